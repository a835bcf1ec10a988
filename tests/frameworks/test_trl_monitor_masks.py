"""The monitor sketches each completion over exactly the tokens TRL's loss counts.

A real ``GRPOTrainer`` run at learning rate 0 (the parameters that sampled a batch are the final
ones), with a loss mask in its generation batch: a tool-calling ``tool_mask`` (injected into the
batch as TRL's tool loop writes it: 0 on the tokens a tool returned, and ``num_items_in_batch``
counting the model's tokens alone), ``mask_truncated_completions`` (TRL's own), and a vLLM
importance-sampling ratio (injected; the loss applies it when ``use_vllm``). Two routes, both
independent of the factored sketch:

* each saved score row equals ``w_i R grad sum_t m_it log pi(o_it | ...)`` by autograd, ``m``
  the loss's per-token weight and ``w_i`` the trainer's weight of the completion;
* the weighted scores give TRL's own gradient: ``-(1/n) sum_i A_i s_i = R grad L``, ``L`` the
  trainer's ``_compute_loss`` on the same batch (every mask the loss multiplies in, its own
  token normaliser). Negative control: the scores computed with the mask ignored miss TRL's
  gradient by far more than the tolerance.

Tolerances are float32 rounding (both routes run the model in float32): ``RTOL`` relative to
the largest entry. Measured on trl 1.16.0 and 0.19.0: the rows agree to 2e-6 and the gradients
to 6e-7 of their largest entry, and the mask ignored is off by 2e-2 to 5e-1 of it.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
pytest.importorskip("datasets")

from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule  # noqa: E402
from ustat_rl.frameworks.demo import demo_trainer  # noqa: E402
from ustat_rl.pilot import load_rollouts  # noqa: E402
from ustat_rl.scores.factored import factored_projection_matrix  # noqa: E402
from ustat_rl.scores.sequence import trainable_parameters  # noqa: E402
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

pytestmark = pytest.mark.integration  # TRL run: GRPOTrainer at learning rate 0

G, B, K, BLOCKS = 4, 8, 32, 8
#: float32 rounding of a sum of a few hundred terms, relative to the largest entry; 100 times
#: the largest difference measured, and 1/200 of the smallest miss of the negative controls.
RTOL = 1e-4
EOS = 1  # the demo tokenizer's end token (ustat_rl.frameworks.demo.VOCAB)


def _tool_mask(out):
    """A tool's reply in the middle of every third completion: its second token is the tool's
    (0), as TRL's tool loop marks it; the loss then counts the model's tokens alone."""
    tool = torch.ones_like(out["completion_mask"])
    tool[::3, 1] = 0
    out["tool_mask"] = tool
    out["num_items_in_batch"] = (out["completion_mask"] * tool).sum()
    return out


def _ratio(out):
    """A per-token importance-sampling ratio as TRL's ``token_mask`` mode leaves it: between
    0.8 and 1.2, and 0 on tokens whose ratio fell outside the clip range."""
    n, t = out["completion_mask"].shape
    ratio = 1.0 + 0.2 * torch.cos(torch.arange(n * t, dtype=torch.float32)).reshape(n, t)
    ratio[::4, 0] = 0.0
    out["importance_sampling_ratio"] = ratio
    return out


def _without(key):
    def drop(out):
        return {k: v for k, v in out.items() if k != key}
    return drop


def _up_to_end(out):
    """The completion mask without ``mask_truncated_completions``: every token up to and
    including the first end token (all of a completion that has none)."""
    ids = out["completion_ids"]
    is_end = ids == EOS
    first = torch.where(is_end.any(dim=1), is_end.int().argmax(dim=1), ids.shape[1] - 1)
    mask = (torch.arange(ids.shape[1])[None, :] <= first[:, None]).int()
    return {**out, "completion_mask": mask}


def _tool_calling():
    if "tool_mask" not in _loss_source():
        pytest.skip(f"trl {trl.__version__}'s loss has no tool_mask (tool calling came in 0.26)")
    return {}


def _vllm():
    if "vllm_importance_sampling_correction" not in {f.name for f in
                                                     dataclasses.fields(trl.GRPOConfig)}:
        pytest.skip(f"trl {trl.__version__} has no vLLM importance-sampling correction")
    return {}


def _loss_source() -> str:
    import inspect

    return inspect.getsource(trl.GRPOTrainer._compute_loss)


#: name -> (the batch as the run sees it, settings, the batch with the mask ignored, what makes
#: the loss apply it after the run)
CASES = {
    "tool_mask": (_tool_mask, _tool_calling, _without("tool_mask"), {}),
    "mask_truncated_completions": (lambda out: out, lambda: dict(mask_truncated_completions=True),
                                   _up_to_end, {}),
    "importance_sampling_ratio": (_ratio, _vllm, _without("importance_sampling_ratio"),
                                  dict(use_vllm=True, vllm_importance_sampling_correction=True)),
}


def _run(tmp_path, monkeypatch, inject, config):
    # transformers < 5 keeps an earlier bf16 config's ACCELERATE_MIXED_PRECISION in the
    # environment; this run must be in float32
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    trainer = demo_trainer(tmp_path / "out", G, B, 2, learning_rate=0.0, bf16=False, **config)
    assert trainer.accelerator.mixed_precision == "no"
    seen = []
    inner = trainer._generate_and_score_completions

    def generate(inputs):
        out = inject(inner(inputs))
        seen.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in out.items()})
        return out

    trainer._generate_and_score_completions = generate  # before the monitor wraps it
    monitor = GroupSizeMonitor(trainer, MonitorConfig(
        schedule=Schedule(every=1, pool=1), sketch=SketchSpec(K, blocks=BLOCKS),
        outputs=Outputs(tmp_path / "t.jsonl", tmp_path / "w")))
    trainer.add_callback(monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert [r.status for r in monitor.records] == ["ok", "ok"]
    return trainer, monitor, seen[-1]


def _predicted_gradient(out, score) -> np.ndarray:
    """``-(1/n) sum_i A_i s_i``: the gradient of the batch from its weighted sketched scores."""
    advantages = out["advantages"].double().numpy()
    return -(advantages[:, None] * score).sum(axis=0) / advantages.size


def _weighted_scores(monitor, out) -> np.ndarray:
    """The monitor's rows for a batch, as its window computes them."""
    tokens, target, counts, _ = monitor._tokens(out)
    return monitor._scores(tokens, target) * monitor._weights(counts, out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_scores_cover_exactly_the_tokens_the_loss_counts(tmp_path, monkeypatch, case):
    inject, settings, ignored, apply = CASES[case]
    trainer, monitor, out = _run(tmp_path, monkeypatch, inject, settings())
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    params = trainable_parameters(model)
    R = factored_projection_matrix(model, SketchSpec(K, monitor.spec.seed, blocks=BLOCKS))
    score = load_rollouts(tmp_path / "w" / "window_000001.npz").score  # (n, K), weighted
    mask, weight = monitor._loss_mask(out)  # (n, T) each
    if case == "mask_truncated_completions":  # the run must have both kinds of completion
        assert 0 < int((mask.sum(dim=1) == 0).sum()) < G * B
    else:
        assert bool((mask < out["completion_mask"]).any() or (weight < mask).any())
    # route 1: each row by autograd, over the loss's tokens and with the trainer's weight
    total = float(out["num_items_in_batch"]) if "num_items_in_batch" in out else float(mask.sum())
    for row in range(G * B):
        prompt = out["prompt_ids"][row][out["prompt_mask"][row].bool()]
        tokens = torch.cat([prompt, out["completion_ids"][row]])[None, :]
        logits = model(tokens).logits[0, prompt.numel() - 1:-1]  # (T, vocab)
        picked = torch.log_softmax(logits, dim=-1).gather(-1, tokens[0, prompt.numel():, None])
        log_prob = (picked[:, 0] * weight[row]).sum()
        grads = torch.autograd.grad(log_prob, list(params.values()))
        want = R @ torch.cat([g.reshape(-1) for g in grads]).double().numpy() * G * B / total
        np.testing.assert_allclose(score[row], want, rtol=0, atol=RTOL * np.abs(want).max() + 1e-12)
    # route 2: TRL's own loss on the same batch, with what makes it apply the mask
    for name, value in apply.items():
        setattr(trainer, name, value)
    loss = trainer._compute_loss(model, out)
    grads = torch.autograd.grad(loss, list(params.values()))
    trl_gradient = R @ torch.cat([g.reshape(-1) for g in grads]).double().numpy()  # (K,)
    scale = np.abs(trl_gradient).max()
    np.testing.assert_allclose(_predicted_gradient(out, score), trl_gradient, rtol=0,
                               atol=RTOL * scale)
    # negative control: the same batch with the mask ignored misses TRL's gradient
    wrong = _predicted_gradient(out, _weighted_scores(monitor, ignored(out)))
    assert np.abs(wrong - trl_gradient).max() > 200 * RTOL * scale


@pytest.mark.parametrize("epsilon_high", [None, 5.0])
def test_cispo_scores_carry_its_clamped_ratio(tmp_path, monkeypatch, epsilon_high):
    """``cispo``'s loss multiplies each token's score by ``clamp(ratio, max=epsilon_high)``,
    which is ``min(1, epsilon_high)`` at ratio 1: with TRL's default ``epsilon_high``
    (``epsilon``, 0.2) the trainer's gradient is a fifth of the unclamped one, and the monitor's
    weighted scores must give it. Negative control: the scores without the factor miss it."""
    if "cispo" not in _loss_source():
        pytest.skip(f"trl {trl.__version__} has no cispo loss")
    config = dict(loss_type="cispo", epsilon_high=epsilon_high)
    trainer, monitor, out = _run(tmp_path, monkeypatch, lambda out: out, config)
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    params = trainable_parameters(model)
    R = factored_projection_matrix(model, SketchSpec(K, monitor.spec.seed, blocks=BLOCKS))
    score = load_rollouts(tmp_path / "w" / "window_000001.npz").score
    loss = trainer._compute_loss(model, out)
    grads = torch.autograd.grad(loss, list(params.values()))
    trl_gradient = R @ torch.cat([g.reshape(-1) for g in grads]).double().numpy()
    scale = np.abs(trl_gradient).max()
    np.testing.assert_allclose(_predicted_gradient(out, score), trl_gradient, rtol=0,
                               atol=RTOL * scale)
    factor = min(1.0, trainer.epsilon_high)
    if factor < 1.0:  # negative control: the factor dropped
        unclamped = _predicted_gradient(out, score / factor)
        assert np.abs(unclamped - trl_gradient).max() > 200 * RTOL * scale
