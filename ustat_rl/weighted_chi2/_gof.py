"""Goodness of fit of a sample against a fully specified continuous law (KS, CvM, AD)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_finite_array

__all__ = ["GofResult", "goodness_of_fit_tests", "anderson_darling_pvalue"]


@dataclass(frozen=True)
class GofResult:
    """Statistics and p-values of three EDF tests of ``sample ~ dist`` (no fitted parameters).

    Attributes
    ----------
    n : int
        Sample size.
    ks_statistic, ks_pvalue : float
        Kolmogorov-Smirnov ``D_n = sup |F_n - F|`` and its exact p-value (scipy ``kstest``).
    cvm_statistic, cvm_pvalue : float
        Cramer-von Mises ``W^2 = n int (F_n - F)^2 dF`` and its p-value (scipy
        ``cramervonmises``).
    ad_statistic, ad_pvalue : float
        Anderson-Darling ``A^2 = n int (F_n - F)^2 / (F (1 - F)) dF`` computed from the
        probability integral transform (with log cdf and log sf, so tail points are exact),
        and its p-value from the Marsaglia-Marsaglia (2004) approximation.
    """

    n: int
    ks_statistic: float
    ks_pvalue: float
    cvm_statistic: float
    cvm_pvalue: float
    ad_statistic: float
    ad_pvalue: float

    def min_pvalue(self) -> float:
        """Smallest of the three p-values."""
        return min(self.ks_pvalue, self.cvm_pvalue, self.ad_pvalue)


def goodness_of_fit_tests(sample, dist) -> GofResult:
    """Test whether ``sample`` was drawn from ``dist`` (used for docs/theory.md C20's limit law).

    Parameters
    ----------
    sample : array_like, shape (n,)
        Observations, n >= 5, finite.
    dist : object
        A fully specified continuous law with ``cdf``, ``logcdf`` and ``logsf`` (for example a
        :class:`~ustat_rl.weighted_chi2.WeightedChiSquare` or a frozen scipy distribution).

    Returns
    -------
    GofResult
        Kolmogorov-Smirnov, Cramer-von Mises and Anderson-Darling statistics and p-values.

    Notes
    -----
    With :math:`u_{(1)} \\le \\dots \\le u_{(n)}` the sorted values of :math:`F(x_i)`,

    .. math:: A^2 = -n - \\frac1n \\sum_{i=1}^n (2i-1)\\,[\\log u_{(i)} + \\log(1-u_{(n+1-i)})].

    Under the null hypothesis the :math:`u_i` are iid uniform, so the null law of every
    statistic is free of ``dist``.

    References
    ----------
    Anderson, T. W. and Darling, D. A. (1954). A test of goodness of fit. JASA 49, 765-769.
    Marsaglia, G. and Marsaglia, J. (2004). Evaluating the Anderson-Darling distribution.
    J. Stat. Softw. 9(2).

    Examples
    --------
    >>> import numpy as np
    >>> from ustat_rl.weighted_chi2 import WeightedChiSquare, goodness_of_fit_tests
    >>> dist = WeightedChiSquare([1.0, 0.25])
    >>> res = goodness_of_fit_tests(dist.rvs(size=200, random_state=np.random.default_rng(0)), dist)
    >>> res.n, 0.0 <= res.ad_pvalue <= 1.0
    (200, True)
    """
    x = as_finite_array(sample, "sample", ndim=(1,))
    if x.size < 5:
        raise ValueError(f"`sample` must hold at least 5 observations, got {x.size}")
    for attr in ("cdf", "logcdf", "logsf"):
        if not callable(getattr(dist, attr, None)):
            raise TypeError(f"`dist` must provide a callable `{attr}`, got {type(dist).__name__}")
    n = x.size
    xs = np.sort(x)
    log_u = np.asarray(dist.logcdf(xs), dtype=float)  # (n,) log u_(i)
    log_1mu = np.asarray(dist.logsf(xs), dtype=float)[::-1]  # (n,) log(1 - u_(n+1-i))
    # the probability integral transform makes every statistic a test of uniformity
    u = np.exp(log_u)  # (n,) sorted
    ks = stats.kstest(u, "uniform")
    cvm = stats.cramervonmises(u, "uniform")
    i = np.arange(1, n + 1)
    ad = float(-n - np.sum((2 * i - 1) * (log_u + log_1mu)) / n)
    return GofResult(n, float(ks.statistic), float(ks.pvalue), float(cvm.statistic),
                     float(cvm.pvalue), ad, float(anderson_darling_pvalue(ad, n)))


def _ad_limit_cdf(z):
    """Asymptotic cdf of A^2 (Marsaglia and Marsaglia 2004, their ``adinf``; error < 2e-6)."""
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        small = (np.exp(-1.2337141 / z) / np.sqrt(z)
                 * (2.00012 + (0.247105 - (0.0649821 - (0.0347962 - (0.011672 - 0.00168691 * z)
                                                        * z) * z) * z) * z))
        large = np.exp(-np.exp(1.0776 - (2.30695 - (0.43424 - (0.082433 - (0.008056 - 0.0003146
                                                                           * z) * z) * z) * z)
                               * z))
    return np.where(z <= 0.0, 0.0, np.where(z < 2.0, small, large))


def _ad_finite_n_correction(n, p):
    """Finite-n correction added to the asymptotic cdf value ``p`` (Marsaglia's ``errfix``)."""
    p = np.asarray(p, dtype=float)
    c = 0.01265 + 0.1757 / n
    t = np.clip(p / c, 0.0, 1.0)
    low = np.sqrt(t) * (1.0 - t) * (49.0 * t - 102.0) * (0.0037 / n**2 + 0.00078 / n + 0.00006) / n
    v = (p - c) / (0.8 - c)
    mid = (-0.00022633 + (6.54034 - (14.6538 - (14.458 - (8.259 - 1.91864 * v) * v) * v) * v) * v)
    mid = mid * (0.04213 / n + 0.01365 / n**2)
    high = (-130.2137 + (745.2337 - (1705.091 - (1950.646 - (1116.360 - 255.7844 * p) * p) * p)
                         * p) * p) / n
    return np.where(p > 0.8, high, np.where(p < c, low, mid))


def anderson_darling_pvalue(statistic, n):
    """P(A^2 >= statistic) for a sample of size ``n`` from the hypothesised law.

    Parameters
    ----------
    statistic : float or array_like
        Anderson-Darling statistic(s).
    n : int
        Sample size (>= 1).

    Returns
    -------
    float or ndarray
        Upper-tail probability, clipped to [0, 1].
    """
    p = _ad_limit_cdf(statistic)
    cdf = np.clip(p + _ad_finite_n_correction(n, p), 0.0, 1.0)
    out = 1.0 - cdf
    return float(out) if np.ndim(out) == 0 else out
