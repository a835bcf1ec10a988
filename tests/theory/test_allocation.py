"""Per-prompt group sizes at a fixed budget (docs/theory.md C40, C41): exact methods against brute
force, baselines, bad input, Monte Carlo, and the negative controls each check must reject."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ustat_rl.montecarlo.allocation import allocated_errors
from ustat_rl.policies.examples import heterogeneous_score_bandit, random_bandit_moments
from ustat_rl.theory import PromptMoments
from ustat_rl.theory.allocation import (
    _dp,
    allocation_mse,
    brute_force_allocation,
    greedy_sizes,
    optimal_allocation,
    rule_is_unbiased,
    rule_min_group_size,
)
from ustat_rl.theory.allocation_baselines import (
    BASELINE_ALLOCATIONS,
    compare_allocations,
    round_to_budget,
)
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def hetero():
    bandit, theta = heterogeneous_score_bandit()
    return bandit, theta, bandit.moments(theta, matrices=False)


def test_greedy_fails_without_convexity_where_the_dp_does_not():
    rng = np.random.default_rng(3)
    greedy_wrong = 0
    for _ in range(200):
        h = rng.uniform(0.0, 1.0, (3, 6))  # arbitrary, not convex
        spare = int(rng.integers(1, 6))
        best = min(sum(h[x, k] for x, k in enumerate(ks))
                   for ks in np.ndindex(6, 6, 6) if sum(ks) == spare)
        assert np.isclose(h[np.arange(3), _dp(h, spare)].sum(), best, rtol=0, atol=1e-15)
        greedy_wrong += h[np.arange(3), greedy_sizes(h, spare)].sum() > best + 1e-15
    assert greedy_wrong > 0


def test_auto_method_choice(hetero):
    _, _, m = hetero
    assert optimal_allocation(m, "grpo", 48).method == "greedy"
    # verl's rloo gives a singleton its own reward (vanilla at G = 1): not convex at G = 1 -> 2
    assert optimal_allocation(m, "verl_rloo", 24).method == "dp"
    rng = np.random.default_rng(0)
    shared = random_bandit_moments(rng, shared=True)
    assert optimal_allocation(shared, "fullmean", 2 * shared.n_prompts + 3).method == "enumerate"
    # TRL's RLOO gives a singleton advantage 0 (mean factor 0 at G = 1): coupled again
    trl = optimal_allocation(shared, "trl_rloo", shared.n_prompts + 3)
    assert trl.method == "enumerate"
    assert np.isclose(trl.mse, brute_force_allocation(shared, "trl_rloo",
                                                      shared.n_prompts + 3).mse, rtol=1e-12)
    assert rule_is_unbiased("openrlhf_rloo") and not rule_is_unbiased("trl_group")
    assert rule_min_group_size("grpo") == 2 and rule_min_group_size("oracle") == 1


def test_estimated_moments_that_break_convexity_use_the_dp(hetero):
    _, _, m = hetero
    # an estimate may put tr Sigma below zero; the term a/G + b/(G(G-1)) is then not convex
    noisy = dataclasses.replace(m, kind="estimated", score_sq_centred=m.grad_sq - 0.05,
                                grad_norm_sq=None)
    out = optimal_allocation(noisy, "grpo", 20)
    assert out.method == "dp"
    assert np.isclose(out.mse, brute_force_allocation(noisy, "grpo", 20).mse, rtol=1e-12)


# ------------------------------------------------------------------ against the baselines
@pytest.mark.parametrize("budget", [24, 48, 96])
def test_optimal_beats_every_reward_only_allocation(hetero, budget):
    _, _, m = hetero
    out = compare_allocations(m, "grpo", budget)
    assert set(out) == {"optimal", *BASELINE_ALLOCATIONS}
    for name, alloc in out.items():
        assert alloc.group_sizes.sum() == budget and alloc.group_sizes.min() >= 2, name
        assert out["optimal"].mse <= alloc.mse * (1 + 1e-12), name
    # score scales 0.5 vs 3 at equal success rates: a strict gain over uniform
    assert out["optimal"].mse < 0.7 * out["uniform"].mse


def test_homogeneous_prompts_get_the_uniform_allocation():
    bandit, theta = heterogeneous_score_bandit(values=(0.3,) * 4, scales=(1.0,) * 4)
    m = bandit.moments(theta, matrices=False)
    assert optimal_allocation(m, "grpo", 32).group_sizes.tolist() == [8, 8, 8, 8]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(0, 40))
def test_round_to_budget_keeps_the_sum_and_the_floor(weights, low, extra):
    budget = len(weights) * low + extra
    sizes = round_to_budget(weights, budget, low)
    assert sizes.sum() == budget and sizes.min() >= low


# ------------------------------------------------------------------ bad input
def test_bad_input_names_the_parameter(hetero):
    _, _, m = hetero
    with pytest.raises(ValueError, match=r"`budget` must be >= P \* min_group = 6 \* 2"):
        optimal_allocation(m, "grpo", 11)
    with pytest.raises(ValueError, match="`estimator` must be a rule with an exact per-group"):
        optimal_allocation(m, "trl_batch", 48)
    with pytest.raises(ValueError, match="`estimator`"):
        compare_allocations(m, "no_such_rule", 48)
    with pytest.raises(TypeError, match="`moments` must be a PromptMoments"):
        optimal_allocation({"value": [0.5]}, "grpo", 48)
    with pytest.raises(ValueError, match="`max_group_size`"):
        optimal_allocation(m, "grpo", 48, max_group_size=4)
    with pytest.raises(ValueError, match="`group_sizes` must have shape"):
        allocation_mse(m, "grpo", [8, 8])
    with pytest.raises(ValueError, match="`method`"):
        optimal_allocation(m, "grpo", 48, method="anneal")
    fields = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}
    fields["value"] = np.where(np.arange(m.n_prompts) == 2, np.nan, m.value)
    with pytest.raises(ValueError, match="`value` must be finite"):
        PromptMoments(**fields)


# ------------------------------------------------------------------ Monte Carlo
def test_monte_carlo_matches_the_allocated_mse_and_rejects_the_uniform_one(hetero):
    bandit, theta, m = hetero
    sizes = optimal_allocation(m, "grpo", 48).group_sizes
    sq = np.sum(allocated_errors(bandit, theta, "grpo", sizes, 20_000, 5) ** 2, axis=1)
    se = sq.std(ddof=1) / np.sqrt(sq.size)
    # Z_CHECK = 4: two-sided false-failure rate 6.3e-5
    assert abs(sq.mean() - allocation_mse(m, "grpo", sizes)) <= Z_CHECK * se
    # negative control: the uniform allocation's exact MSE is not what this estimator has
    assert abs(sq.mean() - allocation_mse(m, "grpo", [8] * 6)) > Z_CHECK * se


def test_fixed_sizes_unbiased_data_dependent_sizes_biased(hetero):
    bandit, theta, m = hetero
    target = bandit.prompt_prob @ bandit.state(theta).grad_per_prompt
    u = target / np.linalg.norm(target)
    sizes = optimal_allocation(m, "grpo", 48).group_sizes
    for adaptive in (False, True):
        t = allocated_errors(bandit, theta, "grpo", sizes, 20_000, 9, adaptive=adaptive) @ u
        z = t.mean() / (t.std(ddof=1) / np.sqrt(t.size))
        assert bool(abs(z) <= Z_CHECK) == (not adaptive), z


def test_allocated_errors_rejects_bad_input(hetero):
    bandit, theta, _ = hetero
    with pytest.raises(ValueError, match="`estimator`"):
        allocated_errors(bandit, theta, "oracle", [2] * 6, 10, 0)
    with pytest.raises(ValueError, match="`group_sizes`"):
        allocated_errors(bandit, theta, "grpo", [1] * 6, 10, 0)


# ------------------------------------------------------------------ symbolic negative controls
def test_proofs_reject_a_wrong_difference_and_a_wrong_greedy():
    from proofs_check import allocation as proof

    assert proof.grpo_convex_decreasing().holds
    wrong = proof.grpo_convex_decreasing(claimed_second=2 * proof.CLAIMED_SECOND_DIFFERENCE)
    assert not wrong.holds

    def first_prompt_only(terms, spare, low=2):
        return [low + spare] + [low] * (len(terms) - 1)

    assert proof.greedy_equals_minimum().holds
    assert not proof.greedy_equals_minimum(greedy=first_prompt_only).holds


# ------------------------------------------------------------------ examples
@pytest.mark.parametrize("name", ["ustat_rl.theory.allocation", "ustat_rl.theory.allocation_baselines",
                                  "ustat_rl.pilot.allocation"])
def test_examples_run_as_doctests(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
