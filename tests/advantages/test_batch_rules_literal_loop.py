"""Every single-reward batch rule's exact enumeration (ustat_rl.training.batch_study.
batch_enumeration) equals the literal loop over every batch of rule_checks.exact_batch (an
independent route, one rule call per batch) to 1e-12 at G = 2, B = 2, and the per-group theory
(``SoftmaxBandit.exact_mse``) for GRPO and the full mean; negative control: slime's and
NeMo-RL's REINFORCE++ baselines, which differ only in the variance, enumerate apart. The Monte
Carlo routes on both backends are tests/advantages/test_batch_rules_backends.py's.
"""

from __future__ import annotations

import pytest
from rule_checks import exact_batch

from ustat_rl.advantages.conventions import batch_rule_names
from ustat_rl.policies.examples import small_bandit
from ustat_rl.training.batch_study import batch_enumeration

pytestmark = pytest.mark.integration  # exact route against a literal loop: about 30 s

#: The group and batch sizes of claim C57's comparison ((2 K P)^G outcomes per group, squared).
G, B = 2, 2
BATCH_RULES = batch_rule_names(G, B)  # every framework rule with batch statistics at G x B
GROUP_RULES = ("grpo", "fullmean")


def test_enumeration_equals_the_literal_loop_over_batches():
    bandit = small_bandit()
    for name in BATCH_RULES:
        out = batch_enumeration(bandit, name, G, B)
        factor, mse = exact_batch(bandit, name, G, B)
        assert out.mse == pytest.approx(mse, rel=1e-12, abs=1e-15), name
        assert out.mean_factor == pytest.approx(factor, rel=1e-12, abs=1e-14), name
    for name in GROUP_RULES:
        assert batch_enumeration(bandit, name, G, B).mse == pytest.approx(
            bandit.exact_mse(name, G, B), rel=1e-12)
    # negative control: slime's and NeMo-RL's REINFORCE++ differ only in the variance
    assert abs(batch_enumeration(bandit, "slime_reinforce_pp_baseline", G, B).mse
               - batch_enumeration(bandit, "nemo_rl_reinforce_pp", G, B).mse) > 1e-3
