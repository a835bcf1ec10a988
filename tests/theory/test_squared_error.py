"""Exact moments behind C5.tf's heavy-tail interval (ustat_rl.theory.squared_error,
ustat_rl.stats.nonnegative).

The closed forms of E X and E X^2 for the squared error of the vanilla, oracle and GRPO
estimators are checked against brute-force enumeration of every group of a small output
table; Maurer's margin is checked to reject a prediction twice the truth (negative control).
"""

import itertools

import numpy as np
import pytest

from ustat_rl.advantages.gradients import grpo_gradient, oracle_gradient, vanilla_gradient
from ustat_rl.stats.nonnegative import iid_mean_squared_error_moments, nonnegative_lower_margin
from ustat_rl.theory.squared_error import grpo_squared_error_moments

pytestmark = pytest.mark.fast

PROB = np.array([0.3, 0.45, 0.2, 0.05])
REWARD = np.array([1.0, 0.0, 0.0, 0.0])
rng = np.random.default_rng(4)
SCORES = rng.normal(size=(4, 3))
SCORES -= PROB @ SCORES  # E W = 0, as for a score


def _brute(estimator, G):
    g = (PROB * REWARD) @ SCORES
    V = PROB @ REWARD
    first = second = 0.0
    for idx in itertools.product(range(4), repeat=G):
        idx = list(idx)
        p = np.prod(PROB[idx])
        W, Z = SCORES[idx], REWARD[idx]
        if estimator == "vanilla":
            est = vanilla_gradient(W, Z)
        elif estimator == "oracle":
            est = oracle_gradient(W, Z, V)
        else:
            est = grpo_gradient(W, Z)
        x = float(np.sum((est - g) ** 2))
        first += p * x
        second += p * x * x
    return first, second


def test_squared_error_moments_match_enumeration():
    V = PROB @ REWARD
    for G in (2, 3, 4):
        for est in ("vanilla", "oracle", "grpo"):
            if est == "grpo":
                got = grpo_squared_error_moments(PROB, REWARD, SCORES, G)
            else:
                centre = 0.0 if est == "vanilla" else V
                got = iid_mean_squared_error_moments(PROB, (REWARD - centre)[:, None] * SCORES, G)
            first, second = _brute(est, G)
            np.testing.assert_allclose([got.mean, got.second], [first, second], rtol=1e-12)


def test_maurer_margin_rejects_a_doubled_prediction():
    moments = [grpo_squared_error_moments(PROB, REWARD, SCORES, 4)]
    margin = nonnegative_lower_margin(moments, [400], [1.0], 3.2e-5)
    truth = moments[0].mean
    assert truth < truth + margin < 2 * truth  # an exact mean passes, twice it does not
