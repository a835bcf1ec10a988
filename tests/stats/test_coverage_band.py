"""Whether a measured coverage lies in its band (``ustat_rl.stats.coverage_band``): the limits
against the band widened by binomial standard errors written out by hand, the verdict at the
counts on either side of each limit, and bad input named by its parameter."""

from __future__ import annotations

import math

import pytest

from ustat_rl.stats.coverage_band import COVERAGE_BAND, coverage_in_band
from ustat_rl.tolerances import Z_ONE_SIDED

pytestmark = pytest.mark.fast


def test_limits_are_the_band_widened_by_binomial_standard_errors():
    verdict = coverage_in_band(135, 150)
    assert COVERAGE_BAND == (0.85, 0.95) and Z_ONE_SIDED == 4.0
    assert verdict.rate == 135 / 150
    assert verdict.lower_limit == pytest.approx(0.85 - 4.0 * math.sqrt(0.85 * 0.15 / 150),
                                                rel=1e-15)
    assert verdict.upper_limit == pytest.approx(0.95 + 4.0 * math.sqrt(0.95 * 0.05 / 150),
                                                rel=1e-15)
    other = coverage_in_band(9, 10, band=(0.5, 0.6), z=2.0)
    assert other.lower_limit == pytest.approx(0.5 - 2.0 * math.sqrt(0.25 / 10), rel=1e-15)
    assert other.upper_limit == pytest.approx(0.6 + 2.0 * math.sqrt(0.24 / 10), rel=1e-15)


@pytest.mark.parametrize("hits, n, passed", [
    (111, 150, True), (110, 150, False),    # lower limit 0.7334: 0.7400 in, 0.7333 out
    (150, 150, True),                         # upper limit 1.021 at n = 150: every hit is in
    (1458, 1500, True), (1459, 1500, False),  # upper limit 0.9725: 0.9720 in, 0.9727 out
    (1275, 1500, True), (0, 1500, False)])
def test_verdict_on_either_side_of_each_limit(hits, n, passed):
    assert coverage_in_band(hits, n).passed is passed


@pytest.mark.parametrize("kwargs, match", [
    (dict(hits=3, n=0), "`n`"), (dict(hits=3, n=2.5), "`n`"), (dict(hits=-1, n=10), "`hits`"),
    (dict(hits=11, n=10), "`hits`"), (dict(hits=1.5, n=10), "`hits`"),
    (dict(hits=5, n=10, band=(0.9, 0.8)), "`band`"), (dict(hits=5, n=10, band=(0.0, 0.5)),
                                                      "`band`"),
    (dict(hits=5, n=10, z=0.0), "`z`"), (dict(hits=5, n=10, z=float("nan")), "`z`")])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        coverage_in_band(**kwargs)
