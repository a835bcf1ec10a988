"""C67 (ustat_rl.claims.beyond_answers.ustatistic): the claim passes on the code as it is, and
bugs planted in the U-statistic routes turn its verdict to "fail": the plug-in ``||U||^2`` for
``||h0||^2`` in the zeta estimates, the V-statistic's divisor ``n^2``, and ``zeta2`` without its
``||g(x)||^2`` term."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.ustatistic import enumerated_zetas, outcomes
from ustat_rl.stats import ustatistics
from ustat_rl.theory import hoeffding

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C67"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_plug_in_h0_fails(monkeypatch):
    original = ustatistics.estimate_zetas

    def plug_in(kernel, sample):
        e = original(kernel, sample)
        u = ustatistics.u_statistic(kernel, sample)
        h = float(u @ u)
        return ustatistics.ZetaEstimate(e.zeta1 + e.h0_sq - h, e.zeta2 + e.h0_sq - h, h, e.n)

    monkeypatch.setattr(ustatistics, "estimate_zetas", plug_in)
    assert _result().verdict == "fail"


def test_v_statistic_divisor_fails(monkeypatch):
    def v_stat(kernel, sample):
        values = ustatistics.pairwise_kernel_matrix(kernel, sample)
        return values.sum(axis=(0, 1)) / values.shape[0] ** 2

    monkeypatch.setattr(ustatistics, "u_statistic", v_stat)
    assert _result().verdict == "fail"


def test_zeta2_without_grad_term_fails(monkeypatch):
    original = hoeffding.kernel_zetas

    def wrong(m):
        z = original(m)
        return hoeffding.KernelZetas(z.zeta1, z.zeta2 - m.grad_sq / 2.0)

    monkeypatch.setattr(hoeffding, "kernel_zetas", wrong)
    result = _result()
    assert result.verdict == "fail" and "zeta2" in result.headline


def test_enumeration_on_a_deterministic_prompt(monkeypatch):
    """A prompt whose rewards are all 0 has h = 0: every zeta and h0 vanish."""
    from ustat_rl.claims.beyond_answers import ustatistic as claim

    rows, prob = outcomes(0)
    assert rows.shape == (6, 4) and prob.sum() == pytest.approx(1.0)
    monkeypatch.setattr(claim, "ZETA_REWARD_PROB", ((0.0, 0.0, 0.0), claim.ZETA_REWARD_PROB[1]))
    z1, z2, h0_sq, h0 = enumerated_zetas(0)
    assert (z1, z2, h0_sq) == (0.0, 0.0, 0.0) and np.all(h0 == 0.0)
