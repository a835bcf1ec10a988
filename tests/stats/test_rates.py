import numpy as np
import pytest

from ustat_rl import fit_mse_rate, loglog_slope, run_monte_carlo

pytestmark = pytest.mark.fast

SIZES = np.array([2.0, 4.0, 8.0, 16.0, 32.0, 64.0])


def _noisy_curve(a, b, seed, rel=0.01):
    truth = a / SIZES + b / SIZES**2
    rng = np.random.default_rng(seed)
    se = rel * truth
    return truth + se * rng.normal(size=SIZES.size), se


def test_rate_fit_recovers_coefficients_within_errors():
    y, se = _noisy_curve(3.0, 5.0, 0)
    fit = fit_mse_rate(SIZES, y, std_error=se)
    assert abs(fit.a - 3.0) <= 4.5 * fit.a_se and abs(fit.b - 5.0) <= 4.5 * fit.b_se
    assert fit.chi2 < 30  # chi2 with 4 dof: P(> 30) < 1e-5


def test_slopes_minus_one_and_minus_two_are_told_apart():
    one, se1 = _noisy_curve(1.0, 0.0, 1)
    two = (1.0 / SIZES**2) * (1 + 0.01 * np.random.default_rng(2).normal(size=SIZES.size))
    fit1 = loglog_slope(SIZES, one, std_error=se1)
    fit2 = loglog_slope(SIZES, two, std_error=0.01 / SIZES**2)
    assert fit1.contains(-1.0) and not fit1.contains(-2.0)
    assert fit2.contains(-2.0) and not fit2.contains(-1.0)


def test_gls_with_monte_carlo_covariance():
    # Common random numbers across G: (Z^2 + E_G^2 / 2) / G with Z shared across G
    def statistic(rng, n):
        z = rng.normal(size=(n, 1)) ** 2 + 0.5 * rng.normal(size=(n, SIZES.size)) ** 2
        return z / SIZES[None, :]

    est = run_monte_carlo(statistic, 20_000, seed=3)
    fit = loglog_slope(SIZES, est.mean, cov=est.cov)
    assert fit.contains(-1.0)
    rate = fit_mse_rate(SIZES, est.mean, cov=est.cov)
    assert abs(rate.a - 1.5) <= 4.5 * rate.a_se


def test_bad_input():
    # each message opens with the parameter it is about (anchored: a decorated name fails)
    with pytest.raises(ValueError, match=r"^`y` must be positive for a log-log slope"):
        loglog_slope(SIZES, -np.ones(6))
    with pytest.raises(ValueError, match=r"^`x` must be positive for a log-log slope$"):
        loglog_slope(np.zeros(6), np.ones(6))
    with pytest.raises(ValueError, match=r"^`group_sizes` needs at least 3 points for a two-term "
                                         r"fit, got 2$"):
        fit_mse_rate(SIZES[:2], np.ones(2))
    with pytest.raises(ValueError, match=r"^`std_error` must be positive$"):
        fit_mse_rate(SIZES, np.ones(6), std_error=np.zeros(6))
    with pytest.raises(ValueError, match=r"^`std_error` must have the shape of `mse` \(6,\), "
                                         r"got \(5,\)$"):
        fit_mse_rate(SIZES, np.ones(6), std_error=np.ones(5))
    with pytest.raises(ValueError, match=r"^`std_error` must contain only finite"):
        fit_mse_rate(SIZES, np.ones(6), std_error=np.full(6, np.inf))
    with pytest.raises(ValueError, match=r"^`cov` must have shape \(6, 6\), got \(5, 5\)$"):
        fit_mse_rate(SIZES, np.ones(6), cov=np.eye(5))
    with pytest.raises(ValueError, match=r"^`cov` must contain only finite"):
        fit_mse_rate(SIZES, np.ones(6), cov=np.full((6, 6), np.nan))
    with pytest.raises(ValueError, match=r"^`mse` must contain only finite"):
        fit_mse_rate(SIZES, np.full(6, np.nan))
    with pytest.raises(ValueError, match=r"^`group_sizes` must contain only finite"):
        fit_mse_rate(np.full(6, np.nan), np.ones(6))
    with pytest.raises(ValueError, match=r"^`mse` must have the shape of `group_sizes` \(6,\), "
                                         r"got \(5,\)$"):
        fit_mse_rate(SIZES, np.ones(5))


def test_three_points_are_enough_for_the_two_term_fit():
    # a = 3, b = 5 exactly on three sizes: the smallest legal fit reproduces them
    fit = fit_mse_rate(SIZES[:3], 3 / SIZES[:3] + 5 / SIZES[:3] ** 2, std_error=np.full(3, 1e-3))
    assert fit.a == pytest.approx(3.0) and fit.b == pytest.approx(5.0) and fit.n_points == 3


def test_weighted_fit_uses_the_known_variances_unscaled():
    # second route: (X^T S^-1 X)^-1 by hand. On points exactly on the curve the residuals are 0,
    # so a covariance rescaled by the residual variance would be 0 and fail the comparison
    se = 0.01 * (3 / SIZES)
    fit = fit_mse_rate(SIZES, 3 / SIZES + 5 / SIZES**2, std_error=se)
    design = np.column_stack([1 / SIZES, 1 / SIZES**2])
    by_hand = np.linalg.inv(design.T @ (design / se[:, None] ** 2))
    np.testing.assert_allclose(fit.cov, by_hand, rtol=1e-8)
    assert fit.a_se == pytest.approx(np.sqrt(by_hand[0, 0]), rel=1e-8)


def test_unweighted_slope_uses_the_residual_variance():
    # no standard errors given: ordinary least squares, se^2 = s^2 [(X^T X)^-1]_11 with
    # s^2 = RSS/(n - 2), recomputed by hand
    x = SIZES
    y = (2.0 / x) * np.exp(np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02]))
    fit = loglog_slope(x, y)
    design = np.column_stack([np.ones_like(x), np.log(x)])
    coef, rss, *_ = np.linalg.lstsq(design, np.log(y), rcond=None)
    by_hand = np.sqrt(rss[0] / (x.size - 2) * np.linalg.inv(design.T @ design)[1, 1])
    assert fit.slope == pytest.approx(coef[1], rel=1e-10)
    assert fit.std_error == pytest.approx(by_hand, rel=1e-8)


def test_interval_is_closed_and_results_are_frozen():
    import dataclasses

    fit = loglog_slope(SIZES, 2.0 / SIZES, std_error=0.01 * 2.0 / SIZES)
    assert fit.contains(fit.ci_low) and fit.contains(fit.ci_high)
    assert not fit.contains(np.nextafter(fit.ci_high, np.inf))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.slope = 0.0
    rate = fit_mse_rate(SIZES, 3 / SIZES, std_error=0.01 * 3 / SIZES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rate.a = 0.0
