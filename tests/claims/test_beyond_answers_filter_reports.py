"""C72 (ustat_rl.claims.beyond_answers.filter_reports): the claim passes on the code as it is,
and bugs planted in the reports' routes turn its verdict to "fail": the plug-in keep
probability without its ``(1 - p)^G`` term, the all-equal U-statistic replaced by the plug-in,
the kept batch's MSE at one group too many, and the replace probability one ``J`` short."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.filter_reports import hand_keep, hand_replace
from ustat_rl.pilot import dynamic_sampling as pilot_ds
from ustat_rl.theory import replace_sampling

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=8, quick=True)


def _result():
    return run_claim(registry()["C72"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_keep_without_failures_fails(monkeypatch):
    monkeypatch.setattr(pilot_ds, "keep_probability", lambda value, G, prompt_prob, kept: (
        1.0 - float(np.mean(np.asarray(value) ** G))))
    result = _result()
    assert result.verdict == "fail" and "plug-in r" in result.headline


def test_unbiased_keep_as_plug_in_fails(monkeypatch):
    def plug_in(successes, counts, sizes):
        p = (np.asarray(successes) / np.asarray(counts))[:, None]
        G = np.asarray(sizes)[None, :]
        return (p**G + (1.0 - p) ** G).mean(axis=0), G[0] <= np.min(counts)

    monkeypatch.setattr(pilot_ds, "all_equal_fraction", plug_in)
    result = _result()
    assert result.verdict == "fail" and "unbiased r" in result.headline


def test_kept_batch_one_group_too_many_fails(monkeypatch):
    original = pilot_ds.filtered_batch_moments
    monkeypatch.setattr(pilot_ds, "filtered_batch_moments",
                        lambda m, est, G, B, kept: original(m, est, G, B + 1, kept))
    result = _result()
    assert result.verdict == "fail" and "kept batch's MSE" in result.headline


def test_replace_probability_one_short_fails(monkeypatch):
    def one_short(keep_prob, batch_size, min_replace_ratio=0.3):
        j0 = replace_sampling.replace_threshold(batch_size, min_replace_ratio)
        return float(binom.sf(j0, batch_size, keep_prob)) if j0 <= batch_size else 0.0

    monkeypatch.setattr(replace_sampling, "replace_probability", one_short)
    result = _result()
    assert result.verdict == "fail" and "pi = P(J > rho B)" in result.headline


def test_hand_sums_on_known_values():
    plug, unbiased = hand_keep(np.array([1, 0, 0, 0, 1, 1, 1, 0.0]), np.repeat([0, 1], 4),
                               [2, 4, 8])
    assert np.allclose(plug, [0.375, 1 - (0.25**4 + 0.75**4), 1 - (0.25**8 + 0.75**8)])
    assert unbiased[:2] == [0.5, 1.0] and unbiased[2] is None  # the module's own doctest values
    assert hand_replace(0.5, 4, 0.3) == (0.6875, pytest.approx((2 * 6 + 1 * 4) / 16 / 0.6875))
