"""Shared test settings, the two tiers, and fixtures every test file may use.

Tolerances live in ``ustat_rl.tolerances``.

**Tiers.** The fast tier (units, exactness, properties) is what a plain ``pytest`` runs: the
``addopts`` of ``pyproject.toml`` select ``-m "not integration"``. The integration tier is every
test marked ``integration``: the files of ``INTEGRATION_FILES`` below (each with the reason it
belongs there), and single tests marked ``@pytest.mark.integration`` where they sit in a file of
the fast tier. The README's test command runs both tiers (``-m "integration or not
integration"``); ``-m integration`` runs the integration tier alone.

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

__all__ = ["DATA", "ROOT", "INTEGRATION_FILES"]

#: The integration tier, file by file, with the reason each file belongs there. Names only (no
#: folder), so a file keeps its tier when it moves into a subfolder of tests/.
INTEGRATION_FILES = {
    # notebooks and the documentation
    "test_notebooks.py": "notebook: executes every notebook",
    "test_docs_build.py": "docs build: the strict Sphinx build of the whole site",
    # installs
    "test_base_install.py": "install: a fresh virtual environment with the base install",
    # whole claims, each run with a planted bug (or against a reference run)
    "test_verify_power.py": "whole claims: each power claim with a planted bug it must catch",
    "test_verify_power_advice.py": "whole claim C50 with planted bugs",
    "test_verify_power_run_noise.py": "whole claims C53, C48 with planted bugs",
    "test_verify_power_dynamic_sampling.py": "whole claim C51 with planted bugs",
    "test_verify_power_multireward.py": "whole claim C52 with planted bugs",
    "test_rate_allocation.py": ("whole claims: each one's stated false-failure share, and "
                                "statistics planted 3% too large"),
    "test_compare_runs.py": ("whole claims: verify --quick in a subprocess against a stored "
                             "reference run (verdicts and predictions to 1e-12)"),
    "test_claims.py": ("whole claims through the verify command line (JSON reproducibility), "
                       "and negative controls at the claims' Monte Carlo sizes"),
    "test_weighted_chi2.py": ("whole claim C20.dist with a planted engine drift, the benchmark "
                              "script in a subprocess, mpmath references"),
    "test_proofs_check.py": "whole derivations: every proof of `ustat-rl proofs` (sympy)",
    # the conformance command: the kit's whole search against an implementation
    "test_conformance.py": "conformance runs: the kit's searches and its command line",
    "test_kit_tolerance_pinned.py": "conformance runs: every convention's tolerance, both sides",
    "test_kit_generator.py": "conformance runs: the kit's generator searched for its claims",
    "test_new_rules.py": "conformance runs: each framework rule against its copied source",
    "test_beyond_group_rules.py": "conformance runs: each further group rule against its "
                                  "copied source",
    "test_multireward.py": "conformance runs: the multi-reward rules against copied sources",
    "test_more_rules.py": "conformance runs: verl's opo and ROLL's reward_norm against their "
                          "copied sources",
    # TRL runs
    "test_frameworks_trl.py": "TRL run: the monitor inside the real GRPOTrainer",
    "test_frameworks_trl_dp.py": "TRL run: GRPOTrainer in two torchrun processes",
    "test_frameworks_trl_masks.py": "TRL run: GRPOTrainer at learning rate 0",
    "test_benchmarks_monitor.py": "TRL run: benchmarks/bench_monitor.py, monitored runs",
    # scripts
    "test_sweeps.py": "scripts: sweeps in subprocesses, killed and resumed",
    "test_sweeps_ray.py": "scripts: a simulation on a local Ray cluster",
    "test_simulations_allocation.py": "script: simulations/allocation_training.py --quick",
    "test_simulations_gradient_mse.py": "script: simulations/gradient_mse.py --quick",
    "test_simulations_training.py": "scripts: limit_law, optimal_group_size, bench_training",
    "test_simulations_trl_gradient_mse.py": "script and TRL run: trl_gradient_mse.py --quick",
    "test_simulations_trl_group_size.py": "script and TRL run: trl_group_size.py --quick",
    "test_advice_study.py": "script and TRL run: advice_study.py --quick",
    "test_transformer_scripts.py": "scripts: the transformer simulations and benchmark --quick",
    "test_benchmarks_montecarlo.py": "script: benchmarks/bench_montecarlo.py --quick",
    "test_benchmarks_sweeps.py": "script: benchmarks/bench_sweeps.py",
    "test_pilot_coverage_script.py": "script: simulations/pilot_coverage.py --quick",
    # coverage studies: many pilots of a policy, each check a coverage count
    "test_pilot_transformer.py": "coverage study: pilots of the committed transformer policy",
    "test_frameworks_window.py": "coverage study: monitor windows of the transformer policy",
    "test_small_pilot_coverage.py": "coverage study: 400 small pilots per cell",
    "test_pilot_sketch.py": ("coverage study: sketched inner products of a tiny GPT-2 against "
                             "full per-sample gradients over many projections"),
}


def pytest_configure(config):
    missing = [name for name in INTEGRATION_FILES if not any((ROOT / "tests").rglob(name))]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py INTEGRATION_FILES names files that do not "
                                f"exist: {', '.join(sorted(missing))}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in INTEGRATION_FILES:
            item.add_marker(pytest.mark.integration)


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
def _interior_pilot(n_prompts, group_size, seed, stream, sketch_dim):
    from ustat_rl.policies.examples import interior_optimum_bandit
    from ustat_rl.scores.bandit import bandit_pilot
    from ustat_rl.seeding import child_rng

    pilot = bandit_pilot(interior_optimum_bandit(), n_prompts, group_size,
                         child_rng(seed, stream), sketch_dim=sketch_dim)
    for value in vars(pilot).values():  # shared between tests: nobody may write into it
        if hasattr(value, "setflags"):
            value.setflags(write=False)
    return pilot


@pytest.fixture(scope="session")
def interior_pilot():
    """``interior_pilot(n_prompts, group_size, seed, stream, sketch_dim=None)``: a pilot of
    ``interior_optimum_bandit()`` drawn with ``child_rng(seed, stream)``.

    The same arguments give the same (read-only) pilot object for the whole session, so files
    that use the same pilot draw it once.
    """
    def draw(n_prompts, group_size, seed, stream, sketch_dim=None):
        return _interior_pilot(n_prompts, group_size, seed, stream, sketch_dim)

    return draw
