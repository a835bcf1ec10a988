"""EBPO's empirical-Bayes baseline (beyond the paper): ustat_rl/theory/ebpo.py.

docs/theory.md C54.ebpo. The exact moments at a fixed prior are checked against the generic
enumeration of a group's outcomes (an independent route to the per-count terms), against the
closed forms at S = 0 (the full mean) and S = 1 (a constant baseline), and the running-prior
Monte Carlo against the exact moments at the stationary prior within ``Z_CHECK = 4`` standard
errors (seeds fixed for reproducibility, not chosen), where S fixed at 0 is rejected.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory import ebpo as E
from ustat_rl.theory import shrinkage as S
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast


def test_advantages_equal_the_papers_formula_read_literally():
    prior = E.EBPOPrior(mean=0.3, reward_var=0.2, group_mean_var=0.05)
    r = np.array([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    s = (0.2 / 4) / (0.2 / 4 + 0.05)
    expected = np.array([[z - ((1 - s) * row.mean() + s * 0.3) for z in row] for row in r])
    np.testing.assert_allclose(E.ebpo_advantages(r, prior), expected, atol=1e-15)
    # an all-failure group keeps a penalty -S mu (the paper's non-vanishing signal)
    np.testing.assert_allclose(E.ebpo_advantages(r, prior)[1], -s * 0.3, atol=1e-15)
    assert E.EBPOPrior(0.5, 0.0, 0.0).weight(4) == 0.0


def test_running_prior_equals_welford_one_by_one():
    rng = np.random.default_rng(5)
    steps = [(rng.random((1, 3, 4)) < 0.4).astype(float) for _ in range(5)]
    run = E.RunningPrior(1)
    for step in steps:
        run.update(step)
    mu, sigma2, tau2 = run.priors()
    every = np.concatenate([s.ravel() for s in steps])
    means = np.concatenate([s.mean(axis=-1).ravel() for s in steps])
    assert mu[0] == pytest.approx(every.mean(), rel=1e-13)
    assert sigma2[0] == pytest.approx(every.var(ddof=1), rel=1e-12)
    assert tau2[0] == pytest.approx(means.var(ddof=1), rel=1e-12)


@pytest.mark.parametrize("G,B,weight", [(2, 1, None), (3, 2, None), (3, 3, 0.7)])
def test_exact_equals_enumeration_of_groups(G, B, weight):
    bandit = small_bandit()
    prior = E.stationary_prior(bandit, G)
    brute = S.group_rule_exact(bandit, G, B, lambda z, w, x: E.ebpo_advantages(z, prior, weight))
    exact = E.ebpo_exact(bandit, G, B, weight=weight)
    assert exact.mse == pytest.approx(brute.mse, rel=1e-11)
    assert exact.mean_factor == pytest.approx(brute.mean_factor, rel=1e-11)
    assert exact.bias_sq == pytest.approx(brute.bias_sq, rel=1e-9)


def test_closed_forms_at_the_ends_of_the_weight():
    bandit = small_bandit()
    mu = E.stationary_prior(bandit, 3).mean
    for G, B in ((2, 1), (3, 2), (4, 3)):
        assert E.ebpo_exact(bandit, G, B, weight=0.0).mse == pytest.approx(
            bandit.exact_mse("fullmean", G, B), rel=1e-12)
        assert E.ebpo_exact(bandit, G, B, weight=1.0).mse == pytest.approx(
            S.prompt_baseline_exact(bandit, G, B, baseline=mu).mse, rel=1e-12)
        s = E.stationary_prior(bandit, G).weight(G)
        assert E.ebpo_exact(bandit, G, B).mean_factor == pytest.approx(1 - (1 - s) / G, rel=1e-12)


def test_stationary_prior_is_the_limit_of_the_running_prior():
    bandit = small_bandit()
    G = 3
    run = E.RunningPrior(1)
    rng = np.random.default_rng(9)
    for _ in range(20):
        run.update(bandit.sample_groups(G, 5_000, rng).reward.reshape(1, 5_000, G))
    limit = E.stationary_prior(bandit, G)
    got = [float(a[0]) for a in run.priors()]
    # 300,000 rewards / 100,000 groups: standard errors below 1.5e-3; 0.01 is about 7 se
    assert got == pytest.approx([limit.mean, limit.reward_var, limit.group_mean_var], abs=0.01)


def test_monte_carlo_matches_exact_and_rejects_the_full_mean():
    bandit = small_bandit()
    G, B = 3, 2
    mc = E.ebpo_monte_carlo(bandit, G, B, 12_000, np.random.default_rng(21), steps=50)
    exact = E.ebpo_exact(bandit, G, B)
    assert abs(mc.mse - exact.mse) <= Z_CHECK * mc.mse_se
    assert abs(mc.mean_factor - exact.mean_factor) <= Z_CHECK * mc.mean_factor_se
    # negative control: the same sample against the exact MSE with S fixed at 0
    assert abs(mc.mse - E.ebpo_exact(bandit, G, B, weight=0.0).mse) > Z_CHECK * mc.mse_se


def test_bad_input_names_the_parameter():
    bandit = small_bandit()
    prior = E.stationary_prior(bandit, 2)
    with pytest.raises(ValueError, match="`prior`"):
        E.ebpo_advantages(np.ones((2, 3)), prior=(0.5, 0.1, 0.1))
    with pytest.raises(ValueError, match="`rewards`"):
        E.ebpo_advantages(np.ones((2, 1)), prior)
    with pytest.raises(ValueError, match="`weight`"):
        E.ebpo_advantages(np.ones((2, 3)), prior, weight=1.5)
    with pytest.raises(ValueError, match="`group_size`"):
        E.ebpo_exact(bandit, 1)
    with pytest.raises(ValueError, match="`moments`"):
        E.stationary_prior(object(), 2)
    with pytest.raises(ValueError, match="`steps`"):
        E.ebpo_monte_carlo(bandit, 2, 1, 10, 0, steps=1)
    with pytest.raises(ValueError, match="`RunningPrior`"):
        E.RunningPrior(2).priors()
