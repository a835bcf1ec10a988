"""C68 (ustat_rl.claims.beyond_answers.variance_filter_kit): the claim passes on the code as it
is, and bugs planted in the kit and the pilot's report turn its verdict to "fail": the kit's
batches tried largest first (its failing batch is no longer the smallest), the reference mask
with the population variance, and the report's option dropped (top_p left at 0.9)."""

from __future__ import annotations

import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.pilot import variance_filter as pilot_module
from ustat_rl.theory import variance_filter_kit as kit
from ustat_rl.theory.variance_filter import VarianceFilter

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C68"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_largest_batches_first_fails(monkeypatch):
    original = kit.filter_cases
    monkeypatch.setattr(kit, "filter_cases", lambda n=300, seed=0: original(n, seed)[::-1])
    assert _result().verdict == "fail"


def test_population_variance_in_the_reference_fails(monkeypatch):
    original = kit.variance_filter_mask
    monkeypatch.setattr(kit, "variance_filter_mask", lambda r, g, spec: original(
        r, g, VarianceFilter(spec.strategy, spec.top_p, spec.top_k, ddof=0)))
    result = _result()
    assert result.verdict == "fail" and "literally" in result.headline


def test_report_option_dropped_fails(monkeypatch):
    original = pilot_module.get_variance_filter
    monkeypatch.setattr(pilot_module, "get_variance_filter",
                        lambda spec, param=None: original(spec, None))
    result = _result()
    assert result.verdict == "fail" and "exact moments" in result.headline

