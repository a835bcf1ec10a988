"""Fixed-budget group-size sweep with GRPO on a transformer: Fig. 5 / Table 2 analogue (docs/theory.md C17, C18).

Config -> simulate -> tidy CSV -> figure.

Starting from the committed ``weak`` warm-up policy, Algorithm 1 (leave-one-out GRPO, plain SGD,
constant learning rate; :func:`ustat_rl.policies.transformer.grpo_train`) is run at a fixed budget
``N = B G`` samples per iteration for every G that divides N, several budgets and seeds. The exact
expected test accuracy ``J = mean_x pi(y*(x)|x)`` on the 500-question test split is recorded after
each iteration count in ``--iters`` (one run per cell, evaluated along the way: with a constant
learning rate this equals separate runs of each length).

The prediction: ``G* = 1 + sqrt(c3'/c1)`` from the exact scaling constants of the starting policy
over training prompts, with a 95% bootstrap interval over prompts
(:func:`ustat_rl.policies.transformer.bootstrap_constants`); Theorem 7 says G* does not depend on N,
n or the schedule. The summary compares the argmax of mean accuracy over G with it.

A *cell* is (N, G, seed). Each finished cell is appended at once (atomically) to
``<out>/transformer_group_size.csv`` (one row per iteration count); a rerun skips finished cells.
The ``device`` column records where each cell ran.

Usage::

    python simulations/transformer_group_size.py --quick                 # about 30 s on one CPU core
    python simulations/transformer_group_size.py --device cuda           # full sweep, sized for a GPU
    python simulations/transformer_group_size.py --workers 2             # cells on a local pool of 2 processes
    python simulations/transformer_group_size.py --ray-address auto      # cells on a running Ray cluster

Full runs write to ``results``, quick runs to ``results/quick/transformer_group_size``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.stats import t as student_t

from ustat_rl.interface.plotting import new_figure, save_figure, set_group_size_ticks
from ustat_rl.policies.transformer import (
    ArithmeticTask,
    bootstrap_constants,
    exact_moments,
    load_study_policy,
    make_splits,
    resolve_device,
)
from ustat_rl.runs.script_args import check_script_args, positive_int, seed_type
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
from ustat_rl.training.transformer import grpo_train

DEFAULT_SEED = 2603
START_POLICY = "weak"
CONFIGS = {
    "full": {"budgets": (256, 512, 1024), "groups": (2, 4, 8, 16, 32, 64, 128), "seeds": 5,
             "iters": (100, 200, 400), "lr": 0.01, "prediction_prompts": 300},
    "quick": {"budgets": (32, 64), "groups": (2, 4, 8, 16, 32), "seeds": 2,
              "iters": (5, 10), "lr": 0.01, "prediction_prompts": 8},
}
CSV_NAME = "transformer_group_size.csv"
PREDICTION_NAME = "transformer_group_size_prediction.csv"
SUMMARY_NAME = "transformer_group_size_summary.csv"




def run_cell(budget: int, group_size: int, seed: int, cfg: dict, splits, device) -> pd.DataFrame:
    """Train one (N, G, seed) cell; one row per evaluated iteration count."""
    policy, _ = load_study_policy(START_POLICY, device=device)
    gen = torch.Generator(device=policy.device).manual_seed(seed)
    start = time.perf_counter()
    run = grpo_train(policy, splits, group_size, budget, max(cfg["iters"]),
                     cfg["lr"], gen, eval_at=cfg["iters"])
    seconds = time.perf_counter() - start
    keep = np.isin(run.iterations, (0,) + tuple(cfg["iters"]))
    return pd.DataFrame({
        "budget": budget, "group_size": group_size, "batch_size": run.batch_size, "seed": seed,
        "n_iter": run.iterations[keep], "test_accuracy": run.test_accuracy[keep],
        "lr": cfg["lr"], "start_policy": START_POLICY, "device": str(policy.device),
        "seconds": seconds})


def predict(cfg: dict, splits, device, seed: int) -> pd.DataFrame:
    policy, _ = load_study_policy(START_POLICY, device=device)
    moments = exact_moments(policy, list(splits.train[: cfg["prediction_prompts"]]), progress=True)
    ci = bootstrap_constants(moments, np.random.default_rng(seed), 2000)
    row = {"start_policy": START_POLICY, "n_prompts": moments.n_prompts, "device": str(policy.device)}
    for name, value in (("c1", ci.constants.c1), ("c2", ci.constants.c2), ("c3", ci.constants.c3),
                        ("g_star", ci.g_star)):
        row.update({name: value, f"{name}_low": ci.low[name], f"{name}_high": ci.high[name]})
    return pd.DataFrame([row])


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy with 95% t intervals over seeds, per (N, n, G), and the argmax flag."""
    grouped = table[table["n_iter"] > 0].groupby(["budget", "n_iter", "group_size"])["test_accuracy"]
    out = grouped.agg(["mean", "std", "count"]).reset_index()
    half = student_t.ppf(0.975, np.maximum(out["count"] - 1, 1)) * out["std"] / np.sqrt(out["count"])
    out["ci_low"], out["ci_high"] = out["mean"] - half, out["mean"] + half
    best = out.groupby(["budget", "n_iter"])["mean"].transform("max")
    out["is_best"] = out["mean"] == best
    return out


def make_figure(summary: pd.DataFrame, prediction: pd.DataFrame, start_accuracy: float,
                out: Path) -> list[Path]:
    iters = sorted(summary["n_iter"].unique())
    fig, axes = new_figure(1, len(iters), sharex=True, sharey=False)
    g_star = float(prediction["g_star"].iloc[0])
    for ax, n in zip(axes[0], iters):
        for budget, cell in summary[summary["n_iter"] == n].groupby("budget"):
            cell = cell.sort_values("group_size")
            ax.errorbar(cell["group_size"], cell["mean"],
                        yerr=[cell["mean"] - cell["ci_low"], cell["ci_high"] - cell["mean"]],
                        marker="o", ms=4, capsize=2, label=f"N = {budget}")
        ax.axvspan(float(prediction["g_star_low"].iloc[0]), float(prediction["g_star_high"].iloc[0]),
                   color="0.85", zorder=0)
        ax.axvline(g_star, color="0.3", ls="--", lw=1, label=f"predicted G* = {g_star:.1f}")
        ax.axhline(start_accuracy, color="0.5", lw=0.8, ls=":", label="start")
        ax.set_xscale("log", base=2)
        set_group_size_ticks(ax, sorted(summary["group_size"].unique()))
        ax.set_title(f"after n = {n} iterations", fontsize=9)
        ax.set_xlabel("group size G")
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("expected test accuracy")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Test accuracy vs G at fixed budgets N (95% t intervals over seeds; "
                 "dashed: predicted G*) (C18.tf)", fontsize=9)
    return save_figure(fig, out / "transformer_group_size")


def _sweep_option(key: str, **kwargs):
    """An option whose full and quick values are ``CONFIGS[...][key]``."""
    return option(CONFIGS["full"][key], flag=f"--{key}", quick=CONFIGS["quick"][key], **kwargs)


@dataclass(frozen=True)
class Config:
    """The options of a sweep: full-run values, the quick ones from ``CONFIGS["quick"]``."""

    seed: int = option(DEFAULT_SEED, flag="--seed", type=seed_type,
                       help="root seed, an integer >= 0")
    budgets: tuple = _sweep_option("budgets", type=positive_int, nargs="+",
                                   help="override N values (each needs a G of --groups dividing "
                                        "it)")
    groups: tuple = _sweep_option("groups", type=positive_int, nargs="+",
                                  help="override G values (each >= 2)")
    seeds: int = _sweep_option("seeds", type=positive_int,
                               help="override the number of seeds (>= 1)")
    iters: tuple = _sweep_option("iters", type=positive_int, nargs="+",
                                 help="override the iteration counts evaluated (each >= 1)")
    lr: float = _sweep_option("lr", type=float, help="override the learning rate (> 0)")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the sweep's come from :class:`Config`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sweep for smoke tests")
    add_config_arguments(parser, Config, ["seed"])
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default results, with --quick "
                             "results/quick/transformer_group_size)")
    parser.add_argument("--device", default=None, help="torch device (default: CUDA if available)")
    add_config_arguments(parser, Config, ["budgets", "groups", "seeds", "iters", "lr"])
    add_executor_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "transformer_group_size", full="results")
    _check_grid(parser, args)
    check_script_args(parser, args)
    return args


def _check_grid(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every budget has a group size dividing it, every G >= 2 and the rate positive."""
    cfg = CONFIGS["quick" if args.quick else "full"]
    groups = args.groups or cfg["groups"]
    if min(groups) < 2:
        parser.error("--groups: every group size must be >= 2 for the leave-one-out baseline, "
                     f"got {min(groups)}")
    for budget in args.budgets or cfg["budgets"]:
        if not any(budget % g == 0 for g in groups):
            parser.error(f"--budgets/--groups: no group size of {list(groups)} divides "
                         f"N = {budget} (G must divide N = B G), so that budget has no cell")
    if args.lr is not None and not (args.lr > 0 and np.isfinite(args.lr)):
        parser.error(f"--lr must be a finite number > 0, got {args.lr}")


def main(argv=None) -> dict:
    args = parse_args(argv)
    start = time.perf_counter()
    cfg = dict(CONFIGS["quick" if args.quick else "full"])
    for key in ("budgets", "groups", "seeds", "iters", "lr"):
        cfg[key] = getattr(args, key)
    device = resolve_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / CSV_NAME
    splits = make_splits(ArithmeticTask(), seed=0)
    pred_path = args.out / PREDICTION_NAME
    if not pred_path.exists():
        write_csv_atomic(predict(cfg, splits, device, args.seed), pred_path)
    prediction = pd.read_csv(pred_path)
    table = pd.read_csv(csv_path) if csv_path.exists() else None
    done = set() if table is None else set(zip(table["budget"], table["group_size"], table["seed"]))
    cells = [(n, g, s) for n in cfg["budgets"] for g in cfg["groups"] if n % g == 0 and n // g >= 1
             for s in range(cfg["seeds"])]
    todo = {}
    for budget, group_size, s in cells:
        if (budget, group_size, s) not in done:
            seed = int(np.random.SeedSequence(args.seed, spawn_key=(budget, group_size, s)).generate_state(1)[0])
            todo[(budget, group_size, s)] = (budget, group_size, seed, cfg, splits, device)
    computed = 0

    def save(key, rows):  # in this process, as each cell finishes
        nonlocal table, computed
        rows["seed"] = key[2]
        table = rows if table is None else pd.concat([table, rows], ignore_index=True)
        write_csv_atomic(order_rows(table, ["budget", "group_size", "seed"], cells), csv_path)
        computed += 1

    try:
        run_cells(todo, run_cell, save, args.executor, n_skipped=len(cells) - len(todo))
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    if table is not None:
        table = order_rows(table, ["budget", "group_size", "seed"], cells)
    summary = summarise(table)
    write_csv_atomic(summary, args.out / SUMMARY_NAME)
    start_accuracy = float(table.loc[table["n_iter"] == 0, "test_accuracy"].mean())
    figures = make_figure(summary, prediction, start_accuracy, args.out)
    write_run_record(args.out, "transformer_group_size", __file__, argv, seed=args.seed,
                     seconds=time.perf_counter() - start,
                     files=[csv_path, pred_path, args.out / SUMMARY_NAME, *figures])
    best = summary[summary["is_best"]][["budget", "n_iter", "group_size", "mean"]]
    print(f"predicted G* = {prediction['g_star'].iloc[0]:.2f} "
          f"[{prediction['g_star_low'].iloc[0]:.2f}, {prediction['g_star_high'].iloc[0]:.2f}]")
    print("best G per (N, n):\n" + best.to_string(index=False))
    print(f"{computed} cells computed, {len(cells) - computed} skipped; wrote {csv_path}, "
          f"{pred_path}, {', '.join(map(str, figures))} ({time.perf_counter() - start:.1f} s)")
    return {"computed": computed, "csv": csv_path, "figures": figures, "summary": summary}


if __name__ == "__main__":
    main()
