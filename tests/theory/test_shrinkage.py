"""Shrinkage and score-weighted baselines (beyond the paper): ustat_rl/theory/shrinkage.py.

docs/theory.md C54. JSPO's exact moments are checked against a brute-force enumeration of every
batch of groups (an independent route to the cell argument), against Theorem 2 at lambda = 0,
and against Monte Carlo within ``Z_CHECK = 4`` standard errors (two-sided false-failure rate
6.3e-5 per comparison; seeds fixed for reproducibility, not chosen), where the exact MSE with
lambda ignored is rejected as the negative control. The optimal-token baseline likewise, with
the full group mean as its control.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory import shrinkage as S
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast


def _jspo_loop(rewards, epsilon=S.JSPO_EPSILON):
    """JSPO's advantage for one batch ``(B, G)``, response by response, as its docstring reads."""
    B, G = rewards.shape
    out = np.empty_like(rewards)
    for b in range(B):
        means = [rewards[p].mean() for p in range(B) if p != b]
        var = [rewards[p].var(ddof=1) / G for p in range(B) if p != b]
        grand = float(np.mean(means))
        v, s = float(np.mean(var)), float(np.mean([(m - grand) ** 2 for m in means]))
        lam = v / (v + s + epsilon)
        for g in range(G):
            loo = (rewards[b].sum() - rewards[b, g]) / (G - 1)
            out[b, g] = rewards[b, g] - ((1 - lam) * loo + lam * grand)
    return out


def test_jspo_advantages_equal_the_literal_loop():
    rng = np.random.default_rng(3)
    for B, G in ((2, 2), (3, 4), (5, 3)):
        r = (rng.random((B, G)) < 0.5).astype(float)
        r[0] = 1.0  # an all-equal group among them
        np.testing.assert_allclose(S.jspo_advantages(r), _jspo_loop(r), rtol=0, atol=1e-14)
    # lambda fixed at 0 is the registry's leave-one-out rule
    r = rng.random((4, 3))
    loo = r - (r.sum(axis=1, keepdims=True) - r) / 2
    np.testing.assert_allclose(S.jspo_advantages(r, weight=0.0), loo, atol=1e-14)


def _brute_force(bandit, G, B, weight=None):
    """Every batch of ``B`` groups (prompt and ``G`` outcomes each), JSPO applied literally."""
    prob, reward, score = [], [], []
    for x in range(bandit.n_prompts):
        action, z, p = bandit.enumerate_groups(x, G)
        prob.append(bandit.prompt_prob[x] * p)
        reward.append(z)
        score.append(bandit.scores(np.full(len(p), x), action, full=True))
    prob, reward, score = (np.concatenate(a) for a in (prob, reward, score))
    idx = np.array(list(itertools.product(range(len(prob)), repeat=B)))  # every batch
    p = np.prod(prob[idx], axis=1)
    adv = S.jspo_advantages(reward[idx], weight=weight)  # (N, B, G)
    g_hat = np.einsum("nbg,nbgd->nd", adv, score[idx]) / (B * G)
    g = bandit.grad
    return (p @ g_hat) @ g / (g @ g), p @ np.sum((g_hat - g) ** 2, axis=1)


@pytest.mark.parametrize("G,B,weight", [(2, 2, None), (2, 2, 0.5), (3, 2, None)])
def test_jspo_exact_equals_brute_force(G, B, weight):
    bandit = small_bandit()
    factor, mse = _brute_force(bandit, G, B, weight)
    exact = S.jspo_exact(bandit, G, B, weight=weight)
    assert exact.mean_factor == pytest.approx(factor, rel=1e-11)
    assert exact.mse == pytest.approx(mse, rel=1e-11)


def test_lambda_zero_is_theorem_2_and_jspo_is_unbiased():
    bandit = small_bandit()
    for G, B in ((2, 2), (3, 3), (4, 2)):
        assert S.jspo_exact(bandit, G, B, weight=0.0).mse == pytest.approx(
            bandit.exact_mse("grpo", G, B), rel=1e-12)
        assert S.jspo_exact(bandit, G, B).mean_factor == pytest.approx(1.0, abs=1e-12)


def test_group_enumeration_reproduces_the_closed_forms():
    bandit = small_bandit()
    value = bandit.moments().value
    for G, B in ((2, 1), (3, 2), (4, 3)):
        assert S.prompt_baseline_exact(bandit, G, B, baseline=value).mse == pytest.approx(
            bandit.exact_mse("oracle", G, B), rel=1e-12)
        full = S.group_rule_exact(bandit, G, B, lambda z, w, x: S.score_weighted_advantages(
            z, np.ones_like(w), 0.0))
        assert full.mse == pytest.approx(bandit.exact_mse("fullmean", G, B), rel=1e-12)
        assert full.mean_factor == pytest.approx((G - 1) / G, rel=1e-12)


def test_verl_weight_is_the_squared_score_norm():
    bandit = small_bandit()
    prompt, action = np.array([0, 0, 1, 1]), np.array([[0, 1], [2, 2], [0, 1], [1, 2]])
    norms = np.sum(bandit.scores(prompt, action) ** 2, axis=2)
    np.testing.assert_allclose(S.squared_score_norms(bandit, prompt, action), norms, atol=1e-15)
    z, w = np.array([1.0, 0.0, 1.0]), np.array([0.5, 2.0, 1.0])
    np.testing.assert_allclose(S.score_weighted_advantages(z, w, 0.0), z - 1.5 / 3.5, atol=1e-15)


def test_monte_carlo_matches_exact_and_rejects_lambda_ignored():
    bandit = small_bandit()
    G, B = 3, 2
    mc = S.jspo_monte_carlo(bandit, G, B, 20_000, np.random.default_rng(11))
    assert abs(mc.mse - S.jspo_exact(bandit, G, B).mse) <= Z_CHECK * mc.mse_se
    assert abs(mc.mean_factor - 1.0) <= Z_CHECK * mc.mean_factor_se
    for w in (0.0, 1.0):  # negative controls
        assert abs(mc.mse - S.jspo_exact(bandit, G, B, weight=w).mse) > Z_CHECK * mc.mse_se
    ot = S.otb_monte_carlo(bandit, G, B, 20_000, np.random.default_rng(12))
    exact = S.otb_exact(bandit, G, B)
    assert abs(ot.mse - exact.mse) <= Z_CHECK * ot.mse_se
    assert abs(ot.mean_factor - exact.mean_factor) <= Z_CHECK * ot.mean_factor_se
    assert abs(ot.mse - bandit.exact_mse("fullmean", G, B)) > Z_CHECK * ot.mse_se  # control


def test_bad_input_names_the_parameter():
    bandit = small_bandit()
    with pytest.raises(ValueError, match="`rewards`"):
        S.jspo_weights(np.ones((1, 3)))
    with pytest.raises(ValueError, match="`rewards`"):
        S.jspo_advantages(np.ones((2, 1)))
    with pytest.raises(ValueError, match="`weight`"):
        S.jspo_advantages(np.ones((2, 3)), weight=1.5)
    with pytest.raises(ValueError, match="`epsilon`"):
        S.jspo_weights(np.ones((2, 3)), epsilon=-1.0)
    with pytest.raises(ValueError, match="`weights`"):
        S.score_weighted_advantages(np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="`batch_size`"):
        S.jspo_exact(bandit, 2, 1)
    with pytest.raises(ValueError, match="`batch_size`"):
        S.jspo_exact(bandit, 4, 6)
    with pytest.raises(ValueError, match="`group_size`"):
        S.otb_exact(bandit, 1)
    with pytest.raises(ValueError, match="`moments`"):
        S.jspo_exact(object(), 2, 2)
    with pytest.raises(ValueError, match="`moments`"):  # rewards in {0, 2}: not binary
        S.jspo_exact(type(bandit)([[0.0, 1.0]], [[0.5, 0.2]], reward_values=(0.0, 2.0)), 2, 2)
