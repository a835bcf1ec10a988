"""C49's simulation (``ustat_rl.claims.beyond_monitor.window``, docs/theory.md C49): with G*
constant along a run, the trajectory verdict's false-alarm rate against its stated simultaneous
level, independent and pooled windows, and the per-window level taken for the family's as the
negative control."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ustat_rl.claims.beyond_monitor.window import false_alarm_rate

pytestmark = pytest.mark.fast

#: One-sided normal quantile for the Monte Carlo bound below: a rate exactly at its bound
#: exceeds bound + Z se in 0.1% of runs.
Z = 3.09


def _false_alarm_rate(with_errors: bool, pooled: bool = False) -> float:
    """Share of 1000 runs with a constant G* = 8 whose verdict says "no single G" (C49's
    simulation, which owns it; ``pooled``: neighbouring windows share a batch)."""
    return false_alarm_rate(np.random.default_rng(20260301), with_errors, pooled)


def test_false_alarm_rate_is_within_the_stated_level():
    """With G* constant the verdict "G* moved" is wrong; Bonferroni bounds its rate by 10%.

    Tolerance: ``0.1 + Z sqrt(0.1 * 0.9 / 1000)`` (false failure <= 0.1% when the rate is at most
    0.1). Negative control: the same rule on the windows' unadjusted 90% intervals (what a
    reader who took one window's level for the family's would do) must exceed that bound.
    """
    bound = 0.1 + Z * math.sqrt(0.1 * 0.9 / 1000)
    assert _false_alarm_rate(with_errors=True) <= bound
    assert _false_alarm_rate(with_errors=True, pooled=True) <= bound  # dependent windows
    assert _false_alarm_rate(with_errors=False) > bound
