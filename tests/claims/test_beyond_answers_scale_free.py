"""C65 (ustat_rl.claims.beyond_answers.scale_free): the claim passes on the code as it is, and
bugs planted in the advice's curves turn its verdict to "fail": the cross-prompt term of a
scaled rule's second moment dropped, and an affine rule's moments read one group size off.
The Monte Carlo side is checked against exact enumeration here too, so its written-out rules
are not themselves the thing that passes."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers import scale_free as claim
from ustat_rl.theory import group_size as owner

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C65"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_cross_prompt_term_dropped_fails(monkeypatch):
    original = owner.batch_mean_terms
    monkeypatch.setattr(owner, "batch_mean_terms", lambda *a: original(*a[:-1], 1))
    result = _result()
    assert result.verdict == "fail" and "trl_group" in result.headline


def test_affine_moments_one_size_off_fail(monkeypatch):
    original = owner.affine_variance
    monkeypatch.setattr(owner, "affine_variance", lambda m, r, g, ref: original(m, r, g + 1, ref))
    result = _result()
    assert result.verdict == "fail" and "grpo" in result.headline


def test_written_out_rules_match_the_literal_forms():
    """The claim's vectorised advantages equal C46's literal transcriptions of the same rules."""
    from ustat_rl.claims.literal_forms import LITERAL_FORMS

    z = (np.random.default_rng(0).random((5, 2, 4)) < 0.5).astype(float)
    assert np.allclose(claim.written_advantages("grpo", z).ravel(),
                       LITERAL_FORMS["grpo"].fn(z.ravel(), np.repeat(np.arange(10), 4)))
    assert np.allclose(claim.written_advantages("trl_group", z).ravel(),
                       LITERAL_FORMS["trl_group"].fn(z.ravel(), 4))


def test_the_estimate_and_its_error_on_known_draws():
    """Two draws e1 = (1, 0), e2 = (0, 1) against g = (1, 0): a = 1/2, b = 1, epsilon = 3/4."""
    eps, se = claim.scale_free_estimate(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, 0.0]))
    assert eps == pytest.approx(0.75) and se > 0
