"""Training at a fixed budget per iteration: allocated against uniform group sizes (C40).

Config -> simulate -> tidy CSV -> figure.

Algorithm 1 (leave-one-out GRPO, constant rate) runs ``R`` times on
:func:`ustat_rl.policies.examples.heterogeneous_score_bandit` with a KL penalty (``tau = 1``, so the
optimum is finite), spending ``N`` rollouts per iteration on its six prompts. Each allocation
(:data:`ustat_rl.training.allocation.TRAINING_ALLOCATIONS`) recomputes its group sizes at every
iterate from the exact moments there; every allocation's runs use the same seeds. The script records
the gap ``J* - J(theta_n)`` at the checkpoints and, at the last one, each allocation's mean gap and its
paired difference to uniform with a 95% interval (mean +- 1.96 se over runs; runs with the same
index share their seed), and the spread of the gap over runs (``sd``), which the gradient noise
sets while the mean gap is still dominated by the deterministic drift.

Each finished allocation (a cell of the sweep executor) is appended to ``<out>/allocation_runs.csv``;
a rerun skips finished cells. Outputs: ``allocation_summary.csv`` and
``allocation_training.png``.

Usage::

    python simulations/allocation_training.py           # full study (minutes)
    python simulations/allocation_training.py --quick   # seconds
    python simulations/allocation_training.py --workers 2

Full runs write to ``results/allocation_training``, quick runs to
``results/quick/allocation_training``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.interface.plotting_training import new_figure, save_figure
from ustat_rl.policies.examples import heterogeneous_score_bandit
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
from ustat_rl.training.allocation import TRAINING_ALLOCATIONS, AllocatedTraining, train_allocated

KL_WEIGHT, BETA, DEFAULT_SEED = 1.0, 0.3, 1903
FULL = dict(budget=24, n_iter=400, checkpoints=(0, 25, 50, 100, 200, 400), n_runs=100,
            allocations=TRAINING_ALLOCATIONS)
QUICK = dict(budget=24, n_iter=20, checkpoints=(0, 10, 20), n_runs=6,
             allocations=("optimal", "uniform", "sgpo"))
RUN_COLUMNS = ["allocation", "run", "n", "gap", "seed", "n_runs"]
Z95 = 1.959964


@dataclass(frozen=True)
class Config:
    budget: int = FULL["budget"]
    n_iter: int = FULL["n_iter"]
    checkpoints: tuple = FULL["checkpoints"]
    n_runs: int = option(FULL["n_runs"], flag="--runs", type=int, quick=QUICK["n_runs"],
                         help="runs per allocation")
    allocations: tuple = FULL["allocations"]
    seed: int = option(DEFAULT_SEED, flag="--seed", type=int, help="root seed")


def _problem():
    bandit, theta0 = heterogeneous_score_bandit(kl_weight=KL_WEIGHT)
    return bandit, theta0, bandit.optimum().value


def simulate_cell(config: Config, allocation: str) -> pd.DataFrame:
    bandit, theta0, best = _problem()
    setting = AllocatedTraining(config.n_iter, allocation, config.budget, BETA,
                                checkpoints=config.checkpoints)
    marks, objective = train_allocated(bandit, theta0, setting, n_runs=config.n_runs,
                                       seed=config.seed)
    rows = pd.DataFrame({"allocation": allocation, "run": np.repeat(np.arange(config.n_runs), marks.size),
                         "n": np.tile(marks, config.n_runs),
                         "gap": (best - objective).ravel()})
    rows["seed"], rows["n_runs"] = config.seed, config.n_runs
    return rows[RUN_COLUMNS]


def summarise(runs: pd.DataFrame, config: Config) -> pd.DataFrame:
    last = runs[runs["n"] == config.n_iter].pivot(index="run", columns="allocation", values="gap")
    out = []
    for name in [r for r in config.allocations if r in last]:
        gap = last[name].to_numpy()
        row = {"allocation": name, "n": config.n_iter, "gap": gap.mean(),
               "se": gap.std(ddof=1) / np.sqrt(gap.size), "sd": gap.std(ddof=1)}
        if "uniform" in last and name != "uniform":
            diff = gap - last["uniform"].to_numpy()
            se = diff.std(ddof=1) / np.sqrt(diff.size)
            row.update(diff_to_uniform=diff.mean(), diff_low=diff.mean() - Z95 * se,
                       diff_high=diff.mean() + Z95 * se)
        out.append(row)
    return pd.DataFrame(out)


def make_figure(runs: pd.DataFrame, out: Path):
    fig, axes = new_figure(1, 1, panel_size=(4.5, 3.2))
    ax = axes[0, 0]
    for name, block in runs.groupby("allocation", sort=False):
        stats = block.groupby("n")["gap"].agg(["mean", "std", "count"])
        half = Z95 * stats["std"] / np.sqrt(stats["count"])
        ax.plot(stats.index, stats["mean"], "o-", label=name, ms=3)
        ax.fill_between(stats.index, stats["mean"] - half, stats["mean"] + half, alpha=0.2)
    ax.set_yscale("log")
    ax.set_xlabel("iteration n")
    ax.set_ylabel("gap J* - J (mean, 95% CI)")
    ax.legend(fontsize=8, frameon=False)
    return save_figure(fig, out / "allocation_training")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 allocations, 6 runs, 20 iterations")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None, help="output folder")
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
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "allocation_training")
    return args


def main(argv=None) -> pd.DataFrame:
    args = parse_args(argv)
    start = time.perf_counter()
    base = QUICK if args.quick else FULL
    config = Config(base["budget"], base["n_iter"], tuple(base["checkpoints"]), args.runs,
                    tuple(base["allocations"]), args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / "allocation_runs.csv"
    if args.overwrite and runs_path.exists():
        runs_path.unlink()
    runs = pd.read_csv(runs_path) if runs_path.exists() else pd.DataFrame(columns=RUN_COLUMNS)
    runs = runs.rename(columns={"rule": "allocation"})  # the column's name in earlier files
    if len(runs) and (set(runs["seed"]) != {config.seed} or set(runs["n_runs"]) != {config.n_runs}
                      or runs["n"].max() != config.n_iter):
        raise SystemExit(f"{runs_path} was written with another seed, runs or n; use "
                         "--overwrite or another --out")
    todo = [r for r in config.allocations if r not in set(runs["allocation"])]

    def save(key, new):
        nonlocal runs
        runs = new if runs.empty else pd.concat([runs, new], ignore_index=True)
        write_csv_atomic(order_rows(runs, ["allocation"], [(r,) for r in config.allocations]), runs_path)

    try:
        run_cells({name: (config, name) for name in todo}, simulate_cell, save, args.executor,
                  progress=not args.no_progress, n_skipped=len(config.allocations) - len(todo))
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    summary = summarise(runs, config)
    write_csv_atomic(summary, out / "allocation_summary.csv")
    figures = [] if args.no_figure else make_figure(runs, out)
    write_run_record(out, "allocation_training", __file__, argv, seed=args.seed,
                     seconds=time.perf_counter() - start,
                     files=[runs_path, out / "allocation_summary.csv", *figures])
    print(summary.to_string(index=False, float_format="%.4g"))
    print(f"{len(todo)} allocation(s) simulated ({time.perf_counter() - start:.1f} s)")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
