"""The TRL monitor inside the real GRPOTrainer on the CPU (ustat_rl.frameworks.trl_monitor).

The demo run of :mod:`ustat_rl.frameworks.demo` (a two-layer GPT-2 built from a config and a
character tokenizer built locally, no download) learns a toy arithmetic reward for a few steps
with the monitor attached. The checks are exact (equalities to rounding), not statistical.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")

from monitor_settings import monitor_config  # noqa: E402

from ustat_rl.frameworks import GroupSizeMonitor, WindowMonitor, read_trajectory  # noqa: E402
from ustat_rl.frameworks.demo import (  # noqa: E402
    DemoSetup,
    demo_trainer,
    parity_reward,
    tiny_family,
    tiny_gpt2,
)
from ustat_rl.frameworks.trainer_units import units_note  # noqa: E402
from ustat_rl.frameworks.trl_monitor import run_rule  # noqa: E402
from ustat_rl.pilot import load_rollouts  # noqa: E402
from ustat_rl.scores.factored import factored_projection_matrix  # noqa: E402
from ustat_rl.scores.sequence import trainable_parameters  # noqa: E402
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

pytestmark = pytest.mark.integration  # TRL run: the monitor inside the real GRPOTrainer

G, B, K, BLOCKS = 4, 8, 32, 8
parity = parity_reward
#: TRL before 0.27 has no ``multi_objective_aggregation``: it always sums, then normalises.
AGGREGATION = "multi_objective_aggregation" in {f.name for f in dataclasses.fields(trl.GRPOConfig)}


def make_trainer(tmp_path, model=None, reward=parity, steps=4, lr=1e-3, cls=None,
                 peft_config=None, **config):
    return demo_trainer(tmp_path / "out", G, B, steps, learning_rate=lr, model=model, reward=reward,
                        setup=DemoSetup(trainer_class=cls, peft_config=peft_config), **config)


def attach(trainer, tmp_path, **kwargs):
    options = dict(every=1, sketch_dim=K, sketch_blocks=BLOCKS, pool=3,
                   trajectory=tmp_path / "trajectory.jsonl", save_rollouts=tmp_path / "windows")
    monitor = GroupSizeMonitor(trainer, monitor_config(**{**options, **kwargs}))
    trainer.add_callback(monitor)
    return monitor


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trl")
    trainer = make_trainer(tmp)
    monitor = attach(trainer, tmp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return trainer, monitor, tmp


def test_logged_fields_and_trajectory(run):
    trainer, monitor, tmp = run
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 4
    assert all(h["ustat/window_skipped"] == 0.0 for h in logs)
    for key in ("ustat/c1", "ustat/c2", "ustat/c3", "ustat/mse_run", "ustat/all_equal_observed",
                "ustat/recommended_group_size", "ustat/advised_group_size", "ustat/flat_share"):
        assert all(key in h for h in logs), key
    records = read_trajectory(tmp / "trajectory.jsonl")
    assert [r.step for r in records] == [0, 1, 2, 3]
    # GRPOConfig's default optimiser, adamw_torch, removes the gradient's scale
    assert all(r.advice_target == "scale_free" for r in records)
    assert [r.windows_pooled for r in records] == [1, 2, 3, 3]
    assert all(r.ok and r.estimator == "trl_group" for r in records)
    assert records[-1].n_prompts == 3 * B and records[-1].budget == G * B
    # the observed all-equal fraction is TRL's own frac_reward_zero_std of the same batch
    for r, h in zip(records, logs):
        assert r.all_equal_observed == pytest.approx(h["frac_reward_zero_std"], abs=1e-7)
    assert math.isnan(records[0].all_equal_predicted)
    assert 0.0 <= records[-1].all_equal_predicted <= 1.0


def _assert_gstar_agrees(monitor, tmp, out_dir):
    import json

    from ustat_rl.formatting import parse_number
    from ustat_rl.interface.cli import main

    for record in monitor.records[1:]:
        path = tmp / "windows" / f"window_{record.step:06d}.npz"
        out = out_dir / f"gstar_{record.step}.json"
        assert main(["gstar", str(path), "--budget", str(G * B), "--json", str(out)]) == 0
        report = json.loads(out.read_text())
        for name in ("c1", "c2", "c3"):
            for end in ("estimate", "low", "high"):
                want = parse_number(report["constants"][name][end])
                assert getattr(getattr(record, name), end) == pytest.approx(want, rel=1e-12), (name, end)
        for end in ("estimate", "low", "high"):
            want = report["gstar"][end]
            assert getattr(record.gstar, end) == pytest.approx(
                math.inf if want == "inf" else parse_number(want), rel=1e-12)
        assert record.recommended_group_size == report["recommended_group_size"]
        assert record.grpo_beats_vanilla == (G not in report["grpo_loses"])


def test_estimates_equal_gstar_on_the_written_rollouts(run, tmp_path):
    _, monitor, tmp = run
    _assert_gstar_agrees(monitor, tmp, tmp_path)


def _lora(**kwargs):
    peft = pytest.importorskip("peft", reason="the trl extra")
    return peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                           **kwargs)


#: The models the monitor is checked on: GPT-2, full fine-tuning of a tied Qwen2, and a Llama
#: LoRA adapter under gradient checkpointing (TRL's ``gradient_checkpointing=True``).
MODELS = {
    "gpt2": lambda: (tiny_gpt2(), {}),
    "qwen2": lambda: (tiny_family("qwen2", tie_word_embeddings=True), {}),
    "llama-lora": lambda: (tiny_family("llama"), dict(peft_config=_lora(),
                                                      gradient_checkpointing=True)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scores_are_the_projected_gradients_of_the_sampled_completions(tmp_path, name,
                                                                      monkeypatch):
    """With the learning rate 0 the parameters that scored a batch are the final ones, so each
    saved score row must equal R grad log pi(completion | prompt) by autograd, with respect to
    the parameters the trainer updates (the adapter's alone under LoRA). The run is in float32
    (``bf16=False``): under mixed precision the forward, hence the score, is bf16's."""
    # transformers < 5 keeps an earlier bf16 config's ACCELERATE_MIXED_PRECISION in the
    # environment, and a later trainer in the same process then runs in bf16 all the same
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    model, options = MODELS[name]()
    trainer = make_trainer(tmp_path, model=model, steps=2, lr=0.0, temperature=0.7, bf16=False,
                           **options)
    assert trainer.accelerator.mixed_precision == "no"
    monitor = attach(trainer, tmp_path, pool=1)
    seen = []
    inner = trainer._generate_and_score_completions

    def keep(inputs):
        out = inner(inputs)
        seen.append({k: v.clone() for k, v in out.items() if isinstance(v, torch.Tensor)})
        return out

    trainer._generate_and_score_completions = keep
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert all(r.ok for r in monitor.records)
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    params = trainable_parameters(model)
    if "lora" in name:
        assert params and all("lora_" in n for n in params)
    R = factored_projection_matrix(model, SketchSpec(K, monitor.spec.seed, blocks=BLOCKS))
    rollouts = load_rollouts(tmp_path / "windows" / "window_000001.npz")
    out = seen[-1]
    # trainer units: TRL's default loss ("dapo"; "bnpo" before 0.22, one micro-batch here)
    # divides by the batch's completion tokens
    assert trainer.args.loss_type in ("dapo", "bnpo")
    weight = out["completion_mask"].shape[0] / float(out["completion_mask"].sum())
    for row in range(0, G * B, 5):
        prompt = out["prompt_ids"][row][out["prompt_mask"][row].bool()]
        keep_tokens = out["completion_mask"][row].bool()
        answer = out["completion_ids"][row][keep_tokens]
        tokens = torch.cat([prompt, answer])[None, :]
        logits = model(tokens).logits[0, prompt.numel() - 1:-1] / 0.7
        log_prob = torch.log_softmax(logits, dim=-1).gather(-1, answer[:, None]).sum()
        grads = torch.autograd.grad(log_prob, list(params.values()))
        full = weight * torch.cat([g.reshape(-1) for g in grads]).double().numpy()
        np.testing.assert_allclose(rollouts.score[row], R @ full, rtol=2e-4,
                                   atol=2e-5 * np.abs(R @ full).max())
    # a wrong temperature is a different policy: the rows must not match it (negative control)
    logits = model(tokens).logits[0, prompt.numel() - 1:-1]
    log_prob = torch.log_softmax(logits, dim=-1).gather(-1, answer[:, None]).sum()
    wrong = weight * torch.cat([g.reshape(-1) for g in torch.autograd.grad(log_prob, list(
        params.values()))]).double().numpy()
    assert not np.allclose(rollouts.score[row], R @ wrong, rtol=2e-4)


@pytest.mark.parametrize("name", ["qwen2", "llama-lora"])
def test_every_window_of_a_family_run_is_estimated_and_equals_gstar(tmp_path, name):
    """Full fine-tuning of a tied Qwen2, and a Llama LoRA adapter with gradient checkpointing:
    no window is skipped, and ``ustat-rl gstar`` on each saved window gives the monitor's
    numbers (as the GPT-2 run's test checks)."""
    model, options = MODELS[name]()
    trainer = make_trainer(tmp_path, model=model, steps=3, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: every rule is a fast one
        monitor = attach(trainer, tmp_path, pool=2)
    assert not _train(trainer)  # no window skipped
    assert [r.status for r in monitor.records] == ["ok"] * 3
    _assert_gstar_agrees(monitor, tmp_path, tmp_path)


class ShuffledTrainer(trl.GRPOTrainer):
    """Interleaves the groups before generation: TRL then groups rows that are not one
    prompt's, which the monitor must detect."""

    def _generate_and_score_completions(self, inputs):
        order = np.random.default_rng(0).permutation(len(inputs))
        return super()._generate_and_score_completions([inputs[i] for i in order])


def _train(trainer):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    return [str(w.message) for w in caught if "GroupSizeMonitor" in str(w.message)]


def test_groups_not_contiguous_skip_the_window(tmp_path):
    trainer = make_trainer(tmp_path, steps=2, cls=ShuffledTrainer)
    monitor = attach(trainer, tmp_path)
    messages = _train(trainer)
    assert trainer.state.global_step == 2  # training went on
    assert [r.status for r in monitor.records] == ["skipped", "skipped"]
    assert all("not contiguous" in r.reason for r in monitor.records)
    assert any("not contiguous" in m for m in messages)


def test_nan_reward_skips_the_window(tmp_path):
    from packaging.version import Version

    if Version("0.20") <= Version(trl.__version__) < Version("0.22"):
        pytest.skip(f"trl {trl.__version__} itself raises on a None reward (its warning indexes "
                    f"the trainer_state in the reward kwargs), monitor or not")

    def sometimes_none(completions, prompts, **kwargs):
        values = parity(completions, prompts)
        return [None] + values[1:]

    trainer = make_trainer(tmp_path, steps=2, reward=sometimes_none)
    monitor = attach(trainer, tmp_path)
    _train(trainer)
    assert trainer.state.global_step == 2
    assert all(r.status == "skipped" and "NaN" in r.reason for r in monitor.records)
    records = read_trajectory(tmp_path / "trajectory.jsonl")
    assert [r.status for r in records] == ["skipped", "skipped"]


def test_a_module_the_sketch_cannot_follow_skips_the_window(tmp_path):
    """A trainable tensor on a module that returns a model output (not a tensor): its gradient
    cannot be followed through hooks, so each window is skipped with the reason, and training
    goes on."""
    model = tiny_gpt2()
    model.transformer.extra_scale = torch.nn.Parameter(torch.ones(1))
    trainer = make_trainer(tmp_path, model=model, steps=2)
    monitor = attach(trainer, tmp_path)
    messages = _train(trainer)
    assert trainer.state.global_step == 2 and len(messages) == 2
    assert all("GPT2Model returns" in r.reason and "not a tensor" in r.reason
               for r in monitor.records)


def test_fallback_parameters_are_announced_and_estimated(tmp_path):
    """A GPT-2 whose head is a linear layer with its own ``forward``: no fast projector, so the
    exact per-sample fallback sketches it (announced once, with its cost) and no window skips."""

    class Doubled(torch.nn.Linear):
        def forward(self, x):
            return 2.0 * torch.nn.functional.linear(x, self.weight, self.bias)

    model = tiny_gpt2()
    head = Doubled(model.config.n_embd, model.config.vocab_size, bias=False)
    model.lm_head = head
    trainer = make_trainer(tmp_path, model=model, steps=2)
    with pytest.warns(UserWarning, match="exact per-sample fallback"):
        monitor = attach(trainer, tmp_path)
    assert not _train(trainer)
    assert [r.status for r in monitor.records] == ["ok", "ok"]


def test_fsdp_is_refused_in_one_line(tmp_path):
    trainer = make_trainer(tmp_path, steps=1)
    trainer.is_fsdp_enabled = True
    with pytest.raises(ValueError, match="FSDP shards the parameters"):
        attach(trainer, tmp_path)


def test_run_rule_reads_the_config():
    class Args:
        multi_objective_aggregation = "sum_then_normalize"

    for scale, name in (("group", "trl_group"), ("batch", "trl_batch"), ("none", "trl_none")):
        args = Args()
        args.scale_rewards = scale
        assert run_rule(args)[0] == name
    # several reward functions: the multi-reward rules (ustat_rl.advantages.multichannel)
    for scale, name in (("group", "trl_sum_then_normalize"), ("batch",
                        "trl_sum_then_normalize_batch"), ("none", "trl_sum_then_normalize_none")):
        args = Args()
        args.scale_rewards = scale
        assert run_rule(args, 2)[0] == name
    args = Args()
    args.scale_rewards, args.multi_objective_aggregation = "batch", "normalize_then_sum"
    rule, source = run_rule(args)
    assert rule == "trl_normalize_then_sum" and "scale_rewards is not read" in source
    args.multi_objective_aggregation = "mean"  # an order TRL does not have
    rule, source = run_rule(args)
    assert rule is None and "not a rule of the registry" in source


def _digit_reward(completions, **kwargs) -> list[float]:
    """A second binary reward function: 1.0 when the completion starts with a digit."""
    return [1.0 if c[:1].isdigit() else 0.0 for c in completions]


def _aggregation(aggregation: str) -> dict:
    """``GRPOConfig`` keywords for an aggregation order, on every supported TRL."""
    if AGGREGATION:
        return dict(multi_objective_aggregation=aggregation)
    if aggregation != "sum_then_normalize":
        pytest.skip(f"TRL {trl.__version__} has no multi_objective_aggregation={aggregation!r}")
    return {}


@pytest.mark.parametrize("aggregation, rule", [("normalize_then_sum", "trl_normalize_then_sum"),
                                               ("sum_then_normalize", "trl_sum_then_normalize")])
def test_several_reward_functions_get_the_multi_reward_rule(tmp_path, aggregation, rule):
    from ustat_rl.pilot.run_noise_definition import (
        window_noise_by_definition as window_reference,
    )

    trainer = make_trainer(tmp_path, reward=[parity, _digit_reward], steps=2,
                           reward_weights=[1.0, 0.5], **_aggregation(aggregation))
    monitor = attach(trainer, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert monitor.estimator == rule and "2 reward functions" in monitor.estimator_source
    logs = [h for h in trainer.state.log_history if "loss" in h]
    batches = list(monitor._batches)
    for record, batch, log in zip(monitor.records, batches, logs):
        assert record.ok and record.estimator == rule
        assert record.run_method.startswith(f"{rule} at the run's G")
        # the captured rewards are TRL's own: per-function means as logged, combined as TRL does
        for k, name in enumerate(("parity_reward", "digit_reward")):
            key = next(key for key in log if key.startswith("rewards/") and key.endswith(
                "/mean") and name in key)
            assert batch.channels[:, k].mean() == pytest.approx(log[key], abs=1e-6)
        np.testing.assert_allclose(batch.channels @ [1.0, 0.5], batch.reward, rtol=1e-12)
    # the last record's MSE and variance are the rule's on TRL's own per-function rewards
    var, mse = window_reference(batches, rule, [1.0, 0.5])
    assert monitor.records[-1].mse_run.estimate == pytest.approx(mse, rel=1e-10)
    assert monitor.records[-1].var_run.estimate == pytest.approx(var, rel=1e-10)
    last = monitor.records[-1].mse_run
    assert last.low <= last.estimate <= last.high


#: The multi-reward window on the families people fine-tune, full and LoRA (Gemma2's scaled
#: embedding and (1 + w) norms included).
FAMILY_RUNS = {
    "qwen2": MODELS["qwen2"],
    "llama-lora": MODELS["llama-lora"],
    "gemma2": lambda: (tiny_family("gemma2"), {}),
    "gemma2-lora": lambda: (tiny_family("gemma2"), dict(peft_config=_lora())),
}


@pytest.mark.parametrize("name", sorted(FAMILY_RUNS))
def test_several_reward_functions_on_the_model_families(tmp_path, name):
    """No window of a two-function run is skipped on these models, and each record carries
    the multi-reward rule's MSE at the run's G (the GPT-2 run above checks the values); on a
    TRL without ``multi_objective_aggregation``, the sum-then-normalise rule it always runs."""
    model, options = FAMILY_RUNS[name]()
    aggregation = "normalize_then_sum" if AGGREGATION else "sum_then_normalize"
    trainer = make_trainer(tmp_path, model=model, reward=[parity, _digit_reward], steps=2,
                           reward_weights=[1.0, 0.5], **_aggregation(aggregation), **options)
    monitor = attach(trainer, tmp_path)
    assert not _train(trainer)  # no window skipped
    assert [r.status for r in monitor.records] == ["ok"] * 2
    for record in monitor.records:
        assert record.run_method.startswith(f"trl_{aggregation} at the run's G")
        assert math.isfinite(record.mse_run.estimate)


@pytest.mark.parametrize("kwargs, match", [
    (dict(every=0), "every"), (dict(sketch_dim=30, sketch_blocks=8), "blocks"),
    (dict(level=1.0), "level"), (dict(pool=0), "pool"), (dict(kind="sparse"), "kind")])
def test_bad_options_name_the_parameter(tmp_path, kwargs, match):
    trainer = make_trainer(tmp_path, steps=1)
    with pytest.raises(ValueError, match=match):
        GroupSizeMonitor(trainer, monitor_config(trajectory=tmp_path / "t.jsonl", **kwargs))


def test_not_a_trainer():
    with pytest.raises(TypeError, match="GRPOTrainer"):
        GroupSizeMonitor(object())


@pytest.mark.parametrize("kwargs, match", [
    (dict(group_size=G), "config.group_size"), (dict(estimator="trl_group"), "config.estimator"),
    (dict(loss_type="dapo"), "config.loss"), (dict(temperature=0.7), "config.sketch.temperature"),
    (dict(pad_token_id=3), "config.pad_token_id")])
def test_what_the_trainer_says_is_refused_in_the_config(tmp_path, kwargs, match):
    trainer = make_trainer(tmp_path, steps=1)
    with pytest.raises(ValueError, match=f"`{match}` is read from the trainer"):
        GroupSizeMonitor(trainer, monitor_config(**kwargs))
    with pytest.raises(TypeError, match="`config`"):
        GroupSizeMonitor(trainer, dict(kwargs))
    monitor = GroupSizeMonitor(trainer)  # control: the defaults, the rest from the trainer
    assert monitor.window.group_size == G and monitor.spec.dimension == 256


def test_the_monitors_trajectory_goes_through_gstar_trajectory(run, tmp_path):
    """The file the real monitor wrote carries each window's G* errors, so the universality
    verdict rebuilds every interval at the Bonferroni level (not the per-window 90%)."""
    import json

    from ustat_rl.interface.cli import main

    _, monitor, tmp = run
    assert all(r.gstar_errors is not None for r in monitor.records)
    out, png = tmp_path / "u.json", tmp_path / "u.png"
    assert main(["gstar", "--trajectory", str(tmp / "trajectory.jsonl"), "--json", str(out),
                 "--plot", str(png)]) == 0
    verdict = json.loads(out.read_text())
    assert verdict["window_level"] == pytest.approx(1 - 0.1 / len(monitor.records))
    assert verdict["group_size"] == G and png.stat().st_size > 0


def _same(a, b) -> bool:
    """Equal records, NaN equal to NaN (a field the window could not estimate)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _replay_entry(trainer, monitor, tmp_path, **overrides):
    """A WindowMonitor set up by hand from the trainer's config, as a loop of one's own would,
    fed exactly what the TRL monitor hands its entry at each window (same model, same step)."""
    args = trainer.args
    options = dict(every=1, sketch_dim=K, sketch_blocks=BLOCKS, pool=3, estimator=monitor.estimator,
                   estimator_source=monitor.estimator_source,
                   reward_weights=trainer.reward_weights.double().numpy(),
                   loss_type=args.loss_type, max_completion_length=args.max_completion_length,
                   epsilon_high=getattr(args, "epsilon_high", None) or args.epsilon,
                   temperature=args.temperature, trajectory=tmp_path / "replay.jsonl")
    entry = WindowMonitor(None, monitor_config(group_size=G, **{**options, **overrides}))
    replayed, real = [], monitor.window.step

    def both(model, *rows, **kwargs):
        replayed.append(entry.step(model, *rows, **kwargs))
        return real(model, *rows, **kwargs)

    monitor.window.step = both
    return replayed


@pytest.mark.parametrize("overrides", [{}, {"loss_type": None}], ids=["same", "paper_units"])
def test_the_entry_by_hand_gives_the_trl_monitors_records(tmp_path, overrides):
    """The framework-agnostic entry, set up from the trainer's config and called with the
    rollouts the TRL monitor hands it, gives the monitor's records field for field (NaN where
    neither could estimate); negative control: the same entry without the loss's weights (the
    paper's units) gives other records."""
    trainer = make_trainer(tmp_path)
    monitor = attach(trainer, tmp_path)
    replayed = _replay_entry(trainer, monitor, tmp_path, **overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert len(replayed) == len(monitor.records) == 4
    assert all(r.ok for r in monitor.records)
    same = [_same(a.to_dict(), b.to_dict()) for a, b in zip(monitor.records, replayed)]
    assert all(same) if not overrides else not any(same)


@pytest.mark.parametrize("scale", ["batch", "group"])
def test_a_real_run_estimates_every_window_in_trainer_units(tmp_path, scale):
    """TRL with ``scale_rewards="batch"`` (batch statistics, held at each batch's value) or
    ``"group"``: every window estimated, the run rule's MSE and variance at the run's G with
    intervals that hold their estimates and do not go below 0; G*, the intervals and the advice
    as for every window."""
    pytest.importorskip("trl")
    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.demo import demo_trainer
    from ustat_rl.scores.spec import SketchSpec

    trainer = demo_trainer(tmp_path / "out", 4, 8, 3, learning_rate=1e-3, scale_rewards=scale,
                           loss_type="dr_grpo")
    monitor = GroupSizeMonitor(trainer, MonitorConfig(
        schedule=Schedule(every=1, pool=2), sketch=SketchSpec(32, blocks=8),
        outputs=Outputs(tmp_path / "t.jsonl")))
    trainer.add_callback(monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    records = monitor.records
    assert [r.status for r in records] == ["ok"] * 3
    assert all(r.units == units_note("dr_grpo") for r in records)
    assert all(r.gstar is not None and r.recommended_group_size >= 2 for r in records)
    for r in records:
        for name in ("var_run", "mse_run"):
            part = getattr(r, name)
            assert 0.0 <= part.low <= part.estimate <= part.high, (name, r)
        assert r.var_run.estimate > 0
        assert r.run_method.startswith(f"trl_{scale} at the run's G = 4")
        assert ("batch statistics held" in r.run_method) == (scale == "batch")
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert all("ustat/var_run" in h for h in logs)
    # dynamic sampling's cost at the run's G, from the all-equal fraction of earlier batches
    assert records[0].ds_keep_prob is None  # no earlier batch to predict from
    for r in records[1:]:
        assert r.ds_keep_prob == pytest.approx(1.0 - r.all_equal_predicted, abs=1e-15)
        # whole generation batches: at least the B/(b r) = 1/r a fractional count would give
        assert r.ds_gen_batches >= 1.0 / r.ds_keep_prob - 1e-12
