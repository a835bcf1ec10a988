import numpy as np
import pytest

from ustat_rl import (
    bandit_squared_errors,
    bandit_statistics,
    per_sample_squared_errors,
    run_monte_carlo,
)
from ustat_rl.policies.examples import small_bandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast


def test_result_independent_of_workers_and_reproducible():
    bandit = small_bandit()
    stat, labels = bandit_squared_errors(bandit, group_sizes=(2, 8), batch_size=2)
    one = run_monte_carlo(stat, 10_000, seed=11, block_size=1000, labels=labels)
    two = run_monte_carlo(stat, 10_000, seed=11, block_size=1000, labels=labels, n_jobs=2)
    np.testing.assert_array_equal(one.mean, two.mean)
    np.testing.assert_array_equal(one.cov, two.cov)
    other = run_monte_carlo(stat, 10_000, seed=12, block_size=1000, labels=labels)
    assert not np.array_equal(one.mean, other.mean)


def test_streaming_moments_equal_one_shot_moments():
    def statistic(rng, n):
        return rng.normal(size=(n, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.2], [0.0, 0.0, 1.0]])

    est = run_monte_carlo(statistic, 2500, seed=4, block_size=300)
    rows = [statistic(np.random.default_rng(np.random.SeedSequence(4, spawn_key=(j,))),
                      min(300, 2500 - 300 * j)) for j in range(9)]
    values = np.concatenate(rows)
    np.testing.assert_allclose(est.mean, values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(est.cov, np.cov(values.T) / len(values), rtol=1e-10)


def test_fast_kernel_matches_exact_mse_and_per_sample_route():
    bandit = small_bandit()
    stat, labels = bandit_squared_errors(bandit, group_sizes=(3, 7), batch_size=3)
    est = run_monte_carlo(stat, 60_000, seed=2, labels=labels)
    for i, (name, g) in enumerate(labels):
        assert abs(est.mean[i] - bandit.exact_mse(name, g, 3)) <= Z_TEST * est.std_error[i], (name, g)
    slow = run_monte_carlo(per_sample_squared_errors(bandit, "grpo", 7, batch_size=3), 30_000, seed=3)
    m, se = est.get(("grpo", 7))
    assert abs(slow.mean[0] - m) <= Z_TEST * np.hypot(slow.std_error[0], se)
    # negative control: the same comparison rejects the wrong estimator's exact MSE
    wrong = bandit.exact_mse("oracle", 7, 3)
    assert abs(m - wrong) > Z_TEST * se


def test_per_prompt_projection_and_degenerate_columns():
    bandit = small_bandit()
    x = 1
    k = bandit.n_actions
    direction = np.zeros(bandit.dim)
    direction[x * k:(x + 1) * k] = bandit.grad_per_prompt[x]
    stat, labels = bandit_statistics(bandit, ("grpo", "oracle"), (4,), prompt=x,
                                     direction=direction, degenerate=True)
    est = run_monte_carlo(stat, 40_000, seed=9, labels=labels)
    g_sq = bandit.grad_per_prompt[x] @ bandit.grad_per_prompt[x]
    m, se = est.get(("proj", "grpo", 4))
    assert abs(m - g_sq) <= Z_TEST * se
    m, se = est.get(("degenerate", 4))
    exact = bandit.exact_mse_per_prompt("grpo", 4)[x] - bandit.exact_mse_per_prompt("oracle", 4)[x]
    assert abs(m - exact) <= Z_TEST * se


def test_contrast_uses_covariance():
    def statistic(rng, n):
        z = rng.normal(size=n)
        return np.column_stack([z, z + 0.01 * rng.normal(size=n)])

    est = run_monte_carlo(statistic, 5000, seed=1, labels=("a", "b"))
    diff, se = est.contrast({"a": 1.0, "b": -1.0})
    # paired: se of the difference is 0.01 x se(a), not sqrt(2) x se(a) as if independent
    assert 0.008 < se / est.std_error[0] < 0.0125
    with pytest.raises(KeyError):
        est.get("c")


def test_bad_input():
    bandit = small_bandit()
    with pytest.raises(ValueError, match="group_sizes"):
        bandit_squared_errors(bandit, ("grpo",), (1, 4))
    with pytest.raises(ValueError, match="estimators"):
        bandit_squared_errors(bandit, ("ppo",), (4,))
    with pytest.raises(TypeError, match="n_reps"):
        run_monte_carlo(lambda rng, n: np.zeros((n, 1)), 10.5, seed=0)
    with pytest.raises(FloatingPointError, match="non-finite"):
        run_monte_carlo(lambda rng, n: np.full((n, 1), np.nan), 10, seed=0)
    with pytest.raises(ValueError, match="direction"):
        bandit_statistics(bandit, ("grpo",), (4,), direction=np.ones(2))


def test_prompt_averaged_matches_exact_and_rejects_unweighted_average():
    from ustat_rl import prompt_averaged_squared_errors

    bandit = small_bandit()  # unequal prompt weights (0.3, 0.7)
    est = prompt_averaged_squared_errors(bandit, ("grpo", "oracle"), (4,), 30_000, seed=8)
    for i, (name, g) in enumerate(est.labels):
        assert abs(est.mean[i] - bandit.prompt_averaged_mse(name, g)) <= Z_TEST * est.std_error[i]
    unweighted = bandit.exact_mse_per_prompt("grpo", 4).mean()
    assert abs(est.get(("grpo", 4))[0] - unweighted) > Z_TEST * est.get(("grpo", 4))[1]


def test_the_execution_leaves_the_prompt_averaged_estimate_unchanged():
    from ustat_rl.montecarlo import Execution, prompt_averaged_squared_errors

    bandit = small_bandit()
    run = dict(estimators=("grpo",), group_sizes=(4,), n_reps=3000, seed=5, block_size=256)
    one = prompt_averaged_squared_errors(bandit, **run)
    two = prompt_averaged_squared_errors(bandit, **run, execution=Execution(n_jobs=2))
    np.testing.assert_array_equal(one.mean, two.mean)
    np.testing.assert_array_equal(one.cov, two.cov)
    # control: the block size fixes the stream, so it is not an execution setting
    other = prompt_averaged_squared_errors(bandit, **(run | {"block_size": 512}))
    assert not np.array_equal(one.mean, other.mean)
    with pytest.raises(ValueError, match="`n_jobs`"):
        Execution(n_jobs=0)
    with pytest.raises(ValueError, match="`progress`"):
        Execution(progress="yes")
    with pytest.raises(TypeError, match="`execution`"):
        prompt_averaged_squared_errors(bandit, **run, execution=2)


def test_stratified_estimate_weights_means_and_squares_covariances():
    from ustat_rl.montecarlo import stratified_estimate

    a = run_monte_carlo(lambda rng, n: rng.normal(size=(n, 2)), 50, seed=1, labels=("u", "v"))
    b = run_monte_carlo(lambda rng, n: 3 + rng.normal(size=(n, 2)), 30, seed=2, labels=("u", "v"))
    est = stratified_estimate([a, b], [0.25, 0.75])
    assert np.allclose(est.mean, 0.25 * a.mean + 0.75 * b.mean, rtol=1e-14)
    assert np.allclose(est.cov, 0.0625 * a.cov + 0.5625 * b.cov, rtol=1e-14)
    assert np.allclose(est.std_error, np.sqrt(np.diag(est.cov)), rtol=1e-14)
    assert est.n_reps == 80 and est.labels == ("u", "v")
    with pytest.raises(ValueError, match="weights"):
        stratified_estimate([a, b], [1.0])
    with pytest.raises(ValueError, match="labels"):
        stratified_estimate([a, b.subset(["v", "u"])], [0.5, 0.5])
