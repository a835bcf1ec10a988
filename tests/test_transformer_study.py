"""Exact vs Monte Carlo gradient MSE on a tiny transformer policy (docs/theory.md C5, C11, C17)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.arithmetic import ArithmeticTask, make_splits
from ustat_rl.estimators import grpo_gradient, oracle_gradient, vanilla_gradient
from ustat_rl.transformer_io import new_policy
from ustat_rl.transformer_study import (
    _estimator_weights,
    bootstrap_constants,
    exact_moments,
    exact_mse,
    fixed_budget_mse,
    mc_squared_errors,
    optimal_group_size,
    scaling_constants,
    value_gradients,
)
from ustat_rl.transformer_train import question_values, supervised_warmup

#: |MC - exact| <= Z se: two-sided false-failure rate 6.3e-5 per comparison (normal approximation).
Z = 4.0
TASK = ArithmeticTask(max_operand=3, max_factor=3, max_answer=9)
SPLITS = make_splits(TASK, n_test=20, n_train=200, seed=0)
GROUPS = (2, 4, 8, 16)


@pytest.fixture(scope="module")
def setup():
    policy = new_policy(TASK, 1, d_model=16, n_layers=1, n_heads=2, d_ff=32, device="cpu",
                        dtype=torch.float64)
    supervised_warmup(policy, SPLITS.train, 60, torch.Generator().manual_seed(0), batch_size=64)
    values = question_values(policy, SPLITS.test)
    # moderate success probability: the regime of Fig. 4 and a well-behaved Monte Carlo
    questions = [q for q, v in zip(SPLITS.test, values) if 0.2 <= v <= 0.8][:3]
    assert len(questions) == 3
    return policy, questions, exact_moments(policy, questions)


@pytest.fixture(scope="module")
def sampled(setup):
    policy, questions, _ = setup
    return mc_squared_errors(policy, questions, GROUPS, 150, torch.Generator().manual_seed(2))


def test_moments_sanity(setup):
    policy, questions, m = setup
    assert np.allclose(m.prob_total, 1.0, atol=1e-12)
    assert np.all(m.score_mean_norm < 1e-10 * np.sqrt(m.score_sq))  # E[W|x] = 0
    assert np.allclose(m.value, question_values(policy, questions), rtol=1e-12)
    direct = value_gradients(policy, questions).numpy()  # g(x) = grad pi(y*|x): second route
    assert np.allclose(m.grad_sq, (direct**2).sum(1), rtol=1e-10)
    assert np.allclose(m.mean_grad, direct.mean(0), rtol=1e-6, atol=1e-9)  # float32 store
    assert np.allclose(np.diag(m.gram), m.grad_sq, rtol=1e-6)


def test_constants_two_routes(setup):
    _, _, m = setup
    c = scaling_constants(m)
    grads_sq_dev = m.grad_sq - 2 * m.gram.mean(1) + m.gram.mean()  # ||g(x) - g||^2
    assert c.c1 == pytest.approx(grads_sq_dev.mean(), rel=1e-9)
    assert c.c2 == pytest.approx(np.mean(exact_mse(m, "oracle", [1], per_prompt=True)), rel=1e-12)
    # G* minimises the fixed-budget MSE: compare with a dense grid
    grid = np.arange(2, 4000)
    best = grid[np.argmin(fixed_budget_mse(c, grid, 4096))]
    assert abs(best - optimal_group_size(c)) <= 1.0
    ci = bootstrap_constants(m, np.random.default_rng(0), n_boot=200)
    assert ci.low["c2"] <= c.c2 <= ci.high["c2"]


def test_estimator_weights_reproduce_estimators():
    rng = np.random.default_rng(0)
    reward = rng.integers(0, 2, size=8).astype(float)
    score = rng.normal(size=(8, 5))
    coef = _estimator_weights(reward, np.array([2, 8]), 0.3)
    assert np.allclose(coef[0] @ score, vanilla_gradient(score[:2], reward[:2]))
    assert np.allclose(coef[3] @ score, grpo_gradient(score, reward))
    assert np.allclose(coef[5] @ score, oracle_gradient(score, reward, 0.3))


def test_mc_mse_matches_exact_formulas(setup, sampled):
    """Theorem 2 (C5) on a transformer: sampled MSEs agree with the exact formulas."""
    _, _, m = setup
    mc = sampled
    for est in ("vanilla", "grpo", "oracle"):
        exact = exact_mse(m, est, GROUPS)
        for g, value in zip(GROUPS, exact):
            mean, se = mc.get((est, g))
            assert abs(mean - value) <= Z * se, (est, g, mean, value, se)
    degenerate = exact_mse(m, "grpo", GROUPS) - exact_mse(m, "oracle", GROUPS)
    for g, value in zip(GROUPS, degenerate):
        mean, se = mc.get(("grpo-oracle", g))
        assert abs(mean - value) <= Z * se
    # negative control: the oracle formula taken for GRPO is rejected at G = 2
    mean, se = mc.get(("grpo", 2))
    assert abs(mean - exact_mse(m, "oracle", [2])[0]) > Z * se


def test_exact_mse_validation(setup):
    _, _, m = setup
    with pytest.raises(ValueError, match="group_sizes"):
        exact_mse(m, "grpo", [1, 2])
    with pytest.raises(ValueError, match="estimator"):
        exact_mse(m, "ppo", [2])


def test_degenerate_slope_rejects_wrong_exponent(setup, sampled):
    """The GLS slope of ||g_GRPO - g_oracle||^2 is near -2 (C5) and rejects -1 (negative control)."""
    from ustat_rl.rates import loglog_slope

    _, _, m = setup
    sizes = GROUPS
    sub = sampled.subset([("grpo-oracle", g) for g in sizes])
    fit = loglog_slope(np.array(sizes, float), sub.mean, cov=sub.cov)  # 99.99% interval
    gap = exact_mse(m, "grpo", sizes) - exact_mse(m, "oracle", sizes)  # proportional to 1/(G(G-1))
    local = loglog_slope(np.array(sizes, float), gap, std_error=1e-9 * gap).slope  # about -2.1
    assert fit.contains(local)
    assert not fit.contains(-1.0)


def test_registered_transformer_claims():
    from ustat_rl.claims import VerifyContext, registry, run_claim

    ctx = VerifyContext(seed=123, quick=True)
    for claim_id in ("C11.tf", "C5.tf"):
        result = run_claim(registry()[claim_id], ctx)
        failed = [c.name for c in result.checks if c.required and not c.passed]
        assert result.verdict in ("pass", "differs") and not failed, (claim_id, result.error, failed)
