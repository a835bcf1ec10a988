"""Throughput and memory of the Monte Carlo engine against the per-sample numpy route.

Workload: one prompt of a softmax bandit with K = 10 actions, groups of G = 64, squared error of
the leave-one-out GRPO gradient against g(x) (docs/theory.md C5). Engines, timed in the same run:

* ``per-sample numpy`` (the baseline): :func:`ustat_rl.montecarlo.per_sample_squared_errors`,
  which samples every action and reward, builds every score ``W_g`` and applies
  :func:`ustat_rl.advantages.gradients.grpo_gradient`, vectorised over a block of groups;
* ``engine n_jobs=1`` and ``engine n_jobs=2``: :func:`ustat_rl.montecarlo.bandit_squared_errors`
  (sufficient statistics, compiled kernel) run by :func:`ustat_rl.montecarlo.run_monte_carlo`.

All three go through ``run_monte_carlo`` with its default block size, so the figures include the
streaming mean/covariance merge.

A second table compares the backends of ``bandit_squared_errors`` on the same workload at
G in {8, 64, 1024}: ``numba`` (the compiled kernel, ``n_jobs`` 1 and 2) and ``torch`` on CPU
(``n_jobs`` 1 and 2, torch's intra-op threads as configured, e.g. 1 under OMP_NUM_THREADS=1),
plus ``torch`` on CUDA when a device is present, whose ratio to the 2-core numba figure
(``numba n_jobs=2``) at G = 64 has a target of 50x; without CUDA that row reads "not measured:
no GPU". Ratios are again medians over rounds of per-round ratios. Throughput is groups per second of wall time: best and median
over ``--repeats`` timed rounds after one untimed warm-up (which also compiles the kernel). The
engines are interleaved within each round and the ratio to the baseline is the median of the
per-round ratios, so both sides of a ratio ran under about the same machine load.
Memory: the tracemalloc peak of one block (numpy allocations; the compiled kernel's few
scratch arrays of size K are not traced), and, unless ``--no-rss``, the peak resident set of a
fresh process that runs one engine, minus its resident set after the imports (Linux only).

Usage::

    python benchmarks/bench_montecarlo.py                      # full (about a minute)
    python benchmarks/bench_montecarlo.py --quick              # smoke run (about 15 s)
    python benchmarks/bench_montecarlo.py --readme benchmarks/README.md --json out.json
    python benchmarks/bench_montecarlo.py --backends-only --readme benchmarks/README.md  # ~1 min
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
import torch

from ustat_rl.montecarlo import (
    Backend,
    bandit_squared_errors,
    per_sample_squared_errors,
    run_monte_carlo,
)
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.seeding import child_seed

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
BACKEND_SECTION = "Monte Carlo backends: numba and torch"
BACKEND_SIZES = (8, 64, 1024)
CPU_BACKENDS = ("numba n_jobs=1", "numba n_jobs=2", "torch cpu n_jobs=1", "torch cpu n_jobs=2")
CUDA_BACKEND = "torch cuda"
NUMBA_1, NUMBA_2 = CPU_BACKENDS[:2]
TARGET_CUDA_RATIO = 50.0  # torch cuda / numba n_jobs=2 at G = 64
NO_GPU = "not measured: no GPU"


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
            seed = child_seed(SEED, r)
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


# ------------------------------------------------------------------------------ backends
@dataclass(frozen=True)
class BackendResult:
    """Measurements of one backend at one group size.

    Attributes
    ----------
    engine : str
    group_size : int
    n_groups : int
        Groups per timed run.
    best_groups_per_s, median_groups_per_s : float
    ratio_to_numba_1, ratio_to_numba_2 : float
        Median over rounds of this engine's throughput over ``numba n_jobs=1`` (resp. ``=2``)'s
        in the same round.
    mse, std_error : float
        The Monte Carlo MSE of the last timed run and its standard error.
    exact_mse : float
        Theorem 2's exact value for the workload.
    """

    engine: str
    group_size: int
    n_groups: int
    best_groups_per_s: float
    median_groups_per_s: float
    ratio_to_numba_1: float
    ratio_to_numba_2: float
    mse: float
    std_error: float
    exact_mse: float


def backend_statistic(engine: str, bandit: SoftmaxBandit, group_size: int):
    """``(statistic, n_jobs)`` of one backend engine at ``group_size``."""
    if engine == CUDA_BACKEND:
        backend, device, n_jobs = "torch", "cuda", 1
    else:
        backend = engine.split()[0]
        device = "cpu" if backend == "torch" else None
        n_jobs = int(engine.rsplit("=", 1)[1])
    statistic, _ = bandit_squared_errors(bandit, "grpo", (group_size,), prompt=0,
                                         backend=Backend(backend, device))
    return statistic, n_jobs


def run_backends(quick: bool, repeats: int, cpu_groups: int | None = None,
                 cuda_groups: int | None = None) -> list[BackendResult]:
    """Interleaved rounds of every backend at every group size of :data:`BACKEND_SIZES`."""
    bandit = benchmark_bandit()
    engines = CPU_BACKENDS + ((CUDA_BACKEND,) if torch.cuda.is_available() else ())
    n_cpu = cpu_groups or (2**17 if quick else 2**19)
    n_cuda = cuda_groups or (2**20 if quick else 2**24)
    results = []
    for g in BACKEND_SIZES:
        setups = {e: backend_statistic(e, bandit, g) for e in engines}
        n_groups = {e: (n_cuda if e == CUDA_BACKEND else n_cpu) for e in engines}
        for statistic, n_jobs in setups.values():  # warm-up: compilation, CUDA context
            run_monte_carlo(statistic, 2 * BLOCK_SIZE, SEED, n_jobs=n_jobs)
        rates = {e: [] for e in engines}
        last = {}
        for r in range(repeats):
            for engine, (statistic, n_jobs) in setups.items():
                seed = child_seed(SEED, r)
                start = time.perf_counter()
                last[engine] = run_monte_carlo(statistic, n_groups[engine], seed, n_jobs=n_jobs)
                rates[engine].append(n_groups[engine] / (time.perf_counter() - start))
        exact = float(bandit.exact_mse_per_prompt("grpo", g)[0])
        for engine in engines:
            own = np.array(rates[engine])
            results.append(BackendResult(
                engine=engine, group_size=g, n_groups=n_groups[engine],
                best_groups_per_s=float(own.max()),
                median_groups_per_s=float(np.median(own)),
                ratio_to_numba_1=float(np.median(own / np.array(rates[NUMBA_1]))),
                ratio_to_numba_2=float(np.median(own / np.array(rates[NUMBA_2]))),
                mse=float(last[engine].mean[0]), std_error=float(last[engine].std_error[0]),
                exact_mse=exact))
    return results


def backend_markdown_section(results: list[BackendResult], command: str) -> str:
    """The README section of the backend comparison."""
    lines = [
        f"## {BACKEND_SECTION}",
        "",
        f"Workload: that of the engine table (one prompt, K = {N_ACTIONS}, leave-one-out GRPO, "
        "batch size 1) at G in {" + ", ".join(str(g) for g in BACKEND_SIZES) + "}, through "
        "`run_monte_carlo`. Engines: `bandit_squared_errors(..., backend=\"numba\")` (compiled "
        "kernel) and `backend=\"torch\"` (sub-blocks of 65,536 groups as tensors) on CPU with "
        f"`n_jobs` 1 and 2 (torch intra-op threads: {torch.get_num_threads()}), and torch on "
        "CUDA when present. Ratios are medians over interleaved rounds of per-round ratios.",
        "",
        "| engine | G | groups per run | groups/s best | groups/s median | ratio to numba "
        "n_jobs=1 | ratio to numba n_jobs=2 | MSE (se) | exact MSE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    cuda_64 = None
    for g in BACKEND_SIZES:
        rows = [r for r in results if r.group_size == g]
        for r in rows:
            lines.append(f"| {r.engine} | {g} | {r.n_groups:,} | {r.best_groups_per_s:,.0f} | "
                         f"{r.median_groups_per_s:,.0f} | {r.ratio_to_numba_1:.2f}x | "
                         f"{r.ratio_to_numba_2:.2f}x | {r.mse:.6f} ({r.std_error:.1e}) | "
                         f"{r.exact_mse:.6f} |")
            if r.engine == CUDA_BACKEND and g == 64:
                cuda_64 = r
        if not any(r.engine == CUDA_BACKEND for r in rows):
            lines.append(f"| {CUDA_BACKEND} | {g} | {NO_GPU} | | | | | | |")
    if cuda_64 is None:
        verdict = f"CUDA >= {TARGET_CUDA_RATIO:g}x numba n_jobs=2 at G = 64: {NO_GPU}."
    else:
        met = "met" if cuda_64.ratio_to_numba_2 >= TARGET_CUDA_RATIO else "NOT met"
        verdict = (f"CUDA >= {TARGET_CUDA_RATIO:g}x numba n_jobs=2 at G = 64: {met} "
                   f"({cuda_64.ratio_to_numba_2:.1f}x, {torch.cuda.get_device_name()}).")
    load = ", ".join(f"{x:.2f}" for x in LOAD_TRIPLE_AT_START)
    contention = ""
    if LOAD_TRIPLE_AT_START[0] >= (os.cpu_count() or 1):
        contention = (" The load average was at or above the core count, so a second worker "
                      "found no idle core: the `n_jobs=2` rows measure contention, not scaling.")
    lines += [
        "",
        f"Target: {verdict}{contention}",
        "",
        f"Measured on the {os.cpu_count()}-core shared development machine "
        f"({platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__}), {time.strftime('%Y-%m-%d %H:%M %Z')}, load average "
        f"(1, 5, 15 min) {load} when the run started (other jobs slow every engine; figures vary "
        "from run to run). Command:",
        "",
        "```",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


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


def update_readme(path: Path, section: str, title: str = SECTION, after: str | None = None
                  ) -> None:
    """Replace the section ``title`` in ``path`` (create the file if absent); keep the rest.

    A section not yet in the file goes right after the section ``after`` when that exists, else
    at the end.
    """
    path = Path(path)
    text = path.read_text() if path.exists() else INTRO

    def span(name):
        return re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.M | re.S).search(text)

    found = span(title)
    anchor = span(after) if after is not None else None
    if found:
        text = text[:found.start()] + section + text[found.end():]
    elif anchor:
        head = text[:anchor.end()].rstrip("\n") + "\n\n"
        text = head + section.rstrip("\n") + "\n\n" + text[anchor.end():]
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
    parser.add_argument("--backend-repeats", type=int, default=None,
                        help="timed rounds of the backend comparison (default 1 quick, 3 full)")
    parser.add_argument("--no-backends", action="store_true",
                        help="skip the numba/torch backend comparison")
    parser.add_argument("--backends-only", action="store_true",
                        help="run only the backend comparison (its README section alone)")
    parser.add_argument("--rss-probe", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.no_backends and args.backends_only:
        parser.error("--no-backends and --backends-only exclude each other")
    if args.backend_repeats is None:
        args.backend_repeats = 1 if args.quick else 3
    if args.repeats < 1 or args.backend_repeats < 1:
        parser.error("--repeats and --backend-repeats must be integers >= 1, got "
                     f"{args.repeats} and {args.backend_repeats}")
    return args


LOAD_TRIPLE_AT_START = os.getloadavg()
LOAD_AT_START = LOAD_TRIPLE_AT_START[0]


def main(argv=None) -> tuple[list[EngineResult], list[BackendResult]] | None:
    args = parse_args(argv)
    if args.rss_probe is not None:
        rss_probe(args.rss_probe, args.groups)
        return None
    shown = ["python", "benchmarks/bench_montecarlo.py"] + list(argv if argv is not None
                                                                else sys.argv[1:])
    env = "".join(f"{k}={os.environ[k]} " for k in ("OMP_NUM_THREADS",) if k in os.environ)
    results, exact = [], None
    if not args.backends_only:
        results = run(args.quick, args.repeats, rss=not (args.no_rss or args.quick))
        exact = float(benchmark_bandit().exact_mse_per_prompt("grpo", GROUP_SIZE)[0])
        section = markdown_section(results, env + " ".join(shown), exact)
        print(section)
    backends = [] if args.no_backends else run_backends(args.quick, args.backend_repeats)
    if backends:
        backend_section = backend_markdown_section(backends, env + " ".join(shown))
        print(backend_section)
    if args.readme is not None:
        if results:
            update_readme(args.readme, section)
        if backends:
            update_readme(args.readme, backend_section, BACKEND_SECTION, after=SECTION)
    if args.json is not None:
        args.json.write_text(json.dumps({"exact_mse": exact,
                                         "results": [asdict(r) for r in results],
                                         "backends": [asdict(r) for r in backends]}, indent=2))
    return results, backends


if __name__ == "__main__":
    main()
