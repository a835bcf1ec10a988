"""Theorem 8's weights: Lyapunov solver vs eigenbasis closed form vs exact finite-n laws."""

import numpy as np
import pytest

from ustat_rl.policies.examples import conflicting_prompts_bandit
from ustat_rl.theory.limit_law import (
    eigenbasis_covariance,
    limit_weights,
    lyapunov_covariance,
    quadratic_limit_law,
    scalar_limit_weight,
)
from ustat_rl.tolerances import Z_TEST
from ustat_rl.training import Algorithm1Config, NoisyQuadratic, quadratic_expected_gap, train
from ustat_rl.training.group_size import bootstrap_argmin, common_argmin, linearised_gap

pytestmark = pytest.mark.fast


def _quadratic():
    rot = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    a = rot @ np.diag([0.8, 1.5, 0.0]) @ rot.T
    gam = np.array([[1.0, 0.4, 0.0], [0.4, 0.6, 0.1], [0.0, 0.1, 0.3]])
    return NoisyQuadratic(a, np.zeros(3), gam)


def test_lyapunov_solver_equals_eigenbasis_form():
    lam = np.array([0.7, 1.1, 2.0])
    om = np.array([[1.0, 0.2, -0.1], [0.2, 0.5, 0.3], [-0.1, 0.3, 0.8]])
    beta = 1.3
    np.testing.assert_allclose(lyapunov_covariance(np.diag(lam), om, beta),
                               eigenbasis_covariance(lam, om, beta), rtol=1e-12)
    with pytest.raises(ValueError, match="beta"):
        lyapunov_covariance(np.diag(lam), om, 0.5)  # beta lambda_min = 0.35 < 1/2


def test_scalar_weight_and_erratum():
    law = quadratic_limit_law(NoisyQuadratic([[2.0]], [0.0], [[0.5]]), 1.5)
    assert law.weights[0] == pytest.approx(scalar_limit_weight(2.0, 0.5, 1.5), rel=1e-12)
    assert law.weights_printed[0] == pytest.approx(law.weights[0] / 1.5**2, rel=1e-12)


def test_weights_are_the_limit_of_the_exact_finite_n_law():
    # Gaussian noise on a quadratic: u_n is exactly Gaussian with covariance S_n, so n Delta_n
    # is exactly weighted chi-square with weights eig(n S_n^{1/2} A S_n^{1/2} / 2) -> w
    problem, beta = _quadratic(), 1.2
    law = quadratic_limit_law(problem, beta)
    q = problem.identifiable_basis
    errors = []
    for n in (1_000, 10_000):
        _, cov = quadratic_expected_gap(problem, np.zeros(3), n, learning_rate=beta)
        finite = limit_weights(q.T @ problem.curvature @ q, n * q.T @ cov @ q)
        errors.append(np.abs(finite - law.weights).max() / law.weights.max())
    assert errors[1] < errors[0] and errors[1] < 2e-3
    # the printed Omega is not the limit
    assert np.abs(finite - law.weights_printed).max() / law.weights.max() > 0.2


def test_monte_carlo_mean_of_n_gap_on_a_quadratic():
    problem, beta, n, reps = _quadratic(), 1.2, 400, 3000
    law = quadratic_limit_law(problem, beta)
    res = train(problem, np.zeros(3), Algorithm1Config(n, learning_rate=beta), n_runs=reps, seed=4)
    x = n * res.gap(problem.value)[:, -1]
    exact, _ = quadratic_expected_gap(problem, np.zeros(3), n, learning_rate=beta)
    se = x.std(ddof=1) / np.sqrt(reps)
    assert abs(x.mean() - n * exact[-1]) <= Z_TEST * se
    assert abs(n * exact[-1] - law.mean) / law.mean < 0.02  # O(1/n) from the limit at n = 400
    assert abs(x.mean() - law.weights_printed.sum()) > Z_TEST * se  # erratum: printed Omega off


def test_linearised_gap_has_an_interior_minimum():
    bandit = conflicting_prompts_bandit()
    opt = bandit.optimum()
    gaps = [linearised_gap(bandit, opt, 0.5, g, 128 // g) for g in (2, 16, 128)]
    assert gaps[1] < gaps[0] and gaps[1] < gaps[2]


def test_bootstrap_argmin_interval():
    rng = np.random.default_rng(0)
    samples = [rng.normal(m, 1.0, 500) for m in (3.0, 1.0, 2.0)]
    arg, (lo, hi), freq = bootstrap_argmin([2, 4, 8], samples, 500, rng)
    assert arg == 4 and lo == hi == 4 and freq[1] == 1.0
    close = [rng.normal(m, 1.0, 50) for m in (1.0, 1.0, 1.0)]
    _, (lo, hi), _ = bootstrap_argmin([2, 4, 8], close, 500, rng)
    assert lo < hi  # no separation: the interval spans several sizes


def _cells(means_by_cell, n_runs, rng, grid=(4, 16, 64)):
    return [(grid, [rng.normal(m, 1.0, n_runs) for m in means]) for means in means_by_cell]


def test_common_argmin_accepts_a_shared_minimum():
    # every cell's mean is smallest at G = 16, by 7 standard errors of the difference of means
    # (sd 1, 400 runs: se of a difference 0.071 against a gap of 0.5)
    rng = np.random.default_rng(1)
    family = common_argmin(_cells([(1.5, 1.0, 1.5)] * 3, 400, rng), 1000, rng, level=0.95)
    assert family.argmins == (16, 16, 16) and family.common == (16,)
    assert family.cell_level == pytest.approx(1 - 0.05 / 3)


def test_common_argmin_rejects_when_no_group_size_is_shared():
    # negative control: the argmin is G = 4 in one cell and G = 64 in the other, each separated
    # by 7 standard errors of the difference, so no G can lie in both intervals and the rule must
    # say "differs"
    rng = np.random.default_rng(2)
    family = common_argmin(_cells([(1.0, 1.5, 1.5), (1.5, 1.5, 1.0)], 400, rng), 1000, rng)
    assert family.argmins == (4, 64) and family.common == ()
    assert family.intervals == ((4, 4), (64, 64))


def test_common_argmin_tolerates_noise_that_moves_a_point_argmin():
    # flat curves: the point argmins differ from cell to cell by chance alone, which the old
    # point rule called "differs"; the simultaneous intervals overlap, so the rule keeps it
    rng = np.random.default_rng(3)
    family = common_argmin(_cells([(1.0, 1.0, 1.0)] * 4, 50, rng), 1000, rng)
    assert len(family.common) >= 1
    # bad input names the parameter
    with pytest.raises(ValueError, match="`level`"):
        common_argmin(_cells([(1.0, 1.0, 1.0)], 50, rng), 100, rng, level=1.0)
    with pytest.raises(ValueError, match="`cells`"):
        common_argmin([], 100, rng)


def test_eigenbasis_covariance_refuses_what_has_no_stationary_covariance():
    # beta * lambda_min <= 1/2 (Theorem 8's condition), a shape mismatch, a non-finite entry:
    # each a one-line error naming the parameter, never a finite number
    lam, om = np.array([1.0, 2.0]), np.eye(2)
    with pytest.raises(ValueError, match="beta \\* lambda_min"):
        eigenbasis_covariance(lam, om, 0.4)
    with pytest.raises(ValueError, match="omega_eigenbasis"):
        eigenbasis_covariance(lam, np.eye(3), 1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        eigenbasis_covariance(lam, om, float("nan"))
    assert np.isfinite(eigenbasis_covariance(lam, om, 1.0)).all()
