"""High-precision references (mpmath) for checking ``WeightedChiSquare``; slow, for tests only.

Three independent routes:

* :func:`reference_probability`: the Bromwich/Gil-Pelaez integral at ``dps`` digits along a
  hyperbola through the saddlepoint, by the trapezoid rule with an error estimate from step
  halving (or by ``mp.quad``); the contour is drawn with different constants (width 1.3x,
  crossing shift 2 / sd, 321 nodes to u = 8) from the double-precision engine, so a
  discretisation or truncation fault in the engine does not reappear here.
* :func:`reference_chi2`: one distinct weight, from mpmath's regularised incomplete gamma.
* :func:`reference_two_weights`: K = 2, integrating the closed-form density
  ``f(x) = exp(-x (1/w1 + 1/w2) / 4) I_0(x (1/w1 - 1/w2) / 4) / (2 sqrt(w1 w2))``.
"""

from __future__ import annotations

import math

KINDS = ("cdf", "sf", "pdf")


def _mp():
    import mpmath  # imported lazily: only the tests and the verify check need it

    return mpmath


def reference_probability(weights, x, kind: str, dps: int = 25, method: str = "trapezoid"):
    """cdf, sf or pdf of ``sum_k w_k chi2_1`` at ``x`` > 0 as an mpmath number.

    Returns ``(value, error_estimate)`` with the error estimate relative to the value.
    ``method="trapezoid"`` (default, fast) halves the step once and reports the difference;
    ``method="quad"`` uses ``mp.quad`` (adaptive tanh-sinh) and its own error estimate.
    """
    mp = _mp()
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
    with mp.workdps(dps):
        w = [mp.mpf(float(v)) for v in weights]
        x = mp.mpf(float(x))
        t_star = 1 / (2 * max(w))
        sd = mp.sqrt(2 * sum(v**2 for v in w))

        def kappa1(s):  # kappa'(t) at t = t_star - 1/s
            return sum(v * s / ((1 - 2 * v * t_star) * s + 2 * v) for v in w)

        lo, hi = mp.mpf(10) ** -40, mp.mpf(10) ** 40  # bisection on log s: slow but sure
        for _ in range(600):
            mid = mp.sqrt(lo * hi)
            if kappa1(mid) > x:
                hi = mid
            else:
                lo = mid
            if hi / lo - 1 < mp.mpf(10) ** (-dps):
                break
        t_hat = t_star - 1 / mp.sqrt(lo * hi)
        shift = min(2 / sd, 2 * t_star / 5)
        if kind == "pdf":
            t_c, side = t_hat, "pdf"
        elif t_hat >= shift:
            t_c, side = t_hat, "sf"
        else:
            t_c, side = min(t_hat, -shift), "cdf"
        base = [1 - 2 * v * t_c for v in w]
        k2 = sum(2 * v**2 / b**2 for v, b in zip(w, base))
        k3 = sum(8 * v**3 / b**3 for v, b in zip(w, base))
        B = mp.mpf(13) / 10 / mp.sqrt(k2)
        A = k3 / (3 * k2**2) * (B * B * k2)
        phi_c = -sum(mp.log(b) for b in base) / 2 - t_c * x

        def phi_minus_phi_c(delta):
            # -1/2 sum log(1 - 2 w delta / b) - delta x, with one complex log: the product's
            # branch is fixed by the sum of the factors' arguments taken in double precision
            factors = [1 - 2 * v * delta / b for v, b in zip(w, base)]
            prod = mp.fprod(factors)
            phase = sum(math.atan2(float(f.imag), float(f.real)) for f in factors)
            log_prod = mp.log(prod)
            turns = round((phase - float(log_prod.imag)) / (2 * math.pi))
            return -(log_prod + 2j * mp.pi * turns) / 2 - delta * x

        def integrand(u):
            delta = A * (mp.cosh(u) - 1) + 1j * B * mp.sinh(u)
            dt = A * mp.sinh(u) + 1j * B * mp.cosh(u)
            val = mp.exp(phi_minus_phi_c(delta)) * dt
            if side != "pdf":
                val = val / (t_c + delta)
            return mp.im(val)

        if method == "quad":
            cuts = [0, mp.mpf(1) / 2, 1, 2, 3, 4, 5, 6, 8]
            total, err = mp.quad(integrand, cuts, error=True)
        else:
            # trapezoid rule on [0, U], halving the step until two sums agree to 1e-16:
            # it converges geometrically in 1/h for this analytic, doubly exponentially
            # decaying integrand, so the last difference over-estimates the error
            upper = mp.mpf(8)
            n = 64
            values = [integrand(upper * j / n) for j in range(n + 1)]
            total = upper / n * (values[0] / 2 + mp.fsum(values[1:-1]) + values[-1] / 2)
            err = mp.inf
            while n < 4096:
                new = [integrand(upper * (2 * j + 1) / (2 * n)) for j in range(n)]
                merged = [None] * (2 * n + 1)
                merged[::2], merged[1::2] = values, new
                values, n = merged, 2 * n
                refined = upper / n * (values[0] / 2 + mp.fsum(values[1:-1]) + values[-1] / 2)
                err = abs(refined - total) + abs(values[-1]) * upper
                total = refined
                if err <= abs(total) * mp.mpf(10) ** -16:
                    break
        value = mp.exp(phi_c) * total / mp.pi
        err = abs(mp.exp(phi_c) * err / mp.pi)
        if side == "cdf":
            value = -value
        if side == "pdf" or side == kind:
            return +value, err / abs(value)
        other = 1 - value
        return other, err / abs(other)


def reference_chi2(dof: int, scale: float, x, kind: str, dps: int = 30):
    """cdf, sf or pdf of ``scale * chi2_dof`` at ``x`` (mpmath)."""
    mp = _mp()
    with mp.workdps(dps):
        a, z = mp.mpf(dof) / 2, mp.mpf(float(x)) / (2 * mp.mpf(float(scale)))
        if kind == "cdf":
            return mp.gammainc(a, 0, z, regularized=True)
        if kind == "sf":
            return mp.gammainc(a, z, mp.inf, regularized=True)
        return mp.exp(-z + (a - 1) * mp.log(z) - mp.loggamma(a)) / (2 * mp.mpf(float(scale)))


def reference_two_weights(w1: float, w2: float, x, kind: str, dps: int = 30):
    """cdf, sf or pdf of ``w1 chi2_1 + w2 chi2_1`` at ``x`` by integrating the Bessel density."""
    mp = _mp()
    with mp.workdps(dps):
        a, b, x = mp.mpf(float(w1)), mp.mpf(float(w2)), mp.mpf(float(x))
        lam_sum, lam_diff = (1 / a + 1 / b) / 4, abs(1 / a - 1 / b) / 4

        def density(u):
            # exp(-c u) I_0(d u) written with the exponentially scaled Bessel function
            return (mp.exp(-(lam_sum - lam_diff) * u) * mp.besseli(0, lam_diff * u)
                    * mp.exp(-lam_diff * u) / (2 * mp.sqrt(a * b)))

        if kind == "pdf":
            return density(x)
        if kind == "cdf":
            return mp.quad(density, [0, x / 2, x])
        span = max(a, b)
        return mp.quad(density, [x, x + span, x + 10 * span, x + 100 * span, mp.inf])
