"""The claims' reading of a ratio's interval (``ustat_rl.claims.verdict_words``) is the commands'
own rule (``ustat_rl.stats.intervals.ratio_verdict``), held once; these pin that rule at its edges.
Exact comparisons of strings: no false-failure rate."""

import math

import pytest

from ustat_rl.claims.verdict_words import interval_allows

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("estimate, low, high, verdict", [
    (0.9, 0.8, 1.0, "within the noise"),                     # an end at 1 shows no gain
    (1.1, 1.0, 1.2, "within the noise"),
    (0.9, 0.8, math.nextafter(1.0, 0.0), "gain shown"),
    (1.1, math.nextafter(1.0, 2.0), 1.2, "worse than uniform"),
    (-0.1, 0.0, 0.5, "undefined"),                           # a ratio of MSEs is positive
    (0.0, 0.0, 0.5, "undefined"),
    (1.0, 0.0, 0.0, "undefined"),                            # zero width: no spread to judge by
    (0.027, 0.027, 0.027, "undefined"),
    (0.5, 0.7, 0.4, "undefined"),                            # unordered ends
    (math.nan, 0.1, 0.2, "undefined"),
    (math.inf, 0.1, 0.2, "undefined"),
    (0.5, math.nan, 0.7, "undefined"),
    (0.5, 0.1, math.inf, "within the noise"),                # unbounded above holds 1
    (0.5, -math.inf, 0.7, "gain shown"),
])
def test_the_interval_allows_one_verdict(estimate, low, high, verdict):
    assert interval_allows(estimate, low, high) == verdict
