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
interval from the sample se. The exact moments of GRPO's squared error that C5.tf feeds the
bound are :func:`ustat_rl.theory.squared_error.grpo_squared_error_moments`.

References
----------
A. Maurer, "A bound on the deviation probability for sums of non-negative random variables",
J. Inequalities in Pure and Applied Mathematics 4(1), 2003.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SquaredErrorMoments", "iid_mean_squared_error_moments", "nonnegative_lower_margin"]


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


def nonnegative_lower_margin(strata, n_per_stratum, weights, alpha: float) -> float:
    """``t`` with ``P(E S - S >= t) <= alpha`` for a stratified mean of non-negative replicates.

    ``S = sum_x f_x mean_x``; stratum ``x`` has ``n_x`` replicates with exact second moment
    ``strata[x].second``. Maurer's bound: ``t = sqrt(2 ln(1/alpha) sum_x f_x^2 E X_x^2/n_x)``.
    """
    n = np.asarray(n_per_stratum, dtype=np.float64)
    f = np.asarray(weights, dtype=np.float64)
    second = np.array([s.second for s in strata])
    return math.sqrt(2.0 * math.log(1.0 / alpha) * float(np.sum(f**2 * second / n)))
