"""The public ``WeightedChiSquare`` distribution (scipy ``rv_continuous`` contract)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from scipy.special import gammainc, gammaincc, gammaln

from .._validation import as_finite_array
from ._closed import closed_log_cdf_sf as _closed_log_cdf_sf
from ._closed import closed_log_pdf as _closed_log_pdf
from ._inversion import Inversion
from ._ruben import RubenSeries
from ._small_x import small_x_params

__all__ = ["WeightedChiSquare"]

METHODS = ("auto", "ruben", "inversion")
#: Largest max(w) / min(w) given to Ruben's series: 1 - min(w) / max(w) stays below 1 in float64
#: with a margin of ten (it rounds to 1 near 9e15).
RUBEN_MAX_SPREAD = 1e15
#: Largest max(w) / min(w) accepted at all: w / max(w) must stay a normal float64.
MAX_SPREAD = 1e300
#: Weights whose largest lies outside this range are rescaled for the engines.
_UNIT_RANGE = (1e-100, 1e100)


def _as_float(x):
    """``x`` as a Python float if it is a real scalar that scipy would compute in float64, else None.

    Used by the scalar fast path: a float, an int or a numpy float64/float32/integer scalar, or a
    0-d array of one of those. Anything else (arrays, longdouble, complex, objects) is None and
    goes through ``rv_continuous``'s generic argument handling.
    """
    if isinstance(x, np.ndarray):
        if x.ndim != 0:
            return None
        x = x[()]
    if isinstance(x, (float, int, np.float32, np.float16, np.integer)):
        return float(x)
    return None


class WeightedChiSquare(stats.rv_continuous):
    r"""Law of :math:`Q = \sum_k w_k Z_k^2` with :math:`Z_k` iid N(0, 1) and weights :math:`w_k > 0`.

    This is the limit law of Theorem 8 (docs/theory.md C20): :math:`n\Delta(\pi_{\theta_n})` converges
    to :math:`\sum_k w_k \chi^2_{1,k}` with :math:`w = \mathrm{eig}(\tfrac12 \Sigma^{1/2}\Lambda
    \Sigma^{1/2})`. The object follows scipy's ``rv_continuous`` contract (``pdf``, ``logpdf``,
    ``cdf``, ``logcdf``, ``sf``, ``logsf``, ``ppf``, ``isf``, ``rvs``, ``mean``, ``var``,
    ``moments``; vectorised and broadcasting, ``loc``/``scale`` accepted), so it can be passed to
    ``scipy.stats.kstest`` and ``scipy.stats.goodness_of_fit``.

    Parameters
    ----------
    weights : array_like, shape (K,)
        Positive, finite weights :math:`w_k`; repeated weights are merged into chi-square
        components with more degrees of freedom.
    method : {"auto", "ruben", "inversion"}, optional
        ``"auto"`` (default) uses the closed form for a single distinct weight, Ruben's
        positive-term series where it converges within its budget, and contour inversion
        elsewhere (everywhere when ``max(w) / min(w) > 1e15``, ``RUBEN_MAX_SPREAD``). Any
        scale of the weights is served (past 1e+-100 the engines work in units of ``max(w)``);
        their spread ``max / min`` must not exceed 1e300 (``MAX_SPREAD``).
        ``"ruben"`` returns NaN where the series cannot certify its accuracy and raises a
        ValueError for a spread above 1e15; ``"inversion"`` always inverts numerically. The
        last two exist to cross-check engines.
    **kwargs
        Passed to :class:`scipy.stats.rv_continuous` (``name``, ``seed``, ...).

    Notes
    -----
    With :math:`m_d` the multiplicity of the distinct weight :math:`w_d` and :math:`K=\sum m_d`:

    * **Closed form** (one distinct weight): :math:`Q/w \sim \chi^2_K`.
    * **Ruben's series** (default): :math:`Q` is the mixture :math:`\beta\chi^2_{K+2J}` with
      :math:`\beta = \min w` and mixing pgf :math:`\prod_d (\beta/w_d)^{m_d/2}
      (1-(1-\beta/w_d)z)^{-m_d/2}`; cdf, sf and pdf are each written as sums of positive terms
      (see ``_ruben``), so both tails keep relative accuracy and the sf is never ``1 - cdf``.
      The series needs about :math:`x/(2\beta) + 40\max_d w_d/\beta` terms in the upper tail,
      so a wide spread :math:`\max w/\min w` exhausts its budget there.
    * **Inversion** (fallback): the Gil-Pelaez/Bromwich integral on a hyperbola through the
      saddlepoint, discretised by the trapezoid rule (see ``_inversion``).
    * **Near zero** (:math:`x\sum_k 1/w_k \le 10^{-9}`, all methods): the first two terms of
      the expansion :math:`F(x) \propto x^{K/2}`, exact to double precision there (see
      ``_small_x``). So :math:`f(0)` is :math:`+\infty` for :math:`K = 1`,
      :math:`1/(2\sqrt{w_1 w_2})` for :math:`K = 2` and 0 for :math:`K \ge 3`.
    * Speed: both engines are compiled kernels (numba, cached on disk after the first run);
      the series coefficients and the kernels' tables are built once per distribution and
      grown on demand. A real scalar without ``loc``/``scale`` skips ``rv_continuous``'s
      argument handling (same float64 result); anything else goes through scipy.
    * ``ppf``/``isf``: Newton's method on the log-probability of the smaller tail, started from
      the Barndorff-Nielsen saddlepoint approximation and safeguarded by bisection.
    * Moments: cumulants :math:`\kappa_j = 2^{j-1}(j-1)!\sum_k w_k^j`, so the mean is
      :math:`\sum w` and the variance :math:`2\sum w^2`.

    Accuracy (tests/weighted_chi2/test_weighted_chi2.py, against an mpmath reference at 25 digits): relative
    error below 1e-10 for cdf and sf down to 1e-15 in both tails, K in {1, 2, 6, 20, 50} and
    spreads up to 1000.

    References
    ----------
    Ruben, H. (1962). Ann. Math. Statist. 33, 542-570.
    Farebrother, R. W. (1984). Algorithm AS 204. Appl. Statist. 33, 332-339.
    Imhof, J. P. (1961). Computing the distribution of quadratic forms in normal variables.
    Biometrika 48, 419-426.

    Examples
    --------
    >>> from ustat_rl.weighted_chi2 import WeightedChiSquare
    >>> dist = WeightedChiSquare([2.0, 0.5])
    >>> float(dist.mean()), float(dist.var())
    (2.5, 8.5)
    >>> p = dist.sf(60.0)
    >>> bool(abs(dist.isf(p) - 60.0) < 1e-9)
    True
    >>> float(WeightedChiSquare([3.0]).cdf(3.0)) == float(__import__("scipy").stats.chi2(1).cdf(1.0))
    True
    """

    def __init__(self, weights, method: str = "auto", **kwargs):
        w = as_finite_array(np.atleast_1d(weights) if np.ndim(weights) == 0 else weights,
                            "weights", ndim=(1,))
        if np.any(w <= 0.0):
            raise ValueError(f"`weights` must be strictly positive, got minimum {w.min()}")
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
        kwargs.pop("a", None)
        kwargs.setdefault("name", "weighted_chi2")
        super().__init__(a=0.0, **kwargs)
        self.weights = np.array(w, dtype=float)  # (K,)
        self.method = method
        distinct, mult = np.unique(self.weights, return_counts=True)
        self._distinct = distinct  # (D,) increasing
        self._mult = mult.astype(float)  # (D,)
        self._K = float(mult.sum())
        with np.errstate(over="ignore"):
            spread = float(distinct[-1] / distinct[0])
        if not spread <= MAX_SPREAD:
            raise ValueError(f"`weights` must satisfy max / min <= {MAX_SPREAD:g} (the float64 "
                             f"range), got {spread:.3g}")
        # weights beyond 1e+-100 are handed to the engines as w / max(w) (and x as x / max(w)),
        # so no scale overflows them; others as they are, keeping subnormal x exact
        top = float(distinct[-1])
        self._unit = 1.0 if _UNIT_RANGE[0] <= top <= _UNIT_RANGE[1] else top
        unit = distinct / self._unit  # (D,)
        self._inversion = Inversion(unit, self._mult)
        if method == "ruben" and not spread <= RUBEN_MAX_SPREAD:
            raise ValueError(f"`method`='ruben' needs max(weights) / min(weights) <= "
                             f"{RUBEN_MAX_SPREAD:g}, got {spread:.3g}; method='auto' or "
                             "'inversion' handle any positive weights")
        # beyond the spread Ruben's mixing law leaves the float range (gamma_d rounds to 1)
        # and its series could not close a window anyway: auto then inverts everywhere
        self._engine = "inversion" if distinct.size > 1 and spread > RUBEN_MAX_SPREAD else method
        self._ruben = (RubenSeries(unit, self._mult)
                       if distinct.size > 1 and self._engine != "inversion" else None)
        self._small = small_x_params(unit, self._mult)  # x -> 0 expansion (_small_x)
        half, w = 0.5 * self._K, float(unit[0])
        self._closed = np.array([half, 2.0 * w, float(gammaln(half)), math.log(2.0 * w),
                                 self._inversion.mean])  # one distinct weight: Q / w ~ chi2_K

    def _updated_ctor_param(self):
        params = super()._updated_ctor_param()
        params.pop("a", None)
        params["weights"] = self.weights
        params["method"] = self.method
        return params

    # ------------------------------------------------------------------ private core
    def _log_cdf_sf(self, x):
        """(log cdf, log sf) at x >= 0 (any shape; 0 and inf allowed)."""
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1) / self._unit  # (n,) in units of max(w)
        if self._engine == "inversion":
            log_cdf, log_sf = self._inversion.log_cdf_sf(flat, self._small)
            return log_cdf.reshape(x.shape), log_sf.reshape(x.shape)
        if self._ruben is None:
            half, scale = self._closed[0], self._closed[1]
            log_cdf, log_sf, ok = _closed_log_cdf_sf(flat, gammainc(half, flat / scale),
                                                     gammaincc(half, flat / scale), self._closed)
        else:
            # the side computed directly is the one below/above the mean; the other is 1 - it
            log_cdf, log_sf, ok = self._ruben.log_cdf_sf(flat, self._inversion.mean, self._small)
            if self.method == "ruben":
                return log_cdf.reshape(x.shape), log_sf.reshape(x.shape)
        if not ok.all():
            sel = np.flatnonzero(~ok)
            log_cdf[sel], log_sf[sel] = self._inversion.log_cdf_sf(flat[sel], self._small)
        return log_cdf.reshape(x.shape), log_sf.reshape(x.shape)

    def _log_density(self, x):
        """log pdf at x >= 0 (any shape; 0 and inf allowed)."""
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1) / self._unit  # (n,) in units of max(w); the density scales back
        if self._engine == "inversion":
            out = self._inversion.log_pdf(flat, self._small)
        elif self._ruben is None:
            out = _closed_log_pdf(flat, self._closed)
        else:
            out, ok = self._ruben.log_pdf(flat, self._small)
            if self.method != "ruben" and not ok.all():
                sel = np.flatnonzero(~ok)
                out[sel] = self._inversion.log_pdf(flat[sel], self._small)
        return (out - math.log(self._unit)).reshape(x.shape)

    def _scalar_log_cdf_sf(self, x: float):
        """(log cdf, log sf) at a float, with rv_continuous's values outside (0, inf)."""
        if x != x:
            return np.float64(np.nan), np.float64(np.nan)
        if x <= 0.0:
            return np.float64(-np.inf), np.float64(0.0)
        log_cdf, log_sf = self._log_cdf_sf(np.array([x]))
        return log_cdf[0], log_sf[0]

    def _scalar_log_pdf(self, x: float):
        if x != x:
            return np.float64(np.nan)
        if x < 0.0:
            return np.float64(-np.inf)
        return self._log_density(np.array([x]))[0]

    # ------------------------------------------------------------------ scalar fast path
    # rv_continuous's argument parsing and broadcasting cost more than the kernels for one
    # point; a bare real scalar without loc/scale arguments skips them and gets the same
    # float64 back (tests/weighted_chi2/test_weighted_chi2.py checks both, bit for bit).
    def cdf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().cdf(x, *args, **kwds)
        return np.exp(self._scalar_log_cdf_sf(v)[0])

    def sf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().sf(x, *args, **kwds)
        return np.exp(self._scalar_log_cdf_sf(v)[1])

    def logcdf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().logcdf(x, *args, **kwds)
        return self._scalar_log_cdf_sf(v)[0]

    def logsf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().logsf(x, *args, **kwds)
        return self._scalar_log_cdf_sf(v)[1]

    def pdf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().pdf(x, *args, **kwds)
        return np.exp(self._scalar_log_pdf(v))

    def logpdf(self, x, *args, **kwds):
        v = None if args or kwds else _as_float(x)
        if v is None:
            return super().logpdf(x, *args, **kwds)
        return self._scalar_log_pdf(v)

    def ppf(self, q, *args, **kwds):
        v = None if args or kwds else _as_float(q)
        if v is None:
            return super().ppf(q, *args, **kwds)
        if 0.0 < v < 1.0:
            return self._solve(np.array([v]), upper=False)[0]
        return np.float64(0.0 if v == 0.0 else np.inf if v == 1.0 else np.nan)

    def isf(self, q, *args, **kwds):
        v = None if args or kwds else _as_float(q)
        if v is None:
            return super().isf(q, *args, **kwds)
        if 0.0 < v < 1.0:
            return self._solve(np.array([v]), upper=True)[0]
        return np.float64(np.inf if v == 0.0 else 0.0 if v == 1.0 else np.nan)

    # ------------------------------------------------------------------ scipy hooks
    def _logcdf(self, x):
        return self._log_cdf_sf(x)[0]

    def _logsf(self, x):
        return self._log_cdf_sf(x)[1]

    def _cdf(self, x):
        return np.exp(self._logcdf(x))

    def _sf(self, x):
        return np.exp(self._logsf(x))

    def _logpdf(self, x):
        return self._log_density(x)

    def _pdf(self, x):
        return np.exp(self._log_density(x))

    def _ppf(self, q):
        return self._solve(np.asarray(q, dtype=float), upper=False)

    def _isf(self, q):
        return self._solve(np.asarray(q, dtype=float), upper=True)

    def _rvs(self, size=None, random_state=None):
        out = np.zeros(size if size is not None else ())
        for w, m in zip(self._distinct, self._mult):
            out = out + w * random_state.chisquare(m, size=size)
        return out

    def _stats(self):
        k2 = 2.0 * np.sum(self.weights**2)
        skew = 8.0 * np.sum(self.weights**3) / k2**1.5
        kurt = 48.0 * np.sum(self.weights**4) / k2**2
        return np.sum(self.weights), k2, skew, kurt

    def _munp(self, n):
        n = int(n)
        cum = [0.0] + [2.0 ** (j - 1) * math.factorial(j - 1) * float(np.sum(self.weights**j))
                       for j in range(1, n + 1)]
        raw = [1.0]
        for k in range(1, n + 1):
            raw.append(sum(math.comb(k - 1, j - 1) * cum[j] * raw[k - j] for j in range(1, k + 1)))
        return raw[n]

    # ------------------------------------------------------------------ quantiles
    def _solve(self, prob, upper: bool):
        """x with P(Q > x) = prob (upper) or P(Q <= x) = prob, by Newton on the smaller tail."""
        prob = np.atleast_1d(prob)
        flip = prob > 0.5
        use_upper = np.where(flip, not upper, upper)
        target = np.where(flip, 1.0 - prob, prob)  # exact for prob >= 0.5 (Sterbenz)
        x = np.empty(prob.shape)
        for side in (False, True):
            sel = np.nonzero(use_upper == side)[0]
            if sel.size:
                x[sel] = self._newton(target[sel], side)
        return x

    def _newton(self, target, upper: bool):
        log_target = np.log(target)
        start = self._inversion.approx_ppf(target, upper) * self._unit
        # lower side: solve log F(e^z) = log p in z = log x; upper side: log S(x) = log q in x
        z = start if upper else np.log(start)
        lo = np.full(z.shape, 0.0 if upper else -np.inf)
        hi = np.full(z.shape, np.inf)
        active = np.ones(z.shape, bool)
        for _ in range(80):
            idx = np.nonzero(active)[0]
            if idx.size == 0:
                break
            za = z[idx]
            xa = za if upper else np.exp(za)
            log_cdf, log_sf = self._log_cdf_sf(xa)
            log_pdf = self._log_density(xa)
            if upper:
                g = log_sf - log_target[idx]  # decreasing in x
                slope = -np.exp(log_pdf - log_sf)
                rising = -g
            else:
                g = log_cdf - log_target[idx]  # increasing in z
                slope = np.exp(za + log_pdf - log_cdf)
                rising = g
            lo[idx] = np.where(rising < 0, np.maximum(lo[idx], za), lo[idx])
            hi[idx] = np.where(rising > 0, np.minimum(hi[idx], za), hi[idx])
            with np.errstate(divide="ignore", invalid="ignore"):  # both branches are evaluated
                new = za - g / slope
                inside = np.isfinite(new) & (new > lo[idx]) & (new < hi[idx])
                both = np.isfinite(lo[idx]) & np.isfinite(hi[idx])
                fallback = np.where(both, 0.5 * (lo[idx] + hi[idx]),
                                    np.where(np.isfinite(hi[idx]),
                                             (0.5 * za if upper else za - 2.0),
                                             (2.0 * za if upper else za + 2.0)))
            new = np.where(inside, new, fallback)
            tol = 1e-15 * (np.abs(za) if upper else 1.0)
            finished = (np.abs(new - za) <= tol) | (g == 0.0)
            z[idx] = new
            active[idx[finished]] = False
        return z if upper else np.exp(z)


# the fast-path overrides keep scipy's documentation of the methods they stand in for
for _name in ("cdf", "sf", "logcdf", "logsf", "pdf", "logpdf", "ppf", "isf"):
    getattr(WeightedChiSquare, _name).__doc__ = getattr(stats.rv_continuous, _name).__doc__
del _name
