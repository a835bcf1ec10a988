"""Every single-reward batch rule at a finite batch on both Monte Carlo backends
(ustat_rl.montecarlo.batch_rules).

The per-group bandit kernels refuse batch rules; ``batch_rule_statistics`` runs them on the
one-channel multi-channel sampler, whose two backends draw the batch with different code and
generators. On the small bandit at G = 2, B = 2, 5,000 steps, for every rule of
``CONVENTION_NAMES`` with batch statistics and on each backend, the Monte Carlo MSE and mean
projection are within ``Z_CHECK`` = 4 standard errors of the MSE and projection obtained by
enumerating every batch (rule_checks.exact_batch, an independent route): 6.3e-5 false failures
per comparison, 4 per rule (two statistics, two backends). Positive control of the route: the
group rules GRPO and the full mean measured the same way match the per-group theory
(``SoftmaxBandit.exact_mse``). Negative controls the same comparison rejects: for each batch
rule, the full mean's exact MSE at that G and B; for slime's REINFORCE++ baseline, NeMo-RL's
(the same centring, the population variance) enumerated exactly. Measured at 10,000 steps:
every rule within 0.5 se of its enumeration on the numba backend, the full mean's MSE 64 to 95
se away, so 5,000 steps keep the controls beyond 45 se.
"""

from __future__ import annotations

import pytest
from rule_checks import Z_CHECK, exact_batch

from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import CONVENTION_NAMES
from ustat_rl.montecarlo import run_monte_carlo
from ustat_rl.montecarlo.batch_rules import as_one_channel, batch_rule_statistics
from ustat_rl.policies import SoftmaxBandit
from ustat_rl.policies.examples import small_bandit

G, B, REPS = 2, 2, 5_000
BATCH_RULES = tuple(n for n in CONVENTION_NAMES if get_rule(n).statistics == "batch"
                    and G * B >= get_rule(n).min_batch_size and G >= get_rule(n).min_group_size)
GROUP_RULES = ("grpo", "fullmean")


def test_every_batch_rule_is_covered():
    assert {"slime_reinforce_pp_baseline", "roll_batch", "nemo_rl_reinforce_pp",
            "verl_reinforce_pp", "verl_gpg", "areal_grpo"} <= set(BATCH_RULES)


@pytest.mark.integration  # about 10 s: every batch enumerated once, then both backends
def test_batch_rules_match_batch_enumeration_on_both_backends():
    bandit = small_bandit()
    exact = {name: exact_batch(bandit, name, G, B) for name in BATCH_RULES}
    for backend in ("numba", "torch"):
        _compare(bandit, exact, backend)


def _compare(bandit, exact, backend):
    stat, labels = batch_rule_statistics(bandit, BATCH_RULES + GROUP_RULES, G, B,
                                         backend=backend,
                                         **({"device": "cpu"} if backend == "torch" else {}))
    est = run_monte_carlo(stat, REPS, seed=383, labels=labels)
    g = bandit.grad
    for name in BATCH_RULES:
        factor, mse = exact[name]
        i, j = est.index(("sq", name, G)), est.index(("proj", name, G))
        assert abs(est.mean[i] - mse) <= Z_CHECK * est.std_error[i], (name, backend)
        assert abs(est.mean[j] - factor * (g @ g)) <= Z_CHECK * est.std_error[j], (name, backend)
        wrong = bandit.exact_mse("fullmean", G, B)  # negative control
        assert abs(est.mean[i] - wrong) > Z_CHECK * est.std_error[i], (name, backend)
    i = est.index(("sq", "slime_reinforce_pp_baseline", G))
    nemo = exact_batch(bandit, "nemo_rl_reinforce_pp", G, B)[1]
    assert abs(est.mean[i] - nemo) > Z_CHECK * est.std_error[i], backend
    for name in GROUP_RULES:  # the route's positive control against the per-group theory
        i = est.index(("sq", name, G))
        assert abs(est.mean[i] - bandit.exact_mse(name, G, B)) <= Z_CHECK * est.std_error[i]


def test_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="bandit"):
        as_one_channel(SoftmaxBandit([[0.0, 1.0]], [[0.5, 0.5]], reward_values=(-1.0, 1.0)))
    with pytest.raises(ValueError, match="rules"):
        batch_rule_statistics(small_bandit(), "verl_remax", 2, 2)
    with pytest.raises(ValueError, match="rules"):
        batch_rule_statistics(small_bandit(), "no_such_rule", 2, 2)
    with pytest.raises(ValueError, match="rules"):
        batch_rule_statistics(small_bandit(), (), 2, 2)
    with pytest.raises(ValueError, match="backend"):
        batch_rule_statistics(small_bandit(), "roll_batch", 2, 2, backend="jax")
