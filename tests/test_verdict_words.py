"""The claims' reading of a ratio's interval (``ustat_rl.claims.verdict_words``) and the verdict
the commands print (``ustat_rl.intervals.ratio_verdict``) are two statements of one rule; they
must agree everywhere, edges included. Exact comparisons of strings: no false-failure rate
(hypothesis runs derandomized, so the examples are the same at every run)."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ustat_rl.claims.verdict_words import interval_allows
from ustat_rl.intervals import ratio_verdict

ends = st.one_of(st.floats(-2.0, 4.0), st.sampled_from([0.0, 1.0, math.nan, math.inf]))


@settings(max_examples=300, derandomize=True)
@given(ends, ends, ends)
def test_the_claims_reading_is_the_commands_verdict(estimate, low, high):
    assert interval_allows(estimate, low, high) == ratio_verdict(estimate, low, high, "uniform")


def test_an_interval_ending_at_one_shows_no_gain():
    assert interval_allows(0.9, 0.8, 1.0) == "within the noise"
    assert interval_allows(1.1, 1.0, 1.2) == "within the noise"
    assert interval_allows(0.9, 0.8, math.nextafter(1.0, 0.0)) == "gain shown"
    assert interval_allows(-0.1, 0.0, 0.5) == "undefined"
