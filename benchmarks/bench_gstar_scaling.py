"""Peak memory and wall time of ``ustat-rl gstar`` against the pilot's number of prompts.

Workload: pilots of a 3-prompt softmax bandit with 4 actions (full scores: 12 columns), 8 samples
a prompt, at 2,500 to 40,000 prompts, written with :func:`ustat_rl.scores.bandit.bandit_pilot`
and ``Rollouts.save``. Each ``ustat-rl gstar PILOT --budget 256 --estimator E`` runs in its own
subprocess; its peak resident memory is the child's own ``VmHWM`` (``/proc/self/status``, read
as it exits; ``ru_maxrss`` from ``os.wait4`` where there is no ``/proc``) and its wall time the
subprocess's. Linux starts a child's ``ru_maxrss`` at its parent's peak, so the pilots are drawn
in children too and this process imports numpy only. The memory per prompt should stay flat if the cost is linear in the
prompts: ``KiB/prompt`` divides the peak above the interpreter's baseline (``ustat-rl --help``)
by the prompts, and falls while the imports' fixed cost dominates; ``marginal KiB/prompt`` is the
growth of the peak from the previous pilot size over the prompts added, constant for a cost
linear in the prompts (it would double with each doubling for a quadratic one).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_gstar_scaling.py           # 2,500 .. 40,000
    OMP_NUM_THREADS=1 python benchmarks/bench_gstar_scaling.py --quick   # 2,500 and 5,000

Writes ``benchmarks/results/gstar_scaling.csv`` (``--out`` to change) and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FULL_SIZES = (2_500, 5_000, 10_000, 20_000, 40_000)
QUICK_SIZES = (2_500, 5_000)
ESTIMATORS = ("grpo", "trl_group")
SAMPLES, BUDGET = 8, 256


def write_pilot(n_prompts: int, path: Path, seed: int = 1) -> None:
    """A pilot of the 3-prompt, 4-action bandit: ``n_prompts`` groups of 8, 12 score columns."""
    from ustat_rl.policies.softmax import SoftmaxBandit
    from ustat_rl.scores.bandit import bandit_pilot

    bandit = SoftmaxBandit(
        np.array([[0.0, 0.3, -0.2, 0.1], [0.2, -0.1, 0.0, 0.4], [-0.3, 0.1, 0.2, 0.0]]),
        np.array([[0.9, 0.6, 0.3, 0.1], [0.2, 0.5, 0.7, 0.4], [0.6, 0.4, 0.5, 0.3]]))
    bandit_pilot(bandit, n_prompts, SAMPLES, seed).save(path)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


#: Runs the CLI and, on exit, writes its own peak RSS (``VmHWM``, KiB) to stderr. ``VmHWM`` belongs
#: to the process's memory map, which ``exec`` makes new; ``ru_maxrss`` of a child does not
#: restart: Linux starts it at the parent's peak, so a large parent (a test session that loaded
#: torch) would hide the child's own figure.
WRAPPER = """
import atexit, runpy, sys
def _peak():
    try:
        with open('/proc/self/status') as status:
            for line in status:
                if line.startswith('VmHWM:'):
                    sys.stderr.write('\\nPEAK_KIB ' + line.split()[1] + '\\n')
    except OSError:
        pass
atexit.register(_peak)
runpy.run_module('ustat_rl.interface.cli', run_name='__main__', alter_sys=True)
"""


def measure(args: list[str]) -> tuple[float, float]:
    """``(peak RSS in MiB, wall seconds)`` of ``python -m ustat_rl.interface.cli *args``: the
    child's ``VmHWM`` where ``/proc`` has it, else its ``ru_maxrss`` (``os.wait4``)."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", WRAPPER, *args], env=_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = child.stderr.read().decode()
    child.stderr.close()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ustat-rl {' '.join(args)} failed: {err}")
    own = [line.split()[1] for line in err.splitlines() if line.startswith("PEAK_KIB ")]
    if own:
        return int(own[-1]) / 1024.0, wall
    scale = 1024.0 if sys.platform != "darwin" else 1024.0 * 1024.0  # ru_maxrss: KiB on Linux
    return usage.ru_maxrss / scale, wall


def run(sizes, out: Path) -> list[dict]:
    rows = []
    base, _ = measure(["--help"])
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"pilot_{n}.npz"
            # in a child: Linux carries a parent's peak RSS into its children's ru_maxrss, so
            # this process stays small (numpy only) and the pilots are drawn elsewhere
            subprocess.run([sys.executable, __file__, "--write-pilot", str(n), str(path)],
                           check=True, env=_env())
            for estimator in ESTIMATORS:
                peak, wall = measure(["gstar", str(path), "--budget", str(BUDGET),
                                      "--estimator", estimator])
                before = [r for r in rows if r["estimator"] == estimator]
                slope = ((peak - before[-1]["peak_mib"]) * 1024.0 / (n - before[-1]["prompts"])
                         if before else float("nan"))
                rows.append(dict(prompts=n, samples=n * SAMPLES, estimator=estimator,
                                 peak_mib=round(peak, 1), wall_s=round(wall, 2),
                                 baseline_mib=round(base, 1),
                                 kib_per_prompt=round((peak - base) * 1024.0 / n, 2),
                                 marginal_kib_per_prompt=round(slope, 2)))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| prompts | estimator | peak RSS (MiB) | wall (s) | KiB/prompt above baseline "
             "| marginal KiB/prompt |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['prompts']:,} | {r['estimator']} | {r['peak_mib']:.1f} | {r['wall_s']:.2f} "
              f"| {r['kib_per_prompt']:.2f} | {r['marginal_kib_per_prompt']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,500 and 5,000 prompts only")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "gstar_scaling.csv", help="CSV to write")
    parser.add_argument("--write-pilot", nargs=2, metavar=("PROMPTS", "PATH"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write_pilot:
        write_pilot(int(args.write_pilot[0]), Path(args.write_pilot[1]))
        return []
    rows = run(QUICK_SIZES if args.quick else FULL_SIZES, args.out)
    print(table(rows))
    print(f"baseline (ustat-rl --help): {rows[0]['baseline_mib']:.1f} MiB; CSV: {args.out}")
    return rows


if __name__ == "__main__":
    main()
