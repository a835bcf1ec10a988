"""Ruben's mixture series for a weighted sum of chi-square(1) variables (positive terms only).

With ``beta = min(w)`` and ``gamma_d = 1 - beta / w_d`` in [0, 1), Ruben (1962) showed that
``Q = sum_k w_k Z_k^2`` is the mixture ``beta * chi2_{K + 2J}`` where the mixing law of ``J`` has
probability generating function ``A(z) = a_0 prod_d (1 - gamma_d z)^(-m_d / 2)`` (``m_d`` is the
multiplicity of the distinct weight ``w_d``). Its coefficients follow the positive recurrence of
Farebrother (1984, AS 204)::

    a_0 = prod_d (beta / w_d)^(m_d / 2),   a_j = (1 / 2j) sum_{k=1}^{j} G_k a_{j-k},
    G_k = sum_d m_d gamma_d^k.

Writing ``g_i(y) = exp(-y/2) (y/2)^(K/2+i) / Gamma(K/2+i+1)`` (a Poisson-type weight) and using
``F_{m+2} = F_m - g``, every probability becomes a sum of positive terms (``y = x / beta``)::

    cdf(x) = sum_{i>=0} g_i(y) C_i,               C_i = P(J <= i)
    sf(x)  = S_K(y) + sum_{i>=0} g_i(y) T_i,      T_i = P(J > i)
    pdf(x) = (1 / 2 beta) sum_{i>=-1} g_i(y) a_{i+1}

so the lower tail, the upper tail and the density all keep full relative accuracy. The sums are
taken over a window around their peak; a point whose window is not closed (edge terms above
``exp(-EDGE_LOG)`` of the peak) or that needs coefficients beyond the budget is reported as not
handled, and the caller falls back to numerical inversion.

References
----------
Ruben, H. (1962). Probability content of regions under spherical normal distributions IV.
Ann. Math. Statist. 33, 542-570.
Farebrother, R. W. (1984). Algorithm AS 204. Appl. Statist. 33, 332-339.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaincc, gammaln

#: Largest number of mixing coefficients computed (the set-up costs O(J_CAP^2 / 2) flops).
J_CAP = 20000
#: A window is closed when its edge terms are below exp(-EDGE_LOG) = 1.6e-18 of its peak.
EDGE_LOG = 41.0
#: T_i is trusted when the truncated remainder bound is below exp(-TAIL_LOG) = 1e-18 of T_i.
TAIL_LOG = 41.5
#: Rescale the unnormalised coefficients when they exceed this (avoids overflow for large K).
_RESCALE = 1e200
_FLOOR = 1e-280


class RubenSeries:
    """Mixing coefficients and positive-term sums for distinct weights ``w`` (multiplicities ``m``)."""

    def __init__(self, weights: np.ndarray, mult: np.ndarray):
        self.weights = weights  # (D,) distinct weights, increasing
        self.mult = mult  # (D,) multiplicities
        self.K = float(mult.sum())
        self.beta = float(weights[0])
        self.gamma = 1.0 - self.beta / weights  # (D,) in [0, 1)
        self.gamma_max = float(self.gamma.max())
        self.log_a0 = 0.5 * float(np.sum(mult * np.log(self.beta / weights)))
        self._b = np.ones(1)  # unnormalised coefficients, a_j = exp(log_a0 + _log_scale) * _b[j]
        self._log_scale = 0.0
        self._exhausted = self.gamma_max == 0.0  # one distinct weight: a = (1, 0, 0, ...)
        self._refresh()

    # ------------------------------------------------------------------ coefficients
    def _extend(self, n_terms: int) -> None:
        """Compute coefficients up to index ``n_terms - 1`` (capped at J_CAP)."""
        n_terms = min(int(n_terms), J_CAP)
        old = self._b.size
        if n_terms <= old or self._exhausted:
            return
        k = np.arange(1, n_terms)
        G = np.zeros(n_terms)  # G[k] = sum_d m_d gamma_d^k
        for g, m in zip(self.gamma, self.mult):
            if g > 0.0:
                G[1:] += m * np.exp(k * np.log(g))
        G[G < 1e-280] = 0.0
        G_rev = G[::-1].copy()  # G_rev[n_terms - 1 - k] = G[k]
        b = np.zeros(n_terms)
        b[:old] = self._b
        scale = self._log_scale
        last = n_terms
        for j in range(old, n_terms):
            b[j] = np.dot(G_rev[n_terms - 1 - j:n_terms - 1], b[:j]) / (2 * j)  # (G_j..G_1).(a_0..a_{j-1})
            if b[j] > _RESCALE:
                b[: j + 1] /= _RESCALE
                b[: j + 1][b[: j + 1] < _FLOOR] = 0.0  # subnormal operands slow the dot 100-fold
                scale += np.log(_RESCALE)
            elif b[j] < _FLOOR:
                # sum(a) = 1 forces max(b) exp(log_a0 + scale) <= 1, so a_j < 1e-280: the
                # series is numerically complete and later terms would only be subnormal
                last = j
                self._exhausted = True
                break
        self._b = b[:last]
        self._log_scale = scale
        self._refresh()

    def _refresh(self) -> None:
        b = self._b
        offset = self.log_a0 + self._log_scale
        with np.errstate(divide="ignore"):
            self.log_a = np.log(b) + offset  # (J,)
            self.log_C = np.log(np.cumsum(b)) + offset  # (J,) C_i = sum_{j<=i} a_j
            tail = np.cumsum(b[::-1])[::-1]
            self.log_T = np.append(np.log(tail[1:]), -np.inf) + offset  # (J,) T_i = sum_{j>i} a_j
        n = b.size
        self.first_valid = int(np.argmax(b > 0))  # earlier coefficients were flushed to zero
        # log g_i(y) = LS[i + 1] - bd0(K/2 + i, y/2): Loader's split of the Poisson weight, which
        # avoids the cancellation between y/2 and (K/2+i) log(y/2) - lgamma(K/2+i+1)
        self.LS = _log_stirling_part(self.K / 2.0 + np.arange(-1, n + 1))
        if self._exhausted:
            self.t_valid = n - 1
        else:
            bound = self._log_tail_bound(n - 1)
            ok = np.nonzero(self.log_T >= bound + TAIL_LOG)[0]
            self.t_valid = int(ok[-1]) if ok.size else -1

    def _log_tail_bound(self, J: int) -> float:
        """Chernoff bound on log P(J_mix > J): min over 1 < z < 1/gamma_max of log A(z) - (J+1) log z."""
        lo, hi = 0.0, -np.log(self.gamma_max)
        best = np.inf
        for _ in range(80):  # golden-section search on log z (the objective is convex)
            m1 = hi - 0.618 * (hi - lo)
            m2 = lo + 0.618 * (hi - lo)
            f1, f2 = self._log_pgf(m1) - (J + 1) * m1, self._log_pgf(m2) - (J + 1) * m2
            best = min(best, f1, f2)
            if f1 < f2:
                hi = m2
            else:
                lo = m1
        return best

    def _log_pgf(self, log_z: float) -> float:
        z = np.exp(log_z)
        return self.log_a0 - 0.5 * float(np.sum(self.mult * np.log1p(-self.gamma * z)))

    # ------------------------------------------------------------------ sums
    def _log_window_sum(self, y, log_v, offset, last, first=None):
        """log sum_i exp(log g_i(y) + log_v[i + offset]) for i in [-offset, last], and an ok mask.

        ``y``: (n,) positive. The peak is found by bisection on the increment of the log term,
        the sum is taken over ``peak +/- L`` with L about 10 standard deviations of the
        Poisson weight, and ``ok`` says whether both window edges are negligible.
        """
        half = self.K / 2.0
        n_v = log_v.size
        first = -offset if first is None else max(-offset, first)
        last = min(last, n_v - 1 - offset)
        if last < first:
            return np.full(y.shape, -np.inf), np.zeros(y.shape, bool)
        ly = np.log(y / 2.0)
        slope = np.diff(log_v)
        slope = np.where(np.isfinite(slope), slope, -1e3)  # -inf - finite: the series has ended
        lo = np.full(y.shape, first)
        hi = np.full(y.shape, last)
        for _ in range(int(np.ceil(np.log2(last - first + 2))) + 1):
            mid = (lo + hi) // 2
            inc = ly - np.log(half + mid + 1.0) + slope[np.clip(mid + offset, 0, max(n_v - 2, 0))]
            up = (inc > 0) & (mid < last)
            lo = np.where(up, mid + 1, lo)
            hi = np.where(up, hi, mid)
        peak = lo  # (n,)
        half_width = np.ceil(10.0 * np.sqrt(half + np.maximum(peak, 0) + 1.0) + 15.0).astype(int)
        out = np.empty(y.shape)
        ok = np.empty(y.shape, bool)
        # group points by window size (powers of two) to keep the (n, W) blocks small
        bucket = np.ceil(np.log2(half_width)).astype(int)
        for b in np.unique(bucket):
            sel = np.nonzero(bucket == b)[0]
            L = 2**b
            idx = peak[sel, None] - L + np.arange(2 * L + 1)[None, :]  # (n_b, W)
            inside = (idx >= first) & (idx <= last)
            idc = np.clip(idx, first, last)
            ell = (self.LS[idc + 1] - _bd0(half + idc, y[sel, None] / 2.0)
                   + log_v[idc + offset])
            ell = np.where(inside, ell, -np.inf)
            top = ell.max(axis=1)
            finite = np.isfinite(top)
            safe_top = np.where(finite, top, 0.0)
            with np.errstate(invalid="ignore"):
                total = np.sum(np.exp(ell - safe_top[:, None]), axis=1)
            out[sel] = np.where(finite, safe_top + np.log(total), -np.inf)
            left_closed = (idx[:, 0] < first) | (ell[:, 0] < top - EDGE_LOG)
            right_closed = (ell[:, -1] < top - EDGE_LOG) & (idx[:, -1] <= last)
            right_closed |= (idx[:, -1] > last) & self._exhausted
            ok[sel] = finite & left_closed & right_closed
        return out, ok

    def _needed(self, y, for_sf: bool):
        """Coefficients needed to close the window at ``y`` (n,) (and to trust T_i there)."""
        lam = y / 2.0
        need = lam + 12.0 * np.sqrt(lam + 1.0) + 60.0
        return need + self._tail_terms() if for_sf else need

    def _prepare(self, x, for_sf: bool):
        """``y = x / beta`` and the mask of points within the coefficient budget."""
        y = x / self.beta
        need = self._needed(y, for_sf)
        feasible = need <= J_CAP
        if feasible.any() and not self._exhausted:
            wanted = int(need[feasible].max()) + 1
            if wanted > self._b.size:
                self._extend(max(wanted, min(2 * self._b.size, J_CAP)))
        return y, feasible

    def _evaluate(self, x, log_v, offset, last, first, for_sf):
        y, feasible = self._prepare(x, for_sf)
        val = np.full(y.shape, np.nan)
        ok = np.zeros(y.shape, bool)
        if feasible.any():
            v, o = self._log_window_sum(y[feasible], log_v(), offset, last(), first())
            val[feasible], ok[feasible] = v, o
        return y, val, ok

    def log_cdf(self, x):
        """(log cdf, ok) at ``x`` > 0 (n,)."""
        _, val, ok = self._evaluate(x, lambda: self.log_C, 0, lambda: self.log_C.size - 1,
                                    lambda: self.first_valid, False)
        return val, ok

    def log_sf(self, x):
        """(log sf, ok) at ``x`` > 0 (n,)."""
        y, series, ok = self._evaluate(x, lambda: self.log_T, 0, lambda: self.t_valid,
                                       lambda: None, True)
        with np.errstate(divide="ignore"):
            head = np.log(gammaincc(self.K / 2.0, y / 2.0))  # S_K(y)
        # where S_K(y) underflows, trust the sum only if it dominates the Chernoff bound on S_K
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(y > self.K, -0.5 * (y - self.K - self.K * np.log(y / self.K)), 0.0)
        ok &= (head > -700.0) | (series > bound + 50.0)
        series = np.where(ok, series, -np.inf)  # unusable points: keep the arithmetic quiet
        return np.logaddexp(series, head), ok

    def log_pdf(self, x):
        """(log pdf, ok) at ``x`` > 0 (n,)."""
        _, val, ok = self._evaluate(x, lambda: self.log_a, 1, lambda: self.log_a.size - 2,
                                    lambda: self.first_valid - 1, False)
        return val - np.log(2.0 * self.beta), ok

    def _tail_terms(self) -> int:
        if self.gamma_max == 0:
            return 0
        return int((TAIL_LOG + 10.0) / -np.log(self.gamma_max))


def _log_stirling_part(n):
    """-log(n!) + n log n - n for n >= 0 (so log pmf = this - bd0); exact at n = 0."""
    n = np.asarray(n, dtype=float)
    big = n >= 30.0
    nb = np.where(big, n, 30.0)
    # Stirling series for log(n!) - [(n + 1/2) log n - n + log(2 pi) / 2], error < 1e-17 at n >= 30
    stirlerr = 1 / (12 * nb) - 1 / (360 * nb**3) + 1 / (1260 * nb**5) - 1 / (1680 * nb**7)
    large = -0.5 * np.log(2 * np.pi * nb) - stirlerr
    with np.errstate(divide="ignore", invalid="ignore"):
        small = -gammaln(n + 1.0) + np.where(n > 0, n * np.log(np.where(n > 0, n, 1.0)), 0.0) - n
    return np.where(big, large, small)


def _bd0(n, lam):
    """n log(n / lam) + lam - n >= 0 without cancellation (Loader 2000), broadcasting."""
    n, lam = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(lam, dtype=float))
    d = n - lam
    v = d / (n + lam)
    near = np.abs(v) < 0.1
    vs = np.where(near, v, 0.0)
    v2 = vs * vs
    term = 2.0 * n * vs
    series = d * vs
    power = term
    for j in range(1, 14):  # |v| < 0.1: the j-th term is below 1e-26 of the first
        power = power * v2
        series = series + power / (2 * j + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.where(n > 0, n * np.log(np.where(n > 0, n, 1.0) / lam), 0.0) + lam - n
    return np.where(near, series, direct)
