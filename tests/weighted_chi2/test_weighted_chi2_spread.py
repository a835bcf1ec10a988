"""WeightedChiSquare for weights of any spread max(w) / min(w), checked against the mpmath reference.

Ruben's series needs ``1 - min(w) / max(w) < 1`` in float64, so past a spread of 1e15
(``RUBEN_MAX_SPREAD``) ``method="auto"`` inverts numerically everywhere and ``method="ruben"``
refuses the weights with an error naming the supported spread. The check: relative error below
``RTOL`` = 1e-10 against :func:`ustat_rl.weighted_chi2._reference.reference_probability` at 25
digits (deterministic, so no false-failure rate), at points where the tiny weight matters
(x ~ min(w)) and where it does not; the negative control drops the tiny weight, which the same
check rejects at the small point.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ustat_rl.weighted_chi2 import WeightedChiSquare
from ustat_rl.weighted_chi2._distribution import RUBEN_MAX_SPREAD
from ustat_rl.weighted_chi2._reference import reference_probability

pytestmark = pytest.mark.fast

RTOL = 1e-10
WIDE = [(1e-30, 1.0), (1e-12, 1e12), (1e-17, 1.0), (1e-20, 1.0, 2.0, 5.0)]


@functools.lru_cache(maxsize=None)
def reference(weights: tuple, x: float, kind: str) -> float:
    value, err = reference_probability(list(weights), x, kind, dps=25)
    assert err < 1e-14
    return float(value)


def points(weights) -> list[float]:
    """x where the smallest weight matters (a few times min w), the centre and both tails."""
    small, big = min(weights), max(weights)
    return [3.0 * small, 0.5 * big, 3.0 * big, 40.0 * big]


@pytest.mark.parametrize("method", ["auto", "inversion"])
@pytest.mark.parametrize("weights", WIDE)
def test_any_spread_matches_the_reference(weights, method):
    dist = WeightedChiSquare(list(weights), method=method)
    for x in points(weights):
        for kind, value in (("cdf", dist.cdf(x)), ("sf", dist.sf(x)), ("pdf", dist.pdf(x))):
            assert float(value) == pytest.approx(reference(weights, x, kind), rel=RTOL, abs=0.0), \
                (kind, x)


def test_dropping_the_tiny_weight_is_rejected_by_the_same_check():
    """Negative control: chi2_1 alone is wrong where x is of the order of the tiny weight."""
    weights = (1e-30, 1.0)
    x = points(weights)[0]
    wrong = float(WeightedChiSquare([1.0]).cdf(x))
    assert wrong != pytest.approx(reference(weights, x, "cdf"), rel=RTOL, abs=0.0)


def test_ruben_names_the_spread_it_supports():
    with pytest.raises(ValueError, match=r"max\(weights\) / min\(weights\) <= 1e\+15"):
        WeightedChiSquare([1e-30, 1.0], method="ruben")
    below = WeightedChiSquare([1.0, RUBEN_MAX_SPREAD / 10], method="ruben")  # still served
    assert np.isfinite(float(below.cdf(1.0)))


def test_quantiles_round_trip_past_the_spread():
    dist = WeightedChiSquare([1e-12, 1e12])
    for p in (1e-6, 0.3, 0.9):
        assert float(dist.cdf(dist.ppf(p))) == pytest.approx(p, rel=1e-9, abs=0.0)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e150])
@pytest.mark.parametrize("method", ["auto", "inversion"])
def test_any_scale_matches_the_reference_of_the_unit_problem(scale, method):
    """Q / c has weights w / c, so cdf(x; c w) = cdf(x / c; w): the reference at w = (1/3, 1)."""
    unit = (1.0 / 3.0, 1.0)
    dist = WeightedChiSquare([scale * w for w in unit], method=method)
    for x in (0.5, 3.0):
        for kind, value in (("cdf", dist.cdf(x * scale)), ("sf", dist.sf(x * scale)),
                            ("pdf", dist.pdf(x * scale) * scale)):
            assert float(value) == pytest.approx(reference(unit, x, kind), rel=RTOL, abs=0.0), \
                (kind, x)
    assert float(dist.ppf(0.3)) / scale == pytest.approx(
        float(WeightedChiSquare(list(unit)).ppf(0.3)), rel=1e-12, abs=0.0)


def test_a_spread_beyond_the_float_range_is_refused_by_name():
    with pytest.raises(ValueError, match=r"`weights` must satisfy max / min <= 1e\+300"):
        WeightedChiSquare([1e-300, 1e300])
