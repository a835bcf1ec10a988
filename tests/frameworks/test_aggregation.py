"""Loss aggregations and the clamped K3 penalty (ustat_rl/frameworks/aggregation.py; docs/theory.md C27).

Exact means are checked against brute-force enumeration of every group (an independent route)
and Monte Carlo; each comparison has a negative control the same check rejects.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ustat_rl.advantages.conventions import get_convention
from ustat_rl.frameworks.aggregation import (
    AGGREGATIONS,
    aggregate_scores,
    aggregate_token_gradients,
    aggregation_weights,
    exact_aggregation_mean,
    k3_clamped,
    k3_clamped_gradient_factor,
    softmax_k3_expected_gradient,
)
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast

HORIZON = 3


def _toy(seed=0):
    """A discrete 'policy' with 7 outputs of lengths 1-3, binary rewards, E[W] = 0."""
    rng = np.random.default_rng(seed)
    prob = rng.dirichlet(np.ones(7))
    reward = np.array([1, 0, 1, 0, 0, 1, 0], dtype=float)
    lengths = np.array([1, 1, 2, 2, 3, 3, 3])
    scores = rng.normal(size=(7, 3))
    scores -= prob @ scores  # the score identity E[W] = 0
    return prob, reward, lengths, scores


def test_token_route_equals_score_route():
    rng = np.random.default_rng(1)
    N, T, d = 5, 4, 3
    lengths = np.array([1, 4, 2, 3, 2])
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(float)
    token = rng.normal(size=(N, T, d))
    adv = rng.normal(size=N)
    scores = (token * mask[:, :, None]).sum(axis=1)
    for mode in AGGREGATIONS:
        a = aggregate_token_gradients(adv, token, mask, mode, horizon=T)
        b = aggregate_scores(adv, scores, lengths, mode, horizon=T)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # negative control: ignoring the mask (padding tokens counted) changes token-mean
    wrong = aggregate_token_gradients(adv, token, np.ones_like(mask), "token-mean")
    assert not np.allclose(wrong, aggregate_scores(adv, scores, lengths, "token-mean"))


def test_weights_validation():
    with pytest.raises(ValueError, match="mode"):
        aggregation_weights([1, 2], "token-sum")
    with pytest.raises(ValueError, match="horizon"):
        aggregation_weights([1, 2], "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="lengths"):
        aggregation_weights([0, 2], "token-mean")


@pytest.mark.parametrize("convention", ["grpo", "trl_group"])
@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_exact_mean_against_enumeration_of_groups(mode, convention):
    """The O(G) formula against the sum over all 7^3 ordered groups of G = 3."""
    prob, reward, lengths, scores = _toy()
    G = 3
    spec = get_convention(convention)
    idx = np.array(list(itertools.product(range(7), repeat=G)))  # (343, G)
    weight = np.prod(prob[idx], axis=1)  # (343,)
    adv = spec.grouped(reward[idx])  # (343, G)
    est = np.array([aggregate_scores(a, scores[i], lengths[i], mode, HORIZON)
                    for a, i in zip(adv, idx)])  # (343, d)
    brute = weight @ est
    exact = exact_aggregation_mean(prob, reward, lengths, scores, convention, G, mode, HORIZON)
    np.testing.assert_allclose(exact, brute, rtol=1e-10, atol=1e-13)


def test_exact_mean_leave_one_out_sum_is_the_gradient():
    """seq-mean-token-sum with leave-one-out is unbiased for g = E[W Z]; the others are not."""
    prob, reward, lengths, scores = _toy()
    g = (prob * reward) @ scores
    for G in (2, 5):
        exact = exact_aggregation_mean(prob, reward, lengths, scores, "grpo", G,
                                       "seq-mean-token-sum")
        np.testing.assert_allclose(exact, g, rtol=1e-12)
        # negative control: per-token means reweight by 1/T, so the same identity fails
        other = exact_aggregation_mean(prob, reward, lengths, scores, "grpo", G,
                                       "seq-mean-token-mean")
        assert np.max(np.abs(other - g)) > 1e-3 * np.max(np.abs(g))
        # with leave-one-out advantages, a weight w(T) of the own length gives E[(Z - V) w(T) W]
        V = prob @ reward
        np.testing.assert_allclose(other, (prob * (reward - V) / lengths) @ scores,
                                   rtol=1e-12)


def test_exact_mean_monte_carlo_token_mean():
    """Monte Carlo of the token-mean estimator at G = 6 (4.5 se per coordinate, 6.8e-6 each)."""
    prob, reward, lengths, scores = _toy(2)
    G, n = 6, 200_000
    rng = np.random.default_rng(3)
    idx = rng.choice(7, size=(n, G), p=prob)
    adv = get_convention("grpo").grouped(reward[idx])  # (n, G)
    c = 1.0 / lengths[idx].sum(axis=1, keepdims=True)  # (n, 1) token-mean weight
    np.testing.assert_allclose(aggregation_weights(lengths[idx[:5]], "token-mean"),
                               np.broadcast_to(c[:5], (5, G)))
    draws = np.einsum("ng,ngd->nd", c * adv, scores[idx])  # (n, d)
    mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(n)
    exact = exact_aggregation_mean(prob, reward, lengths, scores, "grpo", G, "token-mean")
    assert np.all(np.abs(mean - exact) <= Z_TEST * se)
    # negative control: the same check rejects the unweighted (seq-mean-token-sum) mean g
    g = (prob * reward) @ scores
    assert np.any(np.abs(mean - g) > Z_TEST * se)


# ------------------------------------------------------------------------ the clamped K3
LOGITS = np.log([0.01, 0.33, 0.33, 0.33])  # pi(0) = 0.01: the policy has left action 0
REF_LOGITS = np.log([0.3, 0.2, 0.3, 0.2])  # pi_ref(0)/pi(0) = 30: K3 = 25.6 > 10, clamped


def test_k3_clamp_values_and_factor():
    assert k3_clamped(np.log(0.01), np.log(0.3)) == 10.0
    np.testing.assert_allclose(k3_clamped(np.log(0.3), np.log(0.2)), 0.2 / 0.3 - np.log(2 / 3) - 1)
    # the log-ratio clamp: log r = -30 is evaluated at -20, then K3 = e^-20 + 19 clamps at 10
    assert k3_clamped(0.0, -30.0, value_clip=np.inf) == pytest.approx(np.exp(-20.0) + 19.0)
    assert k3_clamped_gradient_factor(np.log(0.01), np.log(0.3)) == 0.0
    np.testing.assert_allclose(k3_clamped_gradient_factor(np.log(0.3), np.log(0.2)), 1 - 2 / 3)
    # the value clamp binds between log r = 2.6 (K3 = e^2.6 - 3.6 = 9.86) and 2.7 (11.2)
    assert k3_clamped_gradient_factor(0.0, 2.6) != 0.0
    assert k3_clamped_gradient_factor(0.0, 2.7) == 0.0  # e^2.7 - 3.7 = 11.2 > 10


def test_k3_clamp_expected_gradient_exact_and_monte_carlo():
    """Where the clamp binds, E[per-sample gradient] is not grad KL(pi_ref || pi) = pi - pi_ref.

    Monte Carlo with 4.5 se per coordinate (6.8e-6 false failures each) matches the clamped
    prediction and rejects the unclamped one (the negative control of the same check).
    """
    pi = np.exp(LOGITS - np.logaddexp.reduce(LOGITS))
    ref = np.exp(REF_LOGITS - np.logaddexp.reduce(REF_LOGITS))
    clamped = softmax_k3_expected_gradient(LOGITS, REF_LOGITS)
    unclamped = softmax_k3_expected_gradient(LOGITS, REF_LOGITS, np.inf, np.inf)
    np.testing.assert_allclose(unclamped, pi - ref, atol=1e-15)  # C27 without the clamp
    # enumeration by hand: action 0 contributes nothing once clamped
    f = np.array([0.0, 1 - ref[1] / pi[1], 1 - ref[2] / pi[2], 1 - ref[3] / pi[3]])
    by_hand = sum(pi[y] * f[y] * (np.eye(4)[y] - pi) for y in range(4))
    np.testing.assert_allclose(clamped, by_hand, atol=1e-15)
    rng = np.random.default_rng(4)
    n = 400_000
    y = rng.choice(4, size=n, p=pi)
    per = (np.eye(4)[y] - pi) * k3_clamped_gradient_factor(np.log(pi[y]), np.log(ref[y]))[:, None]
    mean, se = per.mean(axis=0), per.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(mean - clamped) <= Z_TEST * se)
    assert np.any(np.abs(mean - unclamped) > Z_TEST * se)  # the unclamped C27 mean is rejected
    # the clamp removes the restoring pull on action 0: unclamped -0.29, clamped -0.0029
    assert unclamped[0] < -0.2 and abs(clamped[0]) < 0.02 * abs(unclamped[0])


def test_k3_clamp_inactive_changes_nothing():
    logits, ref = np.array([0.4, -0.2, 0.9, -0.6]), np.array([-0.3, 0.5, 0.0, 0.2])
    np.testing.assert_allclose(softmax_k3_expected_gradient(logits, ref),
                               softmax_k3_expected_gradient(logits, ref, np.inf, np.inf),
                               atol=1e-15)
