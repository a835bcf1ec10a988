"""C74 (ustat_rl.claims.beyond_answers.multichannel_kit): the claim passes on the code as it
is, and bugs planted in the kits turn its verdict to "fail": a tolerance without rounding in
either stage (the written forms rejected, float64 too), a comparison that never fails (the
planted forms pass), a weights check that accepts all-zero weights, and probes that never
refuse."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.advantages.multichannel import get_multichannel_rule
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.multichannel_kit import (
    KIT_WEIGHTS,
    kit_batch,
    normalize_then_sum,
    sum_then_normalize,
)
from ustat_rl.conformance import kit, multichannel

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=10, quick=True)


def _result():
    return run_claim(registry()["C74"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_tolerance_without_rounding_fails(monkeypatch):
    # either stage's rounding alone covers float32 here; without both the bound is 0
    monkeypatch.setattr(multichannel, "_working", lambda dtype: (0.0, 0.0))
    monkeypatch.setattr(multichannel, "tolerance",
                        lambda rule, x, ids, dtype=None: np.zeros(np.shape(x)[0]))
    result = _result()
    assert result.verdict == "fail" and "conforms to" in result.headline  # float64 too


def test_comparison_that_never_fails_fails(monkeypatch):
    monkeypatch.setattr(multichannel, "_compare", lambda fn, rule, z, ids, w: None)
    result = _result()
    assert result.verdict == "fail" and "rejected" in result.headline


def test_weights_check_accepting_zeros_fails(monkeypatch):
    monkeypatch.setattr(multichannel, "check_kit_weights",
                        lambda estimator, weights: estimator.check_weights(weights,
                                                                           np.size(weights)))
    result = _result()
    assert result.verdict == "fail" and "check_kit_weights" in result.headline


@pytest.mark.parametrize("module, name", [(multichannel, "multichannel_probe"),
                                          (kit, "probe")])
def test_probe_that_never_refuses_fails(monkeypatch, module, name):
    monkeypatch.setattr(module, "probe_call", lambda call, batch, signature: None)
    result = _result()
    assert result.verdict == "fail" and name in result.headline


def test_written_forms_equal_the_rules_on_one_batch():
    z, ids = kit_batch()
    w = np.array(KIT_WEIGHTS)
    for rule, fn in (("trl_sum_then_normalize", sum_then_normalize),
                     ("trl_normalize_then_sum", normalize_then_sum)):
        assert np.allclose(fn(z, ids, w), get_multichannel_rule(rule).advantages(z, ids, w),
                           rtol=1e-12, atol=1e-12)
