"""The pilot claims' checks reject a wrong input through the same comparison (docs/theory.md C31,
C32); that the claims pass is ``ustat-rl verify``'s own job."""

from __future__ import annotations

import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.registry import check_close
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.tolerances import Z_STRICT

CTX = VerifyContext(seed=123, quick=True)


@pytest.mark.integration  # the whole claim C31, against a biased value it must reject
def test_negative_control_c31_comparison_rejects_a_biased_value():
    result = run_claim(registry()["C31"], CTX)
    (c1,) = [c for c in result.checks if c.name == "full scores: mean estimate of c1 = exact"]
    se = (c1.ci_high - c1.measured) / Z_STRICT  # C31 compares at Z_STRICT
    # the plug-in ||g_hat(x)||^2 adds E||WZ - g(x)||^2/n to E||g(X)||^2, and so to c1 (exact
    # moments of the bandit C31 uses, n = 8 samples per prompt)
    m = interior_optimum_bandit().moments()
    biased = c1.predicted + float(m.prompt_prob @ (m.score_sq_reward_sq - m.grad_sq)) / 8
    assert not check_close("plug-in c1", biased, c1.measured, se, z=Z_STRICT).passed


def test_c32_coverage_band_rejects_under_coverage_and_accepts_the_band():
    from ustat_rl.claims.paper_pilot import coverage_in_band

    # 150 pilots: the band's lower limit is 0.85 - 4 sqrt(0.85 * 0.15 / 150) = 0.733
    assert coverage_in_band("x", 135, 150).passed and coverage_in_band("x", 128, 150).passed
    assert not coverage_in_band("x", 109, 150).passed  # 72.7%: a method at 73% is rejected
    # 1500 pilots (a full run): 100% is above 0.95 + 4 sqrt(0.95 * 0.05 / 1500) = 0.973
    assert not coverage_in_band("x", 1500, 1500).passed
