"""Shared test settings (tolerances live in ustat_rl.tolerances)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402

#: Test files that make up most of the suite's time (the notebooks, the documentation build,
#: the conformance kit's searches, the planted-bug runs of verify, installs and sweeps run in
#: subprocesses). They carry the ``slow`` mark, so ``pytest -m "not slow"`` is the fast tier.
SLOW_FILES = frozenset({
    "test_notebooks.py", "test_docs_build.py", "test_conformance.py", "test_multireward.py",
    "test_kit_tolerance_pinned.py", "test_new_rules.py", "test_base_install.py",
    "test_verify_power.py", "test_kit_generator.py", "test_proofs_check.py", "test_sweeps.py",
    "test_pilot_sketch.py", "test_pilot_transformer.py", "test_sweeps_ray.py",
    "test_claims.py", "test_compare_runs.py", "test_frameworks_window.py",
    "test_verify_power_advice.py", "test_frameworks_trl_dp.py", "test_weighted_chi2.py",
    "test_rate_allocation.py", "test_verify_power_run_noise.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
