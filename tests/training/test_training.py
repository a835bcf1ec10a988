"""Algorithm 1 vectorised over runs: seeding, exact quadratic theory, and the bandit sampler."""

import doctest
import importlib

import numpy as np
import pytest

from ustat_rl.policies.examples import realisable_kl_bandit
from ustat_rl.tolerances import Z_TEST
from ustat_rl.training import Algorithm1Config, NoisyQuadratic, quadratic_expected_gap, train

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def quad():
    # d = 3: curvatures 0.5 and 2 with a null direction; noise correlated, also along the null
    rot = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    a = rot @ np.diag([0.5, 2.0, 0.0]) @ rot.T
    gam = np.array([[1.0, 0.3, 0.1], [0.3, 0.5, 0.0], [0.1, 0.0, 0.2]])
    return NoisyQuadratic(a, [1.0, -1.0, 0.5], gam, value=2.0)


@pytest.mark.parametrize("name", ["ustat_rl.policies.loglinear", "ustat_rl.training", "ustat_rl.theory.limit_law"])
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize("problem_name", ["quad", "bandit"])
def test_runs_do_not_depend_on_splitting_or_chunking(problem_name, quad):
    if problem_name == "quad":
        problem, theta0, kw = quad, np.zeros(3), {}
    else:
        problem = realisable_kl_bandit()[0]
        theta0, kw = problem.ref_theta, {"estimator": "grpo", "group_size": 4, "batch_size": 2}
    setting = Algorithm1Config(37, learning_rate=0.7, schedule="inverse", checkpoints=[0, 5, 37],
                               **kw)
    whole = train(problem, theta0, setting, n_runs=6, seed=9)
    left = train(problem, theta0, setting, n_runs=2, seed=9)
    right = train(problem, theta0, setting, n_runs=4, seed=9, run_offset=2, chunk_doubles=7)
    np.testing.assert_array_equal(whole.theta, np.concatenate([left.theta, right.theta]))
    np.testing.assert_array_equal(whole.run_ids, np.arange(6))
    assert np.all(whole.theta[:, 0] == theta0)
    # negative control: another root seed changes the trajectories
    other = train(problem, theta0, setting, n_runs=2, seed=10)
    assert not np.allclose(other.theta[:, -1], left.theta[:, -1])


@pytest.mark.parametrize("schedule, beta", [("constant", 0.2), ("inverse", 1.5)])
def test_quadratic_gap_matches_exact_recursion(quad, schedule, beta):
    n, reps = 60, 4000
    setting = Algorithm1Config(n, learning_rate=beta, schedule=schedule, checkpoints=[1, 10, 60])
    res = train(quad, np.zeros(3), setting, n_runs=reps, seed=1)
    exact, cov = quadratic_expected_gap(quad, np.zeros(3), n, learning_rate=beta,
                                        schedule=schedule)
    gap = res.gap(quad.value)
    for j, c in enumerate(res.checkpoints):
        se = gap[:, j].std(ddof=1) / np.sqrt(reps)
        assert abs(gap[:, j].mean() - exact[c]) <= Z_TEST * se
    emp = np.cov(res.theta[:, -1].T)
    se_cov = np.sqrt((emp**2 + np.outer(np.diag(emp), np.diag(emp))) / reps)  # normal theory
    assert np.all(np.abs(emp - cov) <= Z_TEST * se_cov)
    # negative control: the recursion with the other schedule is rejected at n = 60
    wrong, _ = quadratic_expected_gap(quad, np.zeros(3), n, learning_rate=beta,
                                      schedule="inverse" if schedule == "constant" else "constant")
    se = gap[:, -1].std(ddof=1) / np.sqrt(reps)
    assert abs(gap[:, -1].mean() - wrong[-1]) > Z_TEST * se


def test_bandit_first_step_mean_is_the_gradient():
    bandit, _ = realisable_kl_bandit()
    beta, reps = 0.5, 20_000
    setting = Algorithm1Config(1, learning_rate=beta, estimator="oracle", group_size=4,
                               batch_size=2)
    res = train(bandit, bandit.ref_theta, setting, n_runs=reps, seed=2)
    step = (res.theta[:, 1] - bandit.ref_theta) / beta  # (R, d), one minibatch estimate each
    cov = bandit.noise_covariance(bandit.ref_theta, "oracle", 4, 2)
    q = bandit.identifiable_basis
    white = np.linalg.inv(np.linalg.cholesky(q.T @ cov @ q))
    z = white @ q.T @ (step.mean(axis=0) - bandit.grad(bandit.ref_theta)) * np.sqrt(reps)
    assert np.all(np.abs(z) <= Z_TEST)


def test_quadratic_constants(quad):
    assert quad.rank == 2
    assert quad.smoothness == pytest.approx(2.0)
    assert quad.pl_constant == pytest.approx(0.5)
    # the null direction does not change J
    assert quad.objective(quad.optimum + 3 * quad.null_basis[:, 0]) == pytest.approx(quad.value)


def test_bad_input_is_rejected(quad):
    with pytest.raises(ValueError, match="schedule"):
        Algorithm1Config(5, learning_rate=0.1, schedule="cosine")
    with pytest.raises(ValueError, match="learning_rate"):
        Algorithm1Config(5, learning_rate=0.0)
    with pytest.raises(ValueError, match="checkpoints"):
        Algorithm1Config(5, learning_rate=0.1, checkpoints=[9])
    with pytest.raises(ValueError, match="group_size"):
        Algorithm1Config(5, learning_rate=0.1, group_size=1)
    with pytest.raises(TypeError, match="n_iter"):
        Algorithm1Config(5.0, learning_rate=0.1)
    setting = Algorithm1Config(5, learning_rate=0.1)
    with pytest.raises(ValueError, match="theta0"):
        train(quad, np.zeros(2), setting)
    with pytest.raises(TypeError, match="n_runs"):
        train(quad, np.zeros(3), setting, n_runs=2.0)
    with pytest.raises(TypeError, match="config"):
        train(quad, np.zeros(3), 5)
    with pytest.raises(ValueError, match="curvature"):
        NoisyQuadratic([[1.0, 0.0], [0.0, -1.0]], [0, 0], np.eye(2))
