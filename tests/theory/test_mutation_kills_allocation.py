"""Behaviour of the allocation (docs/theory.md C40) that the mutants of docs/mutation.md's fifth
round found untested: each method asked for by name, the enumeration's documented limit, the
rounding's argument checks with their whole messages, and a frozen result.

Every check is exact (no sampling): no false-failure rate. Each test names the mutants it was
written against; they are its negative controls (benchmarks/mutation.py reports them killed).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from ustat_rl.policies.examples import heterogeneous_score_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory.allocation import (
    ALLOCATION_METHODS,
    MAX_COMPOSITIONS,
    allocation_mse,
    optimal_allocation,
)
from ustat_rl.theory.allocation_baselines import round_to_budget

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def hetero_moments():
    bandit, theta = heterogeneous_score_bandit()
    return bandit.moments(theta, matrices=False)


def test_every_method_named_is_run_and_reported(hetero_moments):
    # mutants: the names of ALLOCATION_METHODS decorated (asking for one by name then fails)
    assert ALLOCATION_METHODS == ("auto", "greedy", "dp", "enumerate")
    m = hetero_moments
    out = {method: optimal_allocation(m, "grpo", 18, method=method)
           for method in ALLOCATION_METHODS}
    assert [out[k].method for k in ("greedy", "dp", "enumerate")] == ["greedy", "dp",
                                                                     "enumerate"]
    assert out["auto"].method == "greedy"  # grpo with exact moments: convex and decreasing
    best = out["enumerate"].mse  # every composition of the budget, the exact minimum
    for method, allocation in out.items():
        assert allocation.budget == 18, method
        # the three exact methods minimise the same objective: equal up to rounding
        assert allocation.mse == pytest.approx(best, rel=1e-12, abs=0), method
        assert allocation.mse == allocation_mse(m, "grpo", allocation.group_sizes)


def test_enumeration_refuses_one_composition_past_its_limit():
    # mutant: MAX_COMPOSITIONS moved to 200_001. Two prompts and R spare rollouts have R + 1
    # compositions, so R = MAX_COMPOSITIONS is one too many (it is refused before any work)
    m = SoftmaxBandit([[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.5, 0.0]]).moments()
    budget = 2 * 2 + MAX_COMPOSITIONS  # grpo's smallest group is 2
    message = (f"`budget` {budget}: the exact split (a biased rule, prompts not orthogonal) "
               f"tries all {MAX_COMPOSITIONS + 1} splits over 2 prompts (at most "
               f"{MAX_COMPOSITIONS}): give a budget of at most {budget - 1}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        optimal_allocation(m, "grpo", budget, method="enumerate")
    assert MAX_COMPOSITIONS == 200_000


def test_an_allocation_is_frozen(hetero_moments):
    out = optimal_allocation(hetero_moments, "grpo", 18)
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.mse = 0.0


WEIGHTS_MESSAGE = "^`weights` must be a non-empty 1-D array of finite values >= 0$"


@pytest.mark.parametrize("weights", [[[1.0, 2.0], [3.0, 4.0]], [], [1.0, np.nan], [1.0, -1.0]])
def test_round_to_budget_refuses_bad_weights_with_the_whole_message(weights):
    # mutants: `or` into `and` between the shape checks (a 2-D or an empty array then passed),
    # the message decorated
    with pytest.raises(ValueError, match=WEIGHTS_MESSAGE):
        round_to_budget(weights, 12, 2)


def test_round_to_budget_needs_min_group_for_every_prompt():
    # mutant: P * min_group into P / min_group (a budget of 5 for 3 prompts of 2 then passed)
    with pytest.raises(ValueError, match=r"^`budget` must be >= P \* min_group = 6, got 5$"):
        round_to_budget([1.0, 1.0, 1.0], 5, 2)
    assert round_to_budget([1.0, 1.0, 1.0], 6, 2).tolist() == [2, 2, 2]  # the edge is allowed


def test_round_to_budget_is_proportional_to_weights_of_any_total():
    # mutant: the all-zero guard `w.sum() <= 0` into `<= 1` (weights summing to 1 or less then
    # replaced by the uniform split); only all-zero weights give the uniform split
    assert round_to_budget([0.25, 0.75], 8, 1).tolist() == [2, 6]
    assert round_to_budget([2.5, 7.5], 8, 1).tolist() == [2, 6]  # scale-free
    assert round_to_budget([0.0, 0.0, 0.0], 9, 2).tolist() == [3, 3, 3]
