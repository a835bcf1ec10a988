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
crossing is moved to ``-SHIFT / sd`` and the cdf is computed there.

References
----------
Rice, S. O. (1980). Distribution of quadratic forms in normal random variables: evaluation by
numerical integration. SIAM J. Sci. Stat. Comput. 1, 438-448.
Weideman, J. A. C. and Trefethen, L. N. (2007). Parabolic and hyperbolic contours for computing
the Bromwich integral. Math. Comp. 76, 1341-1356.
Barndorff-Nielsen, O. E. (1990). Approximate interval probabilities. JRSS B 52, 485-496.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

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
        self.sd = float(np.sqrt(2.0 * np.sum(mult * weights**2)))
        # saddlepoints in (-shift_cdf, shift_sf) are too close to the pole at t = 0: there the
        # cdf is computed on a contour crossing at -shift_cdf instead
        self.shift_sf = min(SHIFT / self.sd, 0.5 * self.t_star)
        self.shift_cdf = SHIFT / self.sd
        self.nodes = np.arange(0.0, U_MAX + STEP / 2, STEP)  # (N,)

    # ------------------------------------------------------------------ saddlepoint
    def saddle(self, x):
        """``s = 1 / (t_* - t)`` solving ``kappa'(t) = x`` for x > 0 (n,).

        ``kappa'`` is increasing and concave in ``s``, and ``kappa' <= K s / 2``, so Newton's
        method from ``s = 2x / K`` approaches the root monotonically from the left.
        """
        w, m, r = self.weights[None, :], self.mult[None, :], self.ratio[None, :]
        s = 2.0 * x / self.K
        active = np.ones(x.shape, bool)
        for _ in range(200):
            sa = s[active][:, None]
            den = (1.0 - r) * sa + 2.0 * w  # (n, D)
            f = np.sum(m * w * sa / den, axis=1) - x[active]
            fp = np.sum(m * 2.0 * w**2 / den**2, axis=1)
            step = -f / fp
            s[active] = sa[:, 0] + step
            done = np.abs(step) <= 1e-15 * np.abs(sa[:, 0])
            idx = np.nonzero(active)[0]
            active[idx[done]] = False
            if not active.any():
                break
        return s

    def _base(self, s):
        """``1 - 2 w_d t`` at ``t = t_* - 1/s`` without cancellation (n, D)."""
        return (1.0 - self.ratio)[None, :] + 2.0 * self.weights[None, :] / s[:, None]

    def _kappa_terms(self, base):
        m, w = self.mult[None, :], self.weights[None, :]
        k0 = -0.5 * np.sum(m * np.log(base), axis=1)
        k2 = np.sum(m * 2.0 * w**2 / base**2, axis=1)
        k3 = np.sum(m * 8.0 * w**3 / base**3, axis=1)
        return k0, k2, k3

    # ------------------------------------------------------------------ inversion
    def log_prob(self, x, density: bool = False):
        """Return ``(log value, is_sf)``: log cdf or log sf (whichever the contour gives), or log pdf.

        ``x``: (n,) positive. With ``density=True`` the value is the log pdf and ``is_sf`` is
        meaningless.
        """
        s = self.saddle(x)
        t_hat = self.t_star - 1.0 / s
        if density:
            t_c = t_hat
            base = self._base(s)
        else:
            central = t_hat < self.shift_sf
            t_c = np.where(central, np.minimum(t_hat, -self.shift_cdf), t_hat)
            base = np.where(central[:, None], 1.0 - 2.0 * self.weights[None, :] * t_c[:, None],
                            self._base(s))
        k0, k2, k3 = self._kappa_terms(base)
        B = 1.0 / np.sqrt(k2)  # (n,)
        A = k3 / (3.0 * k2**2)
        u = self.nodes
        delta = A[:, None] * (np.cosh(u) - 1.0)[None, :] + 1j * B[:, None] * np.sinh(u)[None, :]
        dt = A[:, None] * np.sinh(u)[None, :] + 1j * B[:, None] * np.cosh(u)[None, :]  # (n, N)
        # phi(t) - phi(t_c) = -1/2 sum_d m_d log(1 - 2 w_d delta / base_d) - delta x
        ratio = (2.0 * self.weights)[None, :] / base  # (n, D)
        logs = np.zeros(delta.shape, complex)
        for d in range(self.weights.size):
            logs += self.mult[d] * np.log1p(-ratio[:, d, None] * delta)
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            integrand = np.exp(-0.5 * logs - delta * x[:, None]) * dt
            if not density:
                integrand = integrand / (t_c[:, None] + delta)
        im = np.nan_to_num(integrand.imag, nan=0.0, posinf=0.0, neginf=0.0)
        total = (0.5 * im[:, 0] + im[:, 1:].sum(axis=1)) * STEP / np.pi
        is_sf = t_c > 0
        if not density:
            total = np.where(is_sf, total, -total)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = k0 - t_c * x + np.log(total)
        return value, is_sf

    # ------------------------------------------------------------------ saddlepoint approximation
    def approx_ppf(self, p, upper: bool):
        """Barndorff-Nielsen r* approximation inverted for ``x`` (only a starting point for ppf).

        Solves ``Phi(r*) = p`` (or ``Phi(-r*) = p`` when ``upper``) by bisection on
        ``log s``, where ``r* = r + log(v / r) / r``, ``r = sign(t) sqrt(2 (t x - kappa))`` and
        ``v = t sqrt(kappa'')`` at the saddlepoint ``t``.
        """
        target = -ndtri(p) if upper else ndtri(p)  # (n,) target for r*
        lo = np.full(p.shape, np.log(1e-12 * self.t_star))
        hi = np.full(p.shape, np.log(1e12 * self.t_star))
        for _ in range(90):
            mid = 0.5 * (lo + hi)
            r_star = self._r_star(np.exp(mid))
            go_up = r_star < target
            lo = np.where(go_up, mid, lo)
            hi = np.where(go_up, hi, mid)
        return self._kappa1(np.exp(0.5 * (lo + hi)))

    def _kappa1(self, s):
        base = self._base(s)
        return np.sum(self.mult[None, :] * self.weights[None, :] / base, axis=1)

    def _r_star(self, s):
        base = self._base(s)
        t = self.t_star - 1.0 / s
        x = np.sum(self.mult[None, :] * self.weights[None, :] / base, axis=1)
        k0, k2, _ = self._kappa_terms(base)
        r = np.sign(t) * np.sqrt(np.maximum(2.0 * (t * x - k0), 0.0))
        v = t * np.sqrt(k2)
        with np.errstate(divide="ignore", invalid="ignore"):
            r_star = r + np.log(v / r) / r
        near = np.abs(r) < 1e-4  # at the mean: the normal approximation is the limit
        z = (x - self.mean) / self.sd
        return np.where(near | ~np.isfinite(r_star), z, r_star)
