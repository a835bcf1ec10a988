"""C69 (ustat_rl.claims.beyond_answers.running_norm): the claim passes on the code as it is, and
bugs planted in the running normalisation turn its verdict to "fail": the state's population
std in place of its Bessel std, and the long-run form's batch size ignored."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.running_norm import hand_population
from ustat_rl.theory import running_norm as module

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C69"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_population_std_fails(monkeypatch):
    original = module.merge_batch

    def population(state, rewards):
        out = original(state, rewards)
        return dataclasses.replace(out, std=np.sqrt(out.var))

    monkeypatch.setattr(module, "merge_batch", population)
    result = _result()
    assert result.verdict == "fail" and "merged" in result.headline


def test_batch_size_ignored_fails(monkeypatch):
    original = module.fixed_statistics_exact
    monkeypatch.setattr(module, "fixed_statistics_exact",
                        lambda bandit, G, B=1, epsilon=module.ROLL_EPSILON: original(
                            bandit, G, 1, epsilon))
    result = _result()
    assert result.verdict == "fail" and "long-run form" in result.headline


def test_population_of_the_bandit():
    mu, sigma, between = hand_population()
    assert 0 < between < sigma and sigma == pytest.approx(np.sqrt(mu * (1 - mu)))
