"""The TRL monitor reads each reward function's rewards through the public ``reward_funcs``.

A real ``GRPOTrainer`` run on the CPU with three reward sources of the three kinds TRL calls
differently: a plain function, an ``async`` function and a reward model (an ``nn.Module``, scored
by its first logit). The monitor's per-function rewards of each window must be TRL's own: their
means equal the per-function means the trainer logs for the same step (TRL logs them from the
rewards it gathered itself), and the combination is TRL's weighted sum. The caller's list of
reward functions is left as it was. Exact checks (float32 rounding).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
pytest.importorskip("datasets")

from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule  # noqa: E402
from ustat_rl.frameworks.demo import (  # noqa: E402
    arithmetic_prompts,
    char_tokenizer,
    parity_reward,
    tiny_gpt2,
)
from ustat_rl.frameworks.entry import combined_rewards  # noqa: E402
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

pytestmark = pytest.mark.integration  # TRL run: GRPOTrainer with combined rewards
G, B = 4, 4


async def length_reward(completions, **kwargs):
    return [float(len(c)) for c in completions]


def _reward_model():
    from transformers import GPT2Config, GPT2ForSequenceClassification

    torch.manual_seed(1)
    model = tiny_gpt2(n_embd=8)
    config = GPT2Config(**{**model.config.to_dict(), "num_labels": 1, "pad_token_id": 0})
    return GPT2ForSequenceClassification(config).eval()


def test_each_kind_of_reward_function_is_read_through_reward_funcs(tmp_path):
    import inspect

    import datasets

    if "async" not in inspect.getsource(trl.GRPOTrainer._calculate_rewards):
        pytest.skip(f"trl {trl.__version__} does not call async reward functions")
    tok = char_tokenizer()
    funcs = [parity_reward, length_reward, _reward_model()]
    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=G * B,
                          num_generations=G, max_completion_length=3, max_steps=2,
                          logging_steps=1, report_to=[], use_cpu=True, learning_rate=1e-3,
                          save_strategy="no", seed=0, disable_tqdm=True, bf16=False,
                          reward_weights=[1.0, 0.25, 0.5])
    trainer = trl.GRPOTrainer(model=tiny_gpt2(), reward_funcs=funcs, args=args,
                              train_dataset=datasets.Dataset.from_dict(
                                  {"prompt": arithmetic_prompts()}),
                              processing_class=tok, reward_processing_classes=[None, None, tok])
    before = list(trainer.reward_funcs)
    monitor = GroupSizeMonitor(trainer, MonitorConfig(
        schedule=Schedule(every=1, pool=2), sketch=SketchSpec(16, blocks=4),
        outputs=Outputs(tmp_path / "t.jsonl")))
    trainer.add_callback(monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert funcs[0] is parity_reward and funcs[1] is length_reward  # the caller's list as it was
    assert [type(f) for f in before] == [type(f) for f in funcs]
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(monitor.records) == len(logs) == 2
    assert all(r.ok for r in monitor.records)
    names = trainer.reward_func_names
    for batch, log in zip(monitor._batches, logs):
        assert batch.channels.shape == (G * B, 3)
        assert np.all(np.isfinite(batch.channels))
        for k, name in enumerate(names):
            assert batch.channels[:, k].mean() == pytest.approx(log[f"rewards/{name}/mean"],
                                                                abs=1e-6)
        np.testing.assert_array_equal(batch.reward,
                                      combined_rewards(batch.channels, [1.0, 0.25, 0.5]))
    # control: the three functions' rewards are not all alike, so a mix-up would be seen
    channels = monitor._batches[-1].channels
    assert len({round(float(channels[:, k].mean()), 6) for k in range(3)}) == 3
