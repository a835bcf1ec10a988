"""Gradient MSE against group size on bandits: the analogue of the paper's Fig. 4 (docs/theory.md C11).

Config -> simulate -> tidy CSV -> figure.

For each bandit family and policy strength (a *cell*), the prompt-averaged per-prompt MSE
``E_X MSE(X) = sum_x f(x) E||g_hat(x) - g(x)||^2`` of the vanilla, GRPO and oracle estimators is
estimated by Monte Carlo for G in {2, ..., 256} and set against the exact theory of Theorem 2
(C5), ``bandit.prompt_prob @ bandit.exact_mse_per_prompt(estimator, G)``.

Monte Carlo design. Each prompt ``x`` gets ``--reps`` replicates of
:func:`ustat_rl.montecarlo.bandit_squared_errors` with ``prompt=x`` (squared errors against
``g(x)``), which nests the groups of all sizes (common random numbers across G and estimators);
the prompt means are combined with the exact weights ``f(x)`` (stratified sampling), and their
covariances with weights ``f(x)^2`` since prompts are simulated independently. Intervals are
normal 95% intervals, ``mse_mc +- 1.96 se``.

Families: ``arithmetic`` (:func:`ustat_rl.policies.examples.arithmetic_bandit`, Assumption 2 holds
approximately, the paper's pattern vanilla > GRPO > oracle) and, as a contrast, ``one_answer``
(:func:`ustat_rl.policies.examples.one_answer_bandit`, Assumption 2 fails and vanilla can win).

Each finished cell is appended to ``<out>/gradient_mse.csv`` at once (atomically); a rerun skips
the cells already there, so an interrupted run resumes where it stopped. Seeds are per
(cell, prompt), so a resumed run gives the same numbers as an uninterrupted one.

Usage::

    python simulations/gradient_mse.py                 # full run (a few minutes on one core)
    python simulations/gradient_mse.py --quick         # a few seconds
    python simulations/gradient_mse.py --workers 2     # cells on a local pool of 2 processes
    python simulations/gradient_mse.py --ray-address auto   # cells on a running Ray cluster

Full runs write to ``results/gradient_mse``, quick runs to ``results/quick/gradient_mse``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ustat_rl.interface.plotting import plot_mse_grid, save_figure
from ustat_rl.montecarlo import Execution, prompt_averaged_squared_errors
from ustat_rl.policies.examples import POLICY_STRENGTHS, arithmetic_bandit, one_answer_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
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
from ustat_rl.seeding import child_seed

FAMILIES = {"arithmetic": arithmetic_bandit, "one_answer": one_answer_bandit}
ESTIMATORS = ("vanilla", "grpo", "oracle")
GROUP_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)
FULL_REPS = 20_000  # per prompt: relative se of the prompt-averaged MSE about 0.2-0.4%
QUICK_REPS = 200  # per prompt: relative se about 2-4%, enough for the smoke test
BLOCK_SIZE = 1024  # unit of randomness of run_monte_carlo; fixed so results do not depend on it
DEFAULT_SEED = 2603  # arbitrary fixed root seed (the arXiv number of the paper)
LEVEL = 0.95
Z_CI = float(norm.ppf(0.5 + LEVEL / 2.0))  # 1.96: half-width of the 95% interval in se
CSV_NAME = "gradient_mse.csv"
EXACT_NAME = "gradient_mse_exact.csv"
FIGURE_STEM = "gradient_mse"
COLUMNS = ["family", "policy", "strength", "mean_success", "estimator", "group_size", "mse_mc",
           "se", "ci_low", "ci_high", "mse_exact", "z_score", "n_prompts", "n_reps", "seed"]


@dataclass(frozen=True)
class Config:
    """What one run simulates; ``n_reps`` counts replicates per prompt."""

    n_reps: int = option(FULL_REPS, flag="--reps", type=int, quick=QUICK_REPS,
                         help=f"Monte Carlo replicates per prompt (default {FULL_REPS})")
    seed: int = option(DEFAULT_SEED, flag="--seed", type=seed_type,
                       help="root seed, an integer >= 0")
    families: tuple = tuple(FAMILIES)
    policies: tuple = tuple(POLICY_STRENGTHS)
    estimators: tuple = ESTIMATORS
    group_sizes: tuple = GROUP_SIZES

    def cells(self) -> list[tuple[int, int, str, str]]:
        """``(family_index, policy_index, family, policy)`` in run order."""
        return [(i, j, fam, pol) for i, fam in enumerate(self.families)
                for j, pol in enumerate(self.policies)]


@dataclass(frozen=True)
class RunSummary:
    """What a call of :func:`main` did.

    Attributes
    ----------
    computed : tuple of (family, policy)
        Cells simulated by this call.
    skipped : tuple of (family, policy)
        Cells found in the CSV and not redone.
    csv_path, exact_path : Path
    figures : tuple of Path
    seconds : float
    """

    computed: tuple
    skipped: tuple
    csv_path: Path
    exact_path: Path
    figures: tuple = field(default_factory=tuple)
    seconds: float = 0.0


# ------------------------------------------------------------------------------ simulate
def simulate_cell(bandit: SoftmaxBandit, config: Config, cell_key: tuple[int, int],
                  n_jobs: int = 1, progress: bool = False) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Prompt-averaged per-prompt MSE of each (estimator, G): ``(mean (m,), cov (m, m), labels)``."""
    seed = child_seed(config.seed, *cell_key)
    est = prompt_averaged_squared_errors(bandit, config.estimators, config.group_sizes,
                                         config.n_reps, seed, block_size=BLOCK_SIZE,
                                         execution=Execution(n_jobs, progress))
    return est.mean, est.cov, est.labels


def cell_table(family: str, policy: str, bandit: SoftmaxBandit, mean, cov, labels,
               config: Config) -> pd.DataFrame:
    """Tidy rows of one cell: Monte Carlo estimate, interval and exact value per (estimator, G)."""
    se = np.sqrt(np.diag(cov))
    rows = []
    for i, (est, g) in enumerate(labels):
        exact = bandit.prompt_averaged_mse(est, int(g))
        rows.append({
            "family": family, "policy": policy, "strength": POLICY_STRENGTHS[policy],
            "mean_success": float(bandit.prompt_prob @ bandit.value), "estimator": est,
            "group_size": int(g), "mse_mc": mean[i], "se": se[i],
            "ci_low": mean[i] - Z_CI * se[i], "ci_high": mean[i] + Z_CI * se[i],
            "mse_exact": exact, "z_score": (mean[i] - exact) / se[i],
            "n_prompts": bandit.n_prompts, "n_reps": config.n_reps, "seed": config.seed,
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def exact_curves(config: Config) -> pd.DataFrame:
    """Exact prompt-averaged MSE on a dense integer grid of G, for the figure's lines."""
    grid = np.unique(np.geomspace(2, max(config.group_sizes), 64).round().astype(int))
    rows = []
    for fam in config.families:
        for pol in config.policies:
            bandit = FAMILIES[fam](POLICY_STRENGTHS[pol])
            for est in config.estimators:
                for g in grid:
                    rows.append({"family": fam, "policy": pol, "estimator": est,
                                 "group_size": int(g),
                                 "mse_exact": bandit.prompt_averaged_mse(est, int(g))})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ CSV, resume
def read_done(csv_path: Path, config: Config) -> pd.DataFrame:
    """Rows already on disk; refuses a CSV written with another seed, reps or grid."""
    if not csv_path.exists():
        return pd.DataFrame(columns=COLUMNS)
    done = pd.read_csv(csv_path)
    if list(done.columns) != COLUMNS:
        raise SystemExit(f"{csv_path} has columns {list(done.columns)}, expected {COLUMNS}; "
                         "use --overwrite or another --out")
    other = done[(done["n_reps"] != config.n_reps) | (done["seed"] != config.seed)]
    if len(other):
        raise SystemExit(f"{csv_path} holds results for another n_reps/seed "
                         f"({sorted(set(zip(other['n_reps'], other['seed'], strict=True)))}); "
                         "use --overwrite or another --out")
    for (fam, pol), cell in done.groupby(["family", "policy"]):
        found = set(zip(cell["estimator"], cell["group_size"], strict=True))
        wanted = {(e, g) for e in config.estimators for g in config.group_sizes}
        if found != wanted:
            raise SystemExit(f"{csv_path}: cell ({fam}, {pol}) has another estimator/G grid; "
                             "use --overwrite or another --out")
    return done




# ------------------------------------------------------------------------------ figure
def make_figure(table: pd.DataFrame, exact: pd.DataFrame, config: Config, out: Path) -> list[Path]:
    """Log-log panels (rows: family, columns: policy), MC points with 95% bars, exact lines."""
    def title(fam, pol, cell):
        success = cell["mean_success"].iloc[0] if len(cell) else float("nan")
        return f"{fam}, {pol} (E V = {success:.2f})"

    fig = plot_mse_grid(table, exact, row="family", col="policy", estimators=config.estimators,
                        orders={"family": config.families, "policy": config.policies},
                        title=title)
    fig.suptitle("Prompt-averaged gradient MSE vs group size: Monte Carlo (95% CI) and exact "
                 "theory (C5, C11)", fontsize=10)
    return save_figure(fig, out / FIGURE_STEM)


# ------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny run: {QUICK_REPS} replicates per prompt (a few seconds)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder for the CSVs and figures (default results/"
                             "gradient_mse, with --quick results/quick/gradient_mse)")
    parser.add_argument("--n-jobs", type=int, default=1,
                        help="threads per cell (over prompts)")
    add_executor_arguments(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="discard results already in --out instead of resuming")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    if args.reps < 2:
        parser.error(f"--reps must be an integer >= 2, got {args.reps}")
    if args.n_jobs < 1:
        parser.error(f"--n-jobs must be an integer >= 1, got {args.n_jobs}")
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "gradient_mse")
    check_script_args(parser, args)
    return args


def main(argv=None) -> RunSummary:
    args = parse_args(argv)
    start = time.perf_counter()
    config = Config(n_reps=args.reps, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, exact_path = out / CSV_NAME, out / EXACT_NAME
    if args.overwrite and csv_path.exists():
        csv_path.unlink()
    table = read_done(csv_path, config)
    done = set(zip(table["family"], table["policy"], strict=True))

    todo = [c for c in config.cells() if (c[2], c[3]) not in done]
    skipped = tuple((fam, pol) for _, _, fam, pol in config.cells() if (fam, pol) in done)
    bandits = {(fam, pol): FAMILIES[fam](POLICY_STRENGTHS[pol]) for _, _, fam, pol in todo}
    inner_progress = not args.no_progress and args.executor.in_process
    cells = {(fam, pol): (bandits[(fam, pol)], config, (i, j), args.n_jobs, inner_progress)
             for i, j, fam, pol in todo}
    order = [(fam, pol) for _, _, fam, pol in config.cells()]
    computed = []

    def save(key, result):  # in this process, as each cell finishes
        nonlocal table
        new = cell_table(*key, bandits[key], *result, config)
        table = new if table.empty else pd.concat([table, new], ignore_index=True)
        write_csv_atomic(order_rows(table, ["family", "policy"], order), csv_path)
        computed.append(key)

    try:
        run_cells(cells, simulate_cell, save, args.executor, progress=not args.no_progress,
                  n_skipped=len(skipped))
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    table = order_rows(table, ["family", "policy"], order)

    exact = exact_curves(config)
    write_csv_atomic(exact, exact_path)
    figures = tuple(make_figure(table, exact, config, out))
    seconds = time.perf_counter() - start
    write_run_record(out, "gradient_mse", __file__, argv, seed=args.seed, seconds=seconds,
                     files=[csv_path, exact_path, *figures])
    print(f"{len(computed)} cell(s) simulated, {len(skipped)} already done; "
          f"{csv_path}, {', '.join(str(p) for p in figures)} ({seconds:.1f} s)")
    return RunSummary(tuple(computed), skipped, csv_path, exact_path, figures, seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
