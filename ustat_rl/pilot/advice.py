"""The group size a pilot supports, given its uncertainty about ``c1`` (C17, C32).

At a fixed budget ``N = B G`` the GRPO MSE is ``(c1 G + c2 + c3'/(G - 1))/N`` (Theorem 7), so
relative to ``c3'/N`` it depends on ``rho = c1/c3'`` and ``kappa = c2/c3'`` only. ``c2`` and
``c3'`` are well determined by any pilot (their intervals are a few percent wide at 32 x 8);
``rho`` is not: its Fieller interval (:mod:`ustat_rl.pilot.fieller`) often reaches 0, and then
no upper bound on ``G*`` follows. The point estimate's argmin is then ``G = N`` (one prompt per
batch), far from the optimum whenever ``c1`` is small but positive.

:func:`robust_group_size` chooses instead the admissible ``G`` whose worst relative excess over
the best admissible size, over every ``rho`` in the interval, is smallest (minimax regret):

    G_rec = argmin_G max_{rho in [rho_lo, rho_hi]} f(G, rho) / min_G' f(G', rho),
    f(G, rho) = rho G + kappa + 1/(G - 1),

with ``rho_lo`` clipped at 0 (``c1 >= 0``) and ``rho_hi`` raised to at least the pilot's
resolution ``t se(c1)/c3'`` (values of ``c1`` below it cannot be told from 0, so an interval for
``c1`` that lies wholly below 0 does not make ``G = N`` certain). ``rho_hi`` is not capped: the
smallest size is best for every ``rho >= 1/2``, but the excess of each larger ``G`` keeps growing
with ``rho`` towards ``G/G_min``, so an unbounded interval is judged at that limit. That worst
excess is reported: it is what the pilot can promise about the recommendation. When the interval
is narrow this is the argmin at the estimate.

For each ``G`` the ratio is a linear function of ``rho`` over a concave piecewise-linear one (the
lower envelope), so it is quasi-convex in ``rho`` and its maximum over the interval lies at an
end; the grid always holds both ends, and ``verify`` checks the result against a dense brute
force over ``rho`` (docs/theory.md C50).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Advice", "advise", "robust_group_size", "prompts_to_bound"]

#: ``rho`` points of the regret grid (log-spaced, plus the ends and 0).
_GRID = 256

#: Upper end of the grid when the interval has none: ``1/((G_1 - 1)(G_2 - 1)) <= 1/2`` is the
#: largest ``rho`` at which the best admissible size changes, and beyond the grid the limit
#: ``G/G_min`` stands for ``rho = inf``.
_RHO_TOP = 1.0


@dataclass(frozen=True)
class Advice:
    """The recommended group size and what the pilot can say about it (C17, C32).

    Attributes
    ----------
    group_size : int
        Recommended admissible ``G`` (a divisor of ``N``).
    worst_excess : float
        ``max_rho f(G, rho)/min_G' f(G', rho) - 1`` over the ``rho`` interval: the largest
        relative excess MSE of ``group_size`` over the best admissible size that the pilot
        cannot rule out.
    bounded : bool
        Whether the pilot bounds ``G*`` from above.
    prompts_to_bound : float
        Pilot prompts in all that would bound ``G*`` from above (``nan`` when it is bounded;
        ``inf`` when the projection noise alone prevents it).
    """

    group_size: int
    worst_excess: float
    bounded: bool
    prompts_to_bound: float


def robust_group_size(sizes, rho_low: float, rho_high: float, kappa: float):
    """Minimax-regret group size over ``rho in [rho_low, rho_high]`` (module docstring).

    Parameters
    ----------
    sizes : array_like of int
        Admissible group sizes (at least one, each ``>= 2``).
    rho_low, rho_high : float
        The interval for ``c1/c3'`` (ends may be infinite).
    kappa : float
        ``c2/c3'``, at least 0.

    Returns
    -------
    group_size : int
    worst_excess : float

    Examples
    --------
    >>> robust_group_size([2, 4, 8, 16, 32], 0.02, 0.02, 1.0)[0]  # G* = 1 + 0.02^(-1/2) = 8.07
    8
    """
    G = np.asarray(sizes, dtype=np.float64)  # (n_G,)
    lo = max(rho_low, 0.0) if not math.isnan(rho_low) else 0.0
    hi = max(rho_high, lo) if not math.isnan(rho_high) else math.inf
    if math.isinf(lo):  # every rho is infinite: the smallest size is best
        return int(G.min()), 0.0
    grid = _rho_grid(lo, hi if math.isfinite(hi) else max(lo, _RHO_TOP))  # (n_rho,)
    f = grid[:, None] * G[None, :] + kappa + 1.0 / (G[None, :] - 1.0)  # (n_rho, n_G)
    ratio = f / f.min(axis=1, keepdims=True)  # (n_rho, n_G)
    if math.isinf(hi):  # the ratio's limit as rho -> inf
        ratio = np.vstack([ratio, G / G.min()])
    regret = ratio.max(axis=0)  # (n_G,)
    best = int(np.argmin(regret))
    return int(G[best]), float(regret[best] - 1.0)


def _rho_grid(low: float, high: float) -> np.ndarray:
    """Both ends of ``[low, high]`` (finite) and ``_GRID`` log-spaced points between."""
    grid = np.unique(np.r_[low, high, np.geomspace(max(low, 1e-8), max(high, 1e-8), _GRID)])
    return grid[(grid >= low) & (grid <= high)]


def prompts_to_bound(c1, n_prompts: int, sketched: bool, t: float | None = None) -> float:
    """Pilot prompts in all at which ``c1``'s jackknife interval would stop reaching 0 (C32).

    Parameters
    ----------
    c1 : Interval
        The pilot's interval for ``c1``.
    n_prompts : int
    sketched : bool
    t : float, optional
        The Student quantile of ``c1``'s jackknife interval
        (:meth:`~ustat_rl.pilot.uncertainty.PilotIntervals.c1_quantile`); by default read off
        the interval as ``(high - estimate)/se`` (right for an interval not cut at 0).

    Returns
    -------
    float
        With the prompt variance falling as ``1/P``, the ``P`` at which
        ``c_ref > t sqrt(se_p^2 P0/P + se_s^2)``, where ``c_ref`` is the estimate when positive
        and otherwise the interval's upper end (so the figure is then a lower bound: a smaller
        ``c1`` needs more), and never fewer than
        :data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` (below it the jackknife's
        interval is not the one reported). ``inf`` when the projection part alone is too large,
        or when ``c_ref <= 0`` (the pilot then names no size); ``nan`` when the interval
        already stays above 0.
    """
    from .small_sample import SMALL_PILOT_PROMPTS

    if c1.low > 0.0:
        return math.nan
    if not c1.std_error > 0.0:
        return math.inf
    t = (c1.high - c1.estimate) / c1.std_error if t is None else t
    ref = c1.estimate if c1.estimate > 0.0 else c1.high
    room = (ref / t) ** 2 - (c1.sketch_std_error**2 if sketched else 0.0)
    if not ref > 0.0 or room <= 0.0:
        return math.inf
    return float(max(n_prompts * c1.prompt_std_error**2 / room, SMALL_PILOT_PROMPTS))


def advise(intervals, sizes) -> Advice:
    """The :class:`Advice` for a pilot's intervals at the admissible sizes ``sizes`` (C17, C32).

    Parameters
    ----------
    intervals : PilotIntervals
    sizes : array_like of int
        Admissible group sizes at the budget.

    Returns
    -------
    Advice
    """
    c1, c3 = intervals.c1, intervals.constants.c3
    if not c3 > 0.0:
        raise ValueError(f"`rollouts`: the pilot's estimate of c3' is {c3:.3g} <= 0 (rewards "
                         "barely vary within prompts), so G* cannot be estimated")
    t = intervals.c1_quantile()
    rho = intervals.ratio
    # the pilot's resolution: the half-width of c1's interval (a small pilot's upper one)
    reach = c1.high - c1.estimate if intervals.small_pilot else t * c1.std_error
    rho_high = max(rho.high, reach / c3)
    group, excess = robust_group_size(sizes, rho.low, rho_high, intervals.constants.c2 / c3)
    bounded = intervals.bounded
    more = math.nan if bounded else prompts_to_bound(c1, intervals.n_prompts,
                                                     intervals.sketch_included, t)
    return Advice(group, excess, bounded, more)
