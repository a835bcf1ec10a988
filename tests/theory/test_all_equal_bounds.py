"""Moment bounds on the all-equal fraction at other group sizes (ustat_rl.theory.all_equal_bounds).

The bounds are certified (weak duality plus a Lipschitz slack), so a success-rate distribution's
exact all-equal fraction must lie inside them with no tolerance; tightness is checked where the
two moments pin the distribution down (the bounds collapse to within the stated slack).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import betaln

from ustat_rl.theory.advantage import all_equal_probability
from ustat_rl.theory.all_equal_bounds import (
    all_equal_bounds,
    moment_bounds,
    reward_variance_bounds,
)

pytestmark = pytest.mark.fast

BETAS = [(0.6, 0.9), (2.0, 2.0), (0.3, 0.3), (5.0, 1.0), (0.5, 4.0)]
SIZES = (2, 3, 4, 8, 16, 32, 64)


def beta_all_equal(a: float, b: float, G: int) -> float:
    """``E[p^G + (1 - p)^G]`` for ``p ~ Beta(a, b)``, exactly (ratios of Beta functions)."""
    return math.exp(betaln(a + G, b) - betaln(a, b)) + math.exp(betaln(a, b + G) - betaln(a, b))


@pytest.mark.parametrize("a,b", BETAS)
@pytest.mark.parametrize("G0", [2, 4, 8])
def test_bounds_contain_the_truth_for_beta_success_rates(a, b, G0):
    m, a0 = a / (a + b), beta_all_equal(a, b, G0)
    for G in SIZES:
        out = all_equal_bounds(G, (m, m), (a0, a0), G0)
        assert out.feasible
        assert out.low <= beta_all_equal(a, b, G) <= out.high, (G, out)
        assert out.slack < 1e-3


@pytest.mark.parametrize("a,b", BETAS)
def test_reward_variance_bounds_contain_the_truth(a, b):
    G0 = 8
    m = a / (a + b)
    truth = m - (a * (a + 1)) / ((a + b) * (a + b + 1))  # E p - E p^2 = E[p(1 - p)]
    out = reward_variance_bounds((m, m), (beta_all_equal(a, b, G0),) * 2, G0)
    assert out.low <= truth <= out.high


def test_bounds_contain_the_truth_for_discrete_success_rates():
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = rng.random(rng.integers(1, 5))
        w = rng.dirichlet(np.ones(p.size))
        G0 = int(rng.integers(2, 10))
        m, a0 = float(w @ p), float(w @ all_equal_probability(p, G0))
        for G in SIZES:
            out = all_equal_bounds(G, (m, m), (a0, a0), G0)
            assert out.low <= float(w @ all_equal_probability(p, G)) <= out.high


def test_at_the_run_group_size_the_bounds_are_the_box():
    # G = G0: the value itself, to within the certification slack (< 5e-4) and the grid's chord
    # gap (1.1e-5 at G0 = 8)
    out = all_equal_bounds(8, (0.4, 0.4), (0.3, 0.3), 8)
    assert out.slack < 5e-4
    assert out.low == pytest.approx(0.3, abs=out.slack + 2e-5)
    assert out.high == pytest.approx(0.3, abs=out.slack + 2e-5)
    wide = all_equal_bounds(8, (0.3, 0.5), (0.25, 0.35), 8)
    assert wide.low == pytest.approx(0.25, abs=1e-3) and wide.high == pytest.approx(0.35, abs=1e-3)


def test_a_point_mass_is_pinned_down():
    # E p = 1/2 and a(2) = 1/2 force every p = 1/2: a(G) = 2^(1-G) exactly
    for G in (3, 8, 32):
        out = all_equal_bounds(G, (0.5, 0.5), (0.5, 0.5), 2)
        assert out.low == pytest.approx(2.0 ** (1 - G), abs=1e-12)
        assert out.high - out.low < 2e-3


def test_far_group_sizes_get_wide_bounds_not_values():
    # two moments cannot fix the tail: at G = 64 from G0 = 4 the interval is wide
    out = all_equal_bounds(64, (0.4, 0.4), (0.4, 0.4), 4)
    assert out.high - out.low > 0.2


@pytest.mark.parametrize("a,b", BETAS)
def test_negative_control_the_wrong_run_group_size_excludes_the_truth(a, b):
    # the fraction observed at G0 = 8 but read as if at 4 or 16: the truth at 8 falls outside
    m, a8 = a / (a + b), beta_all_equal(a, b, 8)
    for wrong in (4, 16):
        out = all_equal_bounds(8, (m, m), (a8, a8), wrong)
        assert not (out.feasible and out.low <= a8 <= out.high), (wrong, out)


def test_an_impossible_box_is_infeasible():
    # a mean reward of 1/2 forces a(8) >= 2^-7: an all-equal fraction of 0 fits nothing
    out = all_equal_bounds(16, (0.5, 0.5), (0.0, 0.001), 8)
    assert not out.feasible and math.isnan(out.low) and math.isnan(out.high)


@pytest.mark.parametrize("box,name", [((0.5, 0.4), "mean"), ((float("nan"), 0.4), "mean"),
                                      ("ab", "mean")])
def test_bad_boxes_name_the_parameter(box, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        all_equal_bounds(4, box, (0.2, 0.3), 8)


def test_bad_group_sizes_name_the_parameter():
    with pytest.raises(ValueError, match="run_group_size"):
        all_equal_bounds(4, (0.5, 0.5), (0.2, 0.3), 1)
    with pytest.raises(ValueError, match="lipschitz"):
        moment_bounds(lambda p: p, -1.0, (0, 1), (0.5, 0.5), (0.2, 0.3), 8)
