"""Exact first and second moments of GRPO's squared gradient error at one prompt (C5.tf).

The second moment is what the interval of :mod:`ustat_rl.stats.nonnegative` needs for a mean of
non-negative, heavy-tailed replicates (the squared errors of C5.tf's transformer policies);
the first reproduces Theorem 2's MSE.
"""

from __future__ import annotations

import numpy as np

from ..stats.nonnegative import SquaredErrorMoments

__all__ = ["grpo_squared_error_moments"]


def _centred_sum_moments(prob, rows, shift, count: int):
    """``E X`` and ``E X^2`` for ``X = ||e - S||^2``, ``S`` a sum of ``m = count`` centred draws.

    ``rows`` are the centred values ``Y_a``, ``e = shift``. Expanding
    ``(|e|^2 - 2 e.S + |S|^2)^2``, only index patterns in which no index appears once survive
    (``E Y = 0``): ``E X = |e|^2 + m T`` and
    ``E X^2 = |e|^4 + 4 m e'Se + E|S|^4 + 2 |e|^2 m T - 4 m E[(e.Y)|Y|^2]``.
    """
    m = int(count)
    e2 = float(shift @ shift)
    if m == 0:
        return e2, e2 * e2
    gram = rows @ rows.T  # (M, M)
    sq = np.diag(gram)
    proj = rows @ shift  # (M,) e . Y_a
    t = float(prob @ sq)
    q = float(prob @ sq**2)
    r = float(prob @ (gram * gram) @ prob)
    e_sigma_e = float(prob @ proj**2)  # e' Sigma e
    skew = float(prob @ (proj * sq))  # E[(e . Y) ||Y||^2]
    s2 = m * t  # E||S||^2
    s4 = m * q + m * (m - 1) * (t * t + 2.0 * r)  # E||S||^4
    first = e2 + s2
    # (|e|^2 - 2 e.S + |S|^2)^2; E(e.S) = 0, E(e.S)^2 = m e'Se, E[(e.S)|S|^2] = m skew
    second = e2 * e2 + 4.0 * m * e_sigma_e + s4 + 2.0 * e2 * s2 - 4.0 * m * skew
    return first, second


def grpo_squared_error_moments(prob, reward, scores, group_size: int) -> SquaredErrorMoments:
    """Exact moments of ``||g_GRPO - g||^2`` when exactly one output is rewarded (C5.tf).

    Parameters
    ----------
    prob : ndarray (M,)
        Output probabilities at one prompt.
    reward : ndarray (M,)
        Binary rewards with a single 1 (the task's canonical answer ``y*``).
    scores : ndarray (M, d)
        ``W_a``.
    group_size : int
        ``G >= 2``.

    Notes
    -----
    Given ``N`` correct answers in the group (``N ~ Binomial(G, V)``), the leave-one-out
    advantages are ``(G - N)/(G - 1)`` for the correct ones and ``-N/(G - 1)`` for the others,
    so ``g_GRPO = a_N W* - b_N sum_j U_j`` with ``a_N = N (G - N)/(G (G - 1))``,
    ``b_N = N/(G (G - 1))`` and ``U_1..U_{G-N}`` i.i.d. scores of the wrong answers (law
    ``pi(a)/(1 - V)``). Writing ``sum_j U_j = (G - N) u + S`` with ``S`` centred, the error is
    ``||e_N - b_N S||^2``, ``e_N = a_N W* - b_N (G - N) u - g``, whose first two moments need only
    the Gram matrix of the centred wrong-answer scores; ``E X`` reproduces Theorem 2's MSE
    (checked in the tests).
    """
    from scipy.stats import binom

    prob = np.asarray(prob, dtype=np.float64)
    reward = np.asarray(reward, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    right = np.flatnonzero(reward == 1.0)
    if right.size != 1 or not np.all((reward == 0.0) | (reward == 1.0)):
        raise ValueError("`reward` must be binary with exactly one rewarded output")
    G = int(group_size)
    V = float(prob[right[0]])
    w_star = scores[right[0]]
    g = V * w_star
    wrong = reward == 0.0
    q_wrong = prob[wrong] / (1.0 - V)
    u = q_wrong @ scores[wrong]
    centred = scores[wrong] - u  # (M - 1, d)
    first = second = 0.0
    for n in range(G + 1):
        weight = float(binom.pmf(n, G, V))
        a, b, m = n * (G - n) / (G * (G - 1.0)), n / (G * (G - 1.0)), G - n
        shift = a * w_star - b * m * u - g
        f1, f2 = _centred_sum_moments(q_wrong, b * centred, shift, m)
        first += weight * f1
        second += weight * f2
    return SquaredErrorMoments(first, second)
