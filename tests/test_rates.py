import numpy as np
import pytest

from ustat_rl import fit_mse_rate, loglog_slope, run_monte_carlo

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
    with pytest.raises(ValueError, match="y"):
        loglog_slope(SIZES, -np.ones(6))
    with pytest.raises(ValueError, match="x"):
        loglog_slope(np.zeros(6), np.ones(6))
    with pytest.raises(ValueError, match="group_sizes"):
        fit_mse_rate(SIZES[:2], np.ones(2))
    with pytest.raises(ValueError, match="std_error"):
        fit_mse_rate(SIZES, np.ones(6), std_error=np.zeros(6))
    with pytest.raises(ValueError, match="mse"):
        fit_mse_rate(SIZES, np.full(6, np.nan))
