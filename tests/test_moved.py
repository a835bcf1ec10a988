"""Old import paths of moved modules keep working through one alias (ustat_rl/_moved.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ustat_rl._moved import MOVED_ATTRIBUTES, MOVED_MODULES

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_path_is_the_new_module_with_a_warning(old):
    new = importlib.import_module(MOVED_MODULES[old])
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    assert alias is new and alias.__spec__.name == MOVED_MODULES[old]
    if old != "ustat_rl.cli":  # the console-script path is served silently
        assert any(issubclass(w.category, DeprecationWarning) and old in str(w.message)
                   for w in caught)


def test_names_from_old_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ustat_rl.conventions import CONVENTIONS, advantages
        from ustat_rl.estimators import ESTIMATORS, grpo_gradient

        from ustat_rl.policies.transformer import grpo_train
    from ustat_rl.advantages import RULES
    from ustat_rl.training.transformer import grpo_train as new_grpo_train
    assert CONVENTIONS["trl_group"] is RULES["trl_group"] and callable(advantages)
    assert ESTIMATORS == ("vanilla", "grpo", "oracle", "fullmean") and callable(grpo_gradient)
    assert grpo_train is new_grpo_train
    missing = [(new, name) for (_, name), new in MOVED_ATTRIBUTES.items()
               if not hasattr(importlib.import_module(new), name)]
    assert missing == []


def test_unknown_names_still_fail():
    # negative control: the alias serves only the listed paths
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ustat_rl.no_such_module")
    with pytest.raises(ImportError):
        exec("from ustat_rl.policies.transformer import no_such_name", {})


def test_the_old_cli_path_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "ustat_rl.cli", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ustat-rl ")
