"""Import a simulation or benchmark script (or a module of tests/data) by path, so tests call its
functions directly; ``ROOT`` and ``DATA`` for paths that do not depend on a test file's folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

#: The repository root: the nearest folder above this file that holds pyproject.toml.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: The tests' data folder (copied framework code, reference runs).
DATA = ROOT / "tests" / "data"


def load_module(path: Path, name: str):
    """Execute the file ``path`` as a module registered as ``sys.modules[name]``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load_script(relative: str, name: str | None = None):
    """Execute ``ROOT / relative`` as a module named ``name`` (default: the file's stem)."""
    path = ROOT / relative
    return load_module(path, name or path.stem)


def load_data(stem: str):
    """Execute ``tests/data/<stem>.py`` (copied framework code) as the module ``stem``."""
    return load_module(DATA / f"{stem}.py", stem)
