"""The group size a pilot supports, given its uncertainty about ``c1`` (C17, C32).

At a fixed budget ``N = B G`` the GRPO MSE is ``(c1 G + c2 + c3'/(G - 1))/N`` (Theorem 7), so
relative to ``c3'/N`` it depends on ``rho = c1/c3'`` and ``kappa = c2/c3'`` only. ``c2`` and
``c3'`` are well determined by any pilot (their intervals are a few percent wide at 32 x 8);
``rho`` is not: its Fieller interval (:mod:`ustat_rl.pilot.fieller`) often reaches 0, and then
no upper bound on ``G*`` follows. The point estimate's argmin is then ``G = N`` (one prompt per
batch), far from the optimum whenever ``c1`` is small but positive.

The recommendation is the minimax-regret size over the interval for ``rho``, which is maths over
an interval and so the group size's owner's
(:func:`ustat_rl.theory.group_size.robust_group_size`, read through
:func:`~ustat_rl.theory.group_size.group_size_answer`). What is a pilot's stays here: the
interval the regret is taken over (:func:`regret_interval`: ``rho_low`` clipped at 0, ``rho_high``
raised to at least the pilot's resolution ``t se(c1)/c3'``, since values of ``c1`` below it cannot
be told from 0, so an interval for ``c1`` wholly below 0 does not make ``G = N`` certain), and
how many prompts would bound ``G*`` (:func:`prompts_to_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..theory.group_size import group_size_answer

__all__ = ["Advice", "advise", "pilot_advice", "regret_interval", "prompts_to_bound"]


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


def regret_interval(intervals) -> tuple[float, float]:
    """The interval for ``rho = c1/c3'`` a pilot's advice is judged over (C17, C32).

    Fieller's interval for ``rho`` with its upper end raised to at least the pilot's resolution:
    the half-width of ``c1``'s interval (a small pilot's upper one) over ``c3'``. ``ValueError``
    when the pilot's ``c3'`` is not above 0 (then no ``G*`` can be estimated).

    Parameters
    ----------
    intervals : PilotIntervals

    Returns
    -------
    rho_low, rho_high : float
    """
    c1, c3 = intervals.c1, intervals.constants.c3
    if not c3 > 0.0:
        raise ValueError(f"`rollouts`: the pilot's estimate of c3' is {c3:.3g} <= 0 (rewards "
                         "barely vary within prompts), so G* cannot be estimated")
    reach = c1.high - c1.estimate if intervals.small_pilot else intervals.c1_quantile() * c1.std_error
    return intervals.ratio.low, max(intervals.ratio.high, reach / c3)


def advise(intervals, budget) -> Advice:
    """The :class:`Advice` for a pilot's intervals at budget ``N`` (C17, C32).

    Parameters
    ----------
    intervals : PilotIntervals
    budget : int or BudgetGrid
        ``N`` (:func:`~ustat_rl.theory.group_size.budget_grid`).

    Returns
    -------
    Advice
        The recommendation of :func:`~ustat_rl.theory.group_size.group_size_answer` over
        :func:`regret_interval`, and what the pilot can say about it.
    """
    answer = group_size_answer(budget, intervals.constants, ratio=regret_interval(intervals))
    return pilot_advice(intervals, answer)


def pilot_advice(intervals, answer) -> Advice:
    """:class:`Advice` from a :class:`~ustat_rl.theory.group_size.GroupSizeAnswer` whose
    recommendation was taken over :func:`regret_interval` of ``intervals``."""
    bounded = intervals.bounded
    more = math.nan if bounded else prompts_to_bound(intervals.c1, intervals.n_prompts,
                                                     intervals.sketch_included,
                                                     intervals.c1_quantile())
    return Advice(answer.recommended_group_size, answer.worst_excess, bounded, more)
