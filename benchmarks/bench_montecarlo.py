"""Throughput and memory of the Monte Carlo engine against the per-sample numpy route.

Workload: one prompt of a softmax bandit with K = 10 actions, groups of G = 64, squared error of
the leave-one-out GRPO gradient against g(x) (docs/theory.md C5). Engines, timed in the same run:

* ``per-sample numpy`` (the baseline): :func:`ustat_rl.montecarlo.per_sample_squared_errors`,
  which samples every action and reward, builds every score ``W_g`` and applies
  :func:`ustat_rl.estimators.grpo_gradient`, vectorised over a block of groups;
* ``engine n_jobs=1`` and ``engine n_jobs=2``: :func:`ustat_rl.montecarlo.bandit_squared_errors`
  (sufficient statistics, compiled kernel) run by :func:`ustat_rl.montecarlo.run_monte_carlo`.

All three go through ``run_monte_carlo`` with its default block size, so the figures include the
streaming mean/covariance merge. Throughput is groups per second of wall time: best and median
over ``--repeats`` timed rounds after one untimed warm-up (which also compiles the kernel). The
engines are interleaved within each round and the ratio to the baseline is the median of the
per-round ratios, so both sides of a ratio ran under about the same machine load.
Memory: the tracemalloc peak of one block (numpy allocations; the compiled kernel's few
scratch arrays of size K are not traced), and, unless ``--no-rss``, the peak resident set of a
fresh process that runs one engine, minus its resident set after the imports (Linux only).

Usage::

    python benchmarks/bench_montecarlo.py                      # full (about a minute)
    python benchmarks/bench_montecarlo.py --quick              # smoke run (a few seconds)
    python benchmarks/bench_montecarlo.py --readme benchmarks/README.md --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ustat_rl.montecarlo import bandit_squared_errors, per_sample_squared_errors, run_monte_carlo
from ustat_rl.policies.softmax import SoftmaxBandit

N_ACTIONS = 10
GROUP_SIZE = 64
BLOCK_SIZE = 4096  # run_monte_carlo's default block size
SEED = 2603
TARGET_RATIO = 5.0  # engine / per-sample throughput
TARGET_THROUGHPUT = 1e6  # groups per second on the 2-core machine
SECTION = "Monte Carlo engine"
INTRO = ("# Benchmarks\n\nSpeed and memory of the package's hot paths, each reported as a ratio "
         "against a named baseline measured in the same run.\n")
ENGINES = ("per-sample numpy", "engine n_jobs=1", "engine n_jobs=2")
BASELINE = "per-sample numpy"


@dataclass(frozen=True)
class EngineResult:
    """Measurements of one engine.

    Attributes
    ----------
    engine : str
    n_groups : int
        Groups per timed run.
    best_groups_per_s, median_groups_per_s : float
    ratio_to_baseline : float
        Median over rounds of this engine's throughput over the baseline's in the same round.
    block_peak_bytes : int
        tracemalloc peak while computing one block of ``BLOCK_SIZE`` groups.
    rss_peak_mib : float or None
        Peak resident set of a fresh process running the engine, above its post-import level.
    mse, std_error : float
        The Monte Carlo MSE of the last timed run and its standard error.
    """

    engine: str
    n_groups: int
    best_groups_per_s: float
    median_groups_per_s: float
    ratio_to_baseline: float
    block_peak_bytes: int
    rss_peak_mib: float | None
    mse: float
    std_error: float


def benchmark_bandit() -> SoftmaxBandit:
    """The one-prompt, ten-action bandit of the benchmark (fixed, generic parameters)."""
    rng = np.random.default_rng(SEED)
    return SoftmaxBandit(rng.normal(0.0, 0.5, size=(1, N_ACTIONS)),
                         rng.uniform(0.1, 0.9, size=(1, N_ACTIONS)))


def make_statistic(engine: str, bandit: SoftmaxBandit):
    """``(statistic, n_jobs)`` for ``engine``."""
    if engine == BASELINE:
        return per_sample_squared_errors(bandit, "grpo", GROUP_SIZE, prompt=0), 1
    statistic, _ = bandit_squared_errors(bandit, "grpo", (GROUP_SIZE,), prompt=0)
    return statistic, int(engine.rsplit("=", 1)[1])


def time_engines(bandit: SoftmaxBandit, n_groups: dict, repeats: int):
    """Throughputs (groups/s) per engine over ``repeats`` rounds, and each engine's last estimate.

    Rounds interleave the engines (A B C, A B C, ...) so that each round's ratios compare runs
    made under about the same machine load.
    """
    setups = {engine: make_statistic(engine, bandit) for engine in ENGINES}
    for engine, (statistic, n_jobs) in setups.items():  # warm-up, compiles the kernel
        run_monte_carlo(statistic, min(n_groups[engine], BLOCK_SIZE), SEED, n_jobs=n_jobs)
    rates = {engine: [] for engine in ENGINES}
    last = {}
    for r in range(repeats):
        for engine, (statistic, n_jobs) in setups.items():
            seed = np.random.SeedSequence(SEED, spawn_key=(r,))
            start = time.perf_counter()
            last[engine] = run_monte_carlo(statistic, n_groups[engine], seed,
                                           block_size=BLOCK_SIZE, n_jobs=n_jobs)
            rates[engine].append(n_groups[engine] / (time.perf_counter() - start))
    return rates, last


def block_peak_bytes(engine: str, bandit: SoftmaxBandit) -> int:
    """tracemalloc peak of computing one block (after a warm-up, so compilation is excluded)."""
    statistic, _ = make_statistic(engine, bandit)
    statistic(np.random.default_rng(0), 16)
    tracemalloc.start()
    try:
        statistic(np.random.default_rng(1), BLOCK_SIZE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(peak)


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1]) / 1024.0  # reported in kB
    raise KeyError(field)


def rss_probe(engine: str, n_groups: int) -> None:
    """Child-process entry: run one engine once and print its peak RSS above the imports.

    Linux only: the high-water mark VmHWM is reset after the imports and the warm-up
    (``echo 5 > /proc/self/clear_refs``), so the peak belongs to the run alone; prints null
    where that is not available.
    """
    bandit = benchmark_bandit()
    statistic, n_jobs = make_statistic(engine, bandit)
    statistic(np.random.default_rng(0), 16)  # compile / first touch before the reference level
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_mib("VmRSS")
    except (OSError, KeyError):
        print(json.dumps({"rss_peak_mib": None}))
        return
    run_monte_carlo(statistic, n_groups, SEED, n_jobs=n_jobs)
    print(json.dumps({"rss_peak_mib": _status_mib("VmHWM") - before}))


def measure_rss(engine: str, n_groups: int) -> float | None:
    """Peak RSS (MiB) of a fresh process running ``engine`` on ``n_groups``, above imports."""
    done = subprocess.run([sys.executable, __file__, "--rss-probe", engine, "--groups",
                           str(n_groups)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["rss_peak_mib"]


def run(quick: bool, repeats: int, rss: bool, engine_groups: int | None = None,
        baseline_groups: int | None = None) -> list[EngineResult]:
    bandit = benchmark_bandit()
    n_engine = engine_groups or (200_000 if quick else 4_000_000)
    n_base = baseline_groups or (20_000 if quick else 400_000)
    n_groups = {e: (n_base if e == BASELINE else n_engine) for e in ENGINES}
    rates, last = time_engines(bandit, n_groups, repeats)
    base = np.array(rates[BASELINE])
    results = []
    for engine in ENGINES:
        paired = np.array(rates[engine]) / base  # per-round ratios, same load within a round
        results.append(EngineResult(
            engine=engine, n_groups=n_groups[engine], best_groups_per_s=max(rates[engine]),
            median_groups_per_s=statistics.median(rates[engine]),
            ratio_to_baseline=float(np.median(paired)),
            block_peak_bytes=block_peak_bytes(engine, bandit),
            rss_peak_mib=measure_rss(engine, n_groups[engine]) if rss else None,
            mse=float(last[engine].mean[0]), std_error=float(last[engine].std_error[0])))
    return results


# ------------------------------------------------------------------------------ report
def markdown_section(results: list[EngineResult], command: str, exact_mse: float) -> str:
    """The README section: table, targets, exact command and machine."""
    best = {r.engine: r for r in results}
    engine_best = max(best["engine n_jobs=1"].best_groups_per_s,
                      best["engine n_jobs=2"].best_groups_per_s)
    ratio_best = max(best["engine n_jobs=1"].ratio_to_baseline,
                     best["engine n_jobs=2"].ratio_to_baseline)
    lines = [
        f"## {SECTION}",
        "",
        f"Workload: one prompt, K = {N_ACTIONS} actions, G = {GROUP_SIZE}, squared error of the "
        "leave-one-out GRPO gradient (batch size 1), through `run_monte_carlo` with its default "
        f"block of {BLOCK_SIZE} groups. Baseline: `per_sample_squared_errors` (per-sample numpy: "
        "every action, reward and score materialised, then `grpo_gradient`). Throughput is "
        "groups per second of wall time over the timed rounds (best and median); the engines are "
        "interleaved within each round and the ratio is the median over rounds of the per-round "
        "ratio, so both sides of a ratio ran under about the same load.",
        "",
        "| engine | groups per run | groups/s best | groups/s median | ratio to baseline (median) "
        "| tracemalloc peak per block | peak RSS above imports | MSE (se) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rss = f"{r.rss_peak_mib:.1f} MiB" if r.rss_peak_mib is not None else "not measured"
        lines.append(f"| {r.engine} | {r.n_groups:,} | {r.best_groups_per_s:,.0f} | "
                     f"{r.median_groups_per_s:,.0f} | {r.ratio_to_baseline:.2f}x | "
                     f"{r.block_peak_bytes / 2**20:.2f} MiB | {rss} | "
                     f"{r.mse:.6f} ({r.std_error:.1e}) |")
    lines += [
        "",
        f"Exact MSE (Theorem 2): {exact_mse:.6f}.",
        "",
        f"Targets: median ratio >= {TARGET_RATIO:g}x: "
        f"{'met' if ratio_best >= TARGET_RATIO else 'NOT met'} ({ratio_best:.2f}x); best "
        f">= {TARGET_THROUGHPUT:,.0f} groups/s: "
        f"{'met' if engine_best >= TARGET_THROUGHPUT else 'NOT met'} ({engine_best:,.0f}).",
        "",
        f"Measured on the 2-core shared development machine ({platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}), "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, 1-minute load average {LOAD_AT_START:.2f} when the "
        "run started (other jobs slow both sides; figures vary from run to run). Command:",
        "",
        "```",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def update_readme(path: Path, section: str) -> None:
    """Replace this benchmark's section in ``path`` (create the file if absent); keep the rest."""
    path = Path(path)
    text = path.read_text() if path.exists() else INTRO
    pattern = re.compile(rf"^## {re.escape(SECTION)}\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (a few seconds)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per engine")
    parser.add_argument("--no-rss", action="store_true",
                        help="skip the per-engine peak-RSS subprocesses")
    parser.add_argument("--readme", type=Path, default=None,
                        help="write the results into this README's section")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--rss-probe", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.repeats < 1:
        parser.error(f"--repeats must be an integer >= 1, got {args.repeats}")
    return args


LOAD_AT_START = os.getloadavg()[0]


def main(argv=None) -> list[EngineResult] | None:
    args = parse_args(argv)
    if args.rss_probe is not None:
        rss_probe(args.rss_probe, args.groups)
        return None
    results = run(args.quick, args.repeats, rss=not (args.no_rss or args.quick))
    exact = float(benchmark_bandit().exact_mse_per_prompt("grpo", GROUP_SIZE)[0])
    shown = ["python", "benchmarks/bench_montecarlo.py"] + list(argv if argv is not None
                                                                else sys.argv[1:])
    env = "".join(f"{k}={os.environ[k]} " for k in ("OMP_NUM_THREADS",) if k in os.environ)
    section = markdown_section(results, env + " ".join(shown), exact)
    print(section)
    if args.readme is not None:
        update_readme(args.readme, section)
    if args.json is not None:
        args.json.write_text(json.dumps({"exact_mse": exact,
                                         "results": [asdict(r) for r in results]}, indent=2))
    return results


if __name__ == "__main__":
    main()
