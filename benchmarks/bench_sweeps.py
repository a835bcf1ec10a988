"""Cost per cell of each full-size simulation sweep, and the wall time it projects on N workers.

A full-size sweep takes minutes to hours on this machine, so each script's representative cells
are run at a stated fraction of their work (replicates, runs or iterations; everything else at
full size) through the script's own cell function, and the full cost is extrapolated linearly
in that work. :data:`ASSUMPTIONS` says, per script, which cells and what is assumed; the README
section repeats it.

Projections: with ``T`` the sum of the cells' costs and ``t_max`` the longest cell, N one-core
workers (each as fast as a core here, under this load) finish in between ``max(T/N, t_max)``
and ``T/N + t_max`` (greedy list scheduling), plus start-up. The GPU figure is a projection for
the torch Monte Carlo backend at an assumed speed-up; no GPU was available to measure it.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_sweeps.py --readme benchmarks/README.md
    python benchmarks/bench_sweeps.py --quick     # tiny fractions: checks the plumbing only
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from ustat_rl.runs.records import replace_markdown_section

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Full-size sweeps: cost per cell and projected wall time"
WORKERS = (1, 8, 32, 128)
GPU_SPEEDUPS = (10, 50)  # assumed torch-on-GPU speed-ups over numba on one core: assumptions
SIM_PATH = ROOT / "simulations"
ASSUMPTIONS = {
    "gradient_mse": "one cell per family (policy `instruct`) at 1,000 of the 20,000 replicates "
                    "per prompt, after a warm-up that compiles the numba kernel; the other "
                    "policies of a family are assumed to cost what its measured cell costs.",
    "limit_law": "one chunk of 100 of its 500 runs, n up to 10,000; runs are vectorised, so "
                 "scaling 100 runs to 500 linearly overstates a full chunk.",
    "optimal_group_size": "every `iid` cell (N, G) at 30 of its 300 runs; the `finite` variant "
                          "is assumed to cost the same as `iid`.",
    "transformer_gradient_mse": "policy `medium`, both prompt sets, at a tenth of the prompts "
                                "(50 exact, 3 Monte Carlo with 40 replicates each); the other "
                                "policies share the architecture and are assumed to cost the "
                                "same. Fixed costs (loading, the `moderate` filter over the 500 "
                                "test prompts, the bootstrap) are scaled up too, so this is an "
                                "upper bound.",
    "transformer_group_size": "cells (N, G) for N in {256, 1024} and G in {2, 128}, each run to "
                              "2 and to 6 iterations; the difference gives the cost per "
                              "iteration, the rest the cost of two evaluations, so a full cell "
                              "costs 400 per-iteration + 2 x (t_2 - 2 per-iteration) (400 "
                              "iterations, 4 evaluations). N = 512 is interpolated linearly in "
                              "N; G between 2 and 128 takes the mean of the two.",
}


@dataclass(frozen=True)
class ScriptCost:
    """Measured and extrapolated cost of one script's full sweep.

    Attributes
    ----------
    script : str
    n_cells : int
        Cells of the full configuration.
    cell_seconds : tuple of float
        Extrapolated cost of every full cell, in seconds on one core here.
    measured : tuple of str
        What was timed: ``"cell: seconds at fraction"`` lines.
    """

    script: str
    n_cells: int
    cell_seconds: tuple
    measured: tuple

    @property
    def total(self) -> float:
        return float(sum(self.cell_seconds))

    @property
    def longest(self) -> float:
        return float(max(self.cell_seconds))


def load(name: str):
    """Import ``simulations/<name>.py`` as a module (it is a script, not a package module)."""
    module_name = f"bench_{name}"
    spec = importlib.util.spec_from_file_location(module_name, SIM_PATH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def bench_gradient_mse(quick: bool) -> ScriptCost:
    s = load("gradient_mse")
    reps = 50 if quick else 1000
    full = s.Config()
    s.simulate_cell(s.FAMILIES["arithmetic"](2.0), s.Config(n_reps=10), (0, 0))  # numba compile
    per_family, lines = {}, []
    for i, fam in enumerate(full.families):
        bandit = s.FAMILIES[fam](s.POLICY_STRENGTHS["instruct"])
        t = timed(s.simulate_cell, bandit, s.Config(n_reps=reps), (i, 1))
        per_family[fam] = t * full.n_reps / reps
        lines.append(f"{fam}/instruct: {t:.2f} s at {reps} of {full.n_reps} replicates")
    cells = [per_family[fam] for _, _, fam, _ in full.cells()]
    return ScriptCost("gradient_mse", len(cells), tuple(cells), tuple(lines))


def bench_limit_law(quick: bool) -> ScriptCost:
    s = load("limit_law")
    full = s.Config(s.FULL["n_runs"], tuple(s.FULL["checkpoints"]))
    runs = 4 if quick else 100
    t = timed(s.simulate_chunk, full, 0, runs, False)
    cells = [t * count / runs for _, count in full.chunks()]
    line = f"chunk of {runs} of {full.chunk} runs, n up to {max(full.checkpoints)}: {t:.2f} s"
    return ScriptCost("limit_law", len(cells), tuple(cells), (line,))


def bench_optimal_group_size(quick: bool) -> ScriptCost:
    s = load("optimal_group_size")
    full = s.Config(**s.FULL)
    runs = 3 if quick else 30
    part = s.Config(full.budgets, full.sizes, full.n_iters, runs)
    measured, lines = {}, []
    todo = [c for c in full.cells() if c[3] == "iid"]
    for v, _a, _j, variant, budget, g in (todo[:2] if quick else todo):
        t = timed(s.simulate_cell, part, (v, budget, g), variant, budget, g, False)
        measured[(budget, g)] = t * full.n_runs / runs
        lines.append(f"iid N={budget} G={g}: {t:.2f} s at {runs} of {full.n_runs} runs")
    mean = float(np.mean(list(measured.values())))
    cells = [measured.get((n, g), mean) for *_, n, g in full.cells()]
    return ScriptCost("optimal_group_size", len(cells), tuple(cells), tuple(lines))


def bench_transformer_gradient_mse(quick: bool) -> ScriptCost:
    s = load("transformer_gradient_mse")
    full = s.SIZES["full"]
    part = s.SIZES["quick"] if quick else (50, 3, 40)
    fraction = part[0] / full[0]
    test = s.make_splits(s.ArithmeticTask(), seed=0).test
    cost, lines = {}, []
    for pset in s.PROMPT_SETS:
        t = timed(s.simulate_cell, "medium", pset, test, part, 1, torch.device("cpu"))
        cost[pset] = t / fraction
        lines.append(f"medium/{pset}: {t:.2f} s at sizes {part} of {full}")
    cells = [cost[pset] for _ in s.POLICY_NAMES for pset in s.PROMPT_SETS]
    return ScriptCost("transformer_gradient_mse", len(cells), tuple(cells), tuple(lines))


def bench_transformer_group_size(quick: bool) -> ScriptCost:
    s = load("transformer_group_size")
    full = s.CONFIGS["full"]
    splits = s.make_splits(s.ArithmeticTask(), seed=0)
    n_full = max(full["iters"])
    points = ((32, 2), (32, 16)) if quick else ((256, 2), (256, 128), (1024, 2), (1024, 128))
    k1, k2 = (1, 2) if quick else (2, 6)
    cost, lines = {}, []
    for budget, g in points:
        t = {k: timed(s.run_cell, budget, g, 1, {**full, "iters": (k,)}, splits,
                      torch.device("cpu")) for k in (k1, k2)}
        per_iter = max(t[k2] - t[k1], 0.0) / (k2 - k1)
        two_evals = max(t[k1] - k1 * per_iter, 0.0)
        cost[(budget, g)] = n_full * per_iter + two_evals * (len(full["iters"]) + 1) / 2
        lines.append(f"N={budget} G={g}: {t[k1]:.2f} s to {k1} iterations, {t[k2]:.2f} s to "
                     f"{k2}: {per_iter:.3f} s per iteration")
    budgets = sorted({b for b, _ in points})

    def at(budget, g):
        per_budget = {b: (cost.get((b, g)) or np.mean([c for (bb, _), c in cost.items()
                                                       if bb == b])) for b in budgets}
        return float(np.interp(budget, budgets, [per_budget[b] for b in budgets]))

    cells = [at(n, g) for n in full["budgets"] for g in full["groups"] if n % g == 0
             for _ in range(full["seeds"])]
    return ScriptCost("transformer_group_size", len(cells), tuple(cells), tuple(lines))


BENCHES = {"gradient_mse": bench_gradient_mse, "limit_law": bench_limit_law,
           "optimal_group_size": bench_optimal_group_size,
           "transformer_gradient_mse": bench_transformer_gradient_mse,
           "transformer_group_size": bench_transformer_group_size}


def hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render(costs: list[ScriptCost], machine: str, command: str) -> str:
    head = " | ".join(f"N = {n}" for n in WORKERS)
    lines = [SECTION, "",
             "Cost per cell of each full-size sweep, measured on representative cells at a "
             "fraction of their work and extrapolated linearly (which cells, which fraction "
             "and which assumptions for each script: listed below the table). Wall time on "
             "N one-core Ray workers, each as fast as a core of this machine under this load: "
             "from max(T/N, longest cell) to T/N + longest cell (greedy list scheduling), plus "
             "start-up (here about 10 s for Ray and a few seconds per worker for imports). "
             "These are projections from the measured cells, not measurements of full sweeps.",
             "", f"| script | full cells | cost per cell (min - max) | total T (one core) | {head} |",
             "|---|---|---|---|" + "---|" * len(WORKERS)]
    for c in costs:
        walls = []
        for n in WORKERS:
            low, high = max(c.total / n, c.longest), c.total / n + c.longest
            walls.append(f"{hours(low)} - {hours(high)}")
        lines.append(f"| {c.script} | {c.n_cells} | {hours(min(c.cell_seconds))} - "
                     f"{hours(c.longest)} | {hours(c.total)} | " + " | ".join(walls) + " |")
    lines += ["", "Which cells were timed, and what is assumed:", ""]
    for c in costs:
        lines += [f"- {c.script}: {ASSUMPTIONS[c.script]} Timed: " + "; ".join(c.measured) + "."]
    mse = next((c for c in costs if c.script == "gradient_mse"), None)
    if mse is not None:
        lines += ["", "One GPU, torch Monte Carlo backend (`backend=\"torch\"` in "
                  "`ustat_rl.montecarlo`), gradient_mse only: a projection, not a measurement "
                  "(no GPU here, and the script does not yet expose the backend). Assuming the "
                  "GPU runs the bandit statistics S times faster than numba on one core here, "
                  "the full sweep takes T / S: "
                  + ", ".join(f"S = {s}: {hours(mse.total / s)}" for s in GPU_SPEEDUPS)
                  + f" (T = {hours(mse.total)}), plus CUDA start-up, and assuming the rest of "
                  "a cell (exact theory, CSV) is negligible. S is an assumption, not a "
                  "measurement; the target stated in the backends table above (50x numba "
                  "n_jobs=2 at G = 64) has not been measured either."]
    lines += ["", machine, "", "```", command, "```", ""]
    return "\n".join(lines)


def update_readme(path: Path, section: str) -> None:
    """Rewrite this benchmark's section of the README, leaving the rest untouched."""
    replace_markdown_section(path, SECTION, section)


def main(argv=None) -> list[ScriptCost]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny fractions (plumbing only)")
    parser.add_argument("--scripts", nargs="+", choices=list(BENCHES), default=list(BENCHES))
    parser.add_argument("--readme", type=Path, default=None, help="rewrite this README's section")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    start = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    costs = []
    for name in args.scripts:
        t0 = time.perf_counter()
        costs.append(BENCHES[name](args.quick))
        print(f"{name}: {costs[-1].n_cells} cells, total {hours(costs[-1].total)} on one core "
              f"(measured in {time.perf_counter() - t0:.0f} s)", flush=True)
    end_load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    machine = (f"Measured on the shared development machine: {os.cpu_count()} cores, "
               f"{platform.machine()}, Python {platform.python_version()}, numpy "
               f"{np.__version__}, torch {torch.__version__}, one thread per process, started "
               f"{start}; `uptime` at the start: `{uptime}`; load average (1, 5, 15 min) at the "
               f"end: {end_load}. Other jobs shared the cores, so every cost is that of a loaded "
               "core and varies from run to run." + (" QUICK MODE: tiny fractions, figures "
                                                     "meaningless." if args.quick else ""))
    command = "OMP_NUM_THREADS=1 python benchmarks/bench_sweeps.py" + (
        " --quick" if args.quick else "") + (" --readme benchmarks/README.md" if args.readme else "")
    text = render(costs, machine, command)
    print(text)
    if args.readme:
        update_readme(args.readme, text)
    return costs


if __name__ == "__main__":
    main()
