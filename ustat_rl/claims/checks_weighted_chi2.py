"""Check for claim C20.dist: the weighted chi-square law used to test Theorem 8 is exact.

Theorem 8's limit law (docs/theory.md C20) is ``sum_k w_k chi2_1``; every comparison of a simulated
``n * gap`` with it relies on ``WeightedChiSquare``. This check re-derives the law's tails from a
25-digit mpmath reference (exact-numeric) and tests samples built directly as
``sum_k w_k Z_k^2`` against it (monte-carlo), so an engine regression fails ``ustat-rl verify``.
"""

from __future__ import annotations

import numpy as np

from ..weighted_chi2 import WeightedChiSquare, goodness_of_fit_tests
from ..weighted_chi2._reference import reference_probability
from .registry import check_close, check_exact, check_true, register

STATEMENT = ("WeightedChiSquare sf/cdf match a high-precision reference to 1e-10 relative down "
             "to 1e-15, and samples of sum_k w_k chi2_1 pass KS/CvM/AD")
SOURCE = "docs/theory.md C20 (Theorem 8 limit law); Ruben (1962), Farebrother (1984, AS 204)"
METHOD = ("25-digit Gil-Pelaez contour reference at p = 1e-15 (both tails) and the centre; "
          "KS/CvM/AD and moment checks on samples of sum w_k Z_k^2 drawn from normals")

#: Relative accuracy required of cdf and sf.
RTOL = 1e-10
#: A GoF p-value below this fails the check: false-failure rate 1e-4 per test under the null.
P_MIN = 1e-4
#: Weight vectors: a narrow one (Ruben's series), a wide one (inversion fallback), and
#: (full mode) Theorem 8's usual size.
PANELS_QUICK = (np.array([2.0, 0.5, 0.125]), 0.37 * np.geomspace(1.0, 1000.0, 6))
PANELS_FULL = PANELS_QUICK + (0.37 * np.geomspace(1.0, 100.0, 20),)


@register("C20.dist", STATEMENT, SOURCE, METHOD)
def check(ctx):
    checks = []
    panels = PANELS_QUICK if ctx.quick else PANELS_FULL
    for weights in panels:
        dist = WeightedChiSquare(weights)
        x_low, x_mid = dist.ppf([1e-15, 0.4])
        x_high = float(dist.isf(1e-15))
        points = [(float(x_low), "cdf"), (float(x_mid), "cdf"), (x_high, "sf")]
        ref = [float(reference_probability(weights, x, kind)[0]) for x, kind in points]
        got = [float(getattr(dist, kind)(x)) for x, kind in points]
        label = f"K={weights.size}, spread {weights.max() / weights.min():.0f}"
        checks.append(check_exact(f"cdf(1e-15 quantile), cdf(0.4 quantile), sf(1e-15 upper "
                                  f"quantile) vs 25-digit reference, {label}", ref, got,
                                  rtol=RTOL, atol=0.0))
    n = ctx.reps(4000, 40000)
    for k, weights in enumerate(panels):
        rng = np.random.default_rng(ctx.seed_for("C20.dist", 900, k))
        z = rng.standard_normal((n, weights.size))  # (n, K)
        sample = (z**2) @ weights  # (n,) sum_k w_k Z_k^2, independent of dist.rvs
        dist = WeightedChiSquare(weights)
        res = goodness_of_fit_tests(sample, dist)
        label = f"K={weights.size}, n={n}"
        for name in ("ks", "cvm", "ad"):
            p = getattr(res, f"{name}_pvalue")
            checks.append(check_true(f"{name.upper()} p-value of sum w Z^2 against the law, {label}",
                                     p > P_MIN, measured=p, evidence="monte-carlo",
                                     note=f"passes if p > {P_MIN:g} (false-failure rate {P_MIN:g})"))
        k2, k4 = 2 * np.sum(weights**2), 48 * np.sum(weights**4)
        checks.append(check_close(f"sample mean vs sum w, {label}", float(dist.mean()),
                                  float(sample.mean()), float(np.sqrt(k2 / n))))
        checks.append(check_close(f"sample variance vs 2 sum w^2, {label}", float(dist.var()),
                                  float(sample.var(ddof=1)), float(np.sqrt((k4 + 2 * k2**2) / n))))
    return checks
