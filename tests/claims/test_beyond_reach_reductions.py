"""C60 (ustat_rl.claims.beyond_reach.reductions): the claim passes on the code as it is, and a
bug planted in each kind of reduction turns its verdict to "fail" (exact comparisons: any
relative error above 1e-12 on a weight is seen)."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.frameworks import aggregation

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=1, quick=True)


def _verdict():
    return run_claim(registry()["C60"], CTX)


def test_the_claim_passes():
    result = _verdict()
    assert result.verdict == "pass", result.error or result.headline


def test_prompt_mean_that_counts_answers_instead_of_prompts_fails(monkeypatch):
    original = aggregation.prompt_mean_weights

    def answers_not_prompts(lengths, group_ids):  # 1/(N S_p) for 1/(P S_p)
        ids = np.asarray(group_ids)
        return original(lengths, group_ids) * np.unique(ids).size / ids.size

    monkeypatch.setattr(aggregation, "prompt_mean_weights", answers_not_prompts)
    result = _verdict()
    assert result.verdict == "fail" and "prompt_mean" in result.headline


def test_prompt_mean_without_the_clamp_at_one_token_fails(monkeypatch):
    original = aggregation.prompt_mean_weights

    def unclamped(lengths, group_ids):  # a prompt with no loss token: 1/(P (S_p + 1))
        T, ids = np.asarray(lengths, float), np.asarray(group_ids)
        out = original(lengths, group_ids)
        for p in np.unique(ids):
            rows = ids == p
            out[rows] *= max(T[rows].sum(), 1.0) / (T[rows].sum() + 1.0)
        return out

    monkeypatch.setattr(aggregation, "prompt_mean_weights", unclamped)
    assert _verdict().verdict == "fail"


def test_seq_mean_token_mean_over_the_mean_length_fails(monkeypatch):
    original = aggregation.aggregation_weights

    def mean_length(lengths, mode, horizon=None, **kw):  # 1/(N mean T) for 1/(N T_i)
        if mode == "seq-mean-token-mean":
            T = np.asarray(lengths, float)
            return np.broadcast_to(1.0 / (T.shape[-1] * T.mean(axis=-1, keepdims=True)),
                                   T.shape).copy()
        return original(lengths, mode, horizon, **kw)

    monkeypatch.setattr(aggregation, "aggregation_weights", mean_length)
    result = _verdict()
    assert result.verdict == "fail" and "seq-mean-token-mean" in result.headline


def test_token_mean_of_a_stack_over_every_batchs_tokens_fails(monkeypatch):
    """A shape bug: the stack's token count taken over all its batches, not each row's."""
    original = aggregation.aggregation_weights

    def whole_stack(lengths, mode, horizon=None, **kw):
        T = np.asarray(lengths, float)
        if mode == "token-mean" and T.ndim == 2 and kw.get("total_tokens") is None:
            return np.full(T.shape, T.shape[0] / T.sum())
        return original(lengths, mode, horizon, **kw)

    monkeypatch.setattr(aggregation, "aggregation_weights", whole_stack)
    result = _verdict()
    assert result.verdict == "fail" and "stack" in result.headline


def test_token_mean_ignoring_the_trainers_token_count_fails(monkeypatch):
    original = aggregation.aggregation_weights

    def ignored(lengths, mode, horizon=None, total_tokens=None):
        return original(lengths, mode, horizon)

    monkeypatch.setattr(aggregation, "aggregation_weights", ignored)
    result = _verdict()
    assert result.verdict == "fail" and "trainer's" in result.headline


def test_k3_factor_with_an_exclusive_value_clip_fails(monkeypatch):
    """C27.clamp: no gradient where K3 equals the value clip exactly (``<`` for ``<=``)."""
    original = aggregation.k3_clamped_gradient_factor

    def exclusive(log_prob, ref_log_prob, log_ratio_clip=20.0, value_clip=10.0):
        out = original(log_prob, ref_log_prob, log_ratio_clip, value_clip)
        lr = np.clip(np.asarray(ref_log_prob) - np.asarray(log_prob), -log_ratio_clip,
                     log_ratio_clip)
        return np.where(np.exp(lr) - lr - 1.0 == value_clip, 0.0, out)

    monkeypatch.setattr(aggregation, "k3_clamped_gradient_factor", exclusive)
    result = run_claim(registry()["C27.clamp"], CTX)
    assert result.verdict == "fail" and "d K3" in result.headline


def test_c27_clamp_fails_when_the_expected_gradient_ignores_the_clamps(monkeypatch):
    """C27.clamp's softmax check: the expected per-sample gradient with the clamps dropped
    (the factor 1 - r everywhere) differs where the reference puts almost no mass on an action."""
    def unclamped(logits, ref_logits, log_ratio_clip=20.0, value_clip=10.0):
        logits, ref_logits = np.asarray(logits, float), np.asarray(ref_logits, float)
        log_pi = logits - np.logaddexp.reduce(logits)
        log_ref = ref_logits - np.logaddexp.reduce(ref_logits)
        pi, f = np.exp(log_pi), 1.0 - np.exp(log_ref - log_pi)
        return pi * f - pi * float(pi @ f)

    assert run_claim(registry()["C27.clamp"], CTX).verdict == "pass"
    monkeypatch.setattr(aggregation, "softmax_k3_expected_gradient", unclamped)
    result = run_claim(registry()["C27.clamp"], CTX)
    assert result.verdict == "fail" and "a clamp binds" in result.headline
