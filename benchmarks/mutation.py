"""Mutation testing of the core modules, one module at a time, each under a wall-clock budget.

One concept: bugs planted into the package on purpose, and which checks catch them. Two ways of
planting share the throw-away copy of the checkout: mutmut's exhaustive pass over one module
(the scores below), and ``--kinds``, the kinds of bug of issue 48 planted at randomly drawn
sites and run against the module's tests and the claims of verify that execute the site.

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

The planted kinds (no mutmut needed; reads docs/generated/route_map.json)::

    python benchmarks/mutation.py --kinds --quick                     # one bug per kind
    python benchmarks/mutation.py --kinds --per-kind 5 --write-docs  # the report's section
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
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


# ------------------------------------------------------------------------------ planted kinds
# The kinds of bug issue 48 found verify blind to, each planted at places drawn at random (a
# seeded draw over every candidate site ``ast`` finds, never a hand-picked place) and run
# against (a) the targeted tests of the mutated module and (b) ``verify --quick`` restricted to
# the claims that the route map (docs/generated/route_map.json) says execute the mutated
# function: a claim that does not execute it cannot see the change, so running only those
# claims measures the same verdict in a fraction of the time.


@dataclasses.dataclass(frozen=True)
class Site:
    """One place a bug of ``kind`` can be planted: the route, the file and the node's span."""

    kind: str
    route: str
    path: str
    span: tuple[int, int, int, int]  # (line, column, end line, end column) of the node
    before: str
    after: str


@dataclasses.dataclass(frozen=True)
class PlantedResult:
    """What caught one planted bug: its site, the claims and tests run, and their outcomes."""

    site: Site
    claims: tuple[str, ...]
    tests: tuple[str, ...]
    tests_outcome: str   # caught, missed, timeout, no tests
    verify_outcome: str  # caught, missed, timeout, not run (no claim executes the route)
    seconds: float


KINDS = {
    "route no claim runs": "an operator swapped (+ and -, * into /) in an answering route that "
                           "the route map says no claim executes",
    "shared code": "an operator swapped in a lower-layer route (advantages, theory, stats, "
                   "policies) executed by three claims or more, the code both sides of a "
                   "claim take as given",
    "boundary": "a comparison's strictness flipped (> and >=, < and <=) in a claimed route",
    "shape": "an axis or a shape index moved (0 and 1, -1 and -2) in a claimed route",
    "power": "a 1% bias: a division a / b turned into a / (1.01 b) in a claimed route of the "
             "Monte Carlo, pilot, statistics or theory layers",
}
_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div}
_STRICT = {ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Lt: ast.LtE, ast.LtE: ast.Lt}
_AXIS = {0: 1, 1: 0, -1: -2, -2: -1}
_LOWER = ("ustat_rl.advantages.", "ustat_rl.theory.", "ustat_rl.stats.", "ustat_rl.policies.")
_POWER = ("ustat_rl.montecarlo.", "ustat_rl.pilot.", "ustat_rl.stats.", "ustat_rl.theory.")
_EDGE = ("ustat_rl.claims.", "ustat_rl.interface.")
BIAS = 1.01


def _route_nodes(tree: ast.Module):
    """(qualified name, function node) of every top-level function and class method."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{sub.name}", sub


def _walk(node: ast.AST):
    """``ast.walk`` that does not enter f-strings (whose inner positions Python < 3.12 misreports)
    or string concatenations (a swapped operator there is a TypeError, not a wrong answer)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.JoinedStr) or _textual(child):
            continue
        yield from _walk(child)


def _textual(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and any(
        isinstance(side, ast.JoinedStr) or (isinstance(side, ast.Constant)
                                            and isinstance(side.value, (str, bytes)))
        for side in (node.left, node.right))


def _mutations(node: ast.AST, kind: str):
    """(before, after) source of every mutation of ``kind`` at ``node`` (none if it has none)."""
    if kind in ("route no claim runs", "shared code") and isinstance(node, ast.BinOp):
        new = _SWAP.get(type(node.op))
        if new is not None:
            yield ast.unparse(node), f"({ast.unparse(ast.BinOp(node.left, new(), node.right))})"
    elif kind == "boundary" and isinstance(node, ast.Compare) and len(node.ops) == 1:
        new = _STRICT.get(type(node.ops[0]))
        if new is not None:
            yield (ast.unparse(node),
                   f"({ast.unparse(ast.Compare(node.left, [new()], node.comparators))})")
    elif kind == "shape":
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "shape" and isinstance(node.slice, ast.Constant)
                and node.slice.value in _AXIS and not isinstance(node.slice.value, bool)):
            moved = ast.Subscript(node.value, ast.Constant(_AXIS[node.slice.value]), node.ctx)
            yield ast.unparse(node), ast.unparse(moved)
        elif (isinstance(node, ast.keyword) and node.arg == "axis"
              and isinstance(node.value, ast.Constant) and node.value.value in _AXIS
              and not isinstance(node.value.value, bool)):
            yield ast.unparse(node), f"axis={_AXIS[node.value.value]}"
        elif (isinstance(node, ast.keyword) and node.arg == "axis"
              and isinstance(node.value, ast.UnaryOp) and isinstance(node.value.op, ast.USub)
              and isinstance(node.value.operand, ast.Constant)
              and -node.value.operand.value in _AXIS):
            yield ast.unparse(node), f"axis={_AXIS[-node.value.operand.value]}"
    elif kind == "power" and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        biased = ast.BinOp(node.right, ast.Mult(), ast.Constant(BIAS))
        yield ast.unparse(node), f"({ast.unparse(ast.BinOp(node.left, ast.Div(), biased))})"


def _eligible(kind: str, route: str, entry: dict) -> bool:
    claims = entry["claims"]
    if kind == "route no claim runs":
        return entry["status"] == "unclaimed"
    if not claims or route.startswith(_EDGE):
        return False
    if kind == "shared code":
        return route.startswith(_LOWER) and len(claims) >= 3
    if kind == "power":
        return route.startswith(_POWER)
    return True


def candidate_sites(route_map: dict, root: Path = ROOT) -> dict[str, list[Site]]:
    """Every site of every kind in the package, per kind, in source order."""
    sites: dict[str, list[Site]] = {k: [] for k in KINDS}
    for path in sorted((root / "ustat_rl").rglob("*.py")):
        rel = path.relative_to(root)
        parts = rel.with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for qual, func in _route_nodes(tree):
            route = f"{module}.{qual}"
            entry = route_map["routes"].get(route)
            if entry is None:
                continue
            for kind in KINDS:
                if not _eligible(kind, route, entry):
                    continue
                for stmt in func.body:
                    for node in _walk(stmt):
                        for before, after in _mutations(node, kind):
                            span = (node.lineno, node.col_offset, node.end_lineno,
                                    node.end_col_offset)
                            sites[kind].append(Site(kind, route, str(rel), span, before, after))
    return sites


def draw_sites(sites: dict[str, list[Site]], per_kind: int, seed: int) -> list[Site]:
    """``per_kind`` sites of each kind, drawn without replacement by a seeded generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    chosen = []
    for kind in sites:
        pool = sites[kind]
        take = min(per_kind, len(pool))
        chosen += [pool[i] for i in sorted(rng.choice(len(pool), size=take, replace=False))]
    return chosen


_CONTROL_ROUTE = "ustat_rl.advantages.gradients.leave_one_out_baseline"
_CONTROL_NODE = "flat - rule.grouped(flat)"
_CONTROL_TEST = ("tests/advantages/test_estimators.py::"
                 "test_literal_loop_matches_every_estimator",)


def control_sites(root: Path = ROOT) -> list[tuple[Site, tuple[str, ...], tuple[str, ...]]]:
    """The two controls of the machinery, each with the claim and test aimed at its route:
    the leave-one-out advantage with its baseline added instead of subtracted (C1.loo and the
    test must catch it) and the same difference written ``-b + a`` (exactly equal in floating
    point: nothing may catch it)."""
    path = "ustat_rl/advantages/gradients.py"
    tree = ast.parse((root / path).read_text(encoding="utf-8"))
    func = dict(_route_nodes(tree))[_CONTROL_ROUTE.rsplit(".", 1)[-1]]
    node = next((n for n in ast.walk(func) if isinstance(n, ast.BinOp)
                 and ast.unparse(n) == _CONTROL_NODE), None)
    if node is None:
        raise ValueError(f"the control's node `{_CONTROL_NODE}` is no longer in "
                         f"{_CONTROL_ROUTE}: update _CONTROL_NODE")
    span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
    added = ast.unparse(ast.BinOp(node.left, ast.Add(), node.right))
    reordered = ast.unparse(ast.BinOp(ast.UnaryOp(ast.USub(), node.right), ast.Add(), node.left))
    return [(Site("control: planted", _CONTROL_ROUTE, path, span, _CONTROL_NODE,
                  f"({added})"), ("C1.loo",), _CONTROL_TEST),
            (Site("control: neutral", _CONTROL_ROUTE, path, span, _CONTROL_NODE,
                  f"({reordered})"), ("C1.loo",), _CONTROL_TEST)]


def plant(source: str, site: Site) -> str:
    """``source`` with the node at ``site.span`` replaced by ``site.after`` (checked to parse)."""
    lines = source.splitlines(keepends=True)
    line, col, end_line, end_col = site.span
    offsets = [0]
    for text in lines:
        offsets.append(offsets[-1] + len(text.encode("utf-8")))
    raw = source.encode("utf-8")
    start = offsets[line - 1] + col
    stop = offsets[end_line - 1] + end_col
    mutated = (raw[:start] + site.after.encode("utf-8") + raw[stop:]).decode("utf-8")
    if ast.dump(ast.parse(mutated)) == ast.dump(ast.parse(source)):
        raise ValueError(f"planting {site.after!r} at {site.path}:{line} changed nothing")
    return mutated


def targeted_tests(site: Site, root: Path = ROOT, limit: int = 4) -> tuple[str, ...]:
    """The mutated module's focused tests: its TARGETS entry if it has one, else the test files
    that name the mutated function, those named after its module first (at most ``limit``)."""
    for target in TARGETS:
        if target.path == site.path:
            return tuple(t for t in target.tests if "::" not in t)[:limit]
    name = site.route.rsplit(".", 1)[-1]
    stem = Path(site.path).stem
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    found = [p for p in sorted((root / "tests").rglob("test_*.py"))
             if pattern.search(p.read_text(encoding="utf-8"))]
    # the fast tier first, files named after the module first; the integration tier only
    # where no fast file names the function
    slow = {p for p in found if "pytest.mark.integration" in p.read_text(encoding="utf-8")}
    found = [p for p in found if p not in slow] or sorted(slow)
    found.sort(key=lambda p: (stem not in p.name, p.name))
    return tuple(str(p.relative_to(root)) for p in found[:limit])


def _timed(cmd: list[str], cwd: Path, env: dict, timeout: float) -> str:
    """caught (a non-zero exit), missed (exit 0) or timeout, for one command in its own session."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout"
    return "missed" if status == 0 else "caught"


@dataclasses.dataclass(frozen=True)
class PlantConfig:
    """How many bugs to plant, of which kinds, where to draw them, and the time for each run.

    ``kinds`` restricts the draw (default: every kind of :data:`KINDS`); ``controls`` runs the
    two controls of :func:`control_sites` first; no bug starts after ``stop_after_s`` seconds
    (the drawn bugs are run in an order shuffled by the seed, so a run cut short is still a
    random draw of every kind).
    """

    per_kind: int = 5
    seed: int = 48
    tests_timeout_s: float = 300.0
    verify_timeout_s: float = 300.0
    max_test_files: int = 4
    kinds: tuple[str, ...] = tuple(KINDS)
    controls: bool = True
    stop_after_s: float = float("inf")


def run_planted(route_map: dict, config: PlantConfig, log=print,
                on_result=None) -> list[PlantedResult]:
    """Plant each drawn bug in a throw-away copy, run its tests and its claims, restore it;
    ``on_result(results so far)`` after each bug."""
    import numpy as np

    drawn = draw_sites({k: v for k, v in candidate_sites(route_map).items() if k in config.kinds},
                       config.per_kind, config.seed)
    drawn = [drawn[i] for i in np.random.default_rng(config.seed).permutation(len(drawn))]
    began = time.monotonic()
    plan = (control_sites() if config.controls else []) + [
        (site, tuple(route_map["routes"][site.route]["claims"]),
         targeted_tests(site, ROOT, config.max_test_files)) for site in drawn]
    results = []
    clean_runs: dict[tuple[str, ...], str] = {}
    with tempfile.TemporaryDirectory(prefix="ustat-planted-") as tmp:
        workdir = Path(tmp)
        _copy_tracked(workdir)
        env = {**os.environ, "PYTHONPATH": str(workdir), "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1"}
        for site, claims, tests in plan:
            if time.monotonic() - began > config.stop_after_s:
                log(f"stopped after {config.stop_after_s:.0f} s: {len(results)} of {len(plan)} run")
                break
            target = workdir / site.path
            clean = target.read_text(encoding="utf-8")
            start = time.monotonic()
            pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                      "-m", "integration or not integration", *tests]
            if tests and tests not in clean_runs:
                # the same files on the clean copy: a file that fails or times out there
                # says nothing about the bug
                clean_runs[tests] = _timed(pytest, workdir, env, config.tests_timeout_s)
            target.write_text(plant(clean, site), encoding="utf-8")
            try:
                tested = ("no tests" if not tests else f"fails clean ({clean_runs[tests]})"
                          if clean_runs[tests] != "missed"
                          else _timed(pytest, workdir, env, config.tests_timeout_s))
                verified = ("not run" if not claims else _timed(
                    [sys.executable, "-m", "ustat_rl.interface.cli", "verify", "--only",
                     ",".join(claims)], workdir, env, config.verify_timeout_s))
            finally:
                target.write_text(clean, encoding="utf-8")
            result = PlantedResult(site, claims, tests, tested, verified,
                                   round(time.monotonic() - start, 1))
            results.append(result)
            if on_result is not None:
                on_result(results)
            log(f"{site.kind:20s} {site.route}: {site.before!r} -> {site.after!r}: tests "
                f"{tested}, verify {verified} ({len(claims)} claims), {result.seconds:.0f} s")
    return results


def planted_table(results: list[PlantedResult]) -> list[dict]:
    """Per kind: bugs planted, and the share the targeted tests and verify caught."""
    rows = []
    for kind in ["control: planted", "control: neutral", *KINDS]:
        mine = [r for r in results if r.site.kind == kind]
        if not mine and kind.startswith("control"):
            continue
        rows.append({"kind": kind, "planted": len(mine),
                     "tests caught": sum(r.tests_outcome == "caught" for r in mine),
                     "verify caught": sum(r.verify_outcome == "caught" for r in mine),
                     "timeouts": sum("timeout" in (r.tests_outcome, r.verify_outcome)
                                     for r in mine)})
    return rows


PLANTED_BEGIN = "<!-- planted kinds: begin (generated by `python benchmarks/mutation.py --kinds`) -->"
PLANTED_END = "<!-- planted kinds: end -->"


def _miss_needs(result: PlantedResult) -> str:
    """What each side that missed the bug would need to catch it (empty when both caught)."""
    kind = result.site.kind
    if kind.startswith("control"):
        return "" if kind.endswith("planted") else "nothing: a control no check may catch"
    parts = []
    if result.tests_outcome != "caught":
        parts.append("tests: " + ("a longer budget to decide" if result.tests_outcome == "timeout"
                                  else "a test file that names the route"
                                  if result.tests_outcome == "no tests" else _kind_need(kind)))
    if result.verify_outcome == "not run":
        parts.append("verify: a claim that executes the route (docs/claims.md, the to-do list)")
    elif result.verify_outcome == "timeout":
        parts.append("verify: a longer budget to decide")
    elif result.verify_outcome != "caught":
        parts.append("verify: " + _kind_need(kind))
    return "; ".join(parts)


def _kind_need(kind: str) -> str:
    return {"boundary": "a case that puts the compared values equal",
            "shape": "a case with unequal dimensions on the moved axis",
            "power": "a check with a standard error below 1% of the quantity",
            "shared code": "a second side that does not call the route",
            "route no claim runs": "a comparison of the route with an independent one",
            }[kind]


def planted_markdown(results: list[PlantedResult], meta: dict) -> str:
    """The generated section of docs/mutation.md."""
    out = [PLANTED_BEGIN, "", "## Planted kinds of issue 48: what the tests and verify catch", "",
           f"Measured {meta['date']} by `{meta['command']}` on {meta['machine']} (seed "
           f"{meta['seed']}, {meta['per_kind']} per kind drawn, "
           f"{sum(not r.site.kind.startswith('control') for r in results)} of the "
           f"{meta['drawn']} drawn run, {meta['seconds']:.0f} s in all). Each "
           f"bug is drawn at random over every candidate site of its kind (counts below) and "
           f"planted alone in a throw-away copy; *tests* are the mutated module's focused test "
           f"files, *verify* is `ustat-rl verify --quick --only` the claims that the route map "
           f"says execute the mutated route (a claim that does not execute it cannot see the "
           f"change). A timeout counts as not caught.", ""]
    for kind, text in KINDS.items():
        out.append(f"- **{kind}** ({meta['sites'][kind]} candidate sites): {text}.")
    out += ["", "| kind | planted | tests caught | verify caught | timeouts |", "|---|---|---|---|---|"]
    for row in planted_table(results):
        n = row["planted"]

        def share(k, n=n, row=row):
            return f"{row[k]}/{n} = {row[k] / n:.0%}" if n else "none run"

        out.append(f"| {row['kind']} | {n} | {share('tests caught')} | {share('verify caught')} "
                   f"| {row['timeouts']} |")
    out += ["", "| kind | route | bug | tests | verify (claims run) | a miss would need |",
            "|---|---|---|---|---|---|"]
    for r in results:
        need = _miss_needs(r)
        bug = f"`{r.site.before}` -> `{r.site.after}`".replace("|", "\\|")
        out.append(f"| {r.site.kind} | `{r.site.route}` | {bug} | {r.tests_outcome} | "
                   f"{r.verify_outcome} ({len(r.claims)}) | {need} |")
    out += ["", PLANTED_END, ""]
    return "\n".join(out)


def write_planted_section(path: Path, section: str) -> None:
    """Replace the generated section of ``path`` (or append it); the rest stays as written."""
    text = path.read_text(encoding="utf-8")
    if PLANTED_BEGIN in text:
        head, _, rest = text.partition(PLANTED_BEGIN)
        tail = rest.partition(PLANTED_END)[2].lstrip("\n")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def load_planted(path: Path) -> tuple[dict, list[PlantedResult]]:
    """``(meta, results)`` of a JSON written by ``--kinds --out``."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    results = []
    for r in raw["results"]:
        site = Site(**{**r["site"], "span": tuple(r["site"]["span"])})
        results.append(PlantedResult(**{**r, "site": site, "claims": tuple(r["claims"]),
                                        "tests": tuple(r["tests"])}))
    return raw.get("meta", {}), results


def run_kinds(args) -> int:
    """``--kinds``: plant the issue's kinds, write the section of docs/mutation.md."""
    import datetime
    import platform

    if args.render is not None:
        meta, results = load_planted(args.render)
        write_planted_section(ROOT / "docs" / "mutation.md", planted_markdown(results, meta))
        print(f"wrote the planted kinds' section of docs/mutation.md from {args.render}")
        return 0
    route_map = json.loads(args.route_map.read_text(encoding="utf-8"))
    if args.quick:
        # the controls and one bug of one kind, drawn by the seed: minutes, not hours
        kind = list(KINDS)[args.seed % len(KINDS)]
        config = PlantConfig(per_kind=1, seed=args.seed, tests_timeout_s=30,
                             verify_timeout_s=30, max_test_files=1, kinds=(kind,))
    else:
        config = PlantConfig(per_kind=args.per_kind, seed=args.seed,
                             stop_after_s=args.stop_after)
    start = time.monotonic()

    def save(results):
        if args.out is not None:
            args.out.write_text(json.dumps({"results": [dataclasses.asdict(r) for r in results]},
                                           indent=1))

    results = run_planted(route_map, config, on_result=save)
    sites = candidate_sites(route_map)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": "python benchmarks/mutation.py --kinds"
                       + (" --quick" if args.quick else f" --per-kind {config.per_kind}")
                       + f" --seed {config.seed}",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                       f"{platform.python_version()}",
            "seed": config.seed, "per_kind": config.per_kind,
            "drawn": config.per_kind * len(config.kinds), "stop_after_s": config.stop_after_s,
            "seconds": time.monotonic() - start, "sites": {k: len(v) for k, v in sites.items()}}
    for row in planted_table(results):
        print(f"{row['kind']:20s} planted {row['planted']}  tests caught {row['tests caught']}  "
              f"verify caught {row['verify caught']}  timeouts {row['timeouts']}")
    if args.out is not None:
        args.out.write_text(json.dumps({"meta": meta, "results": [dataclasses.asdict(r)
                                                                  for r in results]}, indent=1))
    if args.write_docs:
        write_planted_section(ROOT / "docs" / "mutation.md", planted_markdown(results, meta))
        print("wrote the planted kinds' section of docs/mutation.md")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"modules to run, from {[t.name for t in TARGETS]}")
    parser.add_argument("--budget", type=int, default=None, help="seconds per module")
    parser.add_argument("--out", type=Path, default=None, help="write the scores as JSON")
    parser.add_argument("--logs", type=Path, default=None, help="folder for mutmut's output")
    parser.add_argument("--kinds", action="store_true",
                        help="plant the kinds of bug of issue 48 at random sites instead")
    parser.add_argument("--quick", action="store_true",
                        help="with --kinds: the two controls and one bug of one kind (drawn by the "
                             "seed), 30 s per run, one test file")
    parser.add_argument("--per-kind", type=int, default=5, help="with --kinds: bugs per kind")
    parser.add_argument("--seed", type=int, default=48, help="with --kinds: the draw's seed")
    parser.add_argument("--stop-after", type=float, default=float("inf"),
                        help="with --kinds: start no bug after this many seconds")
    parser.add_argument("--route-map", type=Path,
                        default=ROOT / "docs" / "generated" / "route_map.json",
                        help="with --kinds: the route map that says which claims run a route")
    parser.add_argument("--render", type=Path, default=None,
                        help="with --kinds: write docs/mutation.md's section from a JSON of "
                             "--out, running nothing")
    parser.add_argument("--write-docs", action="store_true",
                        help="with --kinds: write the generated section of docs/mutation.md")
    args = parser.parse_args(argv)
    if args.kinds:
        if args.per_kind < 1:
            parser.error(f"--per-kind must be an integer >= 1, got {args.per_kind}")
        return run_kinds(args)
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
