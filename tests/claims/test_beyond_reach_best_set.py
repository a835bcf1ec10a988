"""C64 (ustat_rl.claims.beyond_reach.best_set) and the best-G set it checks
(ustat_rl.stats.best_set): the claim passes on the code as it is, and bugs planted in the set's
statistics turn its verdict to "fail": Bonferroni's correction dropped, the one-sided p-values
halved, and ties at se = 0 read as significant."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_reach.best_set import STUDY_ALPHA, STUDY_TABLES, excess_rate
from ustat_rl.stats import best_set as module
from ustat_rl.stats.best_set import best_set, best_sets, welch

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=4, quick=True)


def _result():
    return run_claim(registry()["C64"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_without_bonferroni_fails(monkeypatch):
    original = module.best_sets
    monkeypatch.setattr(module, "best_sets", lambda m, v, n, alpha=0.05: original(
        m, v, n, alpha * (np.shape(m)[-1] - 1)))
    result = _result()
    assert result.verdict == "fail" and "excluded" in result.headline


def test_a_p_value_halved_fails(monkeypatch):
    """One-sided p-values halved (as if a two-sided test's were halved twice): too many
    exclusions."""
    original = module.best_sets

    def halved(m, v, n, alpha=0.05):
        _, p = original(m, v, n, alpha)
        p = p / 2
        return p > alpha / max(np.shape(m)[-1] - 1, 1), p

    monkeypatch.setattr(module, "best_sets", halved)
    assert _result().verdict == "fail"


def test_zero_se_ties_read_as_significant_fail(monkeypatch):
    original = module._welch_parts

    def tiny_se(*args):  # se = 0 replaced by a tiny positive number: a tie looks significant
        diff, se, df = original(*args)
        return diff + 1e-9, np.where(se > 0, se, 1e-12), np.where(se > 0, df, 10.0)

    monkeypatch.setattr(module, "_welch_parts", tiny_se)
    result = _result()
    assert result.verdict == "fail" and "boundary" in result.headline


def test_welch_and_the_set_on_known_values():
    assert welch([1.0, 2.0, 3.0], [0.0, 1.0]) == pytest.approx((1.5, (1 / 3 + 0.25) ** 0.5,
                                                                (7 / 12) ** 2 / ((1 / 3) ** 2 / 2 + 0.25 ** 2)))
    out = best_set({4: [0.5, 0.6, 0.55], 2: [0.1, 0.15, 0.2], 8: [0.52, 0.5, 0.58]})
    assert out.sizes == (2, 4, 8) and out.best == 4 and out.members == (4, 8)
    inside, p = best_sets([[0.3, 0.3, 0.1]], [[0.0, 0.0, 0.0]], [3, 3, 3])
    assert inside.tolist() == [[True, True, False]] and p[0, 1] == 1.0  # tie: first is best


@pytest.mark.parametrize("bad, match", [({2: [0.1]}, "finals"), ({2: [0.1, np.nan]}, "finals"),
                                        ({}, "finals")])
def test_bad_tables_name_the_parameter(bad, match):
    with pytest.raises(ValueError, match=match):
        best_set(bad)
    with pytest.raises(ValueError, match="alpha"):
        best_set({2: [0.1, 0.2]}, alpha=1.0)


def test_the_comparison_its_rate_and_its_power():
    """At R = 4000 tables and alpha = 0.05 the stated rate holds at the bound, and an exclusion
    rate of 7% is rejected with probability above 0.8."""
    R = STUDY_TABLES[0]
    least = next(c for c in range(R) if excess_rate(c, R, STUDY_ALPHA))
    assert binom.sf(least - 1, R, STUDY_ALPHA) < 3.2e-5 <= binom.sf(least - 2, R, STUDY_ALPHA)
    assert binom.sf(least - 1, R, 0.07) > 0.8
