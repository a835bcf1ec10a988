"""Speed and accuracy of ``WeightedChiSquare`` against named baselines (docs/theory.md C20).

Baselines, all run in the same process:

* **Pre-compilation implementation** (``benchmarks/_wchi2_baseline``): a frozen copy of the
  pure-numpy ``WeightedChiSquare`` that the numba kernels replaced, imported from this folder.
  Reported: time per scalar ``sf`` call and per point of a vectorised ``sf``, before and after,
  for K in {5, 20, 50, 200} weights ``geomspace(1, spread, K)`` with spread 100 (Ruben's series
  everywhere) and 1000 (contour inversion for the upper half), each pair timed interleaved.
* **Imhof + scipy quad**: Imhof's (1961) real integral
  ``sf(x) = 1/2 + (1/pi) int_0^inf sin(theta(u)) / (u rho(u)) du`` with
  ``theta(u) = 1/2 sum arctan(w u) - x u / 2`` and ``rho(u) = prod (1 + w^2 u^2)^(1/4)``,
  integrated by ``scipy.integrate.quad`` (the usual double-precision route).
* **momentchi2** (``hbe``, ``lpb4``, ``wf``, ``sw``): the moment-matching approximations that
  Python users reach for (Bodenham and Adams 2016), if the package is importable; it is not a
  dependency of this project, so it is skipped when absent.

Reported against the last two: set-up time, time per scalar ``sf`` call, time for a vector of
points, and the relative error of each method in the upper tail (against ``WeightedChiSquare``,
whose own error against a 25-digit mpmath reference is measured in tests/weighted_chi2/test_weighted_chi2.py).

Usage: ``python benchmarks/bench_weighted_chi2.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np
import scipy
from scipy import integrate

from ustat_rl.weighted_chi2 import WeightedChiSquare

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _wchi2_baseline import WeightedChiSquare as BaselineWeightedChiSquare  # noqa: E402

#: Before/after grid: numbers of weights and spreads max(w) / min(w).
COMPARE_K = (5, 20, 50, 200)
COMPARE_SPREADS = (100.0, 1000.0)
#: Probabilities (sf) of the scalar timing points.
SCALAR_LEVELS = (0.5, 1e-6, 1e-15)


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


def _interleaved(fn_before, fn_after, reps):
    """Best-of-``reps`` times of two callables, alternating so both see the same load."""
    before = after = np.inf
    for _ in range(reps):
        start = time.perf_counter()
        fn_before()
        before = min(before, time.perf_counter() - start)
        start = time.perf_counter()
        fn_after()
        after = min(after, time.perf_counter() - start)
    return before, after


def compare_with_baseline(quick: bool) -> list[str]:
    """Per-call and per-point ``sf`` times before (numpy) and after (numba) compilation."""
    reps = 2 if quick else 5
    n_points = 200 if quick else 2_000
    # the baseline grows Ruben's coefficients in a Python loop: seconds for K >= 50
    ks, spreads = (COMPARE_K[:2], COMPARE_SPREADS[:1]) if quick else (COMPARE_K, COMPARE_SPREADS)
    start = time.perf_counter()
    WeightedChiSquare([2.0, 0.5]).sf(np.array([1.0, 9.0]))  # loads (or compiles) the kernels
    first_call = time.perf_counter() - start
    lines = ["### Before and after compilation", "",
             f"Baseline: `benchmarks/_wchi2_baseline` (the pure-numpy implementation the kernels "
             f"replaced). Weights `geomspace(1, spread, K)`; scalar: a Python float at "
             f"sf = {', '.join(f'{p:g}' for p in SCALAR_LEVELS)} (mean of the three); vector: "
             f"{n_points} points at probabilities `linspace(1e-12, 1 - 1e-12)`; best of {reps} "
             f"interleaved rounds; set-up: construction and the first vector call (which grows "
             f"Ruben's coefficients). First kernel call in this process (disk-cache load or "
             f"compilation): {first_call:.2f} s.", "",
             "| K | spread | set-up before | after | scalar sf before | after | ratio "
             "| vector sf per point before | after | ratio | max rel. difference |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    worst_scalar, worst_vector = np.inf, 0.0
    for spread in spreads:
        for k in ks:
            weights = np.geomspace(1.0, spread, k)
            grid = WeightedChiSquare(weights)
            xs = grid.ppf(np.linspace(1e-12, 1.0 - 1e-12, n_points))  # (n,)
            scalars = [float(x) for x in grid.isf(np.array(SCALAR_LEVELS))]
            # set-up: construction and the first vector call, which grows the coefficients
            start = time.perf_counter()
            before = BaselineWeightedChiSquare(weights)
            ref = before.sf(xs)
            setup_before = time.perf_counter() - start
            start = time.perf_counter()
            after = WeightedChiSquare(weights)
            new = after.sf(xs)
            setup_after = time.perf_counter() - start
            for x in scalars:
                before.sf(x), after.sf(x)
            diff = float(np.max(np.abs(new / ref - 1.0)))
            t_scalar = [_interleaved(lambda d=before, x=x: d.sf(x), lambda d=after, x=x: d.sf(x),
                                     5 * reps) for x in scalars]
            s_before = float(np.mean([t[0] for t in t_scalar]))
            s_after = float(np.mean([t[1] for t in t_scalar]))
            v_before, v_after = _interleaved(lambda d=before, v=xs: d.sf(v),
                                             lambda d=after, v=xs: d.sf(v), reps)
            v_before, v_after = v_before / n_points, v_after / n_points
            worst_scalar = min(worst_scalar, s_before / s_after)
            if k <= 50:
                worst_vector = max(worst_vector, v_after)
            lines.append(f"| {k} | {spread:g} | {setup_before * 1e3:.0f} ms | {setup_after * 1e3:.0f} ms "
                         f"| {s_before * 1e6:.0f} us | {s_after * 1e6:.1f} us "
                         f"| {s_before / s_after:.0f}x | {v_before * 1e6:.1f} us "
                         f"| {v_after * 1e6:.2f} us | {v_before / v_after:.0f}x | {diff:.1e} |")
    lines += ["", f"Targets: scalar ratio >= 10x: {'met' if worst_scalar >= 10 else 'NOT met'} "
              f"(smallest {worst_scalar:.0f}x); vector <= 10 us per point for K <= 50: "
              f"{'met' if worst_vector <= 10e-6 else 'NOT met'} (largest "
              f"{worst_vector * 1e6:.2f} us).", ""]
    return lines


def run(quick: bool) -> list[str]:
    reps = 3 if quick else 7
    n_points = 1_000 if quick else 10_000
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
             f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
             f"numba {numba.__version__}; 1-minute load average {load:.2f} at the start.", ""]
    lines += compare_with_baseline(quick)
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
            f"{t * 1e6:.1f} us at sf={p:g}" for p, t in scalar.items()))
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
        lines.append("| WeightedChiSquare | " + f"{ours_t * 1e3:.3f} ms (ratio 1) | "
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
