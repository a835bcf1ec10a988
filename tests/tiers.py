"""Each test file's tier, as the file itself states it.

A test file opens with ``pytestmark = pytest.mark.fast`` (the fast tier: units, exactness,
properties; what a plain ``pytest`` runs) or ``pytestmark = pytest.mark.integration`` (the
integration tier: whole claims with planted bugs, notebooks, the docs build, TRL runs, scripts,
installs, conformance runs, coverage studies), with the reason in a comment beside it; other
marks may join it in a list. The tier is read from the source (not by importing the file), so
a file that fails to import is still checked, and a file holds one tier: a single slow test of a
fast file goes to a file of the integration tier.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: The tiers, as pytest marks (registered in pyproject.toml).
TIERS = ("fast", "integration")


def _marks(node: ast.AST) -> set[str]:
    """Tier names ``X`` of every ``pytest.mark.X`` inside ``node``."""
    return {sub.attr for sub in ast.walk(node)
            if isinstance(sub, ast.Attribute) and sub.attr in TIERS
            and isinstance(sub.value, ast.Attribute) and sub.value.attr == "mark"}


def file_tier(source: str) -> str | None:
    """The tier that a test file's module-level ``pytestmark`` gives, or None (none, or two)."""
    tiers: set[str] = set()
    for node in ast.parse(source).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            tiers |= _marks(node.value)
    return tiers.pop() if len(tiers) == 1 else None


def single_test_marks(source: str) -> set[str]:
    """Tiers marked on single tests (decorators, ``pytest.param(marks=...)``), not the file."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            continue
        found |= _marks(node)
    return found


def tier_problems(paths) -> list[str]:
    """``"path: why"`` for each test file without exactly one tier, or with tests of another."""
    problems = []
    for path in sorted(Path(p) for p in paths):
        source = path.read_text()
        tier = file_tier(source)
        if tier is None:
            problems.append(f"{path}: no `pytestmark = pytest.mark.fast` or "
                            f"`pytestmark = pytest.mark.integration` (exactly one tier)")
        elif others := single_test_marks(source) - {tier}:
            problems.append(f"{path}: a {tier}-tier file with single tests marked "
                            f"{', '.join(sorted(others))} (a file holds one tier)")
    return problems
