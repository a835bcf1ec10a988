"""C75 (ustat_rl.claims.beyond_answers.sampled_routes): the claim passes on the code as it is,
and bugs planted in its routes turn its verdict to "fail": the stratified kernel run one sample
per group too many, the literal sampler with the full mean's rule, opo's baseline without the
response's own reward, the allocation replaced by the uniform one, and the allocated step with
the full mean's (biased) estimator."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.advantages.gradients import fullmean_gradient, rule_gradient
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.sampled_routes import compositions, written_opo
from ustat_rl.montecarlo import bandit as mc_bandit
from ustat_rl.montecarlo import opo_lengths
from ustat_rl.theory.allocation_baselines import baseline_allocation
from ustat_rl.training import allocation

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=11, quick=True)


def _result():
    return run_claim(registry()["C75"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_stratified_kernel_one_sample_late_fails(monkeypatch):
    original = mc_bandit.bandit_squared_errors

    def late(bandit, estimators, group_sizes, **kwargs):
        stat, labels = original(bandit, estimators, tuple(G + 1 for G in group_sizes), **kwargs)
        return stat, tuple((rule, G - 1) for rule, G in labels)

    monkeypatch.setattr(mc_bandit, "bandit_squared_errors", late)
    result = _result()
    assert result.verdict == "fail" and "prompt_averaged_squared_errors" in result.headline


def test_literal_sampler_with_full_mean_fails(monkeypatch):
    monkeypatch.setattr(mc_bandit, "rule_gradient", lambda rule, score, reward, value, **kw: (
        rule_gradient("fullmean", score, reward, value, **kw)))
    result = _result()
    assert result.verdict == "fail" and "per_sample_squared_errors" in result.headline


def test_opo_without_own_reward_fails(monkeypatch):
    def others(rewards, lengths):
        z, T = np.asarray(rewards, float), np.asarray(lengths, float)
        return z - (np.sum(T * z, axis=1, keepdims=True) - T * z) / (
            np.sum(T, axis=1, keepdims=True) - T)

    monkeypatch.setattr(opo_lengths, "opo_advantages", others)
    result = _result()
    assert result.verdict == "fail" and "opo_advantages" in result.headline


def test_uniform_allocation_fails(monkeypatch):
    monkeypatch.setattr(allocation, "optimal_allocation",
                        lambda m, estimator, budget: baseline_allocation(m, "uniform", estimator,
                                                                         budget))
    result = _result()
    assert result.verdict == "fail" and "allocated_sizes" in result.headline


def test_allocated_step_with_full_mean_fails(monkeypatch):
    monkeypatch.setitem(allocation._ESTIMATORS, "grpo", fullmean_gradient)
    result = _result()
    assert result.verdict == "fail" and "allocated_gradient" in result.headline


def test_helpers_on_known_values():
    assert sorted(compositions(6, 2, 2)) == [(2, 4), (3, 3), (4, 2)]
    assert sum(1 for _ in compositions(16, 6, 2)) == 126  # C(9, 5)
    assert written_opo([[1.0, 0.0]], [[3, 1]]).tolist() == [[0.25, -0.75]]
    assert written_opo([[1.0]], [[2]]).tolist() == [[1.0]]
