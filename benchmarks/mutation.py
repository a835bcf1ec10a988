"""Mutation testing of the core modules, one module at a time, each under a wall-clock budget.

A mutant is a small deliberate bug (``<`` turned into ``<=``, ``+`` into ``-``, a constant moved
by one) written into one module; it is *killed* when the module's focused test selection fails.
The score of a module is killed / (killed + survived); mutants the budget did not reach are
counted separately as ``untested`` and never enter the score.  mutmut runs a module's mutants
in source order, so a budget that runs out covers the top of the module (constants,
validation, the first functions) and not the rest: the ``untested`` count says how much.  ``docs/mutation.md`` reports the
scores and explains each surviving mutant.

Every run works in a throw-away copy of the tracked files (``git ls-files``), so the checkout is
never mutated in place, even when a budget expires in the middle of a mutant.

Usage (from the repository root, with the ``mutation`` extra installed)::

    python benchmarks/mutation.py                       # every module, default budgets
    python benchmarks/mutation.py --only estimators     # one module
    python benchmarks/mutation.py --budget 120          # override every budget (seconds)
    python benchmarks/mutation.py --out mutation.json   # per-module scores and survivors as JSON

Needs ``mutmut`` 2.x (pinned in ``constraints.txt``).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Target:
    """One module to mutate, the focused tests that must kill its mutants, and the budget.

    ``tests`` are run in the given order with ``-x``, fastest and most direct first, so a killed
    mutant costs one interpreter start plus the first failing test.  ``env`` holds extra
    environment variables (``NUMBA_DISABLE_JIT=1`` runs the numba kernels as plain Python, so a
    mutant needs no recompilation; the tests then run slower, which the budget allows for).
    A test may be a pytest node id (``file::test``) to run part of a file.  ``only`` names
    top-level definitions (functions, classes, assigned names) and restricts the mutants to
    their lines: the others are counted ``skipped``, are never run and enter neither the score
    nor ``untested``.
    """

    name: str
    path: str
    tests: tuple[str, ...]
    budget_s: int = 480
    env: tuple[tuple[str, str], ...] = ()
    only: tuple[str, ...] = ()


_PILOT_KILLS = "tests/pilot/test_mutation_kills_pilot.py"
_PILOT_DOCTESTS = "tests/pilot/test_pilot_doctests.py::test_doctests"
_ALLOCATION_KILLS = "tests/theory/test_mutation_kills_allocation.py"
_FRAMEWORK_KILLS = "tests/frameworks/test_mutation_kills_frameworks.py"

TARGETS = (
    Target("estimators", "ustat_rl/advantages/gradients.py",
           ("tests/advantages/test_estimators.py",)),
    Target("ustatistics", "ustat_rl/stats/ustatistics.py",
           ("tests/stats/test_ustatistics.py",)),
    Target("theory.mse", "ustat_rl/theory/mse.py",
           ("tests/theory/test_theory.py", "tests/advantages/test_estimators.py")),
    Target("theory.scaling", "ustat_rl/theory/scaling.py",
           ("tests/theory/test_theory.py",)),
    Target("theory.hoeffding", "ustat_rl/theory/hoeffding.py",
           ("tests/theory/test_theory.py", "tests/stats/test_ustatistics.py")),
    Target("rates", "ustat_rl/stats/rates.py",
           ("tests/stats/test_rates.py",)),
    Target("montecarlo.bandit", "ustat_rl/montecarlo/bandit.py",
           ("tests/policies/test_bandit.py", "tests/montecarlo/test_montecarlo.py"),
           env=(("NUMBA_DISABLE_JIT", "1"),)),
    Target("advantages.parts", "ustat_rl/advantages/parts.py",
           ("tests/advantages/test_advantage_rules.py", "tests/advantages/test_estimators.py")),
    Target("theory.affine", "ustat_rl/theory/affine.py",
           ("tests/theory/test_theory.py", "tests/advantages/test_advantage_rules.py")),
    # modules added since the first rounds
    Target("aggregation", "ustat_rl/frameworks/aggregation.py",
           ("tests/frameworks/test_aggregation.py", "tests/frameworks/test_aggregation_validation.py")),
    Target("theory.advantage", "ustat_rl/theory/advantage.py",
           ("tests/theory/test_advantage_theory_validation.py", "tests/theory/test_advantage_theory.py")),
    # the conformance kit's own tests (hypothesis) take about 80 s a run on an idle machine and
    # 6 min under load, too slow to run against the conventions' mutants, whose focused tests
    # take seconds; the kit's module is its own target below
    Target("advantages.conventions", "ustat_rl/advantages/conventions.py",
           ("tests/advantages/test_conventions.py",)),
    Target("advantages.conformance", "ustat_rl/conformance/kit.py",
           ("tests/conformance/test_conformance_report.py", "tests/conformance/test_conformance.py")),
    # the report classes, moved out of kit.py on 2026-12-04 (not run since the move)
    Target("advantages.conformance.report", "ustat_rl/conformance/report.py",
           ("tests/conformance/test_conformance_report.py",)),
    Target("montecarlo.torch_backend", "ustat_rl/montecarlo/torch_backend.py",
           ("tests/montecarlo/test_montecarlo_torch.py",)),
    Target("pilot.estimate", "ustat_rl/pilot/estimate.py",
           ("tests/pilot/test_estimate_validation.py", "tests/pilot/test_estimate.py")),
    Target("pilot.uncertainty", "ustat_rl/pilot/uncertainty.py",
           ("tests/pilot/test_uncertainty_validation.py", "tests/pilot/test_uncertainty.py")),
    Target("scores.sketch", "ustat_rl/scores/sketch.py",
           ("tests/scores/test_sketch_validation.py", "tests/scores/test_sketch.py")),
    Target("scores.factored", "ustat_rl/scores/factored.py",
           ("tests/scores/test_factored_validation.py", "tests/scores/test_sketch.py")),
    # fifth round: the pilot's advice, the allocation, the Edgeworth cumulants, the kit's
    # tolerance and the frameworks layer (docs/mutation.md); each runs the tests written
    # against its survivors first
    Target("pilot.fieller", "ustat_rl/pilot/fieller.py",
           (_PILOT_KILLS, "tests/pilot/test_advice.py", _PILOT_DOCTESTS)),
    Target("pilot.advice", "ustat_rl/pilot/advice.py",
           (_PILOT_KILLS, "tests/pilot/test_advice.py", _PILOT_DOCTESTS)),
    Target("theory.edgeworth", "ustat_rl/theory/edgeworth.py",
           ("tests/stats/test_ustatistics.py::test_projected_grpo_cumulants_match_enumeration",
            "tests/stats/test_ustatistics.py"
            "::test_projected_grpo_cumulants_variance_is_lemma1_and_input_errors",
            "tests/weighted_chi2/test_series_brute_force.py::test_edgeworth_cdf_against_the_exact_gamma_law",
            "tests/weighted_chi2/test_series_brute_force.py"
            "::test_edgeworth_law_of_the_projected_grpo_gradient_by_monte_carlo")),
    Target("theory.allocation", "ustat_rl/theory/allocation.py",
           (_ALLOCATION_KILLS, "tests/theory/test_allocation.py")),
    Target("theory.allocation_baselines", "ustat_rl/theory/allocation_baselines.py",
           (_ALLOCATION_KILLS, "tests/theory/test_allocation.py", "tests/pilot/test_allocate_scaled_rules.py")),
    # the tolerance alone, against its pinned bound: the kit's hypothesis searches are the
    # conformance target's, too slow per mutant here
    Target("advantages.conformance.tolerance", "ustat_rl/conformance/kit.py",
           ("tests/conformance/test_mutation_kills_tolerance.py",
            "tests/conformance/test_kit_tolerance_pinned.py::test_tolerance_is_the_documented_bound",
            "tests/conformance/test_conformance_report.py"),
           only=("TOLERANCE_FORMULA", "_working", "tolerance")),
    Target("frameworks.trainer_units", "ustat_rl/frameworks/trainer_units.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_trainer_units.py")),
    Target("frameworks.grouped", "ustat_rl/frameworks/grouped.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_frameworks_adapters.py")),
    Target("frameworks.verl", "ustat_rl/frameworks/verl.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_frameworks_adapters.py")),
    Target("frameworks.dumps", "ustat_rl/frameworks/dumps.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_frameworks_adapters.py")),
    Target("frameworks.rewards_only", "ustat_rl/frameworks/rewards_only.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_frameworks_adapters.py")),
    Target("frameworks.trajectory", "ustat_rl/frameworks/trajectory.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_trajectory.py")),
    Target("frameworks.universality", "ustat_rl/frameworks/universality.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_trajectory.py")),
    Target("frameworks.window", "ustat_rl/frameworks/window.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_window.py", "tests/frameworks/test_trl_monitor.py")),
    Target("frameworks.gather", "ustat_rl/frameworks/gather.py",
           ("tests/frameworks/test_gather.py",)),
    Target("frameworks.demo", "ustat_rl/frameworks/demo.py",
           (_FRAMEWORK_KILLS, "tests/frameworks/test_trainer_units.py",
            "tests/frameworks/test_trl_monitor.py")),
    Target("frameworks.trl_monitor", "ustat_rl/frameworks/trl_monitor.py",
           ("tests/frameworks/test_trl_monitor.py",)),
)

# mutmut 2.x writes one of these into its cache for every mutant it has run.
_STATUS = {"ok_killed": "killed", "bad_survived": "survived", "bad_timeout": "timeout",
           "ok_suspicious": "suspicious", "skipped": "skipped", "untested": "untested"}


@dataclasses.dataclass(frozen=True)
class ModuleScore:
    """Outcome of one module's run.

    ``score`` is caught / (caught + survived) with caught = killed + suspicious (mutmut's
    "suspicious": the tests failed, but ran far slower than without the mutant, which on a
    loaded machine is the load), NaN when nothing was run; ``timeout`` mutants (the tests ran
    over ten times the baseline and were stopped) enter neither side; ``survivors`` lists
    ``(id, line number, source line, diff)``.
    """

    name: str
    path: str
    tests: tuple[str, ...]
    budget_s: int
    wall_s: float
    finished: bool
    counts: dict
    score: float
    survivors: list


def definition_lines(source: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """``(first, last)`` lines (1-based, inclusive) of each top-level definition in ``names``."""
    spans, found = [], set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined = {node.name}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined = {t.id for t in targets if isinstance(t, ast.Name)}
        else:
            continue
        if defined & set(names):
            found |= defined & set(names)
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            spans.append((first, node.end_lineno))
    missing = sorted(set(names) - found)
    if missing:
        raise ValueError(f"`only`: no top-level definition of {missing}")
    return spans


def _restrict_lines(workdir: Path, spans: list[tuple[int, int]]) -> None:
    """A ``mutmut_config.py`` whose ``pre_mutation`` skips every mutant outside ``spans``.

    mutmut 2.x imports it from the working directory and calls it before each mutant with the
    mutant's 0-based line index; a skipped mutant is recorded ``skipped`` without a test run.
    """
    (workdir / "mutmut_config.py").write_text(
        f"SPANS = {spans!r}\n\n\n"
        "def pre_mutation(context):\n"
        "    line = context.current_line_index + 1\n"
        "    if not any(first <= line <= last for first, last in SPANS):\n"
        "        context.skip = True\n")


def _copy_tracked(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def _read_cache(workdir: Path) -> tuple[dict, list]:
    counts = dict.fromkeys(_STATUS.values(), 0)
    survivors = []
    cache = workdir / ".mutmut-cache"
    if not cache.exists():
        return counts, survivors
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT Mutant.id, Mutant.status, Line.line_number, Line.line "
                          "FROM Mutant JOIN Line ON Mutant.line = Line.id").fetchall()
    for mutant_id, status, line_number, line in rows:
        counts[_STATUS.get(status, status)] = counts.get(_STATUS.get(status, status), 0) + 1
        if status == "bad_survived":
            survivors.append((mutant_id, line_number + 1, line.strip()))
    return counts, survivors


def _show(workdir: Path, mutant_id: int, env: dict) -> str:
    out = subprocess.run([sys.executable, "-m", "mutmut", "show", str(mutant_id)], cwd=workdir,
                         env=env, capture_output=True, text=True)
    return out.stdout.strip()


def run_target(target: Target, budget_s: int | None = None, diffs: bool = True,
               log_dir: Path | None = None) -> ModuleScore:
    """Mutate ``target.path`` in a fresh copy of the repository until done or out of budget."""
    budget = target.budget_s if budget_s is None else budget_s
    with tempfile.TemporaryDirectory(prefix="ustat-mutation-") as tmp:
        workdir = Path(tmp)
        _copy_tracked(workdir)
        if target.only:
            source = (workdir / target.path).read_text()
            _restrict_lines(workdir, definition_lines(source, target.only))
        env = {**os.environ, "PYTHONPATH": str(workdir), "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", **dict(target.env)}
        tests = [t for t in target.tests if (workdir / t.split("::")[0]).exists()]
        # mutmut 2.x counts only exit status 1 as "tests failed": a mutant that breaks an import
        # makes pytest exit with 2 (collection error) and would be scored as a survivor, so
        # every failing status is mapped to 1
        args = ", ".join(repr(a) for a in ("-x", "-q", "-p", "no:cacheprovider", *tests))
        runner = (f'{sys.executable} -c "import sys, pytest; '
                  f'sys.exit(1 if pytest.main([{args}]) else 0)"')
        cmd = [sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", target.path,
               "--tests-dir", "tests", "--runner", runner, "--simple-output", "--no-progress"]
        start = time.monotonic()
        log = open(os.devnull if log_dir is None else log_dir / f"{target.name}.log", "w")
        # a session of its own, so an expired budget stops mutmut's workers and pytest too
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=budget)
            finished = True
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            finished = False
        finally:
            log.close()
        wall = time.monotonic() - start
        counts, survivors = _read_cache(workdir)
        if diffs:
            survivors = [(i, n, line, _show(workdir, i, env)) for i, n, line in survivors]
    caught = counts["killed"] + counts["suspicious"]
    tested = caught + counts["survived"]
    return ModuleScore(target.name, target.path, tuple(tests), budget, round(wall, 1), finished,
                       counts, caught / tested if tested else float("nan"), survivors)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"modules to run, from {[t.name for t in TARGETS]}")
    parser.add_argument("--budget", type=int, default=None, help="seconds per module")
    parser.add_argument("--out", type=Path, default=None, help="write the scores as JSON")
    parser.add_argument("--logs", type=Path, default=None, help="folder for mutmut's output")
    args = parser.parse_args(argv)
    names = {t.name for t in TARGETS}
    if args.only is not None and not set(args.only) <= names:
        parser.error(f"--only takes names from {sorted(names)}, got {args.only}")
    chosen = [t for t in TARGETS if args.only is None or t.name in args.only]
    results = []
    for target in chosen:
        result = run_target(target, args.budget, log_dir=args.logs)
        results.append(result)
        c = result.counts
        print(f"{result.name:18s} score {result.score:6.1%}  killed {c['killed']:3d}  "
              f"survived {c['survived']:3d}  timeout {c['timeout']:2d}  suspicious {c['suspicious']:2d}  "
              f"untested {c['untested']:3d}  skipped {c['skipped']:3d}  {result.wall_s:6.0f} s"
              f"{'' if result.finished else ' (budget reached)'}", flush=True)
        for mutant_id, line_number, line, *_ in result.survivors:
            print(f"    survivor {mutant_id}: line {line_number}: {line}")
        if args.out is not None:
            args.out.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
