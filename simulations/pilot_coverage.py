"""Coverage of the pilot's intervals and accuracy of its advice at the pilot sizes people have (C32).

Config -> simulate -> tidy CSV -> table.

*Coverage*: for each pilot size (prompts x samples: 16 x 8, 32 x 8, 64 x 16, 128 x 16) and score
kind (full scores, or a k = 32 Gaussian projection), independent pilots of
:func:`ustat_rl.policies.examples.interior_optimum_bandit` (the bandit of C31, C32 and notebook 05; exact
``c1 = 0.00291``, ``G* = 8.26``) each give nominal 90% intervals
(:func:`ustat_rl.pilot.pilot_intervals`); the table counts how many cover the exact ``c1``,
``c2``, ``c3'`` and ``G*``. Two intervals for ``G*`` are compared: Fieller's (the one the package
reports) and the delta method's ``rho_hat +- t se`` mapped through ``G* = 1 + rho^(-1/2)`` (the
previous one). The ``_boot`` columns are the studentised bootstrap over prompts of
:mod:`ustat_rl.pilot.bootstrap` (499 resamples; 199 with ``--quick``) on the same pilots, the
alternative the study weighs. ``unbounded`` counts pilots whose ``G*`` interval has no upper end.

*Advice*: pilots of notebook 05's recipe (64 x 16, k = 32) at budgets 256 and 480; the table counts
how often the recommended ``G`` (:func:`ustat_rl.pilot.report.gstar_report`) has an exact
fixed-budget MSE within 10% of the exact optimum over the divisors of ``N``, and the same for the
argmin at the point estimates.

Outputs ``pilot_coverage.csv`` and ``pilot_advice.csv`` under ``--out`` and both tables printed
as Markdown (the ones in docs/theory.md, C32). ``--figures DIR`` also writes the ``ustat-rl gstar
--plot`` figures of two pilots at N = 256 (the docs' pair): notebook 05's (64 x 16, k = 32,
seed 2026), whose interval for ``c1`` reaches 0, and one of 2048 x 16 (k = 32, seed 2026).

Usage::

    python simulations/pilot_coverage.py           # 1000 pilots per cell (a few minutes)
    python simulations/pilot_coverage.py --quick   # 30 pilots per cell (seconds)
    python simulations/pilot_coverage.py --quick --figures docs/figures   # and the docs' figures
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.pilot.bootstrap import bootstrap_t_intervals
from ustat_rl.pilot.report import gstar_report
from ustat_rl.pilot.uncertainty import pilot_intervals, student_quantile
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.runs.records import count_table
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import SketchSpec, drawn_spec
from ustat_rl.theory import admissible_group_sizes
from ustat_rl.theory.group_size import gstar_of_ratio

#: (prompts, samples per prompt) of the coverage table.
SIZES = ((16, 8), (32, 8), (64, 16), (128, 16))
#: Score kinds: full scores (None) and a k = 32 Gaussian projection.
SKETCHES = (None, 32)
#: Budgets of notebook 05's advice.
BUDGETS = (256, 480)
LEVEL = 0.9
FULL_PILOTS, QUICK_PILOTS = 1000, 30  # pilots per cell
DEFAULT_SEED = 0


def delta_gstar(out) -> tuple[float, float]:
    """The delta-method interval for ``G*``: ``rho_hat +- t se`` mapped through ``G*(rho)``."""
    r = out.ratio
    k = out.n_columns if out.sketch_included else None
    t = student_quantile(out.level, r.prompt_std_error**2, r.sketch_std_error**2, out.n_prompts, k)
    return gstar_of_ratio(r.estimate + t * r.std_error), gstar_of_ratio(r.estimate - t * r.std_error)


#: The bootstrap's columns.
BOOT = ("c1_boot", "c2_boot", "c3_boot", "gstar_boot")


def coverage_cell(bandit, truth, n_prompts, group_size, sketch_dim, n_pilots, rng,
                  n_boot=499) -> dict:
    """Counts of covering intervals over ``n_pilots`` independent pilots of one size."""
    keys = ("c1", "c2", "c3", "gstar_fieller", "gstar_delta", *BOOT, "unbounded")
    count = dict.fromkeys(keys, 0)
    for _ in range(n_pilots):
        pilot = bandit_pilot(bandit, n_prompts, group_size, rng, drawn_spec(sketch_dim, rng))
        out = pilot_intervals(pilot, LEVEL)
        boot = bootstrap_t_intervals(pilot, LEVEL, n_boot, rng)
        for name in BOOT:
            low, high = boot[name.removesuffix("_boot")]
            count[name] += low <= truth[name.removesuffix("_boot")] <= high
        for name in ("c1", "c2", "c3"):
            count[name] += getattr(out, name).covers(truth[name])
        count["gstar_fieller"] += out.optimal_group_size.covers(truth["gstar"])
        low, high = delta_gstar(out)
        count["gstar_delta"] += low <= truth["gstar"] <= high
        count["unbounded"] += not out.bounded
    return {"prompts": n_prompts, "samples": group_size,
            "scores": "full" if sketch_dim is None else f"k={sketch_dim}", "pilots": n_pilots,
            **{key: int(value) for key, value in count.items()}}


def advice_cell(bandit, exact, budget, n_pilots, rng) -> dict:
    """How often the advice's exact MSE is within 10% of the exact optimum's (notebook 05)."""
    sizes = admissible_group_sizes(budget).astype(float)
    optimum = float(np.min(exact.fixed_budget_mse(sizes, budget)))
    good = point = unbounded = 0
    for _ in range(n_pilots):
        report = gstar_report(bandit_pilot(bandit, 64, 16, rng, drawn_spec(32, rng)), budget)
        good += exact.fixed_budget_mse(float(report.recommended_group_size), budget) <= 1.1 * optimum
        point += exact.fixed_budget_mse(float(report.best_group_size), budget) <= 1.1 * optimum
        unbounded += not report.bounded
    return {"budget": budget, "pilots": n_pilots, "advice_within_10pct": int(good),
            "point_argmin_within_10pct": int(point), "unbounded": int(unbounded)}


def write_figures(folder: Path, bandit) -> list[Path]:
    """The ``--plot`` figures of a pilot that cannot bound ``G*`` and of one that can (N = 256)."""
    from ustat_rl.interface.plotting_pilot import plot_gstar_report

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    # notebook 05's two pilots (R's seeds are the ones their streams drew before pilots took a
    # SketchSpec)
    for name, n_prompts, seed in (("gstar_unbounded", 64, 1395062587),
                                  ("gstar_bounded", 2048, 1846120509)):
        pilot = bandit_pilot(bandit, n_prompts, 16, np.random.default_rng(2026),
                             SketchSpec(32, seed=seed))
        fig = plot_gstar_report(gstar_report(pilot, 256))
        fig.savefig(folder / f"{name}.png", dpi=110)
        paths.append(folder / f"{name}.png")
    return paths


@dataclass(frozen=True)
class Config:
    """The options that set what a run computes (full-run values; ``--quick`` pilots apart)."""

    n_pilots: int = option(FULL_PILOTS, flag="--pilots", type=int, quick=QUICK_PILOTS,
                           help=f"pilots per cell (default {FULL_PILOTS})")
    seed: int = option(DEFAULT_SEED, flag="--seed", type=int,
                       help=f"root seed (default {DEFAULT_SEED})")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PILOTS} pilots per cell (seconds)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--figures", type=Path, default=None,
                        help="also write the docs' two gstar figures to this folder")
    return parser


def main(argv=None) -> dict:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    n_pilots = args.pilots
    if n_pilots < 1:
        parser.error(f"--pilots must be >= 1, got {n_pilots}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    out = args.out or Path("results") / ("quick" if args.quick else "") / "pilot_coverage"
    for folder, name in ((out, "--out"), (args.figures, "--figures")):
        if folder is not None and folder.exists() and not folder.is_dir():
            parser.error(f"{name} must be a folder, got the file {str(folder)!r}")
    out.mkdir(parents=True, exist_ok=True)
    bandit = interior_optimum_bandit()
    if args.figures is not None:
        for path in write_figures(args.figures, bandit):
            print(f"wrote {path}")
    exact = bandit.scaling_constants()
    truth = {"c1": exact.c1, "c2": exact.c2, "c3": exact.c3, "gstar": exact.optimal_group_size()}
    rows = [coverage_cell(bandit, truth, P, n, k, n_pilots,
                          np.random.default_rng([args.seed, i, j]), 199 if args.quick else 499)
            for i, (P, n) in enumerate(SIZES) for j, k in enumerate(SKETCHES)]
    coverage = pd.DataFrame(rows)
    advice = pd.DataFrame([advice_cell(bandit, exact, N, n_pilots,
                                       np.random.default_rng([args.seed, 100, N]))
                           for N in BUDGETS])
    coverage.to_csv(out / "pilot_coverage.csv", index=False)
    advice.to_csv(out / "pilot_advice.csv", index=False)
    print(f"coverage of nominal {LEVEL:.0%} intervals (exact c1 = {exact.c1:.3g}, "
          f"G* = {truth['gstar']:.3g}):")
    print(count_table(coverage, ("c1", "c2", "c3", "gstar_fieller", "gstar_delta", *BOOT,
                              "unbounded")))
    print("\nadvice at notebook 05's recipe (64 x 16, k = 32):")
    print(count_table(advice, ("advice_within_10pct", "point_argmin_within_10pct", "unbounded")))
    return {"coverage": coverage, "advice": advice, "out": out}


if __name__ == "__main__":
    main()
    sys.exit(0)
