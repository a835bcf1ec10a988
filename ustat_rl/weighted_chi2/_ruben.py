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
handled, and the caller falls back to numerical inversion. Once the coefficients fall below
1e-280 the series stops; it is then trusted only where the Chernoff bound on the mass it leaves
out, ``P(J >= n)``, is negligible, which excludes the upper tail beyond about 1e-260.

The coefficients come from a compiled recurrence; the sums are compiled per point: the peak
term in logs, the others relative to it through ``g_i / g_{i-1} = (y/2) / (K/2 + i)``.

References
----------
Ruben, H. (1962). Probability content of regions under spherical normal distributions IV.
Ann. Math. Statist. 33, 542-570.
Farebrother, R. W. (1984). Algorithm AS 204. Appl. Statist. 33, 332-339.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.special import gammaincc, gammaln

from ._small_x import log1mexp, small_log_cdf, small_log_pdf

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
        self._tail = self._tail_terms()
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
        b = np.zeros(n_terms)
        b[:old] = self._b
        last, self._log_scale, exhausted = _recurrence(b, G, old, self._log_scale)
        self._exhausted = self._exhausted or exhausted
        self._b = b[:last]
        self._refresh()

    def _refresh(self) -> None:
        b = self._b
        offset = self.log_a0 + self._log_scale
        cum = np.cumsum(b)  # (J,) C_i = sum_{j<=i} a_j, unnormalised
        tail = np.append(np.cumsum(b[::-1])[::-1][1:], 0.0)  # (J,) T_i = sum_{j>i} a_j
        with np.errstate(divide="ignore"):
            self.log_a = np.log(b) + offset  # (J,)
            self.log_C = np.log(cum) + offset
            self.log_T = np.log(tail) + offset
        n = b.size
        self.first_valid = int(np.argmax(b > 0))  # earlier coefficients were flushed to zero
        # Chernoff bound on the mass the coefficients leave out, P(J >= n); once the series is
        # exhausted it still limits how far into the tails the sums can be trusted
        self.log_left_out = self._log_tail_bound(n - 1)
        if self._exhausted:
            self.t_valid = n - 1
        else:
            ok = np.nonzero(self.log_T >= self.log_left_out + TAIL_LOG)[0]
            self.t_valid = int(ok[-1]) if ok.size else -1
        # what the kernels read, one row per sequence, padded to n + 2 entries
        tables = np.zeros((_N_ROWS, n + 2))  # (rows, J + 2)
        tables[[_LOG_C, _LOG_T, _LOG_A]] = -np.inf
        for row, values in ((_LOG_C, self.log_C), (_LIN_C, cum), (_LOG_T, self.log_T),
                            (_LIN_T, tail), (_LOG_A, self.log_a), (_LIN_A, b)):
            tables[row, :n] = values
        # log g_i(y) = LS[i + 1] - bd0(K/2 + i, y/2): Loader's split of the Poisson weight, which
        # avoids the cancellation between y/2 and (K/2+i) log(y/2) - lgamma(K/2+i+1)
        tables[_LS] = _log_stirling_part(self.K / 2.0 + np.arange(-1, n + 1))
        tables[_INV_N] = 1.0 / (self.K / 2.0 + np.arange(n + 2))  # g_i / g_{i-1} = (y/2) INV_N[i]
        self.tables = tables
        self.params = np.array([self.beta, self.K / 2.0, n, self.first_valid, self.t_valid,
                                float(self._exhausted), self._tail, self.K,
                                self.log_left_out])

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
    def _needed(self, y, for_sf: bool):
        """Coefficients needed to close the window at ``y`` (n,) (and to trust T_i there)."""
        lam = y / 2.0
        need = lam + 12.0 * np.sqrt(lam + 1.0) + 60.0
        return need + self._tail if for_sf else need

    def _wanted(self, x, for_sf: bool) -> int:
        """Coefficient count covering every point of ``x`` (n,) that fits in the budget."""
        if x.size == 0:
            return 0
        # `need` increases with x, so the largest x decides unless it is beyond the budget
        lam = float(x[0] if x.size == 1 else x.max()) / self.beta / 2.0
        need = lam + 12.0 * math.sqrt(lam + 1.0) + 60.0 + (self._tail if for_sf else 0)
        if not need <= J_CAP:
            if x.size == 1:
                return 0
            needs = self._needed(x / self.beta, for_sf)
            needs = needs[needs <= J_CAP]
            if needs.size == 0:
                return 0
            need = float(needs.max())
        return int(need) + 1

    def _grow(self, wanted: int) -> None:
        if wanted > self._b.size and not self._exhausted:
            self._extend(max(wanted, min(2 * self._b.size, J_CAP)))

    def log_cdf_sf(self, x, split: float, small: np.ndarray):
        """(log cdf, log sf, ok) at ``x`` >= 0 (n,).

        Points at or below ``split`` are summed on the cdf side, the others on the sf side; the
        other probability is ``log(1 - exp(.))`` of the summed one. ``small`` holds the
        ``_small_x`` constants used below their limit.
        """
        if x.size == 1:
            below = x[0] <= split
            self._grow(self._wanted(x, not below))
        else:
            below = x <= split
            self._grow(self._wanted(x[below], False))
            self._grow(self._wanted(x[~below], True))
        head = gammaincc(self.K / 2.0, (x / self.beta) / 2.0)  # (n,) S_K(y), used above split
        return _series_log_cdf_sf(x, split, head, small, self.tables, self.params)

    def log_pdf(self, x, small: np.ndarray):
        """(log pdf, ok) at ``x`` >= 0 (n,)."""
        self._grow(self._wanted(x, False))
        return _series_log_pdf(x, small, self.tables, self.params)

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


# ---------------------------------------------------------------------------------------------
# Compiled kernels: one point at a time, reading the tables built by RubenSeries._refresh
# ---------------------------------------------------------------------------------------------

_LOG_C, _LIN_C, _LOG_T, _LIN_T, _LOG_A, _LIN_A, _LS, _INV_N = range(8)
_N_ROWS = 8
#: exp(-EDGE_LOG), the closure threshold relative to the largest term of a window.
_EDGE = math.exp(-EDGE_LOG)
#: A window whose terms (relative to the peak) exceed this is not unimodal: left to inversion.
_HUGE = 1e280


@numba.njit(cache=True, error_model="numpy")
def _recurrence(b, G, start, log_scale):
    """Fill ``b[start:]`` by ``b_j = (1 / 2j) sum_{k=1}^{j} G_k b_{j-k}``, rescaling in place.

    Returns ``(count, log_scale, exhausted)``: the coefficients past ``count`` were not needed
    because ``b`` fell below ``_FLOOR`` (the series is numerically complete).
    """
    n = b.size
    G_rev = G[::-1].copy()  # G_rev[n - 1 - k] = G[k], so each sum is one contiguous dot product
    for j in range(start, n):
        b[j] = np.dot(G_rev[n - 1 - j:n - 1], b[:j]) / (2 * j)  # (G_j..G_1).(a_0..a_{j-1})
        if b[j] > _RESCALE:
            for i in range(j + 1):
                b[i] /= _RESCALE
                if b[i] < _FLOOR:
                    b[i] = 0.0  # subnormal operands slow the dot product 100-fold
            log_scale += math.log(_RESCALE)
        elif b[j] < _FLOOR:
            # sum(a) = 1 forces max(b) exp(log_a0 + scale) <= 1, so a_j < 1e-280: the series is
            # numerically complete and later terms would only be subnormal
            return j, log_scale, True
    return n, log_scale, False


@numba.njit(cache=True, error_model="numpy")
def _bd0(n, lam):
    """n log(n / lam) + lam - n >= 0 without cancellation (Loader 2000)."""
    d = n - lam
    v = d / (n + lam)
    if abs(v) < 0.1:
        v2 = v * v
        power = 2.0 * n * v
        series = d * v
        for j in range(1, 14):  # |v| < 0.1: the j-th term is below 1e-26 of the first
            power *= v2
            series += power / (2 * j + 1)
        return series
    if n > 0.0:
        return n * math.log(n / lam) + lam - n
    return lam - n


@numba.njit(cache=True, error_model="numpy")
def _window_log_sum(y, tables, log_row, lin_row, offset, first, last, n_v, half, log_beyond):
    """(log sum_i g_i(y) v[i + offset] over i in [first, last], ok) for one point ``y`` > 0.

    The peak is found by bisection on the increment of the log term; the window is
    ``peak +/- L`` with ``L`` the power of two above ``10 sd + 15`` of the Poisson weight, and
    ``ok`` says whether both edges are below ``exp(-EDGE_LOG)`` of the largest term. A window
    running past ``last`` is closed only if ``log_beyond`` (a bound on the log of everything
    past ``last``; +inf when the coefficients stop short of the series) is that small. The peak
    term is computed in logs; the others relative to it, by the ratios ``g_i / g_{i-1} =
    (y/2) / (K/2 + i)`` and the unnormalised ``v`` (one multiplication each).
    """
    first = max(-offset, first)
    last = min(last, n_v - 1 - offset)
    if last < first:
        return -np.inf, False
    log_v = tables[log_row]
    lin_v = tables[lin_row]
    lam = y / 2.0
    ly = math.log(lam)
    lo, hi = first, last
    for _ in range(int(math.ceil(math.log2(last - first + 2))) + 1):
        mid = (lo + hi) // 2
        k = min(max(mid + offset, 0), max(n_v - 2, 0))
        slope = log_v[k + 1] - log_v[k] if n_v >= 2 else -1e3
        if not math.isfinite(slope):
            slope = -1e3  # -inf - finite: the series has ended
        if ly - math.log(half + mid + 1.0) + slope > 0.0 and mid < last:
            lo = mid + 1
        else:
            hi = mid
    peak = lo
    L = 2 ** int(math.ceil(math.log2(math.ceil(10.0 * math.sqrt(half + max(peak, 0) + 1.0)
                                                  + 15.0))))
    v_peak = lin_v[peak + offset]
    log_peak = tables[_LS, peak + 1] - _bd0(half + peak, lam) + log_v[peak + offset]
    if not (v_peak > 0.0 and math.isfinite(log_peak)):
        return -np.inf, False
    inv_peak = 1.0 / v_peak
    inv_n = tables[_INV_N]
    total = 1.0
    top = 1.0
    ratio = 1.0
    term = 0.0
    for i in range(peak + 1, min(peak + L, last) + 1):
        ratio *= lam * inv_n[i]
        term = ratio * lin_v[i + offset] * inv_peak
        total += term
        top = max(top, term)
    right_edge = term
    ratio = 1.0
    term = 0.0
    for i in range(peak - 1, max(peak - L, first) - 1, -1):
        ratio *= (half + i + 1.0) / lam
        term = ratio * lin_v[i + offset] * inv_peak
        total += term
        top = max(top, term)
    if not (top < _HUGE and total < _HUGE):  # also catches NaN
        return -np.inf, False
    left_closed = peak - L < first or term < top * _EDGE
    if peak + L <= last:
        right_closed = right_edge < top * _EDGE
    else:
        right_closed = log_beyond < log_peak + math.log(top) - EDGE_LOG
    return log_peak + math.log(total), left_closed and right_closed


@numba.njit(cache=True, error_model="numpy")
def _logaddexp(a, b):
    if a == b:
        return a + math.log(2.0)
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@numba.njit(cache=True, error_model="numpy")
def _series_log_cdf_sf(x, split, head, small, tables, params):
    """(log cdf, log sf, ok) at ``x`` (n,): the cdf side at or below ``split``, else the sf side.

    Points the series cannot certify (``ok`` False) are left NaN.
    """
    beta, half, n_v = params[0], params[1], int(params[2])
    first_valid, t_valid, exhausted = int(params[3]), int(params[4]), params[5] > 0.0
    tail_terms, K, log_left_out = params[6], params[7], params[8]
    # past the last coefficient: C_i <= 1, so the cdf terms sum to at most sum_{i >= n} g_i(y);
    # T_i <= P(J >= n) there, and every T_i within the coefficients is short by at most that
    sf_beyond = log_left_out if exhausted else np.inf
    log_cdf = np.full(x.size, np.nan)  # (n,)
    log_sf = np.full(x.size, np.nan)
    ok = np.zeros(x.size, np.bool_)
    for j in range(x.size):
        if x[j] <= small[0]:
            log_cdf[j] = small_log_cdf(x[j], small)
            log_sf[j] = log1mexp(log_cdf[j])
            ok[j] = True
            continue
        if x[j] == np.inf:
            log_cdf[j], log_sf[j], ok[j] = 0.0, -np.inf, True
            continue
        y = x[j] / beta
        lam = y / 2.0
        need = lam + 12.0 * math.sqrt(lam + 1.0) + 60.0
        if x[j] <= split:
            if need > J_CAP:
                continue
            cdf_beyond = np.inf
            if exhausted and lam < half + n_v + 1.0:  # g_{i+1} / g_i <= lam / (K/2 + n + 1)
                cdf_beyond = (tables[_LS, n_v + 1] - _bd0(half + n_v, lam)
                              - math.log1p(-lam / (half + n_v + 1.0)))
            value, ok[j] = _window_log_sum(y, tables, _LOG_C, _LIN_C, 0, first_valid, n_v - 1,
                                           n_v, half, cdf_beyond)
            if ok[j]:
                log_cdf[j], log_sf[j] = value, log1mexp(value)
        else:
            if need + tail_terms > J_CAP:
                continue
            series, good = _window_log_sum(y, tables, _LOG_T, _LIN_T, 0, 0, t_valid, n_v, half,
                                           sf_beyond)
            log_head = math.log(head[j])
            # where S_K(y) underflows, trust the sum only if it dominates the Chernoff bound on S_K
            bound = -0.5 * (y - K - K * math.log(y / K)) if y > K else 0.0
            ok[j] = good and (log_head > -700.0 or series > bound + 50.0)
            if ok[j]:
                log_sf[j] = _logaddexp(series, log_head)
                log_cdf[j] = log1mexp(log_sf[j])
                # an exhausted series is short by up to 2 P(J >= n) in all: it must not matter
                if exhausted and not log_sf[j] > log_left_out + TAIL_LOG + math.log(2.0):
                    ok[j], log_cdf[j], log_sf[j] = False, np.nan, np.nan
    return log_cdf, log_sf, ok


@numba.njit(cache=True, error_model="numpy")
def _series_log_pdf(x, small, tables, params):
    """(log pdf, ok) at ``x`` (n,): ``(1 / 2 beta) sum_{i >= -1} g_i(y) a_{i+1}``."""
    beta, half, n_v = params[0], params[1], int(params[2])
    first_valid, exhausted = int(params[3]), params[5] > 0.0
    # past the last coefficient the terms g_i a_{i+1} sum to at most P(J >= n), as g_i <= 1
    beyond = params[8] if exhausted else np.inf
    log_pdf = np.full(x.size, np.nan)  # (n,)
    ok = np.zeros(x.size, np.bool_)
    for j in range(x.size):
        if x[j] <= small[0]:
            log_pdf[j], ok[j] = small_log_pdf(x[j], small), True
            continue
        if x[j] == np.inf:
            log_pdf[j], ok[j] = -np.inf, True
            continue
        y = x[j] / beta
        lam = y / 2.0
        if lam + 12.0 * math.sqrt(lam + 1.0) + 60.0 > J_CAP:
            continue
        value, ok[j] = _window_log_sum(y, tables, _LOG_A, _LIN_A, 1, first_valid - 1, n_v - 2,
                                       n_v, half, beyond)
        if ok[j]:
            log_pdf[j] = value - math.log(2.0 * beta)
    return log_pdf, ok
