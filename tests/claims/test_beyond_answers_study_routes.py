"""C82 (ustat_rl.claims.beyond_answers.study_routes): the numpy study routes of batch rules and
ReMax's greedy baseline against exact moments. The claim passes on the code as it is; planted
bugs of each route turn it at that route's checks."""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.theory.greedy_baseline as greedy
import ustat_rl.training.batch_study as batch_study
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers import study_routes
from ustat_rl.policies.examples import small_bandit

pytestmark = pytest.mark.fast


def failed() -> list[str]:
    result = run_claim(registry()["C82"], VerifyContext())
    return [c.name for c in result.checks if not c.passed]


def test_the_claim_passes_and_the_written_out_parts_are_right():
    assert failed() == []
    reward = np.array([[[1.0, 1.0], [0.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]]])
    np.testing.assert_array_equal(study_routes.dropped_weights(reward), [[0.0, 1.0], [0.0, 0.0]])
    bandit = small_bandit()
    groups = bandit.sample_groups(2, 200_000, np.random.default_rng(0))
    share = np.mean(groups.reward.min(axis=1) == groups.reward.max(axis=1))
    assert abs(share - study_routes.all_equal_share(bandit, 2)) < 5 * np.sqrt(0.25 / 200_000)


def test_a_drop_that_forgets_to_renormalise_fails(monkeypatch):
    real = batch_study.batch_monte_carlo

    def planted(bandit, estimator, group_size, batch_size, n_reps, rng, all_equal="keep"):
        # GRPO gives all-equal groups zero advantage, so "keep" is a drop divided by B
        return real(bandit, estimator, group_size, batch_size, n_reps, rng)

    monkeypatch.setattr(batch_study, "batch_monte_carlo", planted)
    names = failed()
    assert names and all("dropped" in n for n in names)


def test_a_greedy_law_that_always_succeeds_fails(monkeypatch):
    real = greedy.greedy_baseline

    def planted(bandit):
        law = real(bandit)
        return greedy.GreedyBaseline(law.action, np.ones_like(law.success), law.values)

    monkeypatch.setattr(greedy, "greedy_baseline", planted)
    names = failed()
    assert any(n.startswith("greedy_baseline_exact") for n in names)
    assert any(n.startswith("greedy_baseline_monte_carlo (remax): MSE") for n in names)
