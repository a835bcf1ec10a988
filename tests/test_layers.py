"""The layers point one way: ``ustat_rl.claims`` imports ``proofs_check``, never the reverse.

``proofs_check`` returns derivations and comparisons of its own; the adapter
``ustat_rl.claims.symbolic`` turns them into registry checks under the same decision rules.
Every detector here has a negative control that feeds it a case it must flag.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import proofs_check
from proofs_check import bridge, limit_law
from proofs_check.catalogue import entry_named, run_entry
from proofs_check.comparison import ATOL, Comparison, Z
from ustat_rl.claims.registry import Z_CHECK, check_exact
from ustat_rl.claims.symbolic import comparison_check, derivation_check, symbolic_checks

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "proofs_check"

#: Imports every proofs_check module in a fresh interpreter (``__main__`` would run the CLI;
#: it imports nothing but ``runner``).
IMPORT_ALL = (
    "import proofs_check, sys; import proofs_check.runner, proofs_check.errata, "
    "proofs_check.bridge, proofs_check.catalogue, proofs_check.evidence; "
    "import importlib, pkgutil; "
    "[importlib.import_module('proofs_check.' + m.name) "
    "for m in pkgutil.iter_modules(proofs_check.__path__) if m.name != '__main__']"
)
#: Fails (AssertionError naming the culprits) when any ``ustat_rl.claims`` module was loaded.
DETECTOR = (
    "assert not any(m.startswith('ustat_rl.claims') for m in sys.modules), "
    "sorted(m for m in sys.modules if m.startswith('ustat_rl.claims'))"
)


def _python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that resolves imports to this checkout."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


# ---------------------------------------------------------------------------- import direction
def test_proofs_check_never_loads_the_claims_package():
    proc = _python(f"{IMPORT_ALL}; {DETECTOR}; print(proofs_check.__file__)")
    assert proc.returncode == 0, proc.stderr
    # the modules checked are this checkout's, not an installed copy
    assert Path(proc.stdout.strip()).resolve().is_relative_to(PACKAGE)


def test_detector_flags_a_module_list_with_the_claims_package():
    # negative control: the same imports and detector, plus one claims module
    proc = _python(f"{IMPORT_ALL}; import ustat_rl.claims.symbolic; {DETECTOR}")
    assert proc.returncode != 0
    assert "AssertionError" in proc.stderr and "ustat_rl.claims.symbolic" in proc.stderr


def _claims_imports(source: str) -> list[str]:
    """Modules of ``ustat_rl.claims`` imported anywhere in ``source`` (function bodies too)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # "from ustat_rl import claims" names the package as ustat_rl.claims
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return [n for n in names if n == "ustat_rl.claims" or n.startswith("ustat_rl.claims.")]


def test_no_deferred_import_of_the_claims_package():
    # the subprocess test sees import-time loads; a lazy import inside a function needs the AST
    offenders = {path.name: _claims_imports(path.read_text())
                 for path in sorted(PACKAGE.glob("*.py"))}
    assert len(offenders) >= 10
    assert not {name: found for name, found in offenders.items() if found}


@pytest.mark.parametrize("source", [
    "from ustat_rl.claims.registry import Check",
    "def f():\n    import ustat_rl.claims\n",
    "from ustat_rl import claims",
])
def test_static_detector_flags_claims_imports(source):
    assert _claims_imports(source)


def test_static_detector_allows_the_maths_modules():
    assert not _claims_imports("from ustat_rl.policies.softmax import SoftmaxBandit\n"
                               "import ustat_rl.advantages.gradients\nfrom . import claims_like\n")


# ---------------------------------------------------------------------------- the adapter
def test_symbolic_checks_come_from_derivations():
    checks = symbolic_checks("C17")
    derived = proofs_check.claim_derivations("C17")
    assert [c.name for c in checks] == [f"{d.name}: {d.statement}" for d in derived]
    assert all(c.passed and c.evidence == "symbolic" and c.measured == 1.0 for c in checks)
    assert symbolic_checks("C6") == []


def test_derivation_check_fails_for_a_disproved_form():
    # negative control: the transcribed Lemma 14 is disproved, so as a claim it cannot pass
    result = run_entry(entry_named("Lemma 14 as transcribed (C16)"))
    check = derivation_check(result)
    assert not result.holds and not check.passed and check.measured == 0.0
    assert check.note.startswith("disproved")


def _comparisons() -> list[Comparison]:
    """Comparisons of every kind, agreeing and not (the bridge's own negative controls)."""
    rng = np.random.default_rng(3)
    # Theorem 8's printed weight (no beta^2), rejected by the interval rule
    paper_weight = float(limit_law.lyapunov_weight_1d(limit_law.paper_omega()).subs(
        {limit_law.beta: 0.5, limit_law.lam: 3.0, limit_law.gamma: 1.0}))
    return [
        Comparison.exact("exact, equal", [1.0, -2.0], [1.0, -2.0], rtol=bridge.RTOL),
        Comparison.exact("exact, off by 1e-9", [1.0, -2.0], [1.0, -2.0 + 1e-9], rtol=bridge.RTOL),
        *bridge.k3_monte_carlo(rng, 20000),
        *bridge.k3_monte_carlo(rng, 20000, estimator=lambda r: np.log(r) ** 2 / 2),
        *bridge.sgd_limit_monte_carlo(rng, n_iter=500, n_reps=2000),
        *bridge.sgd_limit_monte_carlo(rng, n_iter=500, n_reps=2000, weight=paper_weight),
    ]


def test_comparison_check_keeps_the_bridge_verdict():
    comparisons = _comparisons()
    checks = [comparison_check(c) for c in comparisons]
    assert {c.kind for c in comparisons} == {"exact", "monte-carlo", "interval"}
    assert {c.ok for c in comparisons} == {True, False}  # both outcomes are exercised
    for comp, check in zip(comparisons, checks):
        assert (check.name, check.passed) == (comp.name, comp.ok)
        expected_kind = "monte-carlo" if comp.kind == "monte-carlo" else "exact-numeric"
        assert check.evidence == expected_kind
        if comp.kind != "exact":  # an exact check's headline is the largest deviation
            assert (check.predicted, check.measured) == (comp.expected, comp.actual)


def test_comparison_check_rejects_a_verdict_the_registry_does_not_reproduce():
    # negative control for the guard: flip the bridge's verdict and the adapter must object
    for comp in _comparisons():
        if comp.kind == "interval":
            continue  # the interval verdict is carried over, not recomputed
        with pytest.raises(RuntimeError, match="differs"):
            comparison_check(dataclasses.replace(comp, ok=not comp.ok))


def test_bridge_tolerances_match_the_registry():
    assert Z == Z_CHECK
    assert ATOL == inspect.signature(check_exact).parameters["atol"].default


@pytest.mark.parametrize("name", ["proofs_check.evidence", "ustat_rl.claims.symbolic"])
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------------- one formula, one place
import io  # noqa: E402
import tokenize  # noqa: E402

pytestmark = pytest.mark.fast

#: ``G* = 1 + sqrt(c3'/c1)`` written out, and Theorem 2's GRPO excess numerator
#: ``E||W||^2 Var(Z|x) + ||g(x)||^2`` combined with a ``1/(G(G-1))`` factor.
FORMULA_PATTERNS = {
    "G*": re.compile(r"1(\.0)?\s*\+\s*(math\.|np\.)?sqrt\("),
    "Theorem 2 excess": re.compile(r"(reward_var|grad_sq).*\(\s*\w+\s*-\s*1(\.0)?\s*\)\)?"),
}


def _code_only(source: str) -> str:
    """The source with comments and string literals (docstrings included) blanked."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            continue
        out.append(tok.string if tok.type != tokenize.NEWLINE else "\n")
    return "".join(out)


def _formula_sites(root: Path) -> list[tuple[str, str]]:
    sites = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith("ustat_rl/theory/"):
            continue
        code = _code_only(path.read_text())
        for line in code.split("\n"):
            for name, pattern in FORMULA_PATTERNS.items():
                if name == "Theorem 2 excess" and "reward_var" not in line:
                    continue
                if pattern.search(line) and (name == "G*" or "grad_sq" in line):
                    sites.append((rel, name))
    return sites


def test_theorem2_and_gstar_live_only_in_the_theory_package():
    root = Path(__file__).resolve().parents[1] / "ustat_rl"
    assert _formula_sites(root) == []


def test_the_formula_scan_finds_a_second_copy(tmp_path):
    pkg = tmp_path / "ustat_rl"
    pkg.mkdir()
    (pkg / "copy.py").write_text('"""1 + sqrt(c3/c1) in a docstring is fine."""\n'
                                 "import math\n\n\n"
                                 "def g_star(c1, c3):\n    return 1.0 + math.sqrt(c3 / c1)\n\n\n"
                                 "def excess(m, G):\n"
                                 "    return (m.score_sq * m.reward_var + m.grad_sq) / (G * (G - 1))\n")
    assert sorted(_formula_sites(pkg)) == [("ustat_rl/copy.py", "G*"),
                                           ("ustat_rl/copy.py", "Theorem 2 excess")]


# ---------------------------------------------------------------------------- package scans
LIBRARY = Path(__file__).resolve().parents[1] / "ustat_rl"

#: A module is one concept whatever its length (scipy keeps a contract in one file); past this
#: many lines it is flagged for review, and must say at its top why it is one concept: a
#: paragraph of its docstring that starts with :data:`LENGTH_REASON`.
REVIEW_LINES = 600

#: The words that open a long module's reason, e.g. "One concept: the weighted chi-square's
#: series, whose terms share one recurrence ...".
LENGTH_REASON = "One concept:"

#: The leave-one-out advantage, ``z - (S - z)/(n - 1) = n (z - m)/(n - 1)``, in its code forms
#: (comments and strings blanked, spaces removed): ``(S - z)/(n - 1)``, a product with
#: ``n/(n - 1)`` or ``n/max(n - 1, 1)`` (not Bessel's ``sqrt(n/(n - 1))``), and
#: ``(G z - T)/(G - 1)``.
LOO_PATTERNS = (
    re.compile(r"\([\w.\[\](),:]*(sum|total)[\w.\[\](),:=]*-[\w.\[\]]+\)/\(?\w+-1"),
    re.compile(r"\*\(?(\w+)/(\(|np\.maximum\()\1-1(\.0)?\b"),
    re.compile(r"\((\w+)\*[\w.\[\]]+-[\w.\[\]*]+\)/\(\1-1"),
)

#: The one home of the formula, and modules where the same algebra is another quantity.
LOO_HOME = "ustat_rl/advantages/parts.py"
LOO_ELSEWHERE = {"ustat_rl/pilot/replicates.py": "leave-one-prompt-out means of the jackknife",
                 "ustat_rl/claims/literal_forms.py": "the frameworks' formulas written out for "
                                                     "C46: a route independent of the registry "
                                                     "(slime's Bessel factor n/(n - 1) among them)",
                 "ustat_rl/claims/beyond_answers/enumerated_routes.py":
                     "C71's advantages written out: the side independent of the package's "
                     "routes it checks (benchmarks/claim_sides.py)"}


def _modules(root: Path):
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def _imports(path: Path, name: str):
    """``(target module, imported name or None)`` for every import in ``path`` (deferred ones too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            yield from ((target, alias.name) for alias in node.names)


def _private_imports(root: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for each ``from X import _name`` whose ``_name`` is not a submodule."""
    found = []
    for path, name in _modules(root):
        for target, imported in _imports(path, name):
            if not imported or not imported.startswith("_") or imported.startswith("__"):
                continue
            sub = root.parent.joinpath(*target.split("."), imported)
            if not (sub.with_suffix(".py").exists() or sub.is_dir()):
                found.append((name, f"{target}.{imported}"))
    return found


def _folder_cycles(root: Path) -> list[list[str]]:
    """Cycles among the package's folders (and top-level modules), deferred imports included."""
    top = root.name
    edges: dict[str, set[str]] = {}
    for path, name in _modules(root):
        parts = name.split(".")
        if len(parts) < 2:
            continue  # the package's own __init__ re-exports every layer
        for target, imported in _imports(path, name):
            full = f"{target}.{imported}" if imported else target
            other = full.split(".")
            if other[0] == top and len(other) > 1 and other[1] != parts[1]:
                edges.setdefault(parts[1], set()).add(other[1])
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return cycles


def _module_cycles(root: Path) -> list[list[str]]:
    """Circles of imports between the package's modules, each as its sorted members.

    A strongly connected component of the module-level import graph with more than one module.
    Deferred imports (inside a function) count: a circle closed by one still ties the two
    modules into one unit that neither can be read or tested without (the conformance kit's
    ``adapters`` <-> ``search`` circle was closed that way). An import of a package is an arrow
    to its ``__init__``, which is how Python runs it.
    """
    edges: dict[str, set[str]] = {}
    for name, other in _resolved_imports(root):
        if other and other != name:
            edges.setdefault(name, set()).add(other)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node):  # Tarjan's algorithm
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            members = []
            while not members or members[-1] != node:
                members.append(stack.pop())
            if len(members) > 1:
                components.append(sorted(members))

    for node in sorted(edges):
        if node not in order:
            visit(node)
    return sorted(components)


#: The layers in README's layout order: a module may import only its own layer and the layers
#: before it (deferred imports too). Each folder of the package is the layer of its name; the
#: root modules in :data:`BASE` are the layer ``"base"``. A layer named here whose folder does not
#: exist yet constrains nothing.
LAYERS = ("base", "stats", "weighted_chi2", "advantages", "conformance", "theory", "policies",
          "training", "montecarlo", "pilot", "scores", "frameworks", "claims", "runs",
          "interface")

#: The root modules, all foundational (the bottom layer): argument checks, output paths,
#: number formatting, seeds, tolerances, and the package's own ``__init__``,
#: whose re-exports are imported on first use (an ``from ustat_rl import X`` in the library is
#: resolved to the module that defines ``X``).
BASE = ("__init__", "_validation", "_paths", "formatting", "seeding", "tolerances")


def _room(root: Path, name: str) -> str | None:
    """The layer of module ``name`` of the package at ``root``, or None if it has no place."""
    parts = name.split(".")
    if len(parts) == 1:
        return "base" if "__init__" in BASE else None
    if (root / parts[1]).is_dir():
        return parts[1] if parts[1] in LAYERS and parts[1] != "base" else None
    return "base" if parts[1] in BASE else None


def _unassigned(root: Path) -> list[str]:
    """Root modules and folders of the package that have no layer."""
    return sorted({name.split(".")[1] if "." in name else "__init__"
                   for _, name in _modules(root) if _room(root, name) is None})


def _is_module(root: Path, dotted: str) -> bool:
    where = root.parent.joinpath(*dotted.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _root_names(root: Path) -> tuple[dict[str, str], set[str]]:
    """The package ``__init__``'s lazy exports (name -> defining module) and its own names."""
    exports, own = {}, set()
    for node in ast.parse((root / "__init__.py").read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name):
                own.add(target.id)
                if target.id == "_EXPORTS":
                    exports = {n: f"{root.name}{module}" for module, names
                               in ast.literal_eval(node.value).items() for n in names}
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            own.add(node.name)
    return exports, own


def _resolved_imports(root: Path):
    """``(module, imported library module or None)`` for every import of the package.

    None marks an import that names no module of the package (an old path, or a name
    ``ustat_rl`` does not define): library code imports the modules that exist.
    """
    exports, own = _root_names(root) if (root / "__init__.py").is_file() else ({}, set())
    for path, name in _modules(root):
        for target, imported in _imports(path, name):
            if target.split(".")[0] != root.name:
                continue
            if imported is None:  # import a.b.c
                yield name, target if _is_module(root, target) else None
            elif not _is_module(root, target):
                yield name, None
            elif _is_module(root, f"{target}.{imported}"):
                yield name, f"{target}.{imported}"
            elif target == root.name:  # from ustat_rl import X
                yield name, exports.get(imported, target if imported in own else None)
            else:
                yield name, target


def _layer_violations(root: Path) -> list[tuple[str, str]]:
    """``(layer, imported layer)`` pairs that point up README's layout order."""
    found = []
    for name, other in _resolved_imports(root):
        here, there = _room(root, name), other and _room(root, other)
        if here and there and LAYERS.index(there) > LAYERS.index(here):
            found.append((here, there))
    return sorted(set(found))


def _unresolved_imports(root: Path) -> list[str]:
    """Modules of the package that import a library path that is no module of it."""
    return sorted({name for name, other in _resolved_imports(root) if other is None})


def _long_modules(root: Path, limit: int = REVIEW_LINES) -> list[tuple[str, int]]:
    """Modules past ``limit`` lines whose docstring does not say why they are one concept."""
    found = []
    for path, name in _modules(root):
        source = path.read_text()
        if (n := len(source.splitlines())) <= limit:
            continue
        doc = ast.get_docstring(ast.parse(source)) or ""
        reasons = [p for p in doc.split("\n\n") if p.lstrip().startswith(LENGTH_REASON)]
        if not any(len(p.strip()) > len(LENGTH_REASON) + 20 for p in reasons):
            found.append((name, n))
    return found


def _loo_sites(root: Path) -> list[str]:
    """Modules whose code (not prose) writes the leave-one-out advantage, one entry per line."""
    sites = []
    for path, _ in _modules(root):
        rel = path.relative_to(root.parent).as_posix()
        if rel in LOO_ELSEWHERE:
            continue
        for line in _code_only(path.read_text()).split("\n"):
            squeezed = line.replace(" ", "")
            if any(p.search(squeezed) for p in LOO_PATTERNS):
                sites.append(rel)
    return sites


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ustat_rl"
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def test_no_private_name_is_imported_across_modules():
    assert _private_imports(LIBRARY) == []


def test_private_import_scan_flags_a_planted_import(tmp_path):
    root = _plant(tmp_path, {"__init__.py": "from . import _sub\n", "_sub.py": "",
                             "a.py": "def _helper():\n    pass\n",
                             "b.py": "def f():\n    from .a import _helper\n"})
    assert _private_imports(root) == [("ustat_rl.b", "ustat_rl.a._helper")]


def test_no_folder_level_import_cycle():
    assert _folder_cycles(LIBRARY) == []


def test_cycle_scan_flags_a_planted_cycle(tmp_path):
    root = _plant(tmp_path, {"__init__.py": "", "x/__init__.py": "", "y/__init__.py": "",
                             "x/m.py": "from ..y.n import f\n",
                             "y/n.py": "def f():\n    from ..x import m\n"})
    assert _folder_cycles(root) == [["x", "y", "x"]]


def test_no_import_cycle_between_modules():
    assert _module_cycles(LIBRARY) == []


def test_module_cycle_scan_flags_planted_cycles(tmp_path):
    # inside one folder, closed by a deferred import (as adapters <-> search was), and through a
    # package's __init__ that re-exports a module which imports the package back
    root = _plant(tmp_path, {"__init__.py": "", "kit/__init__.py": "from .registry import f\n",
                             "kit/registry.py": "def f():\n    from . import g\n",
                             "kit/a.py": "from .b import probe\n",
                             "kit/b.py": "def probe():\n    from .a import load\n",
                             "kit/c.py": "from .a import load\n"})
    assert _module_cycles(root) == [["ustat_rl.kit", "ustat_rl.kit.registry"],
                                    ["ustat_rl.kit.a", "ustat_rl.kit.b"]]
    # a one-way chain is no circle
    (root / "kit" / "b.py").write_text("def probe():\n    pass\n")
    (root / "kit" / "registry.py").write_text("def f():\n    pass\n")
    assert _module_cycles(root) == []


def test_modules_import_only_the_layers_before_them():
    assert _layer_violations(LIBRARY) == []


def test_every_module_has_a_layer():
    assert _unassigned(LIBRARY) == []
    # the scan sees the whole package: the root modules, every folder, the nested ones
    rooms = {_room(LIBRARY, name) for _, name in _modules(LIBRARY)}
    assert {"base", "stats", "conformance", "advantages", "interface"} <= rooms
    assert _room(LIBRARY, "ustat_rl.policies.transformer.moments") == "policies"


def test_library_imports_name_modules_of_the_package():
    assert _unresolved_imports(LIBRARY) == []


def test_layer_scan_flags_a_planted_upward_import(tmp_path):
    root = _plant(tmp_path, {"__init__.py": "", "theory/__init__.py": "",
                             "montecarlo/__init__.py": "", "montecarlo/engine.py": "",
                             "theory/m.py": "def f():\n    from ..montecarlo import engine\n"})
    assert _layer_violations(root) == [("theory", "montecarlo")]


def test_layer_scan_flags_a_base_module_importing_back_up(tmp_path):
    # a root helper reaching into a layer above it, by a deferred import and through the
    # package's lazy re-export
    root = _plant(tmp_path, {"__init__.py": '_EXPORTS = {".stats.rates": ("RateFit",)}\n',
                             "stats/__init__.py": "", "stats/rates.py": "class RateFit:\n    pass\n",
                             "claims/__init__.py": "", "claims/registry.py": "",
                             "seeding.py": "def f():\n    from .claims import registry\n",
                             "_validation.py": "from . import RateFit\n"})
    assert _layer_violations(root) == [("base", "claims"), ("base", "stats")]
    # and the same imports from the layer above are allowed
    (root / "claims" / "m.py").write_text("from ..stats.rates import RateFit\nfrom .. import seeding\n")
    assert ("claims", "stats") not in _layer_violations(root)


def test_layer_scan_reports_a_planted_module_without_a_layer(tmp_path):
    root = _plant(tmp_path, {"__init__.py": "", "_validation.py": "", "loose.py": "",
                             "rooms/__init__.py": "", "rooms/m.py": "",
                             "stats/__init__.py": "", "stats/rates.py": ""})
    assert _unassigned(root) == ["loose", "rooms"]


def test_import_scan_reports_an_old_path(tmp_path):
    root = _plant(tmp_path, {"__init__.py": "__version__ = '0'\n", "stats/__init__.py": "",
                             "stats/rates.py": "", "theory/__init__.py": "",
                             "theory/a.py": "from ..rates import loglog_slope\n",
                             "theory/b.py": "import ustat_rl.rates\n",
                             "theory/c.py": "from ustat_rl import rates, __version__\n",
                             "theory/ok.py": "from ..stats import rates\nfrom .. import __version__\n"})
    assert _unresolved_imports(root) == ["ustat_rl.theory.a", "ustat_rl.theory.b",
                                         "ustat_rl.theory.c"]


def test_the_layout_page_draws_the_layers_in_their_order():
    layout = (LIBRARY.parent / "docs" / "layout.md").read_text().split("```")[1]
    drawn = re.findall(r"^  (\w+)/ ", layout, flags=re.M)
    folders = [layer for layer in LAYERS if (LIBRARY / layer).is_dir()]
    assert drawn == folders
    assert all(re.search(rf"\b{name}\b", layout) for name in BASE if name != "__init__")


def test_every_long_module_says_why_it_is_one_concept():
    assert _long_modules(LIBRARY) == []


def test_length_scan_flags_a_long_module_without_its_reason(tmp_path):
    body = "x = 1\n" * REVIEW_LINES
    reason = f'"""The series.\n\n{LENGTH_REASON} its terms share one recurrence and one bound.\n"""\n'
    root = _plant(tmp_path, {"__init__.py": "", "long.py": '"""The series."""\n' + body,
                             "bare.py": body + "x = 2\n", "short.py": body[:-6],
                             "empty_reason.py": f'"""{LENGTH_REASON}\n"""\n' + body,
                             "reasoned.py": reason + body})
    assert _long_modules(root) == [("ustat_rl.bare", REVIEW_LINES + 1),
                                   ("ustat_rl.empty_reason", REVIEW_LINES + 2),
                                   ("ustat_rl.long", REVIEW_LINES + 1)]


def test_the_leave_one_out_formula_is_written_once():
    assert _loo_sites(LIBRARY) == [LOO_HOME]


@pytest.mark.parametrize("code", [
    "centred = reward - (total - reward) / (G - 1)\n",
    "loo = dev * n / np.maximum(n - 1.0, 1.0)\n",
    "s_a = (g * sums[a] - counts[a] * total) / (g - 1.0)\n",
])
def test_the_formula_scan_flags_a_planted_copy(tmp_path, code):
    root = _plant(tmp_path, {"__init__.py": '"""(S - z)/(n - 1) in prose is fine."""\n',
                             "copy.py": code})
    assert _loo_sites(root) == ["ustat_rl/copy.py"]


# ---------------------------------------------------------------------------- tests mirror it
#: Test folders that are not a folder of the package: the scripts of simulations/ and benchmarks/,
#: and the documentation pages' examples and figures (docs).
TEST_FOLDERS_BEYOND = frozenset({"scripts", "docs", "data", "artifacts", "__pycache__"})

#: Test files that check the whole checkout rather than one layer, kept at the top of tests/.
TOP_LEVEL_TESTS = frozenset({"test_base_install.py", "test_docs_build.py", "test_doctests.py",
                             "test_invariants.py", "test_invariants_trajectory.py",
                             "test_layers.py", "test_notebooks.py", "test_old_names.py",
                             "test_proofs_check.py", "test_signatures.py",
                             "test_theory_notes.py"})


def _misplaced_tests(tests: Path, library: Path) -> list[str]:
    """Test files outside a folder named for a package folder (or the listed top-level ones)."""
    folders = {p.name for p in library.iterdir() if (p / "__init__.py").is_file()}
    found = [p.name for p in tests.glob("test_*.py") if p.name not in TOP_LEVEL_TESTS]
    for sub in tests.iterdir():
        if sub.is_dir() and sub.name not in folders | TEST_FOLDERS_BEYOND:
            found += [f"{sub.name}/{p.name}" for p in sub.rglob("test_*.py")]
    return sorted(found)


def test_tests_mirror_the_package():
    tests = ROOT / "tests"
    assert _misplaced_tests(tests, LIBRARY) == []
    # every folder of tests/ with tests in it is used, and most layers have one
    assert len([p for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))]) >= 12


def test_misplaced_test_scan_flags_planted_files(tmp_path):
    library = _plant(tmp_path, {"__init__.py": "", "theory/__init__.py": ""})
    tests = tmp_path / "tests"
    for rel in ("theory/test_ok.py", "test_loose.py", "nowhere/test_lost.py", "test_layers.py"):
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text("")
    assert _misplaced_tests(tests, library) == ["nowhere/test_lost.py", "test_loose.py"]


# ------------------------------------------------------------------ claims/ is no helper library
def _lower_claims_importers(tests: Path) -> list[str]:
    """Test files in the folder of a layer below ``claims`` that import ``ustat_rl.claims``
    (function bodies too): a lower layer's tests test that layer, with its own helpers."""
    below = LAYERS[:LAYERS.index("claims")]
    return sorted(path.relative_to(tests).as_posix()
                  for folder in tests.iterdir() if folder.is_dir() and folder.name in below
                  for path in folder.rglob("*.py") if _claims_imports(path.read_text()))


def test_lower_layer_tests_do_not_import_claims():
    """A test of a layer below claims/ neither imports a claim nor a claim module's helper: a
    test of a claim lives in tests/claims, a helper in the layer it belongs to."""
    assert _lower_claims_importers(ROOT / "tests") == []


def test_claims_import_scan_flags_planted_test_files(tmp_path):
    files = {"theory/test_deferred.py": "def test_a():\n    from ustat_rl.claims import registry\n",
             "stats/test_top.py": "import ustat_rl.claims.registry\n",
             "pilot/helpers.py": "from ustat_rl import claims\n",
             "theory/test_ok.py": "from ustat_rl.theory import scaling\n",
             "claims/test_claim.py": "from ustat_rl.claims import registry\n",
             "interface/test_cli.py": "from ustat_rl.claims import registry\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _lower_claims_importers(tmp_path) == ["pilot/helpers.py", "stats/test_top.py",
                                                 "theory/test_deferred.py"]


# ---------------------------------------------------------------------------- tests tiered
from tiers import tier_problems  # noqa: E402


def test_every_test_file_states_one_tier():
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    assert len(files) > 100
    assert tier_problems(files) == []


def test_tier_scan_flags_planted_files(tmp_path):
    files = {"test_none.py": "import pytest\n\n\ndef test_a():\n    pass\n",
             "test_fast.py": "import pytest\n\npytestmark = pytest.mark.fast\n",
             "test_slow.py": "import pytest\n\npytestmark = [pytest.mark.integration,\n"
                             "              pytest.mark.skipif(False, reason='x')]\n",
             "test_both.py": "import pytest\n\npytestmark = [pytest.mark.fast, "
                             "pytest.mark.integration]\n",
             "test_mixed.py": "import pytest\n\npytestmark = pytest.mark.fast\n\n\n"
                              "@pytest.mark.integration\ndef test_slow():\n    pass\n",
             "test_param.py": "import pytest\n\npytestmark = pytest.mark.fast\n\n\n"
                              "@pytest.mark.parametrize('x', [pytest.param(1, "
                              "marks=pytest.mark.integration)])\ndef test_p(x):\n    pass\n",
             "test_inside.py": "import pytest\n\n\ndef test_a():\n"
                               "    pytestmark = pytest.mark.fast\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    flagged = [p.split(":")[0] for p in tier_problems(tmp_path.iterdir())]
    assert flagged == [str(tmp_path / n) for n in ("test_both.py", "test_inside.py",
                                                    "test_mixed.py", "test_none.py",
                                                    "test_param.py")]
