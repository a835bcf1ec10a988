"""Intervals valid for a mean of non-negative, heavy-tailed replicates (used by C5.tf).

A normal interval built from the sample standard error under-covers for squared errors whose
mean is carried by rare large values: in most runs the rare values are missing, so the sample
mean *and* the sample variance are both too small, and the studentised error has a lower tail
far heavier than the normal one (on the transformer policies of C5.tf, ``P(t < -4)`` is about
3e-3 instead of 3.2e-5 at 30 replicates per prompt; docs/theory.md C5). The bounds here hold for
every sample size and need no normal approximation; it uses the exact second moment of the
squared error, computed from an enumeration, instead of the sample variance.

For a sum ``S = sum_i X_i`` of independent non-negative variables, Maurer (2003) gives
``P(E S - S >= t) <= exp(-t^2 / (2 sum_i E X_i^2))`` with no upper bound on the ``X_i``.
The upper tail of the studentised mean of right-skewed replicates is lighter than the normal
one (a large value raises the sample se with the mean), so the other side keeps the normal
interval from the sample se.

References
----------
A. Maurer, "A bound on the deviation probability for sums of non-negative random variables",
J. Inequalities in Pure and Applied Mathematics 4(1), 2003.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SquaredErrorMoments", "grpo_squared_error_moments", "iid_mean_squared_error_moments",
           "nonnegative_lower_margin"]


@dataclass(frozen=True)
class SquaredErrorMoments:
    """Exact moments of ``X = ||mean of G draws - mu||^2``.

    Attributes
    ----------
    mean : float
        ``E X`` (the MSE).
    second : float
        ``E X^2``.
    """

    mean: float
    second: float



def iid_mean_squared_error_moments(prob, rows, group_size: int) -> SquaredErrorMoments:
    """Moments of the squared error of the mean of ``G`` i.i.d. draws of the rows of ``rows``.

    Parameters
    ----------
    prob : ndarray (M,)
        Probability of each row (sums to one).
    rows : ndarray (M, d)
        The values ``y_a`` a draw can take; ``mu = sum_a prob_a y_a``.
    group_size : int
        ``G``.

    Notes
    -----
    With ``Y = y - mu``, ``K = (Y_a . Y_b)`` the Gram matrix of the centred rows and
    ``T = E||Y||^2``, ``Q = E||Y||^4``, ``R = E (Y . Y')^2`` (two independent draws)::

        E ||sum_g Y_g||^2 = G T
        E ||sum_g Y_g||^4 = G Q + G (G - 1) (T^2 + 2 R)

    (the index patterns of ``E (Y_i . Y_j)(Y_k . Y_l)`` that survive are ``i=j=k=l`` and the
    three pairings), divided by ``G^2`` and ``G^4``. The vanilla estimator is such a mean with
    ``y_a = Z_a W_a`` and the oracle one with ``y_a = (Z_a - V) W_a``.
    """
    prob = np.asarray(prob, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.float64)
    G = int(group_size)
    centred = rows - prob @ rows  # (M, d)
    gram = centred @ centred.T  # (M, M)
    sq = np.diag(gram)  # (M,) ||Y_a||^2
    t = float(prob @ sq)
    q = float(prob @ sq**2)
    r = float(prob @ (gram * gram) @ prob)
    second = (G * q + G * (G - 1) * (t * t + 2.0 * r)) / G**4
    return SquaredErrorMoments(t / G, second)


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


def nonnegative_lower_margin(strata, n_per_stratum, weights, alpha: float) -> float:
    """``t`` with ``P(E S - S >= t) <= alpha`` for a stratified mean of non-negative replicates.

    ``S = sum_x f_x mean_x``; stratum ``x`` has ``n_x`` replicates with exact second moment
    ``strata[x].second``. Maurer's bound: ``t = sqrt(2 ln(1/alpha) sum_x f_x^2 E X_x^2/n_x)``.
    """
    n = np.asarray(n_per_stratum, dtype=np.float64)
    f = np.asarray(weights, dtype=np.float64)
    second = np.array([s.second for s in strata])
    return math.sqrt(2.0 * math.log(1.0 / alpha) * float(np.sum(f**2 * second / n)))
