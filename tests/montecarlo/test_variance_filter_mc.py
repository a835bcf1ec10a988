"""The reward-variance filter's kept batch: exact moments against Monte Carlo on both backends.

Each comparison passes when ``|MC - exact| <= Z_CHECK * se`` (``Z_CHECK = 4``: two-sided
false-failure rate 6.3e-5 per comparison, 8 comparisons here, about 5e-4 in all by a union bound;
seeds fixed for reproducibility, not chosen). Negative control: the same comparison rejects the
exact moments of the filter with its prefix cut one group late.
"""

from __future__ import annotations

import pytest

import ustat_rl.theory.variance_filter as vf_module
from ustat_rl.claims.beyond_frameworks.variance_filter import late_level_kept
from ustat_rl.montecarlo import Backend, run_monte_carlo
from ustat_rl.montecarlo.variance_filter import variance_filter_statistics
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.variance_filter import VarianceFilter, variance_filtered_moments
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.integration  # two samplers, 20 000 batches each per filter

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
