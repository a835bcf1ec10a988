"""C71 (ustat_rl.claims.beyond_answers.enumerated_routes): the claim passes on the code as it
is, and bugs planted in its four routes turn its verdict to "fail": the arcsin target's weight
squared, the all-equal probability without its ``(1 - V)^G`` term, the covariance taken at
``G + 1``, and EBPO's weight with ``sigma^2`` not divided by ``G``."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.enumerated_routes import full_mean, loo, route_bandit, trl_group
from ustat_rl.theory import advantage, ebpo, mse

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=7, quick=True)


def _result():
    return run_claim(registry()["C71"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_arcsin_weight_squared_fails(monkeypatch):
    original = advantage.arcsin_weight
    monkeypatch.setattr(advantage, "arcsin_weight", lambda value: original(value) ** 2)
    result = _result()
    assert result.verdict == "fail" and "per_prompt_advantage_mse" in result.headline


def test_all_equal_without_failures_fails(monkeypatch):
    monkeypatch.setattr(advantage, "all_equal_probability",
                        lambda value, G: np.asarray(value, dtype=float) ** G)
    result = _result()
    assert result.verdict == "fail" and "dynamic_sampling_mse" in result.headline


def test_covariance_one_size_late_fails(monkeypatch):
    original = mse.affine_covariance
    monkeypatch.setattr(mse, "affine_covariance",
                        lambda m, rule, G, reference: original(m, rule, G + 1.0, reference))
    result = _result()
    assert result.verdict == "fail" and "per_prompt_covariance" in result.headline


def test_ebpo_weight_without_group_size_fails(monkeypatch):
    def weight(self, group_size):
        return self.reward_var / (self.reward_var + self.group_mean_var)

    monkeypatch.setattr(ebpo.EBPOPrior, "weight", weight)
    result = _result()
    assert result.verdict == "fail" and "ebpo_advantages" in result.headline


def test_written_advantages_on_known_rows():
    z = np.array([[1.0, 0.0, 0.0]])
    assert loo(z).tolist() == [[1.0, -0.5, -0.5]]
    assert np.allclose(full_mean(z), [[2 / 3, -1 / 3, -1 / 3]])
    assert np.allclose(trl_group(z), full_mean(z) / (np.sqrt(1 / 3) + 1e-4))


def test_bandit_has_both_rewards_at_every_prompt():
    bandit = route_bandit()
    assert np.all((bandit.value > 0.0) & (bandit.value < 1.0))
