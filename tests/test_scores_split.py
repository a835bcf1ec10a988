"""The split of the pilot into statistics (ustat_rl/pilot/, numpy) and scores (ustat_rl/scores/,
torch): the statistics load no torch, and the old module paths still serve the moved modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]

#: Imports ``ustat_rl.pilot`` and every module in it.
IMPORT_PILOT = ("import importlib, pkgutil, sys, ustat_rl.pilot; "
                "[importlib.import_module('ustat_rl.pilot.' + m.name) "
                "for m in pkgutil.iter_modules(ustat_rl.pilot.__path__)]")
#: Fails (AssertionError) when torch was loaded.
DETECTOR = "assert 'torch' not in sys.modules, 'torch was imported'"


def _python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that resolves imports to this checkout."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=path))


# ---------------------------------------------------------------------------- the split
def test_the_pilot_statistics_load_no_torch():
    proc = _python(f"{IMPORT_PILOT}; {DETECTOR}; print(len(sys.modules))")
    assert proc.returncode == 0, proc.stderr


def test_the_torch_detector_flags_a_scores_module():
    # negative control: the same detector after one module of ustat_rl.scores
    proc = _python(f"{IMPORT_PILOT}; import ustat_rl.scores.sequence; {DETECTOR}")
    assert proc.returncode != 0 and "torch was imported" in proc.stderr


def test_an_old_path_warns_and_gives_the_new_module():
    proc = _python(
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    import ustat_rl.pilot.sketch\nexcept DeprecationWarning as e:\n"
        "    print('warned:', e)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import sys, ustat_rl.pilot.sketch as old, ustat_rl.scores.sketch as new\n"
        "from ustat_rl.pilot import factored\n"
        "import ustat_rl.scores.factored as new_factored\n"
        "print(old is new, sys.modules['ustat_rl.pilot.sketch'] is new, "
        "factored is new_factored)")
    assert proc.returncode == 0, proc.stderr
    assert "warned: ustat_rl.pilot.sketch has moved to ustat_rl.scores.sketch" in proc.stdout
    assert proc.stdout.strip().endswith("True True True")


def test_a_numpy_side_module_is_not_aliased():
    # negative control: ustat_rl.pilot.rollouts stayed, so it is its own module, no warning
    proc = _python("import warnings; warnings.simplefilter('error', DeprecationWarning); "
                   "import ustat_rl.pilot.rollouts as r; print(r.__name__)")
    assert proc.returncode == 0 and proc.stdout.strip() == "ustat_rl.pilot.rollouts"
