"""Shared test settings, the two tiers, and fixtures every test file may use.

Tolerances live in ``ustat_rl.tolerances``.

**Tiers.** Each test file states its tier in itself: ``pytestmark = pytest.mark.fast`` (units,
exactness, properties) or ``pytestmark = pytest.mark.integration`` (whole claims with planted
bugs, notebooks, the docs build, TRL runs, scripts, installs, conformance runs, coverage
studies), the reason for the integration tier in a comment beside it (``tests/tiers.py``). A
plain ``pytest`` runs the fast tier (``pyproject.toml``'s ``addopts`` select ``-m "not
integration"``); the README's test command runs both (``-m "integration or not
integration"``); ``-m integration`` runs the integration tier alone. A run that collects a file
without exactly one tier, or a file holding single tests of the other tier, stops before any
test runs.

**Paths.** ``ROOT`` is the repository root, found by walking up to ``pyproject.toml``, so a test
file keeps working when it moves into a subfolder of ``tests/``; ``DATA`` is ``tests/data``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from functools import lru_cache  # noqa: E402

import pytest  # noqa: E402
from script_loader import DATA, ROOT, load_module, load_script  # noqa: E402
from tiers import tier_problems  # noqa: E402

__all__ = ["DATA", "ROOT"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Refuse a run that collected a test file without its tier (before ``-m`` deselects)."""
    problems = tier_problems({item.path for item in items if item.path.name.startswith("test_")})
    if problems:
        raise pytest.UsageError("test files must state their tier (tests/tiers.py):\n  "
                                + "\n  ".join(problems))


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="session")
def root():
    """The repository root (a ``pathlib.Path``)."""
    return ROOT


@pytest.fixture(scope="session")
def script():
    """``script(relative, name=None)``: a simulation or benchmark script imported by path.

    ``relative`` is relative to the repository root (``"simulations/gradient_mse.py"``); the
    module is named ``name`` (default: the file's stem). Each call executes the file afresh.
    """
    return load_script


@pytest.fixture(scope="session")
def data_module():
    """``data_module(stem)``: ``tests/data/<stem>.py`` imported by path (copied framework code)."""
    return lambda stem: load_module(DATA / f"{stem}.py", stem)


@lru_cache(maxsize=None)
def _interior_pilot(n_prompts, group_size, seed, stream, sketch):
    from ustat_rl.policies.examples import interior_optimum_bandit
    from ustat_rl.scores.bandit import bandit_pilot
    from ustat_rl.seeding import child_rng

    pilot = bandit_pilot(interior_optimum_bandit(), n_prompts, group_size,
                         child_rng(seed, stream), sketch=sketch)
    for value in vars(pilot).values():  # shared between tests: nobody may write into it
        if hasattr(value, "setflags"):
            value.setflags(write=False)
    return pilot


@pytest.fixture(scope="session")
def interior_pilot():
    """``interior_pilot(n_prompts, group_size, seed, stream, sketch=None)``: a pilot of
    ``interior_optimum_bandit()`` drawn with ``child_rng(seed, stream)``, its scores projected by
    the ``SketchSpec`` ``sketch`` if one is given.

    The same arguments give the same (read-only) pilot object for the whole session, so files
    that use the same pilot draw it once.
    """
    def draw(n_prompts, group_size, seed, stream, sketch=None):
        return _interior_pilot(n_prompts, group_size, seed, stream, sketch)

    return draw
