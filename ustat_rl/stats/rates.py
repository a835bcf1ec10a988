"""Rates in the group size: MSE(G) = a/G + b/G^2 fits and log-log slopes (docs/theory.md C5, C7).

Both fits weight by the Monte Carlo uncertainty: independent standard errors give weighted
least squares; a full covariance (common random numbers across G) gives generalised least
squares, so correlated estimates are not over-counted. Intervals come from statsmodels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import statsmodels.api as sm
from scipy.stats import norm

from .._validation import as_finite_array, as_float

__all__ = ["RateFit", "SlopeFit", "fit_mse_rate", "loglog_slope"]


@dataclass(frozen=True)
class RateFit:
    """Fit of ``MSE(G) = a/G + b/G^2``.

    Attributes
    ----------
    a, b : float
        Coefficients of ``1/G`` and ``1/G^2``.
    a_se, b_se : float
        Their standard errors (from the Monte Carlo covariance, not rescaled by the residuals).
    cov : ndarray (2, 2)
        Covariance of ``(a, b)``.
    chi2 : float
        Weighted residual sum of squares; about ``n_points - 2`` when the model is right.
    n_points : int
    """

    a: float
    b: float
    a_se: float
    b_se: float
    cov: np.ndarray
    chi2: float
    n_points: int


@dataclass(frozen=True)
class SlopeFit:
    """Slope of ``log y`` against ``log x`` with a confidence interval.

    Attributes
    ----------
    slope, std_error : float
    ci_low, ci_high : float
        Interval at ``level`` (normal quantiles: the weights are known Monte Carlo variances).
    intercept : float
    level : float
    """

    slope: float
    std_error: float
    ci_low: float
    ci_high: float
    intercept: float
    level: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the interval."""
        return bool(self.ci_low <= value <= self.ci_high)


def _weights(y: np.ndarray, std_error, cov, name: str) -> np.ndarray | None:
    if cov is not None:
        cov = as_finite_array(cov, "cov", ndim=(2,))
        if cov.shape != (y.size, y.size):
            raise ValueError(f"`cov` must have shape ({y.size}, {y.size}), got {cov.shape}")
        return cov
    if std_error is not None:
        se = as_finite_array(std_error, "std_error", ndim=(1,))
        if se.shape != y.shape:
            raise ValueError(f"`std_error` must have the shape of `{name}` {y.shape}, got {se.shape}")
        if np.any(se <= 0):
            raise ValueError("`std_error` must be positive")
        return np.diag(se**2)
    return None


def _gls(y, design, sigma):
    model = sm.GLS(y, design, sigma=sigma) if sigma is not None else sm.OLS(y, design)
    result = model.fit()
    if sigma is not None:
        # Known variances: use the unscaled covariance (no residual-variance rescaling).
        params_cov = np.asarray(result.normalized_cov_params)
    else:
        params_cov = np.asarray(result.cov_params())
    return np.asarray(result.params), params_cov, result


def fit_mse_rate(group_sizes, mse, std_error=None, cov=None) -> RateFit:
    """Fit ``MSE(G) = a/G + b/G^2`` by weighted (or generalised) least squares.

    Parameters
    ----------
    group_sizes : array_like (n,)
    mse : array_like (n,)
        Estimated MSE at each group size.
    std_error : array_like (n,), optional
        Independent standard errors (weighted least squares).
    cov : array_like (n, n), optional
        Full covariance of the estimates (generalised least squares); takes precedence.

    Examples
    --------
    >>> G = np.array([2.0, 4.0, 8.0, 16.0])
    >>> fit = fit_mse_rate(G, 3 / G + 5 / G**2, std_error=np.full(4, 1e-3))
    >>> round(fit.a, 6), round(fit.b, 6)
    (3.0, 5.0)
    """
    sizes = as_finite_array(group_sizes, "group_sizes", ndim=(1,))
    y = as_finite_array(mse, "mse", ndim=(1,))
    if sizes.shape != y.shape:
        raise ValueError(f"`mse` must have the shape of `group_sizes` {sizes.shape}, got {y.shape}")
    if y.size < 3:
        raise ValueError(f"`group_sizes` needs at least 3 points for a two-term fit, got {y.size}")
    if np.any(sizes <= 0):
        raise ValueError("`group_sizes` must be positive")
    sigma = _weights(y, std_error, cov, "mse")
    design = np.column_stack([1.0 / sizes, 1.0 / sizes**2])
    params, params_cov, result = _gls(y, design, sigma)
    resid = y - design @ params
    chi2 = float(resid @ np.linalg.solve(sigma, resid)) if sigma is not None else float(resid @ resid)
    return RateFit(float(params[0]), float(params[1]), float(np.sqrt(params_cov[0, 0])),
                   float(np.sqrt(params_cov[1, 1])), params_cov, chi2, int(y.size))


def loglog_slope(x, y, std_error=None, cov=None, level: float = 0.9999) -> SlopeFit:
    """Slope of ``log y`` on ``log x`` with a ``level`` interval.

    Standard errors of ``y`` become standard errors of ``log y`` by the delta method
    (``se / y``); a covariance ``C`` becomes ``C / (y y^T)``. ``y`` must be positive.
    The default level 0.9999 matches ``Z_CHECK``-style checks (about 3.9 standard errors).

    Examples
    --------
    >>> x = np.array([1.0, 2.0, 4.0, 8.0])
    >>> fit = loglog_slope(x, 2.0 / x, std_error=0.01 * 2.0 / x)
    >>> round(fit.slope, 8)
    -1.0
    """
    x = as_finite_array(x, "x", ndim=(1,))
    y = as_finite_array(y, "y", ndim=(1,))
    level = as_float(level, "level", low=0.0, high=1.0)
    if x.shape != y.shape:
        raise ValueError(f"`y` must have the shape of `x` {x.shape}, got {y.shape}")
    if x.size < 2:
        raise ValueError(f"`x` needs at least 2 points, got {x.size}")
    if np.any(x <= 0):
        raise ValueError("`x` must be positive for a log-log slope")
    if np.any(y <= 0):
        raise ValueError("`y` must be positive for a log-log slope; got a non-positive value")
    sigma = _weights(y, std_error, cov, "y")
    if sigma is not None:
        sigma = sigma / np.outer(y, y)
    design = sm.add_constant(np.log(x))
    params, params_cov, result = _gls(np.log(y), design, sigma)
    se = float(np.sqrt(params_cov[1, 1]))
    if sigma is None and x.size <= 2:
        raise ValueError("an unweighted slope needs at least 3 points for an interval")
    if sigma is not None:
        half = norm.ppf(0.5 + level / 2.0) * se
    else:
        lo, hi = result.conf_int(alpha=1.0 - level)[1]
        half = (hi - lo) / 2.0
    slope = float(params[1])
    return SlopeFit(slope, se, slope - half, slope + half, float(params[0]), level)
