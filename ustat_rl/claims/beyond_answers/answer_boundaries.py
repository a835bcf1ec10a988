"""The small verdicts of the answer objects, at their boundaries (C79).

Several answers a user reads are one comparison on a stored interval: whether a pilot's
interval or a monitored window's covers a value (:meth:`~ustat_rl.pilot.uncertainty.Interval.covers`,
:meth:`~ustat_rl.frameworks.trajectory.RecordInterval.covers`) and how wide it is
(:attr:`~ustat_rl.pilot.uncertainty.Interval.width`, infinite for an unbounded end), whether a
rate's slope interval holds the theory's slope (:meth:`~ustat_rl.stats.rates.SlopeFit.contains`),
whether an allocation's MSE ratio is within the noise
(:attr:`~ustat_rl.pilot.allocation.RatioInterval.within_noise`), and what budget an allocation
spends (:attr:`~ustat_rl.theory.allocation.Allocation.budget`). A comparison's strictness flipped
(``<`` for ``<=``) is invisible unless a case puts the compared values equal, so each is checked
at its ends exactly and one float step outside them (``numpy.nextafter``); the budget is read
from allocations the package computes at several budgets. All exact, no sampling: no
false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_true, register

__all__ = ["INTERVAL", "SLOPE", "BUDGETS"]

#: A pilot interval ``(estimate, low, high)`` and a slope interval ``(slope, low, high)``.
INTERVAL = (0.8, 0.5, 1.25)
SLOPE = (-1.02, -1.1, -0.94)
#: Budgets of the allocations whose ``budget`` is read (a small bandit's three prompts).
BUDGETS = (6, 9, 16)


def _below(x: float) -> float:
    return float(np.nextafter(x, -math.inf))


def _above(x: float) -> float:
    return float(np.nextafter(x, math.inf))


def _interval_checks() -> list:
    from ...pilot.uncertainty import Interval

    est, low, high = INTERVAL
    box = Interval(est, low, high, 0.2, 0.2, 0.0)
    open_end = Interval(est, low, math.inf, 0.2, 0.2, 0.0)
    inside = [box.covers(v) for v in (low, high, est)]
    outside = [box.covers(v) for v in (_below(low), _above(high))]
    return [
        check_true("Interval.covers holds both ends and the estimate, and neither value one float "
                   "step outside", all(inside) and not any(outside), float(sum(inside))),
        check_true("Interval.width is high - low, and infinite for an unbounded end",
                   box.width == high - low and open_end.width == math.inf
                   and open_end.covers(1e300), float(box.width)),
    ]


def _record_checks() -> list:
    from ...frameworks.trajectory import RecordInterval

    est, low, high = INTERVAL
    record = RecordInterval(est, low, high)
    inside = [record.covers(v) for v in (low, high, est)]
    outside = [record.covers(v) for v in (_below(low), _above(high))]
    return [check_true("RecordInterval.covers (a monitored window's interval) holds both ends and "
                       "not one float step outside", all(inside) and not any(outside),
                       float(sum(inside)))]


def _slope_checks() -> list:
    from ...stats.rates import SlopeFit

    slope, low, high = SLOPE
    fit = SlopeFit(slope, 0.04, low, high, 0.0, 0.95)
    inside = [fit.contains(v) for v in (low, high, slope)]
    outside = [fit.contains(v) for v in (_below(low), _above(high))]
    return [check_true("SlopeFit.contains holds both ends of its interval and not one float step "
                       "outside", all(inside) and not any(outside), float(sum(inside)))]


def _ratio_checks() -> list:
    from ...pilot.allocation import RatioInterval

    cases = {  # (low, high): within the noise?
        (0.8, 1.0): True,          # the interval reaches 1 exactly: no gain shown
        (1.0, 1.3): True,          # starts at 1 exactly: no loss shown
        (0.8, _below(1.0)): False,  # below 1 by one float step: a gain
        (_above(1.0), 1.3): False,  # above 1 by one float step: a loss
    }
    got = {ends: RatioInterval(0.95 if ends[1] <= 1.0 else 1.1, 0.05, *ends).within_noise
           for ends in cases}
    return [check_true("RatioInterval.within_noise iff the interval holds 1, with 1 at either "
                       "end exactly inside and one float step away outside", got == cases,
                       float(sum(got.values())), note=f"expected {list(cases.values())}, "
                                                      f"got {list(got.values())}")]


def _budget_checks() -> list:
    from ...policies.examples import small_bandit
    from ...theory.allocation import optimal_allocation

    moments = small_bandit().moments()
    spent = [optimal_allocation(moments, "grpo", budget).budget for budget in BUDGETS]
    return [check_true(f"Allocation.budget of the optimal allocation at N = {BUDGETS} is N",
                       spent == list(BUDGETS), float(spent[-1]),
                       note=f"measured: the last budget; all: {spent}")]


@register("C79", "Beyond the paper: the small verdicts answer objects carry (a pilot "
          "interval's covers and width, a monitored window's covers, a slope interval's "
          "contains, an allocation ratio's within-noise and an allocation's budget) hold at "
          "their boundaries: ends inside, one float step outside, an unbounded end infinite",
          "derived (docs/theory.md C79; issue 48's boundaries)",
          "each at values equal to its ends and one float step beyond (numpy.nextafter); "
          "optimal allocations at three budgets")
def check_c79(ctx) -> list:
    return (_interval_checks() + _record_checks() + _slope_checks() + _ratio_checks()
            + _budget_checks())
