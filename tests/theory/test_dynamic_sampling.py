"""Dynamic sampling (DAPO's filter_groups): exact accepted-batch moments, generation cost, budget.

docs/theory.md section 7, "Dynamic sampling (beyond the paper)". Three routes: the exact formulas
of ``ustat_rl.theory.dynamic_sampling``, brute-force enumeration of every outcome of a group
(every reward vector, G <= 6) and of pairs of kept groups, and a Monte Carlo of verl's actual
loop (``ustat_rl.montecarlo.dynamic_sampling``). Monte Carlo comparisons allow ``Z_CHECK = 4``
standard errors (two-sided false-failure rate 6.3e-5 each, about 2e-3 for the 33 comparisons
here by a union bound); seeds are fixed for reproducibility, not chosen. Each check has a
negative control that the same comparison rejects.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import ustat_rl.montecarlo.dynamic_sampling as mc_module
import ustat_rl.theory.dynamic_sampling as ds_module
from ustat_rl.advantages.registry import get_rule
from ustat_rl.montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
from ustat_rl.policies.examples import known_value_bandit as known_p_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.stats.ustatistics import squared_mean_norm
from ustat_rl.theory import minibatch_mse, scaling_constants
from ustat_rl.theory.advantage import all_equal_probability, dynamic_sampling_mse
from ustat_rl.theory.dynamic_sampling import (
    filtered_batch_moments,
    generation_cost,
    keep_probability,
    optimal_filtered_group_size,
)
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast

#: Exact identities in double precision (the brief's 1e-12, relative to the quantity's size).
EXACT = 1e-12

#: Steps per Monte Carlo case: the standard error of each mean is about 0.7% of its spread.
N_REPS = 20_000

MIXTURE = ([0.02, 0.3, 0.7, 0.98], [0.4, 0.1, 0.1, 0.4])


def z_score(samples, predicted) -> float:
    samples = np.asarray(samples, dtype=np.float64)
    return float((samples.mean() - predicted) / (samples.std(ddof=1) / math.sqrt(samples.size)))


def bias_sq_z(errors, predicted) -> float:
    """``||E e||^2`` by the unbiased pair average of ``<e_i, e_j>`` (the claim's own estimator,
    ``squared_mean_norm``), as a z-score against ``predicted``."""
    estimate, se = squared_mean_norm(errors)
    return float((estimate - predicted) / se)


# ------------------------------------------------------------------------------ enumeration
def enumerated(bandit: SoftmaxBandit, rule: str, G: int):
    """Per prompt, over every outcome of a group: ``P(kept)``, ``E[g_hat 1_kept]`` (in the
    prompt's block) and ``E[||g_hat||^2 1_kept]``, with the rule evaluated on each group."""
    spec = get_rule(rule)
    keep, first, second, outcomes = [], [], [], []
    for x in range(bandit.n_prompts):
        action, reward, prob = bandit.enumerate_groups(x, G)
        kept = reward.min(axis=1) != reward.max(axis=1)  # (M,)
        w = bandit.score_table[x][action]  # (M, G, K)
        g_hat = np.einsum("mg,mgk->mk", spec.grouped(reward), w) / G  # (M, K)
        keep.append(prob @ kept)
        first.append((prob * kept) @ g_hat)
        second.append((prob * kept) @ np.sum(g_hat**2, axis=1))
        outcomes.append((x, prob * kept, g_hat))
    return np.array(keep), first, np.array(second), outcomes


@pytest.mark.parametrize("rule", ["grpo", "fullmean", "verl_grpo"])
@pytest.mark.parametrize("G", [2, 3, 4, 5, 6])
def test_exact_moments_equal_enumeration_of_every_group(rule, G):
    bandit = known_p_bandit(*MIXTURE)
    m, f, B = bandit.moments(), bandit.prompt_prob, 3
    keep, first, second, _ = enumerated(bandit, rule, G)
    r = float(f @ keep)
    mean = np.concatenate([f[x] * first[x] / r for x in range(bandit.n_prompts)])  # E g_DS
    g = bandit.grad
    variance_one = float(f @ second) / r - mean @ mean
    out = filtered_batch_moments(m, rule, G, B)
    assert out.keep_prob == pytest.approx(r, rel=EXACT, abs=0)
    assert np.allclose(out.accepted_prompt_prob, f * keep / r, rtol=EXACT, atol=0)
    cond = np.array([first[x] @ bandit.grad_per_prompt[x] / keep[x] for x in range(4)])
    assert np.allclose(out.conditional_mean_factor * m.grad_sq, cond, rtol=EXACT, atol=0)
    assert np.allclose(out.conditional_second_moment, second / keep, rtol=EXACT, atol=0)
    assert out.mean_sq == pytest.approx(mean @ mean, rel=EXACT)
    assert out.bias_sq == pytest.approx((mean - g) @ (mean - g), rel=EXACT)
    assert out.variance == pytest.approx(variance_one / B, rel=EXACT)
    assert out.mse == pytest.approx(variance_one / B + (mean - g) @ (mean - g), rel=EXACT)
    assert out.mse == pytest.approx(out.variance + out.bias_sq, rel=EXACT)
    assert out.mse_rescaled == pytest.approx(r * r * variance_one / B
                                             + (r * mean - g) @ (r * mean - g), rel=EXACT)
    # the keep probability over the 2^G reward vectors of one prompt
    for p in MIXTURE[0]:
        ones = np.array([bin(v).count("1") for v in range(2**G)])
        prob = p**ones * (1 - p) ** (G - ones)
        assert keep_probability(p, G) == pytest.approx(prob[(ones > 0) & (ones < G)].sum(),
                                                       rel=EXACT)


@pytest.mark.parametrize("G", [2, 3])
def test_batch_of_two_equals_enumeration_of_pairs_of_kept_groups(G):
    """The 1/B law: ``E||(g_1 + g_2)/2 - g||^2`` over every pair of kept groups."""
    bandit = known_p_bandit([0.1, 0.6], [0.3, 0.7])
    keep, _, _, outcomes = enumerated(bandit, "grpo", G)
    r = float(bandit.prompt_prob @ keep)
    probs, vectors = [], []
    for x, prob, g_hat in outcomes:
        probs.append(bandit.prompt_prob[x] * prob / r)
        vectors.append(np.stack([bandit.embed(x, v) for v in g_hat]))
    prob, vec = np.concatenate(probs), np.concatenate(vectors)  # (M,), (M, d)
    diff = (vec[:, None, :] + vec[None, :, :]) / 2 - bandit.grad  # (M, M, d): every pair
    total = np.einsum("i,j,ijk->", prob, prob, diff**2)
    assert filtered_batch_moments(bandit.moments(), "grpo", G, 2).mse == pytest.approx(total,
                                                                                      rel=EXACT)


def test_mse_matches_section7_and_unfiltered_matches_c6():
    m = known_p_bandit(*MIXTURE).moments()
    for G, B in [(2, 1), (4, 3), (9, 5)]:
        out = filtered_batch_moments(m, "grpo", G, B)
        scale, mse = dynamic_sampling_mse(m, "grpo", G, B)
        assert out.mse == pytest.approx(mse, rel=EXACT) and scale == pytest.approx(1 / out.keep_prob)
        assert out.unfiltered_mse == pytest.approx(minibatch_mse(m, "grpo", G, B), rel=1e-10)
        # GRPO's kept batch estimates g/r: every prompt weighted f(x)/r, bias (Q/r)^2 ||g||^2
        assert np.allclose(out.prompt_weight, m.prompt_prob / out.keep_prob, rtol=EXACT)
        q, r = 1 - out.keep_prob, out.keep_prob
        assert out.bias_sq == pytest.approx((q / r) ** 2 * m.grad_norm_sq, rel=1e-10)
        # statement 3 in Theorem 7's constants: the bracket c1 + c2/G + c3'/(G(G - 1))
        c = scaling_constants(m)
        bracket = c.c1 + c.c2 / G + c.c3 / (G * (G - 1))
        g_sq = m.grad_norm_sq
        assert out.mse == pytest.approx((bracket / r - q * g_sq / r**2) / B + (q / r) ** 2 * g_sq,
                                        rel=1e-10)
        assert out.mse_rescaled == pytest.approx((r * bracket - q * g_sq) / B, rel=1e-10)


# ------------------------------------------------------------------------------ Monte Carlo
MC_CASES = [  # (p's, f, rule, G, B, b, K)
    ([0.02], None, "grpo", 4, 2, 2, 0),
    ([0.98], None, "grpo", 8, 2, 3, 0),
    (*MIXTURE, "grpo", 2, 3, 4, 0),
    (*MIXTURE, "verl_grpo", 4, 3, 4, 0),
    (*MIXTURE, "fullmean", 6, 3, 4, 0),
]


@pytest.mark.parametrize("case", MC_CASES, ids=lambda c: f"{c[2]}-p{c[0][0]}-G{c[3]}")
def test_verl_loop_matches_exact_bias_mse_and_batches(case):
    values, f, rule, G, B, b, K = case
    bandit = known_p_bandit(values, f)
    m = bandit.moments()
    run = simulate_dynamic_sampling(bandit, rule, G, B, N_REPS, np.random.default_rng(2024 + G),
                                    FilterLoop(b, K))
    exact = filtered_batch_moments(m, rule, G, B)
    cost = generation_cost(bandit.value, G, B, b, K, bandit.prompt_prob)
    errors = run.gradients - bandit.grad
    sq = np.sum(errors**2, axis=1)
    assert abs(z_score(sq, exact.mse)) <= Z_CHECK
    assert abs(bias_sq_z(errors, exact.bias_sq)) <= Z_CHECK
    for x in range(bandit.n_prompts):  # the mean, block by block: E g_DS = sum_x w(x) g(x)
        along = run.gradients @ bandit.embed(x, bandit.grad_per_prompt[x])
        assert abs(z_score(along, exact.prompt_weight[x] * m.grad_sq[x])) <= Z_CHECK
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    assert abs(z_score(run.kept_groups, cost.expected_kept_groups)) <= Z_CHECK
    # negative control: the unfiltered (C6) MSE ignores the filtering and is rejected
    assert abs(z_score(sq, exact.unfiltered_mse)) > Z_CHECK


def test_negative_controls_for_the_mean_and_the_batch_count():
    """Reweighting the prompts but keeping the unconditioned within-group law, and counting
    ``B/(b r)`` batches (as if kept groups arrived one by one), are both rejected."""
    bandit = known_p_bandit(*MIXTURE)
    G, B, b = 2, 3, 4
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, N_REPS, np.random.default_rng(7),
                                    FilterLoop(b))
    exact = filtered_batch_moments(bandit.moments(), "grpo", G, B)
    x = 0  # p = 0.02: a kept group there is far from a typical group
    along = run.gradients @ bandit.embed(x, bandit.grad_per_prompt[x])
    reweighted_only = exact.accepted_prompt_prob[x] * bandit.moments().grad_sq[x]
    assert abs(z_score(along, exact.prompt_weight[x] * bandit.moments().grad_sq[x])) <= Z_CHECK
    assert abs(z_score(along, reweighted_only)) > Z_CHECK
    assert abs(z_score(run.gen_batches, B / (b * exact.keep_prob))) > Z_CHECK


def test_cap_probability_and_capped_batches_match_the_loop():
    bandit = known_p_bandit([0.02])
    G, B, b, K = 4, 2, 2, 3
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, N_REPS, np.random.default_rng(11),
                                    FilterLoop(b, K))
    cost = generation_cost(bandit.value, G, B, b, K)
    p_cap = cost.cap_probability
    failed = 1.0 - run.filled.mean()
    assert abs(failed - p_cap) <= Z_CHECK * math.sqrt(p_cap * (1 - p_cap) / N_REPS)
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    # the steps that fill still have the uncapped batch's MSE (the cap reads only keep counts)
    sq = np.sum((run.gradients - bandit.grad) ** 2, axis=1)
    assert abs(z_score(sq, filtered_batch_moments(bandit.moments(), "grpo", G, B).mse)) <= Z_CHECK
    # negative control: the uncapped expectation is rejected
    uncapped = generation_cost(bandit.value, G, B, b).expected_gen_batches
    assert abs(z_score(run.gen_batches, uncapped)) > Z_CHECK


# ------------------------------------------------------------------------------ batch counts
@pytest.mark.parametrize("p,G", [(0.02, 2), (0.5, 2), (0.98, 6), (0.5, 8)])  # r 0.04 to 0.99
@pytest.mark.parametrize("B,b", [(1, 1), (1, 5), (3, 1), (4, 4), (7, 3), (16, 48)])
def test_closed_form_batches_equal_the_series_and_special_cases(p, G, B, b):
    r = keep_probability(p, G)
    exact = generation_cost(p, G, B, b).expected_gen_batches
    K = int(60 * B / (b * r)) + 60  # P(N > K) is far below rounding
    assert generation_cost(p, G, B, b, K).expected_gen_batches == pytest.approx(exact, rel=1e-12)
    if b == 1:
        assert exact == pytest.approx(B / r, rel=1e-12)
    if B == 1:
        assert exact == pytest.approx(1 / (1 - (1 - r) ** b), rel=1e-12)
    cost = generation_cost(p, G, B, b)
    assert cost.expected_rollouts == pytest.approx(G * b * exact, rel=EXACT)
    assert cost.cap_probability == 0.0


def test_all_equal_with_probability_one_is_infinite_never_nan():
    cost = generation_cost([0.0, 1.0], 4, 8)
    assert cost.expected_gen_batches == math.inf and cost.expected_rollouts == math.inf
    assert cost.expected_kept_groups == math.inf and cost.keep_prob == 0.0
    capped = generation_cost([0.0, 1.0], 4, 8, max_num_gen_batches=5)
    assert capped.expected_gen_batches == 5.0 and capped.cap_probability == 1.0
    m = known_p_bandit([0.5]).moments()
    degenerate = SoftmaxBandit([[0.0, 0.0]], [[1.0, 1.0]]).moments()  # V = 1
    with pytest.raises(ValueError, match="inf"):
        filtered_batch_moments(degenerate, "grpo", 4, 2)
    with pytest.raises(ValueError, match="never ends"):
        simulate_dynamic_sampling(SoftmaxBandit([[0.0, 0.0]], [[1.0, 1.0]]), "grpo", 2, 1, 3, 0)
    run = simulate_dynamic_sampling(SoftmaxBandit([[0.0, 0.0]], [[1.0, 1.0]]), "grpo", 2, 1, 3,
                                    0, FilterLoop(max_num_gen_batches=2))
    assert not run.filled.any() and run.gradients.shape == (0, 2) and (run.gen_batches == 2).all()
    assert math.isfinite(filtered_batch_moments(m, "grpo", 4, 2).mse)


def test_keep_probability_is_accurate_near_zero_and_one():
    for p in (1e-10, 1 - 1e-10):
        exact = 2 * 1e-10 * (1 - 1e-10)  # 1 - p^2 - (1 - p)^2 = 2 p (1 - p)
        assert keep_probability(p, 2) == pytest.approx(exact, rel=1e-9)
    # negative control: 1 minus the all-equal probability loses the digits at p = 1e-10
    naive = 1 - float(all_equal_probability(1e-10, 2))
    assert abs(naive - 2e-10) / 2e-10 > 1e-8


# ------------------------------------------------------------------------------ fixed budget
def test_optimal_group_size_takes_the_largest_affordable_batch():
    m = known_p_bandit(*MIXTURE).moments()
    N = 96
    res = optimal_filtered_group_size(m, N, accounting="generated", group_sizes=[2, 3, 4, 6, 8])
    for G, B, mse, cost in zip(res.group_sizes, res.batch_sizes, res.mses, res.rollouts):
        costs = [generation_cost(m.value, int(G), B_, None, 0, m.prompt_prob).expected_rollouts
                 for B_ in range(1, N // G + 1)]
        affordable = [i + 1 for i, c in enumerate(costs) if c <= N]
        assert B == (max(affordable) if affordable else 0)
        if B:
            assert cost == pytest.approx(costs[B - 1], rel=EXACT)
            assert mse == pytest.approx(filtered_batch_moments(m, "grpo", int(G), int(B)).mse,
                                        rel=EXACT)
    assert res.mse == res.mses.min() and res.group_size == res.group_sizes[res.mses.argmin()]


#: A spread of difficulties: ten prompts with p = 0.05, 0.15, ..., 0.95, equally likely.
SPREAD = np.linspace(0.05, 0.95, 10)


@pytest.mark.parametrize("accounting", ["generated", "accepted"])
def test_optimum_equals_a_search_over_every_group_and_batch_size(accounting):
    """Brute force over every (G, B) with the public cost and MSE functions."""
    m = known_p_bandit(SPREAD).moments()
    N, sizes = 256, range(2, 17)
    best = (math.inf, 0, 0)
    for G in sizes:
        for B in range(1, N // G + 1):
            cost = generation_cost(m.value, G, B, None, 0, m.prompt_prob).expected_rollouts
            if accounting == "accepted" or cost <= N:
                best = min(best, (filtered_batch_moments(m, "grpo", G, B).mse, G, B))
    res = optimal_filtered_group_size(m, N, accounting=accounting, group_sizes=list(sizes))
    assert (res.group_size, res.batch_size) == best[1:]
    assert res.mse == pytest.approx(best[0], rel=EXACT)


def test_budget_accountings_order_the_mses_and_move_the_best_group_size():
    """Counting generated rollouts affords fewer kept groups at every G than counting kept ones,
    so its MSE is never lower; the unfiltered search is C6's MSE. The best sizes at N = 1024
    (pinned here, quoted in docs/theory.md) differ by accounting and target."""
    m = known_p_bandit(SPREAD).moments()
    N, sizes = 1024, np.arange(2, 65)
    found = {(acc, t): optimal_filtered_group_size(m, N, accounting=acc, group_sizes=sizes,
                                                   target=t)
             for acc in ds_module.ACCOUNTINGS for t in ds_module.FILTER_TARGETS}
    for t in ds_module.FILTER_TARGETS:
        gen, acc = found["generated", t], found["accepted", t]
        assert np.all(gen.batch_sizes <= acc.batch_sizes) and np.all(gen.mses >= acc.mses)
        assert np.all(gen.rollouts <= N * (1 + 1e-12))
    for G, mse in zip(sizes, found["unfiltered", "grad"].mses):
        assert mse == pytest.approx(minibatch_mse(m, "grpo", int(G), N // int(G)), rel=1e-10)
    best = {key: res.group_size for key, res in found.items()}
    assert best == {("generated", "grad"): 10, ("generated", "rescaled"): 3,
                    ("accepted", "grad"): 11, ("accepted", "rescaled"): 2,
                    ("unfiltered", "grad"): 3, ("unfiltered", "rescaled"): 3}


# ------------------------------------------------------------------------------ inputs
@pytest.mark.parametrize("call,match", [
    (lambda m: keep_probability(0.5, 1), "group_size"),
    (lambda m: keep_probability(1.5, 4), "value"),
    (lambda m: keep_probability([0.5, 0.5], 4, [0.2, 0.2]), "prompt_prob"),
    (lambda m: generation_cost(0.5, 4, 0), "batch_size"),
    (lambda m: generation_cost(0.5, 4, 2, 0), "gen_batch_size"),
    (lambda m: generation_cost(0.5, 4, 2, 2, -1), "max_num_gen_batches"),
    (lambda m: filtered_batch_moments(m, "grpo", 1, 2), "group_size"),
    (lambda m: filtered_batch_moments(m, "grpo", 4, 0), "batch_size"),
    (lambda m: filtered_batch_moments(m, "vanilla", 4, 2), "advantage"),
    (lambda m: filtered_batch_moments("m", "grpo", 4, 2), "moments"),
    (lambda m: optimal_filtered_group_size(m, 1), "budget"),
    (lambda m: optimal_filtered_group_size(m, 64, accounting="kept"), "accounting"),
    (lambda m: optimal_filtered_group_size(m, 64, target="arcsin"), "target"),
    (lambda m: optimal_filtered_group_size(m, 64, group_sizes=[1]), "group_sizes"),
    (lambda m: optimal_filtered_group_size(m, 64, gen_batch_multiple=0), "gen_batch_multiple"),
    (lambda m: optimal_filtered_group_size(m, 3, group_sizes=[4]), "budget"),
])
def test_inputs_are_validated_with_the_parameter_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(known_p_bandit([0.3, 0.6]).moments())


def test_simulator_rejects_what_it_cannot_run():
    bandit = known_p_bandit([0.3])
    for rule in ("oracle", "trl_batch"):
        with pytest.raises(ValueError, match="`estimator`"):
            simulate_dynamic_sampling(bandit, rule, 4, 2, 10, 0)
    with pytest.raises(ValueError, match="binary"):
        simulate_dynamic_sampling(SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]],
                                                reward_values=(0.0, 2.0)), "grpo", 4, 2, 10, 0)
    with pytest.raises(TypeError, match="bandit"):
        simulate_dynamic_sampling(bandit.moments(), "grpo", 4, 2, 10, 0)


def test_non_binary_rewards_are_rejected():
    m = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]], reward_values=(0.0, 2.0)).moments()
    with pytest.raises(ValueError, match="binary"):
        filtered_batch_moments(m, "grpo", 4, 2)


@pytest.mark.parametrize("module", [ds_module, mc_module])
def test_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
