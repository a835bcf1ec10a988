"""Speed and accuracy of ``WeightedChiSquare`` against named baselines (docs/theory.md C20).

Baselines, all run in the same process:

* **Imhof + scipy quad**: Imhof's (1961) real integral
  ``sf(x) = 1/2 + (1/pi) int_0^inf sin(theta(u)) / (u rho(u)) du`` with
  ``theta(u) = 1/2 sum arctan(w u) - x u / 2`` and ``rho(u) = prod (1 + w^2 u^2)^(1/4)``,
  integrated by ``scipy.integrate.quad`` (the usual double-precision route).
* **momentchi2** (``hbe``, ``lpb4``, ``wf``, ``sw``): the moment-matching approximations that
  Python users reach for (Bodenham and Adams 2016), if the package is importable; it is not a
  dependency of this project, so it is skipped when absent.

Reported: set-up time, time per scalar ``sf`` call, time for a vector of points, and the
relative error of each method in the upper tail (against ``WeightedChiSquare``, whose own error
against a 30-digit mpmath reference is measured in tests/test_weighted_chi2.py).

Usage: ``python benchmarks/bench_weighted_chi2.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy import integrate

from ustat_rl.weighted_chi2 import WeightedChiSquare


def imhof_sf(weights, x):
    """Imhof's integral for P(Q > x) with scipy's adaptive quadrature (baseline)."""
    w = np.asarray(weights, dtype=float)

    def integrand(u):
        theta = 0.5 * np.sum(np.arctan(w * u)) - 0.5 * x * u
        rho = np.prod((1.0 + (w * u) ** 2) ** 0.25)
        return np.sin(theta) / (u * rho)

    value, _ = integrate.quad(integrand, 0.0, np.inf, limit=500, epsabs=1e-15, epsrel=1e-12)
    return 0.5 + value / np.pi


def _time(fn, reps):
    best = np.inf
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _momentchi2():
    try:
        import momentchi2
    except ImportError:
        return None
    return momentchi2


def run(quick: bool) -> list[str]:
    reps = 3 if quick else 7
    n_points = 1_000 if quick else 10_000
    lines = []
    cases = [("K=20, spread 100 (Ruben series)", np.geomspace(1.0, 100.0, 20)),
             ("K=50, spread 1000 (inversion fallback)", np.geomspace(1.0, 1000.0, 50))]
    if quick:
        cases = cases[:1]
    for label, weights in cases:
        start = time.perf_counter()
        dist = WeightedChiSquare(weights)
        probe = dist.isf([0.5, 1e-6, 1e-15])  # forces the coefficient set-up
        setup = time.perf_counter() - start
        scalar = {p: _time(lambda d=dist, x=x: d.sf(x), 5 * reps)
                  for p, x in zip((0.5, 1e-6, 1e-15), probe)}
        xs = dist.ppf(np.linspace(1e-12, 1 - 1e-12, n_points))
        vector = _time(lambda d=dist, v=xs: d.sf(v), reps)
        lines.append(f"### {label}")
        lines.append("")
        lines.append(f"- set-up (construct + first ppf/isf calls): {setup * 1e3:.0f} ms")
        lines.append("- scalar `sf` call: " + ", ".join(
            f"{t * 1e3:.2f} ms at sf={p:g}" for p, t in scalar.items()))
        lines.append(f"- `sf` on {n_points} points spanning [1e-12, 1 - 1e-12]: {vector:.3f} s "
                     f"({vector / n_points * 1e6:.0f} us/point)")
        lines.append("")
        lines.append("| method | time per scalar sf | rel. error at sf=1e-3 | at 1e-6 | at 1e-9 "
                     "| at 1e-12 | at 1e-15 |")
        lines.append("|---|---|---|---|---|---|---|")
        levels = (1e-3, 1e-6, 1e-9, 1e-12, 1e-15)
        xq = dist.isf(np.array(levels))
        truth = dist.sf(xq)
        ours_t = _time(lambda d=dist, v=xq: [d.sf(x) for x in v], reps) / len(xq)
        lines.append("| WeightedChiSquare | " + f"{ours_t * 1e3:.2f} ms (ratio 1) | "
                     + " | ".join("(reference)" for _ in levels) + " |")
        start = time.perf_counter()
        with warnings.catch_warnings():
            # quad hits its subdivision limit in the far tail: that is the baseline's behaviour
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            imhof = [imhof_sf(weights, x) for x in xq]
        imhof_t = (time.perf_counter() - start) / len(xq)
        errs = [abs(v / t - 1.0) for v, t in zip(imhof, truth)]
        lines.append(f"| Imhof + scipy quad | {imhof_t * 1e3:.2f} ms "
                     f"(ratio {imhof_t / ours_t:.1f}) | " + " | ".join(f"{e:.1e}" for e in errs)
                     + " |")
        mc2 = _momentchi2()
        if mc2 is None:
            lines.append("| momentchi2 | not installed | | | | | |")
        else:
            for name in ("hbe", "lpb4", "wf", "sw"):
                fn = getattr(mc2, name)
                try:
                    t = _time(lambda fn=fn, w=weights, v=xq: [fn(list(w), float(x)) for x in v],
                              max(1, reps // 2)) / len(xq)
                    errs = [abs((1.0 - fn(list(weights), float(x))) / tr - 1.0)
                            for x, tr in zip(xq, truth)]
                    lines.append(f"| momentchi2.{name} | {t * 1e3:.2f} ms (ratio {t / ours_t:.1f}) | "
                                 + " | ".join(f"{e:.1e}" for e in errs) + " |")
                except Exception as exc:  # a baseline failing is a result to report, not a crash
                    lines.append(f"| momentchi2.{name} | failed: {type(exc).__name__} | | | | | |")
        lines.append("")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and points")
    args = parser.parse_args(argv)
    print("\n".join(run(args.quick)))


if __name__ == "__main__":
    main()
