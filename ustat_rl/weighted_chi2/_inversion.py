"""Numerical inversion of the Laplace transform on a contour through the saddlepoint.

For ``Q = sum_d w_d chi2_{m_d}`` the cumulant generating function is
``kappa(t) = -1/2 sum_d m_d log(1 - 2 w_d t)`` for ``t < t_* = 1 / (2 max w)``, and (Gil-Pelaez in
Laplace form, with ``phi(t) = kappa(t) - t x``)::

    sf(x)  =  1/(2 pi i) int_{c - i inf}^{c + i inf} exp(phi(t)) / t dt,   0 < c < t_*
    cdf(x) = -1/(2 pi i) int_{c - i inf}^{c + i inf} exp(phi(t)) / t dt,   c < 0
    pdf(x) =  1/(2 pi i) int_{c - i inf}^{c + i inf} exp(phi(t)) dt,       c < t_*.

The vertical line is bent into the hyperbola ``t(u) = t_c + A (cosh u - 1) + i B sinh u``
(u real), which crosses the real axis at the saddlepoint ``t_c`` (``kappa'(t_c) = x``), leaves it
vertically along the steepest-descent direction (``B = 1 / sqrt(kappa''(t_c))``), matches the
curvature of the steepest-descent path (``A = kappa''' / (3 kappa''^2)``) and opens to the right
around the branch cut ``[t_*, inf)``. On it ``exp(phi)`` is nearly real near the saddle and
decays doubly exponentially in ``u``, so the trapezoid rule in ``u`` converges geometrically and
the result, computed as ``exp(phi(t_c))`` times a sum with little cancellation, keeps its
relative accuracy far into both tails (the side, cdf or sf, is the one whose saddlepoint lies on
the correct side of the pole at 0). Near the mean the saddlepoint approaches the pole, so the
crossing is moved to ``-SHIFT / sd`` and the cdf is computed there. The saddlepoint search and
the quadrature are compiled per point (``_contour`` says how the integrand avoids a logarithm
per weight and node).

References
----------
Rice, S. O. (1980). Distribution of quadratic forms in normal random variables: evaluation by
numerical integration. SIAM J. Sci. Stat. Comput. 1, 438-448.
Weideman, J. A. C. and Trefethen, L. N. (2007). Parabolic and hyperbolic contours for computing
the Bromwich integral. Math. Comp. 76, 1341-1356.
Barndorff-Nielsen, O. E. (1990). Approximate interval probabilities. JRSS B 52, 485-496.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.special import ndtri

from ._small_x import log1mexp, small_log_cdf, small_log_pdf

#: Trapezoid step and truncation in the contour parameter u (87 nodes); see the module notes.
STEP = 0.075
U_MAX = 6.5
#: Crossing point for x near the mean, in units of 1 / sd: far enough from the pole at t = 0.
SHIFT = 1.5


class Inversion:
    """Saddlepoint, contour inversion and saddlepoint approximation for distinct weights."""

    def __init__(self, weights: np.ndarray, mult: np.ndarray):
        self.weights = weights  # (D,) increasing
        self.mult = mult  # (D,)
        self.K = float(mult.sum())
        self.w_max = float(weights[-1])
        self.t_star = 0.5 / self.w_max
        self.ratio = weights / self.w_max  # (D,) in (0, 1]
        self.mean = float(np.sum(mult * weights))
        self.sd = self.w_max * float(np.sqrt(2.0 * np.sum(mult * self.ratio**2)))  # no overflow
        # saddlepoints in (-shift_cdf, shift_sf) are too close to the pole at t = 0: there the
        # cdf is computed on a contour crossing at -shift_cdf instead
        self.shift_sf = min(SHIFT / self.sd, 0.5 * self.t_star)
        self.shift_cdf = SHIFT / self.sd
        u = np.arange(0.0, U_MAX + STEP / 2, STEP)  # (N,)
        self.nodes = np.stack([np.cosh(u) - 1.0, np.cosh(u), np.sinh(u)])  # (3, N)
        # what the kernels read: (4, D) weights, multiplicities (as counts too) and 1 - w / w_max
        self.table = np.stack([weights, mult, 1.0 - self.ratio, np.round(mult)])
        self.params = np.array([self.K, self.t_star, self.shift_sf, self.shift_cdf, STEP,
                                self.mean, self.sd])

    def log_cdf_sf(self, x, small: np.ndarray):
        """(log cdf, log sf) at ``x`` >= 0 (n,), from whichever the contour gives."""
        return _inversion_log_cdf_sf(x, small, self.table, self.params, self.nodes)

    def log_pdf(self, x, small: np.ndarray):
        """log pdf at ``x`` >= 0 (n,)."""
        return _inversion_log_pdf(x, small, self.table, self.params, self.nodes)

    def approx_ppf(self, p, upper: bool):
        """Barndorff-Nielsen r* approximation inverted for ``x`` (only a starting point for ppf).

        Solves ``Phi(r*) = p`` (or ``Phi(-r*) = p`` when ``upper``) by bisection on
        ``log s``, where ``r* = r + log(v / r) / r``, ``r = sign(t) sqrt(2 (t x - kappa))`` and
        ``v = t sqrt(kappa'')`` at the saddlepoint ``t``.
        """
        target = -ndtri(p) if upper else ndtri(p)  # (n,) target for r*
        return _approx_ppf(np.asarray(target, dtype=float), self.table, self.params)


# ---------------------------------------------------------------------------------------------
# Compiled kernels, one point at a time. ``table`` rows: w_d, m_d, 1 - w_d / w_max, m_d (counts);
# ``params``: K, t_*, shift_sf, shift_cdf, STEP, mean, sd; ``nodes`` rows: cosh u - 1, cosh u,
# sinh u. With t = t_* - 1/s, ``1 - 2 w_d t = (1 - w_d / w_max) + 2 w_d / s`` has no cancellation.
# ---------------------------------------------------------------------------------------------

_TWO_PI = 2.0 * math.pi
#: Renormalise the running product of contour factors past 2^400 (an exact power of two), so
#: that |P|^2 cannot overflow.
_BIG = 2.0**400
_INV_BIG = 2.0**-400
_LOG_BIG = 400.0 * math.log(2.0)


@numba.njit(cache=True, error_model="numpy")
def _saddle(x, table, K):
    """``s = 1 / (t_* - t)`` solving ``kappa'(t) = x`` for x > 0.

    ``kappa'`` is increasing and concave in ``s``, and ``kappa' <= K s / 2``, so Newton's
    method from ``s = 2x / K`` approaches the root monotonically from the left.
    """
    s = 2.0 * x / K
    for _ in range(200):
        f = 0.0
        fp = 0.0
        for d in range(table.shape[1]):
            w, m = table[0, d], table[1, d]
            den = table[2, d] * s + 2.0 * w
            f += m * w * s / den
            fp += m * 2.0 * w * w / (den * den)
        step = -(f - x) / fp
        done = abs(step) <= 1e-15 * abs(s)
        s += step
        if done:
            break
    return s


@numba.njit(cache=True, error_model="numpy")
def _contour(x, density, table, params, nodes, scratch):
    """(log value, is_sf) at one x > 0: log cdf or log sf (whichever the contour gives), or log pdf.

    The integrand needs ``exp(phi(t) - phi(t_c)) = prod_d (1 - r_d delta)^(-m_d / 2) exp(-delta x)``
    with ``r_d = 2 w_d / base_d``. Every factor has its argument in (-pi, 0] on the contour
    (``Im delta >= 0``), so the product ``P`` is accumulated in complex arithmetic, its argument
    unwrapped by counting the crossings of the negative real axis, and ``P^(-1/2)`` taken as
    ``(-1)^crossings conj(sqrt(P)) / |P|`` with the principal square root: no logarithm per
    weight. The loop runs over weights outside and nodes inside, so the nodes' independent
    products pipeline. ``scratch`` is (7, max(N, D)) workspace.
    """
    D, N = table.shape[1], nodes.shape[1]
    t_star, shift_sf, shift_cdf, step = params[1], params[2], params[3], params[4]
    s = _saddle(x, table, params[0])
    t_hat = t_star - 1.0 / s
    t_c = t_hat
    r = scratch[6, :D]  # (D,) base_d, then r_d
    if not density and t_hat < shift_sf:
        t_c = min(t_hat, -shift_cdf)
        for d in range(D):
            r[d] = 1.0 - 2.0 * table[0, d] * t_c
    else:
        for d in range(D):
            r[d] = table[2, d] + 2.0 * table[0, d] / s
    k0, k2, k3 = 0.0, 0.0, 0.0
    for d in range(D):
        w, m, b = table[0, d], table[1, d], r[d]
        k0 -= 0.5 * m * math.log(b)
        k2 += m * 2.0 * w * w / (b * b)
        k3 += m * 8.0 * w * w * w / (b * b * b)
        r[d] = 2.0 * w / b
    B = 1.0 / math.sqrt(k2)
    A = k3 / (3.0 * k2 * k2)
    # (N,) each: P = p_re + i p_im (times _BIG^n_scaled), delta = d_re + i d_im
    p_re, p_im, crossings, n_scaled = scratch[0, :N], scratch[1, :N], scratch[2, :N], scratch[3, :N]
    d_re, d_im = scratch[4, :N], scratch[5, :N]
    for j in range(N):
        p_re[j], p_im[j], crossings[j], n_scaled[j] = 1.0, 0.0, 0.0, 0.0
        d_re[j], d_im[j] = A * nodes[0, j], B * nodes[2, j]  # A (cosh u - 1), B sinh u
    for d in range(D):
        rd = r[d]
        for _ in range(int(table[3, d])):
            for j in range(N):
                f_re = 1.0 - rd * d_re[j]
                f_im = -rd * d_im[j]
                a, b = p_re[j], p_im[j]
                n_re = a * f_re - b * f_im
                n_im = a * f_im + b * f_re
                # turned clockwise past -pi (Im P = 0 counts as the upper half-plane)
                crossings[j] += 1.0 if (b < 0.0 and n_im >= 0.0) else 0.0
                big = abs(n_re) + abs(n_im) > _BIG
                p_re[j] = n_re * _INV_BIG if big else n_re
                p_im[j] = n_im * _INV_BIG if big else n_im
                n_scaled[j] += 1.0 if big else 0.0
    total = 0.0
    for j in range(N):
        a, b = p_re[j], p_im[j]
        modulus = math.sqrt(a * a + b * b)
        if a >= 0.0:  # principal square root of P, without cancellation
            sq_re = math.sqrt(0.5 * (modulus + a))
            sq_im = b / (2.0 * sq_re)
        else:
            sq_im = math.sqrt(0.5 * (modulus - a))
            sq_im = sq_im if b >= 0.0 else -sq_im
            sq_re = b / (2.0 * sq_im)
        mag = math.exp(-d_re[j] * x - 0.5 * _LOG_BIG * n_scaled[j]) / modulus
        if int(crossings[j]) % 2 == 1:
            mag = -mag
        c, sn = math.cos(d_im[j] * x), math.sin(d_im[j] * x)
        # P^(-1/2) exp(-delta x) = mag (sq_re - i sq_im) (c - i sn)
        e_re = mag * (sq_re * c - sq_im * sn)
        e_im = -mag * (sq_re * sn + sq_im * c)
        dt_re, dt_im = A * nodes[2, j], B * nodes[1, j]  # dt/du = A sinh u + i B cosh u
        i_re = e_re * dt_re - e_im * dt_im
        i_im = e_re * dt_im + e_im * dt_re
        if not density:  # divide by t = t_c + delta
            q_re, q_im = t_c + d_re[j], d_im[j]
            i_im = (i_im * q_re - i_re * q_im) / (q_re * q_re + q_im * q_im)
        if math.isfinite(i_im):  # overflowed or underflowed nodes carry no weight
            total += 0.5 * i_im if j == 0 else i_im
    total *= step / math.pi
    is_sf = t_c > 0.0
    if not density and not is_sf:
        total = -total
    if total > 0.0:
        return k0 - t_c * x + math.log(total), is_sf
    return (-np.inf if total == 0.0 else np.nan), is_sf


@numba.njit(cache=True, error_model="numpy")
def _inversion_log_cdf_sf(x, small, table, params, nodes):
    log_cdf = np.empty(x.size)  # (n,)
    log_sf = np.empty(x.size)
    scratch = np.empty((7, max(nodes.shape[1], table.shape[1])))
    for j in range(x.size):
        if x[j] <= small[0]:
            log_cdf[j] = small_log_cdf(x[j], small)
            log_sf[j] = log1mexp(log_cdf[j])
        elif x[j] == np.inf:
            log_cdf[j], log_sf[j] = 0.0, -np.inf
        else:
            value, is_sf = _contour(x[j], False, table, params, nodes, scratch)
            if is_sf:
                log_sf[j], log_cdf[j] = value, log1mexp(value)
            else:
                log_cdf[j], log_sf[j] = value, log1mexp(value)
    return log_cdf, log_sf


@numba.njit(cache=True, error_model="numpy")
def _inversion_log_pdf(x, small, table, params, nodes):
    out = np.empty(x.size)  # (n,)
    scratch = np.empty((7, max(nodes.shape[1], table.shape[1])))
    for j in range(x.size):
        if x[j] <= small[0]:
            out[j] = small_log_pdf(x[j], small)
        elif x[j] == np.inf:
            out[j] = -np.inf
        else:
            out[j] = _contour(x[j], True, table, params, nodes, scratch)[0]
    return out


@numba.njit(cache=True, error_model="numpy")
def _kappa_at(s, table, params):
    """(t, kappa'(t), kappa(t), kappa''(t)) at ``t = t_* - 1/s``."""
    k1, k0, k2 = 0.0, 0.0, 0.0
    for d in range(table.shape[1]):
        w, m = table[0, d], table[1, d]
        b = table[2, d] + 2.0 * w / s
        k1 += m * w / b
        k0 -= 0.5 * m * math.log(b)
        k2 += m * 2.0 * w * w / (b * b)
    return params[1] - 1.0 / s, k1, k0, k2


@numba.njit(cache=True, error_model="numpy")
def _r_star(s, table, params):
    t, x, k0, k2 = _kappa_at(s, table, params)
    r = math.copysign(math.sqrt(max(2.0 * (t * x - k0), 0.0)), t) if t != 0.0 else 0.0
    r_star = r + math.log(t * math.sqrt(k2) / r) / r
    if abs(r) < 1e-4 or not math.isfinite(r_star):  # at the mean: the normal limit
        return (x - params[5]) / params[6]
    return r_star


@numba.njit(cache=True, error_model="numpy")
def _approx_ppf(target, table, params):
    out = np.empty(target.size)  # (n,)
    for j in range(target.size):
        lo = math.log(1e-12 * params[1])
        hi = math.log(1e12 * params[1])
        for _ in range(90):
            mid = 0.5 * (lo + hi)
            if _r_star(math.exp(mid), table, params) < target[j]:
                lo = mid
            else:
                hi = mid
        out[j] = _kappa_at(math.exp(0.5 * (lo + hi)), table, params)[1]
    return out
