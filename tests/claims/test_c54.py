"""C54, C54.map, C54.ot, C54.ebpo (beyond the paper, ustat_rl/claims/beyond_shrinkage.py): each
passes on the code as it is and fails on a planted bug in the estimator it samples."""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.claims.beyond_shrinkage as claims_module
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.theory import ebpo, shrinkage

pytestmark = pytest.mark.fast


def _run(claim_id, seed=0):
    return run_claim(registry()[claim_id], VerifyContext(seed=seed, quick=True))


def _failing(result):
    return [c.name for c in result.checks if c.required and not c.passed]


@pytest.mark.parametrize("claim_id", ["C54", "C54.map", "C54.ot", "C54.ebpo"])
def test_claims_pass_on_the_code_as_it_is(claim_id):
    result = _run(claim_id)
    assert result.verdict == "pass", (_failing(result), result.error)


def test_c54_fails_when_the_sampled_estimator_ignores_lambda(monkeypatch):
    def no_shrinkage(*args, **kwargs):
        return shrinkage.jspo_monte_carlo(*args, **{**kwargs, "weight": 0.0})

    monkeypatch.setattr(claims_module, "jspo_monte_carlo", no_shrinkage)
    failing = _failing(_run("C54"))
    assert any(name.startswith("JSPO MSE") for name in failing), failing


def test_c54_ot_fails_when_the_sampled_baseline_is_the_plain_group_mean(monkeypatch):
    def unweighted(bandit, G, B, n_reps, rng):
        s, score, n, B, G = shrinkage.draw_batches(bandit, G, B, n_reps, rng)
        adv = shrinkage.score_weighted_advantages(s.reward, np.ones(s.reward.shape))
        g_hat = np.einsum("nbg,nbgd->nd", adv.reshape(n, B, G), score) / (B * G)
        return shrinkage.batch_moments(bandit, g_hat)

    monkeypatch.setattr(claims_module, "otb_monte_carlo", unweighted)
    failing = _failing(_run("C54.ot"))
    assert any(name.startswith("optimal-token MSE") for name in failing), failing


def test_c54_ebpo_fails_when_the_sampled_estimator_ignores_the_prior(monkeypatch):
    def no_prior(*args, **kwargs):
        return ebpo.ebpo_monte_carlo(*args, **{**kwargs, "weight": 0.0})

    monkeypatch.setattr(claims_module, "ebpo_monte_carlo", no_prior)
    failing = _failing(_run("C54.ebpo"))
    assert any(name.startswith("EBPO MSE") for name in failing), failing
