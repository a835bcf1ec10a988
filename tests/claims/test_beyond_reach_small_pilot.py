"""C63 (ustat_rl.claims.beyond_reach.small_pilot): the claim passes on the code as it is, and
bugs planted in the small pilots' intervals turn its verdict to "fail": the chi-square upper end
of c1 dropped (the jackknife alone: about 69% coverage where the comparison needs 82%), and the
threshold compared with ``<=`` (32 prompts counted as a small pilot)."""

from __future__ import annotations

import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_reach.small_pilot import coverage_passes, power_at
from ustat_rl.pilot import small_sample, uncertainty

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=3, quick=True)


def _result():
    return run_claim(registry()["C63"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_c1_without_its_chi_square_end_fails(monkeypatch):
    monkeypatch.setattr(uncertainty, "c1_upper_end", lambda stats, level, estimate, *a: estimate)
    result = _result()
    assert result.verdict == "fail" and "for c1 covers" in result.headline


def test_the_threshold_compared_with_at_most_fails(monkeypatch):
    monkeypatch.setattr(uncertainty, "is_small_pilot",
                        lambda n: int(n) <= small_sample.SMALL_PILOT_PROMPTS)
    result = _result()
    assert result.verdict == "fail" and "boundary" in result.headline


def test_the_comparison_its_rate_and_its_power():
    """At n = 300: 247 covering intervals pass, 246 fail; the stated rate holds at coverage 0.9
    exactly, and coverage 0.80 is rejected with probability above 0.8."""
    from scipy.stats import binom

    assert coverage_passes(247, 300) and not coverage_passes(246, 300)
    assert binom.cdf(246, 300, 0.9) < 3.2e-5 <= binom.cdf(247, 300, 0.9)
    assert power_at(0.80, 300) > 0.8 and power_at(0.9, 300) < 3.2e-5
