"""The pilot claims' checks reject a wrong input through the same comparison (docs/theory.md C31,
C32); that the claims pass is ``ustat-rl verify``'s own job."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.fast

def test_c32_coverage_band_rejects_under_coverage_and_accepts_the_band():
    from ustat_rl.claims.paper_pilot import coverage_in_band

    # 150 pilots: the band's lower limit is 0.85 - 4 sqrt(0.85 * 0.15 / 150) = 0.733
    assert coverage_in_band("x", 135, 150).passed and coverage_in_band("x", 128, 150).passed
    assert not coverage_in_band("x", 109, 150).passed  # 72.7%: a method at 73% is rejected
    # 1500 pilots (a full run): 100% is above 0.95 + 4 sqrt(0.95 * 0.05 / 1500) = 0.973
    assert not coverage_in_band("x", 1500, 1500).passed


def test_c31_group_passes_and_a_one_in_a_million_error_of_one_moment_turns_it(monkeypatch):
    import ustat_rl.claims.paper_pilot as paper_pilot
    from ustat_rl.claims import VerifyContext, registry, run_claim

    claim = registry()["C31.group"]
    assert run_claim(claim, VerifyContext()).verdict == "pass"
    real = paper_pilot.group_moments

    def planted(reward, score):
        out = real(reward, score)
        out["score_sq_centred"] *= 1 + 1e-6
        return out

    monkeypatch.setattr(paper_pilot, "group_moments", planted)
    result = run_claim(claim, VerifyContext())
    assert result.verdict == "fail" and result.headline.startswith("group of 3")
