"""Training throughput of Algorithm 1: R runs as one vectorised array vs a loop of single runs.

Workload: :func:`ustat_rl.policies.examples.realisable_kl_bandit` (4 prompts, 3 actions, d = 7),
GRPO with G = 4, B = 2, rate beta/i (beta = 0.75), ``n`` iterations from ``theta_ref``: the
setting of the limit-law check (docs/theory.md C20). Engines, timed in the same process:

* ``loop of single runs`` (the baseline): ``train(..., n_runs=1, run_offset=r)`` for each run
  ``r``, i.e. the same code with an array of one run, called once per run;
* ``vectorised``: one ``train(..., n_runs=R)`` call.

Both produce the same trajectories (seeds per run), up to floating-point rounding where numpy
picks another summation path for a one-run array: checked before timing. Throughput is
run-iterations per second of wall time. The baseline is timed on ``--loop-runs`` runs (its cost
is linear in the number of runs) and the ratio is per run-iteration. Rounds interleave the two
engines; the reported ratio is the median of per-round ratios.

Usage::

    python benchmarks/bench_training.py                    # R = 2000 (about a minute)
    python benchmarks/bench_training.py --quick            # smoke run (seconds)
    python benchmarks/bench_training.py --readme benchmarks/README.md
"""

from __future__ import annotations

import argparse
import platform
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ustat_rl.policies.examples import realisable_kl_bandit
from ustat_rl.training import Algorithm1Config, train

SECTION = "Training throughput"
TARGET = 20.0
SETTING = dict(learning_rate=0.75, schedule="inverse", estimator="grpo", group_size=4,
               batch_size=2)
SEED = 7


def check_identical(bandit, n_iter: int, n_runs: int = 5) -> float:
    """Largest difference between the vectorised runs and the same runs one at a time."""
    setting = Algorithm1Config(n_iter, **SETTING)
    whole = train(bandit, bandit.ref_theta, setting, n_runs=n_runs, seed=SEED).theta
    single = np.concatenate([train(bandit, bandit.ref_theta, setting, n_runs=1, seed=SEED,
                                   run_offset=r).theta for r in range(n_runs)])
    return float(np.abs(whole - single).max())


def time_round(bandit, n_runs: int, loop_runs: int, n_iter: int) -> tuple[float, float]:
    """Run-iterations per second of (vectorised, loop)."""
    setting = Algorithm1Config(n_iter, **SETTING)
    start = time.perf_counter()
    train(bandit, bandit.ref_theta, setting, n_runs=n_runs, seed=SEED)
    vec = n_runs * n_iter / (time.perf_counter() - start)
    start = time.perf_counter()
    for r in range(loop_runs):
        train(bandit, bandit.ref_theta, setting, n_runs=1, seed=SEED, run_offset=r)
    loop = loop_runs * n_iter / (time.perf_counter() - start)
    return vec, loop


def run(n_runs: int, loop_runs: int, n_iter: int, repeats: int) -> dict:
    bandit, _ = realisable_kl_bandit()
    identical = check_identical(bandit, 20)
    time_round(bandit, min(n_runs, 50), 2, 5)  # warm-up
    rounds = [time_round(bandit, n_runs, loop_runs, n_iter) for _ in range(repeats)]
    vec = [r[0] for r in rounds]
    loop = [r[1] for r in rounds]
    return {"n_runs": n_runs, "loop_runs": loop_runs, "n_iter": n_iter, "repeats": repeats,
            "max_abs_diff": identical, "identical": identical <= 1e-12, "vec_best": max(vec), "vec_median": statistics.median(vec),
            "loop_best": max(loop), "loop_median": statistics.median(loop),
            "ratio": statistics.median(v / lo for v, lo in rounds)}


def markdown_section(res: dict, command: str) -> str:
    met = "met" if res["ratio"] >= TARGET else "NOT met"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"## {SECTION}\n\n"
        "Workload: Algorithm 1 (GRPO, G = 4, B = 2, rate beta/i with beta = 0.75) on the "
        "KL-regularised shared-parameter bandit `realisable_kl_bandit()` (4 prompts, 3 actions, "
        f"d = 7), {res['n_iter']} iterations per run. Baseline: a loop of single runs "
        "(`train(..., n_runs=1, run_offset=r)`) in the same process; engine: one vectorised "
        f"`train(..., n_runs={res['n_runs']})`. Trajectories agree between the two up to rounding "
        f"(max |difference| {res['max_abs_diff']:.1e} over 20 iterations of 5 runs). Throughput in run-iterations per second; the baseline "
        f"is timed on {res['loop_runs']} runs (its cost is linear in the runs); ratio = median "
        f"over {res['repeats']} interleaved rounds of the per-round ratio.\n\n"
        "| engine | runs | run-iterations/s best | run-iterations/s median | ratio (median) |\n"
        "|---|---|---|---|---|\n"
        f"| loop of single runs | {res['loop_runs']} | {res['loop_best']:,.0f} | "
        f"{res['loop_median']:,.0f} | 1.00x |\n"
        f"| vectorised | {res['n_runs']} | {res['vec_best']:,.0f} | {res['vec_median']:,.0f} | "
        f"{res['ratio']:.1f}x |\n\n"
        f"Target: ratio >= {TARGET:g}x: {met} ({res['ratio']:.1f}x).\n\n"
        f"Measured on the shared development machine ({platform.machine()}, Python "
        f"{platform.python_version()}, numpy {np.__version__}), {when}, while other jobs were "
        "running. Command:\n\n"
        f"```\n{command}\n```\n"
    )


def update_readme(path: Path, section: str) -> None:
    """Replace this benchmark's section of ``path`` (or append it), leaving the rest untouched."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^## {re.escape(SECTION)}\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--runs", type=int, default=2000, help="R, runs of the vectorised engine")
    parser.add_argument("--loop-runs", type=int, default=40, help="runs timed in the loop")
    parser.add_argument("--iters", type=int, default=200, help="iterations per run")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--readme", type=Path, default=None, help="write the section here")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.loop_runs, args.iters, args.repeats = 100, 3, 20, 1
    for name in ("runs", "loop_runs", "iters", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be an integer >= 1")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    res = run(args.runs, args.loop_runs, args.iters, args.repeats)
    command = "OMP_NUM_THREADS=1 python benchmarks/bench_training.py" + (
        f" --readme {args.readme}" if args.readme else "")
    section = markdown_section(res, command)
    print(section)
    if args.readme is not None:
        update_readme(args.readme, section)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
