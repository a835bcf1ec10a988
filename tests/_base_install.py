"""The base-install boundary: which installed top-level modules a plain ``pip install -e .`` lacks.

``blocked_modules()`` reads ``[project].dependencies`` from pyproject.toml (at test time, so a
dependency moved into the core is honoured at once), takes their transitive requirements from
the installed metadata, and returns every importable top-level name that only distributions
outside that closure provide (hypothesis, ray, pyarrow, sphinx, ... in a dev environment).
``RUNNER`` is a script that blocks them with a meta-path finder and then runs a command line
(``-m module`` or a script path), so a test sees what a user with the base install sees.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"ustat_rl", "proofs_check"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_requirements() -> list[str]:
    """``[project].dependencies`` of pyproject.toml."""
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as handle:
        return list(tomllib.load(handle)["project"]["dependencies"])


def core_closure() -> set[str]:
    """Canonical names of the core dependencies and everything they require (extras off)."""
    from packaging.requirements import Requirement

    todo = [Requirement(r) for r in core_requirements()]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = _canonical(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(req.name).requires or []
        except metadata.PackageNotFoundError:
            continue
        todo.extend(Requirement(r) for r in requires)
    return seen


def blocked_modules() -> list[str]:
    """Top-level modules installed here that the base install would not have."""
    allowed = core_closure()
    blocked = []
    for module, dists in metadata.packages_distributions().items():
        if (module in OWN or module in sys.stdlib_module_names or not module.isidentifier()
                or module.startswith("_")):
            continue
        if not any(_canonical(d) in allowed for d in dists):
            blocked.append(module)
    return sorted(blocked)


RUNNER = '''
import importlib.abc
import runpy
import sys

BLOCKED = frozenset(sys.argv[1].split(","))


class BaseInstall(importlib.abc.MetaPathFinder):
    """Import of a module outside the core dependencies fails as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not a core dependency)",
                                      name=name)
        return None


sys.meta_path.insert(0, BaseInstall())
target, argv = sys.argv[2], sys.argv[3:]
if target == "-m":
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = [target, *argv]
    sys.path.insert(0, str(__import__("pathlib").Path(target).resolve().parent))
    runpy.run_path(target, run_name="__main__")
'''
