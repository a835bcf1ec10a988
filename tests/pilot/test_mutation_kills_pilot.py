"""Edges of Fieller's interval and of the advice (docs/theory.md C32) that the mutants of
docs/mutation.md's fifth round found untested.

Every check is exact (no sampling): no false-failure rate. Each test names the mutants it was
written against; they are its negative controls (benchmarks/mutation.py reports them killed).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from ustat_rl.pilot.advice import Advice
from ustat_rl.pilot.fieller import fieller_ratio
from ustat_rl.theory.group_size import robust_group_size

pytestmark = pytest.mark.fast

SIZES = [2, 4, 8, 16, 32]


def test_fieller_is_the_whole_line_when_c3_sits_on_the_edge_of_resolution():
    # mutant: `not a > 0` into `not a >= 0`. At c3_hat^2 = t^2 v33 exactly (a = 0) the set is
    # unbounded (module docstring), and the quadratic's roots would divide by a = 0
    c3, t = 2.0, 2.0
    v33 = c3 * c3 / (t * t)  # 1.0: a = c3^2 - t^2 v33 = 0 in floating point
    assert c3 * c3 - t * t * v33 == 0.0
    assert fieller_ratio(0.5, c3, 0.01, 0.0, v33, t) == (-math.inf, math.inf)
    # just inside the resolution the set is bounded again
    low, high = fieller_ratio(0.5, c3, 0.01, 0.0, 0.5 * v33, t)
    assert math.isfinite(low) and math.isfinite(high) and low < 0.5 / c3 < high


def test_a_nan_lower_end_is_read_as_zero():
    # mutant: a NaN rho_low read as 1.0 instead of 0 (c1 >= 0 is all that is known)
    for high in (0.02, 0.3, math.inf):
        for kappa in (0.0, 1.0):
            assert robust_group_size(SIZES, math.nan, high, kappa) == \
                robust_group_size(SIZES, 0.0, high, kappa), (high, kappa)
    # and the answer is not the one at rho_low = 1 (where G = 2 is best)
    assert robust_group_size(SIZES, math.nan, 0.02, 1.0)[0] != 2


def test_advice_is_frozen():
    advice = Advice(8, 0.1, True, math.nan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        advice.group_size = 4
