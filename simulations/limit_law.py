"""The limit law of Theorem 8 by simulation: n Delta_n against the weighted chi-square (C20).

Config -> simulate -> tidy CSV -> figure.

Algorithm 1 (GRPO, rate beta/i, G = 4, B = 2) runs on the KL-regularised shared-parameter bandit
:func:`ustat_rl.policies.examples.realisable_kl_bandit`, whose maximisers form an affine set with
known ``Q``, ``H*`` and noise covariance ``Gamma``. For each run and each checkpoint ``n`` the
script records ``n Delta_n`` and ``n d^2(theta_n, Theta*)``. It then compares the ``R`` values
of ``n Delta_n`` at each ``n`` with ``WeightedChiSquare(w)`` for the weights from the Lyapunov
equation with the corrected ``Omega = beta^2 Q^T Gamma Q`` and with the paper's printed
``Omega = Q^T Gamma Q`` (Kolmogorov-Smirnov, Cramer-von Mises, Anderson-Darling; mean against
``sum w``, variance against ``2 sum w^2``), so the table shows how the fit improves with ``n``.

Runs are simulated in chunks (``--chunk`` runs each, seeds per run, so chunking does not change
any number); each finished chunk is appended to ``<out>/limit_law_runs.csv`` at once and a rerun
skips the chunks already there.

Usage::

    python simulations/limit_law.py            # 4000 runs, n up to 10000 (a few minutes)
    python simulations/limit_law.py --quick    # a few seconds
    python simulations/limit_law.py --workers 2            # chunks on a local pool of 2 processes
    python simulations/limit_law.py --ray-address auto     # chunks on a running Ray cluster

Full runs write to ``results/limit_law``, quick runs to ``results/quick/limit_law``.
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
    plot_limit_histogram,
    plot_limit_qq,
    save_figure,
    tidy_axes,
)
from ustat_rl.policies.examples import realisable_kl_bandit
from ustat_rl.runs.script_args import check_script_args, seed_type
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.runs.sweeps import (
    CellFailedError,
    add_executor_arguments,
    default_output,
    executor_from_args,
    run_cells,
    write_csv_atomic,
    write_run_record,
)
from ustat_rl.theory.limit_law import bandit_limit_law
from ustat_rl.training import Algorithm1Config, train
from ustat_rl.weighted_chi2 import WeightedChiSquare, goodness_of_fit_tests

BETA, GROUP_SIZE, BATCH_SIZE = 0.75, 4, 2  # beta lambda in [0.97, 1.63]: Theorem 8 applies
FULL = dict(n_runs=4000, checkpoints=(100, 300, 1000, 3000, 10000))
QUICK = dict(n_runs=200, checkpoints=(30, 100, 300))
CHUNK = 500
DEFAULT_SEED = 2603
RUNS_CSV, SUMMARY_CSV, FIGURE_STEM = "limit_law_runs.csv", "limit_law_summary.csv", "limit_law"
RUN_COLUMNS = ["run", "n", "n_gap", "n_dist2", "seed", "beta", "group_size", "batch_size"]


@dataclass(frozen=True)
class Config:
    n_runs: int = option(FULL["n_runs"], flag="--runs", type=int, quick=QUICK["n_runs"],
                         help="number of independent runs")
    checkpoints: tuple = FULL["checkpoints"]
    seed: int = option(DEFAULT_SEED, flag="--seed", type=seed_type,
                       help="root seed, an integer >= 0")
    chunk: int = option(CHUNK, flag="--chunk", type=int, help="runs per resumable chunk")

    def chunks(self) -> list[tuple[int, int]]:
        """``(first run, number of runs)`` of each chunk."""
        return [(s, min(self.chunk, self.n_runs - s)) for s in range(0, self.n_runs, self.chunk)]


def simulate_chunk(config: Config, first: int, count: int, progress: bool) -> pd.DataFrame:
    """Tidy rows ``(run, n, n Delta_n, n d^2)`` for runs ``first .. first + count - 1``."""
    bandit, _ = realisable_kl_bandit()
    opt = bandit.optimum()
    marks = np.array(config.checkpoints)
    setting = Algorithm1Config(int(marks[-1]), learning_rate=BETA, schedule="inverse",
                               estimator="grpo", group_size=GROUP_SIZE, batch_size=BATCH_SIZE,
                               checkpoints=marks)
    res = train(bandit, bandit.ref_theta, setting, n_runs=count, seed=config.seed,
                run_offset=first, progress=progress)
    gap = res.gap(opt.value)  # (R, C)
    dist2 = opt.distance(res.theta) ** 2
    rows = pd.DataFrame({
        "run": np.repeat(res.run_ids, marks.size), "n": np.tile(marks, count),
        "n_gap": (gap * marks).ravel(), "n_dist2": (dist2 * marks).ravel()})
    rows["seed"], rows["beta"] = config.seed, BETA
    rows["group_size"], rows["batch_size"] = GROUP_SIZE, BATCH_SIZE
    return rows[RUN_COLUMNS]


def summarise(runs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Goodness of fit and moments per ``n`` for the corrected and the printed weights."""
    bandit, _ = realisable_kl_bandit()
    law = bandit_limit_law(bandit, BETA, "grpo", GROUP_SIZE, BATCH_SIZE)
    laws = {"corrected": WeightedChiSquare(law.weights),
            "printed": WeightedChiSquare(law.weights_printed)}
    rows = []
    for n, block in runs.groupby("n"):
        x = block["n_gap"].to_numpy()
        for name, dist in laws.items():
            gof = goodness_of_fit_tests(x, dist)
            rows.append({"n": n, "omega": name, "n_runs": x.size, "mean": x.mean(),
                         "mean_se": x.std(ddof=1) / np.sqrt(x.size), "mean_theory": dist.mean(),
                         "var": x.var(ddof=1), "var_theory": dist.var(),
                         "ks_stat": gof.ks_statistic, "ks_p": gof.ks_pvalue,
                         "cvm_stat": gof.cvm_statistic, "cvm_p": gof.cvm_pvalue,
                         "ad_stat": gof.ad_statistic, "ad_p": gof.ad_pvalue,
                         "mean_n_dist2": block["n_dist2"].mean(),
                         "trace_sigma": float(np.trace(law.sigma))})
    return pd.DataFrame(rows), laws


def make_figure(runs: pd.DataFrame, laws: dict, out: Path) -> list[Path]:
    """QQ plot and histogram of n Delta_n at the largest and smallest n."""
    marks = sorted(runs["n"].unique())
    show = [marks[0], marks[-1]] if len(marks) > 1 else marks
    fig, axes = new_figure(2, len(show), panel_size=(4.0, 3.2), sharex=False)
    for j, n in enumerate(show):
        x = runs.loc[runs["n"] == n, "n_gap"].to_numpy()
        plot_limit_qq(axes[0, j], x, laws)
        plot_limit_histogram(axes[1, j], x, laws)
        axes[0, j].set_title(f"n = {n}, {x.size} runs", fontsize=9)
    tidy_axes(axes)
    fig.suptitle("Theorem 8: n Delta_n vs weighted chi-square (corrected vs printed Omega)",
                 fontsize=10)
    return save_figure(fig, out / FIGURE_STEM)




def read_done(path: Path, config: Config) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=RUN_COLUMNS)
    done = pd.read_csv(path)
    if list(done.columns) != RUN_COLUMNS or set(done["seed"]) - {config.seed} or (
            len(done) and set(done["n"]) != set(config.checkpoints)):
        raise SystemExit(f"{path} was written with another seed or checkpoints; use --overwrite "
                         "or another --out")
    return done


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 runs, n up to 300 (seconds)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default results/limit_law, with --quick "
                             "results/quick/limit_law)")
    parser.add_argument("--overwrite", action="store_true", help="discard finished chunks")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument("--no-figure", action="store_true", help="write the CSVs only")
    add_executor_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    if args.runs < 2:
        parser.error(f"--runs must be an integer >= 2, got {args.runs}")
    if args.chunk < 1:
        parser.error(f"--chunk must be an integer >= 1, got {args.chunk}")
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "limit_law")
    check_script_args(parser, args)
    return args


def main(argv=None) -> pd.DataFrame:
    args = parse_args(argv)
    start = time.perf_counter()
    base = QUICK if args.quick else FULL
    config = Config(args.runs, tuple(base["checkpoints"]), args.seed, args.chunk)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs_path = out / RUNS_CSV
    if args.overwrite and runs_path.exists():
        runs_path.unlink()
    runs = read_done(runs_path, config)
    done = set(runs["run"])
    todo = [(f, c) for f, c in config.chunks() if not set(range(f, f + c)) <= done]
    inner_progress = not args.no_progress and args.executor.in_process

    def save(key, new):  # in this process, as each chunk finishes
        nonlocal runs
        runs = new if runs.empty else pd.concat([runs[~runs["run"].isin(new["run"])], new])
        write_csv_atomic(runs.sort_values(["run", "n"]), runs_path)

    cells = {(first, count): (config, first, count, inner_progress) for first, count in todo}
    try:
        run_cells(cells, simulate_chunk, save, args.executor, progress=not args.no_progress,
                  n_skipped=len(config.chunks()) - len(todo), desc="chunks")
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    runs = runs.sort_values(["run", "n"])
    runs = runs[runs["run"] < config.n_runs]
    summary, laws = summarise(runs)
    write_csv_atomic(summary, out / SUMMARY_CSV)
    figures = [] if args.no_figure else make_figure(runs, laws, out)
    write_run_record(out, "limit_law", __file__, argv, seed=args.seed,
                     seconds=time.perf_counter() - start,
                     files=[runs_path, out / SUMMARY_CSV, *figures])
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summary[["n", "omega", "n_runs", "mean", "mean_theory", "var", "var_theory",
                       "ks_p", "cvm_p", "ad_p"]].to_string(index=False, float_format="%.4g"))
    print(f"{len(todo)} chunk(s) simulated; {runs_path}, {out / SUMMARY_CSV}, "
          f"{', '.join(map(str, figures))} ({time.perf_counter() - start:.1f} s)")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
