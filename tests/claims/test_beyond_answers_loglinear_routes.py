"""C76 (ustat_rl.claims.beyond_answers.loglinear_routes): the claim passes on the code as it
is, and bugs planted in its routes turn its verdict to "fail": the covariance of the next
prompt, the batch's between-prompt term dropped (a stratified factor for i.i.d. prompts), and
``restrict`` and ``reweight`` keeping the old ``||g||^2``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ustat_rl.theory
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.loglinear_routes import loglinear_problem, parameter_mse
from ustat_rl.policies.loglinear import LogLinearBandit
from ustat_rl.theory.moments import PromptMoments

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=12, quick=True)


def _result():
    return run_claim(registry()["C76"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_covariance_of_the_next_prompt_fails(monkeypatch):
    original = ustat_rl.theory.per_prompt_covariance
    monkeypatch.setattr(ustat_rl.theory, "per_prompt_covariance",
                        lambda *args: np.roll(original(*args), 1, axis=0))
    result = _result()
    assert result.verdict == "fail" and "prompt_covariance" in result.headline


def test_between_prompt_term_dropped_fails(monkeypatch):
    monkeypatch.setattr(LogLinearBandit, "prompt_variance_factor", lambda self, B: 0.0)
    result = _result()
    assert result.verdict == "fail" and "exact_mse" in result.headline


@pytest.mark.parametrize("method", ["restrict", "reweight"])
def test_old_norm_kept_fails(monkeypatch, method):
    original = getattr(PromptMoments, method)

    def stale(self, arg):
        return dataclasses.replace(original(self, arg), grad_norm_sq=self.grad_norm_sq)

    monkeypatch.setattr(PromptMoments, method, stale)
    result = _result()
    assert result.verdict == "fail" and method in result.headline


def test_features_are_shared_and_mse_of_one_exact_prompt():
    bandit, theta = loglinear_problem()
    assert np.all(bandit.features != 0.0)  # every prompt moves every parameter
    g = np.array([1.0, 2.0])
    one = [(g, float(g @ g), None, g)]  # an estimate equal to its target: MSE 0 at any B
    assert parameter_mse(one, [1.0], 3) == pytest.approx(0.0, abs=1e-12)
