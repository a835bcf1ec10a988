"""C58 (ustat_rl.claims.beyond_frameworks.variance_filter): the claim passes on the code
as it is and fails on each planted bug: the population variance where the sample variance is
asked, and the top_p prefix cut one group late; and the kept batch's exact moments against
Monte Carlo on both backends at ``Z_CHECK = 4`` (two-sided false-failure rate 6.3e-5 per
comparison, 8 comparisons, about 5e-4 in all by a union bound; seeds fixed for reproducibility,
not chosen), the late prefix's exact MSE rejected by the same comparison.
"""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.theory.variance_filter as vf_module
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_frameworks.variance_filter import late_level_kept
from ustat_rl.montecarlo import Backend, run_monte_carlo
from ustat_rl.montecarlo.variance_filter import variance_filter_statistics
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.variance_filter import VarianceFilter, variance_filtered_moments
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.integration  # the whole claim three times, two samplers (about 80 s)

CTX = VerifyContext(seed=0, quick=True)


def _failed(result) -> list:
    return [c.name for c in result.checks if not c.passed]


def test_c58_passes():
    result = run_claim(registry()["C58"], CTX)
    assert result.verdict == "pass", _failed(result)


def test_c58_fails_with_the_population_variance(monkeypatch):
    real = vf_module.group_variances
    monkeypatch.setattr(vf_module, "group_variances", lambda r, g, ddof=1: real(r, g, 0))
    result = run_claim(registry()["C58"], CTX)
    assert result.verdict == "fail"
    assert any("literally" in name for name in _failed(result))


def test_c58_fails_with_the_prefix_one_group_late(monkeypatch):
    real = vf_module._prefix_length
    monkeypatch.setattr(vf_module, "_prefix_length",
                        lambda mass, p: np.minimum(real(mass, p) + 1, mass.shape[-1]))
    result = run_claim(registry()["C58"], CTX)
    assert result.verdict == "fail"
    assert any("literally" in name for name in _failed(result))


def test_the_late_prefix_changes_the_exact_moments(monkeypatch):
    """The planted bug moves the exact MSE far beyond rounding: the routes can tell it."""
    moments = small_bandit().moments()
    spec = VarianceFilter("top_p", 0.5)
    right = variance_filtered_moments(moments, "grpo", 4, 6, spec)
    monkeypatch.setattr(vf_module, "_level_kept", late_level_kept(vf_module._level_kept))
    wrong = variance_filtered_moments(moments, "grpo", 4, 6, spec)
    assert wrong.keep_rate > right.keep_rate
    assert abs(wrong.mse - right.mse) > 1e-3 * right.mse


G, B, REPS = 4, 3, 20_000
SPECS = (VarianceFilter("top_p", 0.6), VarianceFilter("top_k", top_k=1, divisor="batch"))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_exact_moments_equal_monte_carlo(backend, monkeypatch):
    bandit = small_bandit()
    moments = bandit.moments()
    for i, spec in enumerate(SPECS):
        exact = variance_filtered_moments(moments, "grpo", G, B, spec)
        stat, labels = variance_filter_statistics(bandit, "grpo", G, B, spec,
                                                  backend=Backend(backend, "cpu"))
        est = run_monte_carlo(stat, REPS, seed=10 + i, labels=labels)
        mse, se = est.get(("sq", labels[0][1], G))
        proj, proj_se = est.get(("proj", labels[0][1], G))
        g_sq = float(bandit.grad @ bandit.grad)
        assert abs(mse - exact.mse) <= Z_CHECK * se, (spec, mse, exact.mse, se)
        assert abs(proj - exact.mean_factor * g_sq) <= Z_CHECK * proj_se
        if spec.strategy == "top_p":  # negative control: the late prefix's exact MSE
            monkeypatch.setattr(vf_module, "_level_kept", late_level_kept(vf_module._level_kept))
            late = variance_filtered_moments(moments, "grpo", G, B, spec)
            monkeypatch.undo()
            assert abs(mse - late.mse) > Z_CHECK * se, (mse, late.mse, se)
