"""Other frameworks' dynamic-sampling group filters (beyond the paper): exact against enumeration and
against the refill loop.

docs/theory.md section 7, "Dynamic sampling (beyond the paper)", table of group filters. Each filter
is checked three ways: its ``keep(k, G)`` against the framework's own statistic evaluated on the
explicit reward vector, its exact keep probability and kept-batch moments against enumeration of
every group, and the kept batch's bias, MSE and generation batches against a Monte Carlo of the
loop at ``p`` near 0, near 1 and in the middle, within ``Z_CHECK = 4`` standard errors (two-sided
false-failure rate 6.3e-5 per comparison, about 2e-3 for the 30 here by a union bound; seeds
fixed for reproducibility, not chosen). Negative control: the same comparison rejects the
exact value of the wrong filter.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import ustat_rl.theory.group_filters as group_filters_module
from ustat_rl.advantages.registry import get_rule
from ustat_rl.montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
from ustat_rl.policies.examples import known_value_bandit
from ustat_rl.stats.ustatistics import squared_mean_norm
from ustat_rl.theory.dynamic_sampling import (
    filtered_batch_moments,
    generation_cost,
    keep_probability,
    optimal_filtered_group_size,
)
from ustat_rl.theory.group_filters import (
    GROUP_FILTERS,
    GroupFilter,
    get_group_filter,
    keep_mask,
    mean_range_group_filter,
)
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast

EXACT = 1e-12
N_REPS = 20_000
MIXTURE = ([0.02, 0.3, 0.7, 0.98], [0.4, 0.1, 0.1, 0.4])


def framework_keep(name: str, rewards: np.ndarray, low=None, high=None) -> np.ndarray:
    """Each framework's statistic on reward rows ``(n, G)``, as its source computes it
    (``low``, ``high``: a range other than the default, for the mean-range filters)."""
    if name == "verl":  # np.std(rewards) > 0
        return np.std(rewards, axis=1) > 0
    if name == "slime":  # torch float64 std (Bessel) > 1e-6
        return np.std(rewards.astype(np.float64), axis=1, ddof=1) > 1e-6
    mean = rewards.mean(axis=1)  # openrlhf: min_r < avg < max_r; roll: low < mean < high
    default = (0.0, 1.0) if name == "openrlhf" else (0.1, 0.95)
    low, high = default if low is None else (low, high)
    return (mean > low) & (mean < high)


def groups(G: int, dtype=np.float64) -> np.ndarray:
    """The group ``[1]*k + [0]*(G - k)`` for ``k = 0..G``, shuffled (order must not matter)."""
    rows = (np.arange(G)[None, :] < np.arange(G + 1)[:, None]).astype(dtype)
    return np.random.default_rng(G).permuted(rows, axis=1)


@pytest.mark.parametrize("name", sorted(GROUP_FILTERS))
@pytest.mark.parametrize("G", [2, 3, 4, 9, 10, 11, 19, 20, 21, 40, 100])
def test_each_filter_is_the_frameworks_statistic(name, G):
    for dtype in (np.float64, np.float32):  # rewards stored in either precision
        assert keep_mask(name, G).tolist() == framework_keep(name, groups(G, dtype)).tolist()


def test_slime_and_openrlhf_defaults_are_verls_filter_for_binary_rewards():
    """Not written as "not all equal": the smallest non-zero std of a binary group,
    ``sqrt((G - 1)/G^2)`` (ddof 0) or ``1/sqrt(G)`` (ddof 1), is far above 1e-6, and ``k/G`` is
    strictly inside (0, 1) exactly when ``0 < k < G``."""
    verl = GROUP_FILTERS["verl"]
    for G in range(2, 3001):
        expected = keep_mask(verl, G)
        assert keep_mask("slime", G).tolist() == expected.tolist()
        assert keep_mask("openrlhf", G).tolist() == expected.tolist()
    # negative control: ROLL's defaults differ once 1/G <= 0.1 or (G - 1)/G >= 0.95
    assert keep_mask("roll", 9).tolist() == keep_mask(verl, 9).tolist()
    assert keep_mask("roll", 10)[[1, 9]].tolist() == [False, True]
    assert keep_mask("roll", 20)[[1, 2, 3, 18, 19]].tolist() == [False, False, True, True, False]


def enumerated(bandit, rule_name: str, G: int, keep_name: str, low, high):
    """Per prompt, over every outcome of a group: ``P(kept)``, ``E[g_hat 1_kept]`` and
    ``E[||g_hat||^2 1_kept]``, with the framework's statistic evaluated on each reward vector."""
    spec = get_rule(rule_name)
    keep, first, second = [], [], []
    for x in range(bandit.n_prompts):
        action, reward, prob = bandit.enumerate_groups(x, G)
        kept = framework_keep(keep_name, reward, low, high)
        g_hat = np.einsum("mg,mgk->mk", spec.grouped(reward), bandit.score_table[x][action]) / G
        keep.append(prob @ kept)
        first.append((prob * kept) @ g_hat)
        second.append((prob * kept) @ np.sum(g_hat**2, axis=1))
    return np.array(keep), first, np.array(second)


ENUMERATED = [  # (framework, (low, high) or None for its defaults, G); 6^G outcomes per prompt
    ("roll", None, 4), ("roll", (0.2, 0.8), 5), ("openrlhf", None, 5), ("openrlhf", (0.25, 0.6), 6)]


@pytest.mark.parametrize("keep_name,bounds,G", ENUMERATED)
@pytest.mark.parametrize("rule", ["grpo", "verl_grpo"])
def test_exact_kept_batch_equals_enumeration_of_every_group(keep_name, bounds, G, rule):
    bandit = known_value_bandit([0.05, 0.6, 0.93], [0.3, 0.3, 0.4])
    m, f, B = bandit.moments(), bandit.prompt_prob, 3
    group_filter = keep_name if bounds is None else mean_range_group_filter(keep_name, *bounds)
    keep, first, second = enumerated(bandit, rule, G, keep_name, *(bounds or (None, None)))
    r = float(f @ keep)
    mean = np.concatenate([f[x] * first[x] / r for x in range(bandit.n_prompts)])
    g = bandit.grad
    variance_one = float(f @ second) / r - mean @ mean
    out = filtered_batch_moments(m, rule, G, B, group_filter)
    assert keep_probability(bandit.value, G, f, group_filter) == pytest.approx(r, rel=EXACT)
    assert out.keep_prob == pytest.approx(r, rel=EXACT)
    assert np.allclose(out.prompt_keep, keep, rtol=EXACT, atol=0)
    assert out.bias_sq == pytest.approx((mean - g) @ (mean - g), rel=EXACT)
    assert out.variance == pytest.approx(variance_one / B, rel=EXACT)
    assert out.mse == pytest.approx(variance_one / B + (mean - g) @ (mean - g), rel=EXACT)
    if bounds is not None:  # these ranges drop groups whose gradient is not zero
        verl = filtered_batch_moments(m, rule, G, B)
        assert abs(verl.mse - out.mse) > 1e-3 * out.mse
        assert abs(verl.keep_prob - r) > 1e-3


MC_CASES = [  # (group filter, p's, f, G, B, b, wrong filter): p near 0, near 1, and a spread
    ("roll", [0.05], None, 10, 2, 2, "verl"),
    ("roll", [0.97], None, 20, 2, 2, "verl"),
    ("roll", *MIXTURE, 10, 3, 4, "verl"),
    ("openrlhf", [0.05], None, 10, 2, 1, "roll"),  # OpenRLHF refills one prompt at a time
    ("slime", [0.97], None, 20, 2, 3, "roll"),
    ("openrlhf", *MIXTURE, 20, 3, 1, "roll"),
]


def z_score(samples, predicted) -> float:
    samples = np.asarray(samples, dtype=np.float64)
    return float((samples.mean() - predicted) / (samples.std(ddof=1) / math.sqrt(samples.size)))


@pytest.mark.parametrize("case", MC_CASES, ids=lambda c: f"{c[0]}-p{c[1][0]}-G{c[3]}")
def test_refill_loop_matches_exact_bias_mse_and_batches(case):
    name, values, f, G, B, b, wrong = case
    bandit = known_value_bandit(values, f)
    m = bandit.moments()
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, N_REPS, np.random.default_rng(31 + G),
                                    FilterLoop(b, 0, name))
    exact, other = (filtered_batch_moments(m, "grpo", G, B, kept) for kept in (name, wrong))
    cost, other_cost = (generation_cost(bandit.value, G, B, b, 0, bandit.prompt_prob, kept)
                        for kept in (name, wrong))
    errors = run.gradients - bandit.grad
    sq = np.sum(errors**2, axis=1)
    estimate, se = squared_mean_norm(errors)
    assert abs(z_score(sq, exact.mse)) <= Z_CHECK
    assert abs(estimate - exact.bias_sq) <= Z_CHECK * se
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    if b == 1:  # one prompt at a time: exactly B are kept, no overflow
        assert np.all(run.kept_groups == B) and cost.expected_kept_groups == pytest.approx(B)
    else:
        assert abs(z_score(run.kept_groups, cost.expected_kept_groups)) <= Z_CHECK
    # negative control: the wrong filter's exact MSE and generation batches are rejected
    assert abs(z_score(sq, other.mse)) > Z_CHECK
    assert abs(z_score(run.gen_batches, other_cost.expected_gen_batches)) > Z_CHECK


def test_cap_under_rolls_filter_matches_the_loop():
    bandit = known_value_bandit([0.05])
    G, B, b, K = 10, 2, 2, 6
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, N_REPS, np.random.default_rng(5),
                                    FilterLoop(b, K, "roll"))
    cost = generation_cost(bandit.value, G, B, b, K, group_filter="roll")
    p_cap = cost.cap_probability
    assert abs((1.0 - run.filled.mean()) - p_cap) <= Z_CHECK * math.sqrt(p_cap * (1 - p_cap)
                                                                           / N_REPS)
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    # negative control: verl's cap probability at the same G, B, b, K
    verl_cap = generation_cost(bandit.value, G, B, b, K).cap_probability
    assert abs((1.0 - run.filled.mean()) - verl_cap) > Z_CHECK * math.sqrt(p_cap * (1 - p_cap)
                                                                            / N_REPS)


def test_default_filter_leaves_every_result_unchanged():
    m = known_value_bandit(*MIXTURE).moments()
    for G in (2, 5, 12):
        a, b = (filtered_batch_moments(m, "grpo", G, 3, *kept) for kept in ((), ("verl",)))
        assert (a.keep_prob, a.mse, a.bias_sq) == (b.keep_prob, b.mse, b.bias_sq)
    best = optimal_filtered_group_size(m, 256, group_sizes=[4, 10, 20], group_filter="roll")
    assert best.group_size in (4, 10, 20) and math.isfinite(best.mse)


def test_group_filters_are_validated_with_the_parameter_named():
    with pytest.raises(ValueError, match="group_filter"):
        keep_probability(0.5, 4, group_filter="dapo")
    with pytest.raises(ValueError, match="low"):
        mean_range_group_filter("r", 0.9, 0.1)
    bad = GroupFilter("bad", lambda k, G: np.ones(G, dtype=bool), "")
    with pytest.raises(ValueError, match="shape"):
        keep_mask(bad, 4)
    with pytest.raises(ValueError, match="drops every group"):  # G = 5: k/G in (0.1, 0.15)? none
        filtered_batch_moments(known_value_bandit([0.5]).moments(), "grpo", 5, 1,
                               mean_range_group_filter("narrow", 0.1, 0.15))
    assert get_group_filter(None) is GROUP_FILTERS["verl"]


def test_examples_run():
    assert doctest.testmod(group_filters_module).failed == 0
