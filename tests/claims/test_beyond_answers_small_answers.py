"""C70 (ustat_rl.claims.beyond_answers.small_answers): the claim passes on the code as it is,
and bugs planted in its four routes turn its verdict to "fail": Welch's degrees of freedom over
``n`` instead of ``n - 1``, the law's last term over ``G`` instead of ``G - 1``, the budget's
search kept to divisors, and ``gstar_at``'s level ignored."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.small_answers import law
from ustat_rl.pilot import uncertainty
from ustat_rl.stats import best_set
from ustat_rl.theory import group_size, scaling

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C70"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_welch_df_over_n_fails(monkeypatch):
    original = best_set._welch_parts

    def over_n(mean_a, var_a, n_a, mean_b, var_b, n_b):
        diff, se, _ = original(mean_a, var_a, n_a, mean_b, var_b, n_b)
        a, b = np.divide(var_a, n_a), np.divide(var_b, n_b)
        with np.errstate(invalid="ignore"):  # 0/0 for equal rewards, as the original's where
            return diff, se, np.where(se > 0, (a + b) ** 2 / (a**2 / n_a + b**2 / n_b), np.inf)

    monkeypatch.setattr(best_set, "_welch_parts", over_n)
    result = _result()
    assert result.verdict == "fail" and "welch" in result.headline


def test_law_over_g_fails(monkeypatch):
    monkeypatch.setattr(scaling, "grpo_law", lambda c1, c2, c3, N, G: (
        c1 * np.asarray(G, float) + c2 + c3 / np.asarray(G, float)) / N)
    result = _result()
    assert result.verdict == "fail" and "best_group_size" in result.headline


def test_budget_search_on_divisors_fails(monkeypatch):
    original = group_size._candidates
    monkeypatch.setattr(group_size, "_candidates", lambda rule, n, divisors_only, lo, hi: original(
        rule, n, True, lo, hi))
    result = _result()
    assert result.verdict == "fail" and "budget_exponent" in result.headline


def test_level_ignored_fails(monkeypatch):
    original = uncertainty.fieller_gstar
    monkeypatch.setattr(uncertainty, "fieller_gstar",
                        lambda c1, c3, errors, n, level: original(c1, c3, errors, n, 0.9))
    result = _result()
    assert result.verdict == "fail" and "nested" in result.headline


def test_law_on_known_values():
    assert law(1.0, 2.0, 3.0, 4, [2, 4]).tolist() == [(2 + 2 + 3) / 4, (4 + 2 + 1) / 4]
