"""Fieller's interval for the ratio ``rho = c1/c3'`` and hence for ``G*`` (docs/theory.md C32).

``G* = 1 + sqrt(c3'/c1) = 1 + rho^(-1/2)`` is a ratio's transform, and a ratio whose denominator
is estimated is not well served by ``estimate +- t se``: the delta method's standard error of
``c1_hat/c3_hat`` is small exactly when ``c1_hat`` is small, so the interval is too short where it
matters. Fieller's theorem inverts the test of ``c1 - rho c3' = 0`` instead: the set of ``rho``
with

    (c1_hat - rho c3_hat)^2 <= t^2 (v11 - 2 rho v13 + rho^2 v33)

(``v`` the covariance of ``(c1_hat, c3_hat)``) has coverage ``1 - alpha`` whenever
``c1_hat - rho c3_hat`` is normal with that variance, for any ``rho``. It contains ``rho = 0`` if
and only if ``|c1_hat| <= t sqrt(v11)``, i.e. exactly when the interval for ``c1`` with the same
quantile reaches 0; ``G*`` is then unbounded above. When ``c3'`` itself is not distinguishable
from 0 (``c3_hat^2 <= t^2 v33``) the set is unbounded and so is ``G*`` in both directions.
The quadratic is derived in ``proofs_check.pilot`` (``fieller_quadratic``); the map from ``rho``
to ``G*`` is :func:`ustat_rl.theory.group_size.gstar_of_ratio`.
"""

from __future__ import annotations

import math

__all__ = ["fieller_ratio", "fieller_from_errors", "fieller_nonnegative"]


def fieller_ratio(c1: float, c3: float, v11: float, v13: float, v33: float,
                  t: float) -> tuple[float, float]:
    """Fieller's interval ``[low, high]`` for ``rho = c1/c3'`` (C32).

    Parameters
    ----------
    c1, c3 : float
        The estimates ``c1_hat``, ``c3_hat``.
    v11, v13, v33 : float
        Their variances and covariance.
    t : float
        The two-sided quantile (``t`` for the level).

    Returns
    -------
    low, high : float
        ``-inf``/``inf`` ends where the set is unbounded (``c3_hat^2 <= t^2 v33``), in which case
        the whole line is returned: the set is then the line or two rays, both unbounded.

    Examples
    --------
    >>> low, high = fieller_ratio(1.0, 2.0, 0.01, 0.0, 0.0, 2.0)
    >>> round(low, 6), round(high, 6)
    (0.4, 0.6)
    """
    a = c3 * c3 - t * t * v33
    b = c1 * c3 - t * t * v13
    c = c1 * c1 - t * t * v11
    if not a > 0.0:
        return -math.inf, math.inf
    disc = max(b * b - a * c, 0.0)  # >= 0 up to rounding: c1/c3 satisfies the inequality
    root = math.sqrt(disc)
    return (b - root) / a, (b + root) / a


def fieller_from_errors(c1: float, c3: float, se1: float, se3: float, cov13: float,
                        t: float) -> tuple[float, float]:
    """:func:`fieller_ratio` from the standard errors the intervals for ``c1`` and ``c3'`` use.

    Using ``se1^2`` (not a separately computed variance) makes ``rho = 0`` lie in Fieller's set
    exactly when ``c1``'s interval ``c1 +- t se1`` reaches 0; the covariance is clipped to the
    Cauchy-Schwarz bound ``|cov13| <= se1 se3``, which a jackknife estimate with its projection
    part corrected for the interaction need not respect.
    """
    bound = se1 * se3
    return fieller_ratio(c1, c3, se1 * se1, min(max(cov13, -bound), bound), se3 * se3, t)



def fieller_nonnegative(num: float, den: float, v11: float, v12: float, v22: float,
                        t: float) -> tuple[float, float]:
    """The part of Fieller's set for ``num/den`` in ``[0, inf)``, as ``(low, high)``, for a ratio
    known to be at least 0 (a noise scale).

    Where ``den_hat^2 > t^2 v22`` the set is :func:`fieller_ratio`'s interval, cut at 0. Otherwise
    the quadratic opens downwards and the set is the line less the open interval between its
    roots (or the whole line): when ``num_hat^2 > t^2 v11`` (the numerator told from 0) the roots
    have opposite signs and the non-negative part is ``[positive root, inf)``; else it holds 0,
    and is ``[0, inf)``. Where both are unbounded the pilot cannot bound the ratio from above.

    Examples
    --------
    >>> [round(end, 6) for end in fieller_nonnegative(1.0, 2.0, 0.01, 0.0, 0.0, 2.0)]
    [0.4, 0.6]
    >>> low, high = fieller_nonnegative(1.0, 0.1, 0.01, 0.0, 0.01, 2.0)  # 0.1 +- 0.2 holds 0
    >>> round(low, 6), high
    (3.232572, inf)
    """
    a = den * den - t * t * v22
    if a > 0.0:
        low, high = fieller_ratio(num, den, v11, v12, v22, t)
        return max(low, 0.0), max(high, 0.0)
    b = num * den - t * t * v12
    c = num * num - t * t * v11
    if not c > 0.0:
        return 0.0, math.inf
    if a == 0.0:  # one root, c/(2b); the set is the ray away from it on the side b decides
        return (max(c / (2.0 * b), 0.0), math.inf) if b > 0.0 else (0.0, math.inf)
    root = math.sqrt(b * b - a * c)  # a < 0 < c: b^2 - a c > 0, roots of opposite signs
    return max((b - root) / a, (b + root) / a), math.inf
