"""Exact moments vs Monte Carlo on a tiny transformer policy (docs/theory.md C5, C11, C17)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl import theory
from ustat_rl.advantages.gradients import grpo_gradient, oracle_gradient, vanilla_gradient
from ustat_rl.montecarlo import run_monte_carlo
from ustat_rl.montecarlo.transformer import (
    _estimator_weights,
    mc_squared_errors,
    squared_error_statistic,
)
from ustat_rl.policies.transformer import (
    ArithmeticTask,
    TransformerArchitecture,
    bootstrap_constants,
    enumerate_moments,
    make_splits,
    new_policy,
    value_gradients,
)
from ustat_rl.seeding import child_seed
from ustat_rl.tolerances import Z_CHECK
from ustat_rl.training.transformer import question_values, supervised_warmup

pytestmark = pytest.mark.fast

TASK = ArithmeticTask(max_operand=3, max_factor=3, max_answer=9)
SPLITS = make_splits(TASK, n_test=20, n_train=200, seed=0)
GROUPS = (2, 4, 8, 16)


@pytest.fixture(scope="module")
def setup():
    policy = new_policy(TASK, 1, architecture=TransformerArchitecture(16, 1, 2, 32),
                        device="cpu", dtype=torch.float64)
    supervised_warmup(policy, SPLITS.train, 60, torch.Generator().manual_seed(0), batch_size=64)
    values = question_values(policy, SPLITS.test)
    # moderate success probability: the regime of Fig. 4 and a well-behaved Monte Carlo
    questions = [q for q, v in zip(SPLITS.test, values) if 0.2 <= v <= 0.8][:3]
    assert len(questions) == 3
    return policy, questions, enumerate_moments(policy, questions)


@pytest.fixture(scope="module")
def sampled(setup):
    policy, questions, _ = setup
    return mc_squared_errors(policy, questions, GROUPS, 150, seed=2)


def test_moments_sanity(setup):
    policy, questions, run = setup
    m = run.moments
    assert isinstance(m, theory.PromptMoments) and m.kind == "exact"
    assert np.allclose(run.prob_total, 1.0, atol=1e-12)
    assert np.all(run.score_mean_norm < 1e-10 * np.sqrt(m.score_sq))  # E[W|x] = 0
    assert np.allclose(m.value, question_values(policy, questions), rtol=1e-12)
    # Z^2 = Z for a binary reward, so E[|W|^2 Z] = E|WZ|^2 (two sums, one identity)
    assert np.allclose(m.score_sq_reward, m.score_sq_reward_sq, rtol=1e-12)
    direct = value_gradients(policy, questions).numpy()  # g(x) = grad pi(y*|x): second route
    assert np.allclose(m.grad_sq, (direct**2).sum(1), rtol=1e-10)
    assert np.allclose(m.grad_gram, direct @ direct.T, rtol=1e-10)
    assert np.allclose(run.mean_grad, direct.mean(0), rtol=1e-10, atol=1e-14)


def test_constants_two_routes(setup):
    _, _, run = setup
    m = run.moments
    c = theory.scaling_constants(m)
    g_mean = run.mean_grad  # g; c1 = mean ||g(x) - g||^2 from the Gram matrix
    grads_sq_dev = m.grad_sq - 2 * m.grad_gram.mean(1) + m.grad_gram.mean()
    assert c.c1 == pytest.approx(grads_sq_dev.mean(), rel=1e-9)
    assert m.grad_norm_sq == pytest.approx(g_mean @ g_mean, rel=1e-9)
    assert c.c2 == pytest.approx(theory.prompt_averaged_mse(m, "oracle", 1), rel=1e-12)
    # G* minimises the fixed-budget MSE: compare with a dense grid
    grid = np.arange(2, 4000)
    best = grid[np.argmin(c.fixed_budget_mse(grid, 4096))]
    assert abs(best - c.optimal_group_size()) <= 1.0


def test_bootstrap_is_the_theory_at_resampled_weights(setup):
    _, _, run = setup
    m = run.moments
    ci = bootstrap_constants(m, np.random.default_rng(0), n_boot=200)
    exact = theory.scaling_constants(m)
    assert ci.constants == exact and ci.g_star == exact.optimal_group_size()
    assert ci.low["c2"] <= exact.c2 <= ci.high["c2"]
    # one resample by hand: c1 = sum w ||g(x)||^2 - w^T Gram w, the definition restated
    w = np.array([2.0, 0.0, 1.0]) / 3
    c1 = w @ m.grad_sq - w @ m.grad_gram @ w
    assert theory.scaling_constants(m.reweight(w)).c1 == pytest.approx(c1, rel=1e-9)
    with pytest.raises(TypeError, match="moments"):
        bootstrap_constants(run, 0)


def test_estimator_weights_reproduce_estimators():
    rng = np.random.default_rng(0)
    reward = rng.integers(0, 2, size=8).astype(float)
    score = rng.normal(size=(8, 5))
    coef = _estimator_weights(reward, np.array([2, 8]), 0.3)
    assert np.allclose(coef[0] @ score, vanilla_gradient(score[:2], reward[:2]))
    assert np.allclose(coef[3] @ score, grpo_gradient(score, reward))
    assert np.allclose(coef[5] @ score, oracle_gradient(score, reward, 0.3))


def test_mc_mse_matches_exact_formulas(setup, sampled):
    """Theorem 2 (C5) on a transformer: sampled MSEs agree with ``ustat_rl.theory``.

    Each comparison fails by chance with probability 6.3e-5 (``Z_CHECK`` = 4, normal
    approximation), 16 comparisons: about 1e-3 for the test.
    """
    _, _, run = setup
    m = run.moments
    mc = sampled
    for est in ("vanilla", "grpo", "oracle"):
        exact = theory.prompt_averaged_mse(m, est, GROUPS)
        for g, value in zip(GROUPS, exact):
            mean, se = mc.get((est, g))
            assert abs(mean - value) <= Z_CHECK * se, (est, g, mean, value, se)
    degenerate = (theory.prompt_averaged_mse(m, "grpo", GROUPS)
                  - theory.prompt_averaged_mse(m, "oracle", GROUPS))
    for g, value in zip(GROUPS, degenerate):
        mean, se = mc.get(("grpo-oracle", g))
        assert abs(mean - value) <= Z_CHECK * se
    # negative control: the oracle formula taken for GRPO is rejected at G = 2
    mean, se = mc.get(("grpo", 2))
    assert abs(mean - theory.prompt_averaged_mse(m, "oracle", 2)) > Z_CHECK * se


def test_mc_is_stratified_over_prompts(setup):
    """Prompt ``x`` is its own stratum with seed ``child_seed(seed, x)``, weighted ``1/P``."""
    policy, questions, _ = setup
    sizes = (2, 4)
    both = mc_squared_errors(policy, questions[:2], sizes, 6, seed=5, block_size=4)
    first = mc_squared_errors(policy, questions[:1], sizes, 6, seed=5, block_size=4)
    stat, labels = squared_error_statistic(policy, questions[1], sizes)
    second = run_monte_carlo(stat, 6, child_seed(5, 1), block_size=4, labels=labels)
    assert np.allclose(both.mean, (first.mean + second.mean) / 2, rtol=1e-12)
    assert np.allclose(both.cov, (first.cov + second.cov) / 4, rtol=1e-12)
    assert both.n_reps == 12 and both.labels == labels and labels[0] == ("vanilla", 2)
    again = mc_squared_errors(policy, questions[:1], sizes, 6, seed=5, block_size=4)
    other = mc_squared_errors(policy, questions[:1], sizes, 6, seed=6, block_size=4)
    assert np.array_equal(first.mean, again.mean)
    assert not np.allclose(first.mean, other.mean)


def test_inputs_validated(setup):
    policy, questions, _ = setup
    with pytest.raises(TypeError, match="policy"):
        enumerate_moments("policy", questions)
    with pytest.raises(ValueError, match="questions"):
        enumerate_moments(policy, [])
    with pytest.raises(ValueError, match="group_sizes"):
        mc_squared_errors(policy, questions, [1, 2], 4, seed=0)


def test_degenerate_slope_rejects_wrong_exponent(setup, sampled):
    """The GLS slope of ||g_GRPO - g_oracle||^2 is near -2 (C5) and rejects -1 (negative control)."""
    from ustat_rl.stats.rates import loglog_slope

    _, _, run = setup
    m = run.moments
    sizes = np.array(GROUPS, float)
    sub = sampled.subset([("grpo-oracle", g) for g in GROUPS])
    fit = loglog_slope(sizes, sub.mean, cov=sub.cov)  # 99.99% interval
    gap = (theory.prompt_averaged_mse(m, "grpo", GROUPS)
           - theory.prompt_averaged_mse(m, "oracle", GROUPS))  # proportional to 1/(G(G-1))
    local = loglog_slope(sizes, gap, std_error=1e-9 * gap).slope  # about -2.1
    assert fit.contains(local)
    assert not fit.contains(-1.0)

