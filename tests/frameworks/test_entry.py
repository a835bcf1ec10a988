"""The framework-agnostic entry (ustat_rl.frameworks.entry.WindowMonitor) in a hand-written loop.

A tiny GPT-2 (built from a config, no download, no TRL) samples nothing: the loop makes up
prompts (left-padded, of different lengths), completions (right-padded, some cut short) and two
reward functions' rewards, and calls the entry once per step, changing the parameters between
steps as an optimizer would. Every window's record must equal, exactly, what
:func:`ustat_rl.frameworks.window.window_record` gives for the same batches built here by hand
(rows unpadded and concatenated independently, scores sketched by
:func:`ustat_rl.scores.chunks.sketch_rows`, weighted by
:func:`ustat_rl.frameworks.trainer_units.completion_weights`, rewards combined as TRL combines
them). Negative control: the same batches without the loss's weights give another record.
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from monitor_settings import monitor_config  # noqa: E402

from ustat_rl.frameworks.demo import tiny_gpt2  # noqa: E402
from ustat_rl.frameworks.entry import WindowMonitor, combined_rewards  # noqa: E402
from ustat_rl.frameworks.generation import Generation  # noqa: E402
from ustat_rl.frameworks.trainer_units import completion_weights  # noqa: E402
from ustat_rl.frameworks.trajectory import WindowRecord, read_trajectory  # noqa: E402
from ustat_rl.frameworks.window import Batch, window_record  # noqa: E402
from ustat_rl.scores.chunks import sketch_rows  # noqa: E402
from ustat_rl.scores.sequence import trainable_parameters  # noqa: E402
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

pytestmark = pytest.mark.fast

G, B, K, BLOCKS, VOCAB = 4, 6, 16, 4, 14  # VOCAB: the tiny GPT-2's
WEIGHTS = np.array([1.0, 0.5])
ESTIMATOR = "trl_sum_then_normalize"


def _batch(rng):
    """Unpadded prompt and completion token lists (each prompt repeated G times) and the
    rewards of two reward functions ``(n, 2)``."""
    prompts, completions = [], []
    for _ in range(B):
        prompt = rng.integers(1, VOCAB, size=rng.integers(2, 6)).tolist()
        for _ in range(G):
            prompts.append(prompt)
            completions.append(rng.integers(1, VOCAB, size=rng.integers(1, 7)).tolist())
    rewards = np.stack([rng.integers(0, 2, size=B * G), rng.integers(0, 3, size=B * G)], axis=1)
    return prompts, completions, rewards.astype(np.float64)


def _padded(prompts, completions):
    """What a loop hands the entry: prompts left-padded, completions right-padded (pad 0)."""
    p_width, c_width = max(map(len, prompts)), max(map(len, completions)) + 2
    n = len(prompts)
    prompt_ids, prompt_mask = torch.zeros(n, p_width, dtype=torch.long), torch.zeros(n, p_width)
    completion_ids = torch.zeros(n, c_width, dtype=torch.long)
    completion_mask = torch.zeros(n, c_width)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        prompt_ids[i, p_width - len(p):], prompt_mask[i, p_width - len(p):] = torch.tensor(p), 1
        completion_ids[i, :len(c)], completion_mask[i, :len(c)] = torch.tensor(c), 1
    return prompt_ids, prompt_mask, completion_ids, completion_mask


def _reference_scores(model, prompts, completions, spec):
    """Each row's sketched score, rows built without the entry: prompt + completion + the
    completion's padding (so the rows are as wide as the entry's, for float32 results equal to
    the last bit), the completion's tokens weighted 1."""
    c_width = max(map(len, completions)) + 2
    rows = [p + c + [0] * (c_width - len(c)) for p, c in zip(prompts, completions)]
    width = max(map(len, rows))
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    target = torch.zeros(len(rows), width)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        tokens[i, :len(rows[i])] = torch.tensor(rows[i])
        target[i, len(p):len(p) + len(c)] = 1.0
    return sketch_rows(model, tokens, target, spec, chunk_size=8)


def _monitor(tmp_path, process_group=None, **kwargs):
    options = dict(every=2, sketch_dim=K, sketch_blocks=BLOCKS, pool=2, estimator=ESTIMATOR,
                   reward_weights=WEIGHTS, loss_type="dapo", trajectory=tmp_path / "t.jsonl",
                   chunk_size=8)
    return WindowMonitor(None, monitor_config(**{"group_size": G, **options, **kwargs}),
                         process_group)


def test_two_windows_equal_window_record_on_the_same_batches(tmp_path):
    model = tiny_gpt2(n_embd=8)
    monitor = _monitor(tmp_path)
    spec = SketchSpec(K, seed=0, blocks=BLOCKS)
    meta = dict(spec.to_meta("factored"), model_name=str(model.config.name_or_path or
                                                         type(model).__name__),
                param_dim=sum(p.numel() for p in trainable_parameters(model).values()))
    rng = np.random.default_rng(20261203)
    returned, weighted, unweighted = [], [], []
    for step in range(4):
        prompts, completions, rewards = _batch(rng)
        record = monitor.step(model, Generation(*_padded(prompts, completions)), rewards)
        if step % 2:
            assert record is None  # every = 2: steps 0 and 2 are the windows
        else:
            returned.append(record)
            score = _reference_scores(model, prompts, completions, spec)
            lengths = np.array([len(c) for c in completions], dtype=np.float64)
            reward = combined_rewards(rewards, WEIGHTS)
            first = sum(b.n_groups for b in weighted)
            weighted.append(Batch(step, G, reward, score * completion_weights("dapo", lengths)[
                :, None], first, rewards))
            unweighted.append(Batch(step, G, reward, score, first, rewards))
        with torch.no_grad():  # the loop's optimizer step
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
    assert len(returned) == 2 and monitor.records == returned
    for i, record in enumerate(returned):
        assert isinstance(record, WindowRecord) and record.ok
        assert record.estimator == ESTIMATOR and record.windows_pooled == i + 1
        want, _ = window_record(weighted[:i + 1], meta, B * G, monitor.config)
        np.testing.assert_equal(record.to_dict(), want.to_dict())
        control, _ = window_record(unweighted[:i + 1], meta, B * G, monitor.config)
        assert control.var_run.estimate != pytest.approx(record.var_run.estimate, rel=1e-3)
    written = read_trajectory(tmp_path / "t.jsonl")
    assert [r.step for r in written] == [0, 2]
    assert written[1].gstar.estimate == pytest.approx(returned[1].gstar.estimate, rel=1e-12)


def test_group_ids_that_break_a_group_skip_the_window(tmp_path):
    model = tiny_gpt2(n_embd=8)
    monitor = _monitor(tmp_path, every=1)
    prompts, completions, rewards = _batch(np.random.default_rng(1))
    ids = np.repeat(np.arange(B), G)
    ids[0], ids[G] = ids[G], ids[0]  # one row in the wrong group
    with pytest.warns(UserWarning, match="skipped the window at step 0: groups are not contig"):
        record = monitor.step(model, Generation(*_padded(prompts, completions), group_ids=ids),
                              rewards)
    assert record.status == "skipped"
    with warnings.catch_warnings():  # control: the right ids estimate the same batch
        warnings.simplefilter("error")
        record = monitor.step(model, Generation(*_padded(prompts, completions),
                                                group_ids=np.repeat(np.arange(B), G)), rewards)
    assert record.ok and math.isfinite(record.c1.estimate)


@pytest.mark.parametrize("options, match", [
    (dict(group_size=0), "group_size"), (dict(estimator="nope"), "estimator"),
    (dict(loss_type="mean"), "loss_type"), (dict(reward_weights=[[1.0]]), "reward_weights"),
    (dict(loss_type="dr_grpo"), "max_completion_length"), (dict(level=1.0), "level"),
    (dict(sketch_dim=10, sketch_blocks=4), "blocks"),
    (dict(chunk_size=0), "chunk_size"), (dict(group_filter="rol"), "group_filter"),
    (dict(every=0), "every"),
])
def test_bad_options_name_the_parameter(tmp_path, options, match):
    options = {"group_size": G, **options}
    with pytest.raises((ValueError, TypeError), match=f"`{match}`"):
        _monitor(tmp_path, **options)
    _monitor(tmp_path)  # control: the defaults of these tests are taken


#: Each bad input: the parameter its refusal must name, and how the good input is spoiled.
BAD_INPUTS = {
    "model": ("model", lambda x: dict(x, model=object())),
    "prompt_mask_shape": ("prompt_mask", lambda x: dict(x, prompt_mask=x["prompt_mask"][:, 1:])),
    "prompt_mask_zero": ("prompt_mask", lambda x: dict(
        x, prompt_mask=torch.zeros_like(x["prompt_mask"]))),
    "prompt_mask_zero_row": ("prompt_mask", lambda x: dict(
        x, prompt_mask=_set(x["prompt_mask"], (3, slice(None)), 0.0))),
    "prompt_mask_negative": ("prompt_mask", lambda x: dict(
        x, prompt_mask=_set(x["prompt_mask"], (0, -1), -1.0))),
    "completion_mask_nonbinary": ("completion_mask", lambda x: dict(
        x, completion_mask=_set(x["completion_mask"], (1, 0), 0.5))),
    "completion_mask_negative": ("completion_mask", lambda x: dict(
        x, completion_mask=_set(x["completion_mask"], (1, 0), -1.0))),
    "completion_ids_float": ("completion_ids", lambda x: dict(
        x, completion_ids=x["completion_ids"].float())),
    "completion_ids_vocab": ("completion_ids", lambda x: dict(
        x, completion_ids=_set(x["completion_ids"], (2, 0), VOCAB))),
    "completion_ids_negative": ("completion_ids", lambda x: dict(
        x, completion_ids=_set(x["completion_ids"], (2, 0), -1))),
    "prompt_ids_vocab": ("prompt_ids", lambda x: dict(
        x, prompt_ids=_set(x["prompt_ids"], (0, -1), VOCAB + 5))),
    "rewards": ("rewards", lambda x: dict(x, rewards=x["rewards"][:, :1])),  # 1 column, 2 weights
    "group_ids": ("group_ids", lambda x: dict(x, group_ids=np.arange(3))),
    "loss_weights": ("loss_weights", lambda x: dict(x, loss_weights=np.ones(B * G))),  # + type
    "token_weights": ("token_weights", lambda x: dict(
        x, token_weights=x["completion_mask"][:, :2])),
}


def _step(monitor, model, rewards, loss_weights=None, **rows):
    """The monitor's step on rows given as keywords: a Generation of the tokens, masks, token
    weights and group ids, the rewards and the loss's weights beside it."""
    return monitor.step(model, Generation(**rows), rewards, loss_weights=loss_weights)


def _set(tensor, index, value):
    """A copy of ``tensor`` with ``value`` at ``index``."""
    tensor = tensor.clone()
    tensor[index] = value
    return tensor


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_inputs_name_the_parameter_before_any_work(tmp_path, case):
    name, spoil = BAD_INPUTS[case]
    monitor = _monitor(tmp_path, every=1)
    prompts, completions, rewards = _batch(np.random.default_rng(2))
    prompt_ids, prompt_mask, completion_ids, completion_mask = _padded(prompts, completions)
    inputs = dict(model=tiny_gpt2(n_embd=8), prompt_ids=prompt_ids, prompt_mask=prompt_mask,
                  completion_ids=completion_ids, completion_mask=completion_mask,
                  rewards=rewards)
    with pytest.raises((ValueError, TypeError), match=f"`{name}`") as refused:
        _step(monitor, **spoil(inputs))
    assert "\n" not in str(refused.value)  # one line
    assert monitor.records == [] and monitor.due(0)  # nothing was done, nothing counted
    assert not (tmp_path / "t.jsonl").exists()
    assert _step(monitor, **inputs).ok  # control: the good inputs are taken


def test_the_monitor_takes_a_config_and_a_small_signature(tmp_path):
    import inspect

    assert len(inspect.signature(WindowMonitor).parameters) <= 4
    with pytest.raises(TypeError, match="`config`"):
        WindowMonitor(None, dict(group_size=G))
    with pytest.raises(ValueError, match="`config.group_size`"):
        WindowMonitor(None, monitor_config())
    with pytest.raises(TypeError, match="`model`"):
        WindowMonitor(object(), monitor_config(group_size=G))


def _one_window(tmp_path, name, **kwargs):
    model = tiny_gpt2(n_embd=8)
    prompts, completions, rewards = _batch(np.random.default_rng(3))
    options = dict(every=1, trajectory=tmp_path / f"{name}.jsonl")
    step_options = {k: kwargs.pop(k) for k in ("loss_weights",) if k in kwargs}
    monitor = _monitor(tmp_path, **options, **kwargs)
    lengths = np.array([len(c) for c in completions], dtype=np.float64)
    if step_options.get("loss_weights") == "dapo":
        step_options["loss_weights"] = completion_weights("dapo", lengths)
    return monitor.step(model, Generation(*_padded(prompts, completions)), rewards,
                        **step_options)


def test_loss_weights_given_per_step_are_the_loss_types():
    """The loop's own per-completion weights (here dapo's, computed by the loop) give the record
    the loss_type gives; control: no weights at all give another."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        by_type = _one_window(Path(tmp), "a")
        by_weights = _one_window(Path(tmp), "b", loss_type=None, loss_weights="dapo")
        plain = _one_window(Path(tmp), "c", loss_type=None)
    assert by_weights.units.startswith("trainer (per-completion loss weights")
    for name in ("c1", "c2", "c3", "var_run", "mse_run"):
        assert getattr(by_weights, name) == getattr(by_type, name)
    assert plain.var_run.estimate != pytest.approx(by_type.var_run.estimate, rel=1e-3)


def test_an_explicit_process_group_is_used(tmp_path):
    """A one-process gloo group passed as ``process_group`` gathers this process's rows alone:
    the record equals the one without torch.distributed."""
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed unavailable or already initialised")
    want = _one_window(tmp_path, "alone")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        group = dist.new_group([0])
        got = _one_window(tmp_path, "group", process_group=group)
    finally:
        dist.destroy_process_group()
    np.testing.assert_equal(got, want)
    assert [r.step for r in read_trajectory(tmp_path / "group.jsonl")] == [0]


def test_each_window_is_summarised_on_the_monitor_logger(tmp_path, caplog):
    from ustat_rl.frameworks.window import advice_line

    with caplog.at_level(logging.INFO, logger="ustat_rl.monitor"):
        record = _one_window(tmp_path, "logged")
    lines = [r.getMessage() for r in caplog.records if r.name == "ustat_rl.monitor"]
    assert lines == [f"WindowMonitor: {advice_line(record)}"]
    assert "advice G = " in lines[0] and "\n" not in lines[0]
