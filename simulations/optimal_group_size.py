"""Fixed-budget training sweeps over the group size: universality of G* (C17, C18, Table 2).

Config -> simulate -> tidy CSV -> figure.

For each prompt-sampling variant (``iid``: the theory's model; ``finite``: batches sweep a finite
set of 8 prompts, the rest without replacement), budget ``N`` and group size ``G`` (``B = N/G``),
Algorithm 1 (GRPO, constant rate 0.5) runs ``R`` times on
:func:`ustat_rl.policies.examples.conflicting_prompts_bandit`, where prompts pull shared parameters
apart so ``c1 > 0`` at the optimum and ``G* = 1 + sqrt(c3'/c1)`` is about 18. For several ``n``
the script records the last-iterate gap and the *tail mean* (mean gap over the last 25% of the
iterations; same expectation near stationarity, less noise) and compares the empirical argmin
over ``G`` (bootstrap interval) with the predictions: ``G*`` at ``theta_0``, at ``theta*``, along
the path and in the paper's sup form, and the argmin of the linearised stationary gap computed
from the exact noise covariance (which also accounts for the finite prompt set).

Each finished (variant, N, G) cell is appended to ``<out>/group_size_runs.csv`` at once; a rerun
skips finished cells. Outputs: ``group_size_summary.csv`` (mean, se, prediction per cell and n),
``group_size_argmin.csv`` (argmin, bootstrap interval, predictions), ``group_size_table.csv``
(Table 2 analogue: rows N, columns G) and the figure ``group_size.png``.

Usage::

    python simulations/optimal_group_size.py           # full sweep (tens of minutes)
    python simulations/optimal_group_size.py --quick   # seconds
    python simulations/optimal_group_size.py --workers 2          # cells on a local pool of 2 processes
    python simulations/optimal_group_size.py --ray-address auto   # cells on a running Ray cluster

Full runs write to ``results/optimal_group_size``, quick runs to
``results/quick/optimal_group_size``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.interface.plotting_training import (
    new_figure,
    plot_gap_vs_group_size,
    save_figure,
    star_legend,
)
from ustat_rl.policies.examples import conflicting_prompts_bandit
from ustat_rl.runs.script_args import check_script_args, seed_type
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.runs.sweeps import (
    CellFailedError,
    add_executor_arguments,
    default_output,
    executor_from_args,
    order_rows,
    run_cells,
    write_csv_atomic,
    write_run_record,
)
from ustat_rl.seeding import child_rng, child_seed
from ustat_rl.theory import admissible_group_sizes
from ustat_rl.training.group_size import (
    SweepCell,
    bootstrap_argmin,
    linearised_gap,
    predicted_group_sizes,
    sweep_cell,
)

BETA = 0.5
VARIANTS = {"iid": "iid", "finite": "stratified"}
FULL = dict(budgets=(128, 256, 512), sizes=(2, 4, 8, 16, 32, 64, 128), n_iters=(50, 100, 200),
            n_runs=300)
QUICK = dict(budgets=(64,), sizes=(4, 16, 64), n_iters=(10, 20), n_runs=20)
DEFAULT_SEED = 2603
N_BOOT, LEVEL = 2000, 0.95
STAR_COLUMNS = {"at_start": "g_star_start", "at_optimum": "g_star_optimum",
                "path_average": "g_star_path", "sup_form": "g_star_sup"}
RUN_COLUMNS = ["variant", "budget", "group_size", "batch_size", "n", "run", "gap_last",
               "gap_tail", "seed", "n_runs"]


@dataclass(frozen=True)
class Config:
    budgets: tuple = option(FULL["budgets"], flag="--budgets", type=int, nargs="+",
                            quick=QUICK["budgets"], help="budgets N = BG")
    sizes: tuple = FULL["sizes"]
    n_iters: tuple = FULL["n_iters"]
    n_runs: int = option(FULL["n_runs"], flag="--runs", type=int, quick=QUICK["n_runs"],
                         help="runs per cell")
    seed: int = option(DEFAULT_SEED, flag="--seed", type=seed_type,
                       help="root seed, an integer >= 0")
    variants: tuple = tuple(VARIANTS)

    def cells(self) -> list[tuple[int, int, int, str, int, int]]:
        """``(variant index, budget index, size index, variant, N, G)`` with ``G | N``."""
        return [(v, a, j, var, n, g) for v, var in enumerate(self.variants)
                for a, n in enumerate(self.budgets)
                for j, g in enumerate(self.sizes) if g <= n and n % g == 0]


def _bandit(variant: str):
    bandit = conflicting_prompts_bandit(prompt_sampling=VARIANTS[variant])
    return bandit, bandit.optimum()


def simulate_cell(config: Config, key, variant: str, budget: int, group_size: int,
                  progress: bool) -> pd.DataFrame:
    bandit, opt = _bandit(variant)
    seed = child_seed(config.seed, *key)
    cell = sweep_cell(bandit, opt, SweepCell(budget, group_size, config.n_iters, BETA),
                      config.n_runs, seed, progress=progress)
    n_iters = cell.n_iters
    rows = pd.DataFrame({
        "variant": variant, "budget": budget, "group_size": group_size,
        "batch_size": budget // group_size, "n": np.tile(n_iters, config.n_runs),
        "run": np.repeat(np.arange(config.n_runs), n_iters.size),
        "gap_last": cell.last.ravel(), "gap_tail": cell.tail.ravel()})
    rows["seed"], rows["n_runs"] = config.seed, config.n_runs
    return rows[RUN_COLUMNS]


def summarise(runs: pd.DataFrame, config: Config):
    """Per-cell means with predictions, argmins with bootstrap intervals, the Table 2 analogue."""
    rng = child_rng(config.seed, 999)
    summary, argmins = [], []
    for variant in config.variants:
        bandit, opt = _bandit(variant)
        pred = predicted_group_sizes(bandit, opt, bandit.ref_theta, BETA, 200)
        for budget in config.budgets:
            grid = [g for g in config.sizes if g <= budget and budget % g == 0]
            lin = {g: linearised_gap(bandit, opt, BETA, g, budget // g) for g in grid}
            for n in config.n_iters:
                block = runs[(runs["variant"] == variant) & (runs["budget"] == budget)
                             & (runs["n"] == n)]
                if sorted(block["group_size"].unique()) != grid:
                    continue  # cell not finished
                samples = [block.loc[block["group_size"] == g, "gap_tail"].to_numpy() for g in grid]
                for g, s in zip(grid, samples):
                    last = block.loc[block["group_size"] == g, "gap_last"].to_numpy()
                    summary.append({"variant": variant, "budget": budget, "n": n, "group_size": g,
                                    "gap_tail": s.mean(), "se_tail": s.std(ddof=1) / np.sqrt(s.size),
                                    "gap_last": last.mean(),
                                    "se_last": last.std(ddof=1) / np.sqrt(last.size),
                                    "gap_linearised": lin[g]})
                arg, (lo, hi), freq = bootstrap_argmin(grid, samples, N_BOOT, rng, LEVEL)
                argmins.append({"variant": variant, "budget": budget, "n": n, "argmin": arg,
                                "boot_low": lo, "boot_high": hi,
                                "boot_share_argmin": float(freq[grid.index(arg)]),
                                "linearised_argmin": min(lin, key=lin.get),
                                "g_star_start": pred.at_start, "g_star_optimum": pred.at_optimum,
                                "g_star_path": pred.path_average, "g_star_sup": pred.sup_form})
    summary, argmins = pd.DataFrame(summary), pd.DataFrame(argmins)
    table = (summary[summary["n"] == max(config.n_iters)]
             .pivot_table(index=["variant", "budget"], columns="group_size", values="gap_tail")
             if len(summary) else pd.DataFrame())
    return summary, argmins, table


def make_figure(summary: pd.DataFrame, argmins: pd.DataFrame, config: Config, out: Path):
    fig, axes = new_figure(len(config.variants), len(config.n_iters), panel_size=(3.6, 3.0),
                           sharex=True)
    colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a"]
    for i, variant in enumerate(config.variants):
        for j, n in enumerate(config.n_iters):
            ax = axes[i, j]
            for k, budget in enumerate(config.budgets):
                cell = summary[(summary["variant"] == variant) & (summary["budget"] == budget)
                               & (summary["n"] == n)].sort_values("group_size")
                if cell.empty:
                    continue
                half = 1.96 * cell["se_tail"]
                plot_gap_vs_group_size(ax, cell["group_size"], cell["gap_tail"],
                                       (cell["gap_tail"] - half, cell["gap_tail"] + half),
                                       predicted=cell["gap_linearised"], label=f"N = {budget}",
                                       color=colors[k % len(colors)])
            row = argmins[argmins["variant"] == variant]
            if len(row):
                stars = {k: float(row.iloc[0][col]) for k, col in STAR_COLUMNS.items()}
                for value in stars.values():
                    ax.axvline(value, color="0.6", lw=0.6)
                if j == 0:
                    star_legend(ax, stars, loc="upper center")
            ax.set_title(f"{variant} prompts, n = {n}", fontsize=9)
            if i == 0 and j == len(config.n_iters) - 1:
                ax.legend(fontsize=7, frameon=False)
    fig.suptitle("Final gap vs G at fixed budget (tail mean, 95% CI; dotted: linearised "
                 "prediction; grey: predicted G*)", fontsize=9)
    return save_figure(fig, out / "group_size")




def read_done(path: Path, config: Config) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=RUN_COLUMNS)
    done = pd.read_csv(path)
    if (list(done.columns) != RUN_COLUMNS or set(done["seed"]) - {config.seed}
            or set(done["n_runs"]) - {config.n_runs} or set(done["n"]) - set(config.n_iters)):
        raise SystemExit(f"{path} was written with another seed, runs or n; use --overwrite or "
                         "another --out")
    return done


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{len(QUICK['budgets'])} budget, {len(QUICK['sizes'])} sizes, "
                        f"{QUICK['n_runs']} runs")
    add_config_arguments(parser, Config, ["n_runs", "budgets", "seed"])
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default results/optimal_group_size, with --quick "
                             "results/quick/optimal_group_size)")
    parser.add_argument("--overwrite", action="store_true", help="discard finished cells")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument("--no-figure", action="store_true", help="write the CSVs only")
    add_executor_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    if args.runs < 2:
        parser.error(f"--runs must be an integer >= 2, got {args.runs}")
    if min(args.budgets) < 2:
        parser.error("--budgets must be integers >= 2")
    sizes = (QUICK if args.quick else FULL)["sizes"]
    for budget in args.budgets:
        usable = sorted(set(admissible_group_sizes(budget).tolist()) & set(sizes))
        if not usable:
            parser.error(f"--budgets: no group size of this sweep divides N = {budget} "
                         f"(sizes {list(sizes)}; G must divide N = B G), so there is nothing "
                         "to compare; choose budgets with at least one such divisor, e.g. 64")
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "optimal_group_size")
    check_script_args(parser, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    base = QUICK if args.quick else FULL
    config = Config(tuple(args.budgets), tuple(base["sizes"]), tuple(base["n_iters"]),
                    args.runs, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / "group_size_runs.csv"
    if args.overwrite and runs_path.exists():
        runs_path.unlink()
    runs = read_done(runs_path, config)
    done = set(zip(runs["variant"], runs["budget"], runs["group_size"]))
    todo = [c for c in config.cells() if (c[3], c[4], c[5]) not in done]
    order = [(c[3], c[4], c[5]) for c in config.cells()]
    key_columns = ["variant", "budget", "group_size"]

    def save(key, new):  # in this process, as each cell finishes
        nonlocal runs
        runs = new if runs.empty else pd.concat([runs, new], ignore_index=True)
        write_csv_atomic(order_rows(runs, key_columns, order), runs_path)

    cells = {(variant, budget, g): (config, (v, budget, g), variant, budget, g, False)
             for v, _a, _j, variant, budget, g in todo}
    try:
        run_cells(cells, simulate_cell, save, args.executor, progress=not args.no_progress,
                  n_skipped=len(config.cells()) - len(todo))
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    runs = order_rows(runs, key_columns, order)
    summary, argmins, table = summarise(runs, config)
    write_csv_atomic(summary, out / "group_size_summary.csv")
    write_csv_atomic(argmins, out / "group_size_argmin.csv")
    write_csv_atomic(table, out / "group_size_table.csv", index=True)
    figures = [] if args.no_figure else make_figure(summary, argmins, config, out)
    write_run_record(out, "optimal_group_size", __file__, argv, seed=args.seed,
                     seconds=time.perf_counter() - start,
                     files=[runs_path, out / "group_size_summary.csv", out / "group_size_argmin.csv",
                            out / "group_size_table.csv", *figures])
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(argmins.to_string(index=False, float_format="%.3g"))
        print(table.to_string(float_format="%.3g"))
    print(f"{len(todo)} cell(s) simulated, {len(config.cells()) - len(todo)} already done; "
          f"{', '.join(map(str, figures))} ({time.perf_counter() - start:.1f} s)")
    return argmins


if __name__ == "__main__":
    main(sys.argv[1:])
