"""SkyRL's POLARIS ``replace``: the exact replaced batch against enumeration and SkyRL's loop.

The multiplicity law is checked against enumeration of every choice of copies (exact, 1e-12);
with no copies possible the replaced batch is verl's filtered batch (1e-12); the exact MSE,
squared bias, expected batches and cap probability match the Monte Carlo of SkyRL's loop within
``Z_CHECK = 4`` standard errors (two-sided 6.3e-5 each) at ``p`` near 0 and near 1; negative
controls: verl's regenerating filter's exact MSE and the unmerged copies' (advantages per copy)
are rejected by the same comparison.
"""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest

import ustat_rl.montecarlo.replace_sampling as mc_module
import ustat_rl.theory.replace_sampling as theory_module
from ustat_rl.montecarlo.replace_sampling import ReplaceLoop, simulate_replace_sampling
from ustat_rl.policies.examples import known_value_bandit
from ustat_rl.stats.ustatistics import squared_mean_norm
from ustat_rl.theory.dynamic_sampling import filtered_batch_moments
from ustat_rl.theory.replace_sampling import (
    multiplicity_law,
    replace_batch_moments,
    replace_generation_cost,
    replace_probability,
    replace_threshold,
)
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast

N_REPS = 8_000


def enumerated_law(r: float, B: int, ratio: float):
    """``(pi, counts, pairs)`` by enumerating every ``j`` and every choice of SkyRL's copies."""
    from scipy.stats import binom

    size = B + 2
    counts, pairs, pi = np.zeros(size), np.zeros((size, size)), 0.0
    for j in range(B + 1):
        if not j > B * ratio:
            continue
        pj, d = binom.pmf(j, B, r), B - j
        pi += pj
        if j >= d:  # every subset of d distinct good groups is equally likely
            choices = [(c, 1.0) for c in itertools.combinations(range(j), d)]
            choices = [(c, 1.0 / len(choices)) for c, _ in choices]
        else:  # every bad slot picks a good group uniformly
            choices = [(c, j ** -d) for c in itertools.product(range(j), repeat=d)]
        for chosen, weight in choices:
            mult = 1 + np.bincount(np.asarray(chosen, dtype=np.int64), minlength=j)
            for i in range(j):
                counts[mult[i]] += pj * weight
                for i2 in range(j):
                    if i2 != i:
                        pairs[mult[i], mult[i2]] += pj * weight
    return pi, counts / pi, pairs / pi


@pytest.mark.parametrize("r, B, ratio", [(0.3, 5, 0.3), (0.6, 4, 0.0), (0.2, 6, 0.1)])
def test_multiplicity_law_equals_enumeration_of_every_choice(r, B, ratio):
    pi, counts, pairs = multiplicity_law(r, B, ratio)
    want_pi, want_counts, want_pairs = enumerated_law(r, B, ratio)
    assert pi == pytest.approx(want_pi, rel=1e-12)
    n = counts.size
    np.testing.assert_allclose(counts, want_counts[:n], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pairs, want_pairs[:n, :n], rtol=1e-12, atol=1e-15)
    assert np.all(want_counts[n:] == 0)
    assert float(np.arange(n) @ counts) == pytest.approx(B, rel=1e-12)  # B slots in all


def test_threshold_is_skyrls_strict_floating_point_comparison():
    assert [replace_threshold(B) for B in (1, 3, 4, 10, 20)] == [1, 1, 2, 4, 7]
    assert replace_threshold(4, 1.0) == 5 and replace_probability(0.9, 4, 1.0) == 0.0


@pytest.mark.parametrize("estimator", ["grpo", "verl_grpo"])
def test_without_copies_the_batch_is_verls_filtered_batch(estimator):
    # B = 2 at ratio 0.9: replaced only when both groups are good, so no copy is ever made
    m = known_value_bandit([0.1, 0.8], [0.3, 0.7]).moments()
    polaris, verl = replace_batch_moments(m, estimator, 5, 2, 0.9), filtered_batch_moments(m, estimator, 5, 2)
    np.testing.assert_allclose(polaris.prompt_weight, verl.prompt_weight, rtol=1e-12)
    for key in ("mean_sq", "bias_sq", "variance", "mse"):
        assert getattr(polaris, key) == pytest.approx(getattr(verl, key), rel=1e-12)


def z_score(samples, predicted) -> float:
    samples = np.asarray(samples, dtype=np.float64)
    return (samples.mean() - predicted) / (samples.std(ddof=1) / math.sqrt(samples.size))


#: ``(values, estimator, G, B)``: p near 0 with leave-one-out, p near 1 std-normalised.
CASES = [((0.05,), "grpo", 4, 6), ((0.95,), "verl_grpo", 6, 5)]


@pytest.mark.parametrize("case", CASES)
def test_loop_matches_exact_bias_mse_and_batches(case):
    values, estimator, G, B = case
    bandit = known_value_bandit(values)
    exact = replace_batch_moments(bandit.moments(), estimator, G, B)
    cost = replace_generation_cost(bandit.value, G, B)
    run = simulate_replace_sampling(bandit, estimator, G, B, N_REPS, np.random.default_rng(7 + G))
    errors = run.gradients - bandit.grad
    sq = np.sum(errors**2, axis=1)
    assert abs(z_score(sq, exact.mse)) <= Z_CHECK
    estimate, se = squared_mean_norm(errors)
    assert abs(estimate - exact.bias_sq) <= Z_CHECK * se
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    assert abs(z_score(run.copies, B - _mean_good(exact))) <= Z_CHECK
    # negative controls: verl's regenerating filter, and copies that keep their own advantages
    assert abs(z_score(sq, filtered_batch_moments(bandit.moments(), estimator, G, B).mse)) > Z_CHECK
    unmerged = replace_batch_moments(bandit.moments(), estimator, G, B, merge_copies=False)
    assert abs(z_score(sq, unmerged.mse)) > Z_CHECK


def _mean_good(exact) -> float:
    """``E[J | replaced]``: the good groups of the batch used, from the multiplicity counts."""
    return float(exact.multiplicity_counts.sum())


def test_cap_probability_matches_the_loop():
    bandit, G, B, K = known_value_bandit([0.03]), 4, 4, 3
    cost = replace_generation_cost(bandit.value, G, B, 0.3, K)
    run = simulate_replace_sampling(bandit, "grpo", G, B, N_REPS, np.random.default_rng(3),
                                    ReplaceLoop(max_sample_batches=K))
    se = math.sqrt(cost.cap_probability * (1 - cost.cap_probability) / N_REPS)
    assert cost.cap_probability == pytest.approx((1 - cost.replace_prob) ** K, rel=1e-12)
    assert abs((1 - run.filled.mean()) - cost.cap_probability) <= Z_CHECK * se
    assert abs(z_score(run.gen_batches, cost.expected_gen_batches)) <= Z_CHECK
    # negative control: the regenerating filter's chance of its cap at the same K
    from ustat_rl.theory.dynamic_sampling import generation_cost

    assert abs((1 - run.filled.mean()) - generation_cost(bandit.value, G, B, B, K).cap_probability) \
        > Z_CHECK * se


def test_bad_input_names_the_parameter():
    m = known_value_bandit([0.5]).moments()
    with pytest.raises(ValueError, match="min_replace_ratio"):
        replace_batch_moments(m, "grpo", 4, 4, -0.1)
    with pytest.raises(TypeError, match="merge_copies"):
        replace_batch_moments(m, "grpo", 4, 4, merge_copies="yes")
    with pytest.raises(ValueError, match="never replaced"):
        replace_batch_moments(m, "grpo", 4, 4, 1.0)
    with pytest.raises(ValueError, match="group_size"):
        replace_generation_cost(0.5, 1, 4)
    with pytest.raises(ValueError, match="min_replace_ratio"):
        simulate_replace_sampling(known_value_bandit([0.5]), "grpo", 4, 4, 10, 0, ReplaceLoop(1.0))


def test_examples_run():
    assert doctest.testmod(theory_module).failed == 0
    assert doctest.testmod(mc_module).failed == 0
