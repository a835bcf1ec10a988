"""Every single-reward batch rule at a finite batch: exactly by enumerating every batch
(ustat_rl.training.batch_study.batch_enumeration) and by Monte Carlo on both backends
(ustat_rl.montecarlo.batch_rules).

* ``batch_enumeration`` refuses what it cannot enumerate, naming the parameter (its equality with
  the literal loop over every batch is tests/advantages/test_batch_rules_literal_loop.py's).
* The per-group bandit kernels refuse batch rules; ``batch_rule_statistics`` runs them on the
  one-channel multi-channel sampler, whose two backends draw the batch with different code and
  generators. On the small bandit at G = 2, B = 2, 5,000 steps, for every batch rule and on each
  backend, the Monte Carlo MSE and mean projection are within ``Z_CHECK`` = 4 standard errors of
  the enumerated ones: 6.3e-5 false failures per comparison, 4 per rule (two statistics, two
  backends). Positive control of the route: GRPO and the full mean measured the same way match
  the per-group theory. Negative controls the same comparison rejects: for each batch rule, the
  full mean's exact MSE at that G and B; for slime's REINFORCE++ baseline, NeMo-RL's (the same
  centring, the population variance) enumerated exactly. Measured at 10,000 steps: every rule
  within 0.5 se of its enumeration on the numba backend, the full mean's MSE 64 to 95 se away,
  so 5,000 steps keep the controls beyond 45 se.
* verl's ``remax`` on both backends (the greedy rollout's reward drawn as a second channel that
  ignores the action) against its exact MSE and unbiased projection
  (``ustat_rl.theory.greedy_baseline.greedy_baseline_exact``) at (G, B) = (2, 2) and (4, 3),
  20,000 steps, within ``Z_CHECK`` se; negative control: GRPO's exact MSE (measured 12 to 34 se
  away); the second channel leaves the target gradient at the bandit's ``g`` (1e-15).
"""

from __future__ import annotations

import numpy as np
import pytest
from rule_checks import Z_CHECK

from ustat_rl.advantages.conventions import batch_rule_names
from ustat_rl.montecarlo import Backend, run_monte_carlo
from ustat_rl.montecarlo.batch_rules import as_one_channel, batch_rule_statistics
from ustat_rl.policies import SoftmaxBandit
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.greedy_baseline import greedy_baseline_exact
from ustat_rl.training.batch_study import batch_enumeration

pytestmark = pytest.mark.fast

REPS = 5_000
#: The group and batch sizes of claim C57's comparison ((2 K P)^G outcomes per group, squared).
G, B = 2, 2
BATCH_RULES = batch_rule_names(G, B)  # every framework rule with batch statistics at G x B
GROUP_RULES = ("grpo", "fullmean")


def test_every_batch_rule_is_covered():
    assert {"slime_reinforce_pp_baseline", "roll_batch", "nemo_rl_reinforce_pp",
            "verl_reinforce_pp", "verl_gpg", "areal_grpo"} <= set(BATCH_RULES)


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_batch_rules_match_batch_enumeration_on_both_backends(backend):
    bandit = small_bandit()
    stat, labels = batch_rule_statistics(bandit, BATCH_RULES + GROUP_RULES, G, B,
                                         backend=Backend(backend, "cpu"))
    est = run_monte_carlo(stat, REPS, seed=383, labels=labels)
    wrong = bandit.exact_mse("fullmean", G, B)  # negative control
    for name in BATCH_RULES:
        exact = batch_enumeration(bandit, name, G, B)
        i, j = est.index(("sq", name, G)), est.index(("proj", name, G))
        assert abs(est.mean[i] - exact.mse) <= Z_CHECK * est.std_error[i], (name, backend)
        assert abs(est.mean[j] - exact.projection) <= Z_CHECK * est.std_error[j], (name, backend)
        assert abs(est.mean[i] - wrong) > Z_CHECK * est.std_error[i], (name, backend)
    i = est.index(("sq", "slime_reinforce_pp_baseline", G))
    nemo = batch_enumeration(bandit, "nemo_rl_reinforce_pp", G, B).mse
    assert abs(est.mean[i] - nemo) > Z_CHECK * est.std_error[i], backend
    for name in GROUP_RULES:  # the route's positive control against the per-group theory
        i = est.index(("sq", name, G))
        assert abs(est.mean[i] - bandit.exact_mse(name, G, B)) <= Z_CHECK * est.std_error[i]


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_remax_matches_its_exact_moments_on_both_backends(backend):
    bandit = small_bandit()
    g = bandit.grad
    assert np.abs(as_one_channel(bandit, greedy=True).target_gradient(
        np.array([1.0, 0.0])) - g).max() < 1e-15
    for G_, B_, seed in ((2, 2, 384), (4, 3, 385)):
        stat, labels = batch_rule_statistics(bandit, ("verl_remax", "grpo"), G_, B_,
                                             backend=Backend(backend, "cpu"))
        est = run_monte_carlo(stat, 20_000, seed=seed, labels=labels)
        exact = greedy_baseline_exact(bandit, G_, B_)
        i, j = est.index(("sq", "verl_remax", G_)), est.index(("proj", "verl_remax", G_))
        assert abs(est.mean[i] - exact.mse) <= Z_CHECK * est.std_error[i], (G_, B_)
        assert abs(est.mean[j] - g @ g) <= Z_CHECK * est.std_error[j], (G_, B_)  # unbiased
        # negative control: leave-one-out GRPO's MSE
        assert abs(est.mean[i] - bandit.exact_mse("grpo", G_, B_)) > Z_CHECK * est.std_error[i]


def test_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="bandit"):
        as_one_channel(SoftmaxBandit([[0.0, 1.0]], [[0.5, 0.5]], reward_values=(-1.0, 1.0)))
    with pytest.raises(ValueError, match="estimators"):
        batch_rule_statistics(small_bandit(), "baseline", 2, 2)  # b(x) not drawn
    with pytest.raises(ValueError, match="estimators"):
        batch_rule_statistics(small_bandit(), "no_such_rule", 2, 2)
    with pytest.raises(ValueError, match="estimators"):
        batch_rule_statistics(small_bandit(), (), 2, 2)
    with pytest.raises(ValueError, match="backend"):
        batch_rule_statistics(small_bandit(), "roll_batch", 2, 2, backend="jax")
    with pytest.raises(ValueError, match="estimator"):
        batch_enumeration(small_bandit(), "verl_remax", 2, 2)
    with pytest.raises(ValueError, match="batch_size"):
        batch_enumeration(small_bandit(), "roll_batch", 2, 4)
    with pytest.raises(ValueError, match="batch_size"):
        batch_enumeration(small_bandit(), "roll_batch", 2, 0)
