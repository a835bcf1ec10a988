"""C40's check of the exact allocation (ustat_rl/claims/beyond_allocation.py): the exact method
equals brute force over every allocation on 180 random problems, and the same comparison
rejects a solver that allocates by the oracle's term alone (negative control)."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims.beyond_allocation import BIASED_RULES, UNBIASED_RULES, exact_vs_brute_force
from ustat_rl.theory.allocation import optimal_allocation

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("rules, shared", [(UNBIASED_RULES, False), (BIASED_RULES, False),
                                           (UNBIASED_RULES + BIASED_RULES, True)])
def test_exact_method_equals_brute_force(rules, shared):
    # 60 random problems per family (2-4 prompts, 0-8 spare rollouts): 180 in all
    cases, agree, worst = exact_vs_brute_force(np.random.default_rng(11), 60, rules, shared)
    assert (cases, agree) == (60, 60), worst


def test_brute_force_check_rejects_a_wrong_solver():
    # negative control: allocating by the oracle's tr Sigma/G alone ignores GRPO's 1/(G(G-1))
    # term and the score norms' share of it; the same comparison must catch it
    def oracle_only(m, rule, budget):
        return optimal_allocation(m, "oracle", budget - m.n_prompts).group_sizes + 1

    cases, agree, _ = exact_vs_brute_force(np.random.default_rng(11), 60, ("grpo",), False,
                                           solver=oracle_only)
    assert agree < cases
