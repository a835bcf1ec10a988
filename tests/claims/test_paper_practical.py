"""Algorithm 2's minibatch-reuse bias (ustat_rl/training/algorithm2.py; docs/theory.md C25, Theorem 12),
C26.train's step-size extrapolation, and the negative controls of C24's and C27.mc's checks
(ustat_rl/claims/paper_practical.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims.paper_practical import (
    C26_WINDOWS,
    _step_extrapolation,
    c25_bandit,
    c25_slope_checks,
)
from ustat_rl.tolerances import Z_TEST
from ustat_rl.training.algorithm2 import (
    OffPolicyBandit,
    algorithm2_gradient,
    minibatch_bias,
    minibatch_bias_monte_carlo,
    on_policy_mean,
)

pytestmark = pytest.mark.fast


def _surrogate(bandit, theta, actions, adv):
    """Algorithm 2's per-batch objective, whose gradient g_hat must be (central differences)."""
    pi = np.exp(theta - np.logaddexp.reduce(theta))
    old = np.exp(bandit.logits - np.logaddexp.reduce(bandit.logits))
    ref = np.exp(bandit.ref_logits - np.logaddexp.reduce(bandit.ref_logits))
    r = ref[actions] / pi[actions]
    return np.mean(pi[actions] / old[actions] * adv - bandit.kl_weight * (r - np.log(r) - 1.0))


def test_gradient_is_the_surrogate_gradient():
    bandit = c25_bandit()
    actions = np.array([[0, 1, 2, 0]])
    adv = bandit.advantages(actions)
    theta = np.array([0.5, -0.1, 0.3])
    grad = algorithm2_gradient(bandit, theta, actions, adv)[0]
    h = 1e-6
    numeric = np.array([(_surrogate(bandit, theta + h * e, actions[0], adv[0])
                         - _surrogate(bandit, theta - h * e, actions[0], adv[0])) / (2 * h)
                        for e in np.eye(3)])
    np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-9)
    # negative control: without the importance ratio the gradient differs away from theta_old
    plain = algorithm2_gradient(bandit, theta, actions, adv, importance=False)[0]
    assert np.max(np.abs(plain - numeric)) > 1e-3


def test_on_policy_mean_by_monte_carlo():
    """F(theta) against a Monte Carlo of on-policy batches (4.5 se, 6.8e-6 per coordinate)."""
    bandit = c25_bandit()
    theta = np.array([0.6, -0.4, 0.0])
    rng = np.random.default_rng(11)
    pi = np.exp(theta - np.logaddexp.reduce(theta))
    actions = rng.choice(3, size=(100_000, 4), p=pi)
    draws = algorithm2_gradient(bandit, np.tile(theta, (actions.shape[0], 1)), actions,
                                bandit.advantages(actions), importance=False)
    mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(actions.shape[0])
    exact = on_policy_mean(bandit, theta)[0]
    assert np.all(np.abs(mean - exact) <= Z_TEST * se)
    # negative control: F at theta_old (where the batch of C25 is drawn) is rejected
    assert np.any(np.abs(mean - on_policy_mean(bandit, bandit.logits)[0]) > Z_TEST * se)


def test_bias_zero_before_updates_and_monte_carlo_route():
    bandit = c25_bandit()
    assert np.max(np.abs(minibatch_bias(bandit, 0.3, 0))) < 1e-14
    rng = np.random.default_rng(12)
    mean, se = minibatch_bias_monte_carlo(bandit, 0.2, 3, 20_000, rng)
    exact = minibatch_bias(bandit, 0.2, 3)
    assert np.all(np.abs(mean - exact) <= Z_TEST * se)
    assert np.max(np.abs(mean) / se) > Z_TEST  # power: 'no bias' is rejected


def test_slope_two_and_a_wrong_exponent_rejected():
    bandit = c25_bandit()
    assert all(c.passed for c in c25_slope_checks(bandit))
    wrong = c25_slope_checks(bandit, exponent=1.0)
    assert not any(c.passed for c in wrong[:3])  # slope 1 is outside every band
    wrong3 = c25_slope_checks(bandit, exponent=3.0)
    assert not any(c.passed for c in wrong3[:3])


def test_bias_depends_on_m_eta():
    """||b_m||^2 at equal m eta agrees to first order; it is not a function of eta alone."""
    bandit = OffPolicyBandit(np.array([0.0, 0.5, -0.5, 0.2]), np.zeros(4),
                             np.array([0.0, 1.0, 0.0, 1.0]), 0.2, 3)
    a = np.sum(minibatch_bias(bandit, 0.004, 1) ** 2)
    b = np.sum(minibatch_bias(bandit, 0.001, 4) ** 2)
    c = np.sum(minibatch_bias(bandit, 0.004, 4) ** 2)
    assert abs(a / b - 1.0) < 0.02
    assert abs(c / a - 16.0) < 0.5


def test_c26_step_extrapolation_removes_a_one_over_i_bias():
    n, target, c = 4000, 1.5, 0.8
    i = np.arange(1, n + 1)
    path = target + c / i  # the first-order bias alone
    windows = np.array([[path[int(a * n):int(b * n)].mean()] for a, b in C26_WINDOWS])  # (3, 1)
    final, removed, residual = _step_extrapolation(windows)
    assert abs(windows[2, 0] - target) > 1e-4  # the raw average keeps the bias
    assert abs(final[0] - target) < 1e-7 and abs(residual[0]) < 1e-7
    np.testing.assert_allclose(removed[0], windows[2, 0] - final[0])


# ---------------------------------------------------------------- C24, C27.mc
def test_c24_limit_check_rejects_a_wrong_constant():
    """Negative control: the Richardson check rejects the constant without (1 - 2V)^2."""
    from ustat_rl.claims.paper_practical import limit_check
    from ustat_rl.policies.examples import std_normalisation_bandit
    from ustat_rl.theory.lemma11 import lemma11_constant

    m = std_normalisation_bandit().moments()
    V = float(m.value[0])
    assert limit_check(m, lemma11_constant(m), "right")[0].passed
    assert not limit_check(m, lemma11_constant(m) / (1 - 2 * V) ** 2, "wrong")[0].passed
    # a rate of 1/G^2 would make G D(G) vanish: rejected as well
    assert not limit_check(m, 0.0, "rate 1/G^2")[0].passed


def test_c24_all_equal_check_rejects_one_sided_formula():
    """Negative control: p^G alone (forgetting (1 - p)^G) is rejected by the same MC check."""
    from ustat_rl.claims.paper_practical import _monte_carlo
    from ustat_rl.claims.registry import check_close
    from ustat_rl.policies.examples import std_normalisation_bandit

    bandit = std_normalisation_bandit()
    V = float(bandit.value[0])
    # G = 2, where the forgotten V^G = 0.084 is 24 standard errors (the check's sizes)
    _, equal = _monte_carlo(bandit, 2, 20000, np.random.default_rng(11))
    p_hat, se = equal.mean(), np.sqrt(equal.mean() * (1 - equal.mean()) / equal.size)
    assert check_close("right", V**2 + (1 - V) ** 2, p_hat, se).passed
    assert not check_close("wrong", (1 - V) ** 2, p_hat, se).passed


def test_c27_mc_rejects_the_forward_kl_gradient():
    """Negative control: predicting grad KL(pi || pi_ref) fails the per-coordinate checks."""
    from ustat_rl.claims.paper_practical import k3_gradient_checks

    checks = k3_gradient_checks(np.random.default_rng(5), 200000, target="forward")
    assert not all(c.passed for c in checks[:4])
