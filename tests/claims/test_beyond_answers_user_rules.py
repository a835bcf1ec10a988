"""C77 (ustat_rl.claims.beyond_answers.user_rules): a user's own affine rule against every
outcome of a group. The claim passes on the code as it is; planted bugs of the general affine
branch (a term's sign, the covariance's cross term) and of the registry turn it."""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.advantages.registry as rule_registry
import ustat_rl.theory.affine as affine
import ustat_rl.theory.mse as mse
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers import user_rules

pytestmark = pytest.mark.fast


def run():
    return run_claim(registry()["C77"], VerifyContext())


def test_the_claim_passes_and_reaches_the_general_branch():
    from ustat_rl.theory.affine import affine_coefficients

    a, b, c, D, k = affine_coefficients(user_rules.user_rule(), 3.0, np.array([0.4]),
                                        np.array([0.4]))
    assert a != 0 and b != 0 and np.all(D != 0)
    result = run()
    assert result.verdict == "pass", [c.name for c in result.checks if not c.passed]
    assert user_rules.USER_RULE_NAME not in rule_registry.rule_names()


def test_the_written_out_advantages_are_the_rule_s():
    rule = user_rules.user_rule()
    z = np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    value = 0.35
    groups = np.repeat(np.arange(z.shape[0]), z.shape[1])
    np.testing.assert_allclose(user_rules.written_out(z, value).ravel(),
                               rule.advantages(z.ravel(), groups,
                                               reference=np.full(z.size, value)), rtol=1e-12)


def test_a_sign_flipped_grpo_term_of_the_general_branch_fails(monkeypatch):
    real = affine.affine_variance

    def planted(m, estimator, G, reference):
        a, b, c, D, k = affine.affine_coefficients(estimator, G, reference, m.value)
        var, k = real(m, estimator, G, reference)
        if a != 0 and b != 0:  # the general branch, its b^2 GRPO term subtracted
            var = var - 2.0 * b**2 * affine._grpo_trace(m, G)
        return var, k

    monkeypatch.setattr(mse, "affine_variance", planted)
    result = run()
    assert result.verdict == "fail" and "per_prompt_mse" in result.headline


def test_a_covariance_off_by_a_tenth_of_a_percent_fails(monkeypatch):
    real = affine.affine_covariance

    def planted(m, estimator, G, reference):
        cov, k = real(m, estimator, G, reference)
        return cov * 1.001, k

    monkeypatch.setattr(mse, "affine_covariance", planted)
    assert run().verdict == "fail"


def test_an_unregister_that_leaves_the_name_fails(monkeypatch):
    monkeypatch.setattr(rule_registry, "unregister_rule", lambda name: None)
    result = run()
    assert result.verdict == "fail" and "unregister_rule" in result.headline
    rule_registry.RULES.pop(user_rules.USER_RULE_NAME, None)
