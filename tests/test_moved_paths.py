"""The modules given rooms of their own keep their old paths, each warning with its removal
release, and the package's public names come from the new homes."""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import ustat_rl
from ustat_rl._moved import MOVED_MODULES, REMOVED_IN

pytestmark = pytest.mark.fast

LIBRARY = ustat_rl.__path__[0]

#: One old path of each kind of move, and a name it must still serve.
OLD_NAMES = {
    "ustat_rl.rates": "RateFit",
    "ustat_rl.ustatistics": "u_statistic",
    "ustat_rl.intervals": "percentile_interval",
    "ustat_rl.aggregation": "aggregation_weights",
    "ustat_rl._script_args": "seed_type",
    "ustat_rl.advantages.conformance": "check_conformance",
    "ustat_rl.advantages.conformance_adapters": "adapt",
    "ustat_rl.advantages.conformance_multichannel": "check_multichannel_conformance",
    "ustat_rl.advantages.conformance_search": "search",
    "ustat_rl.conformance_adapters": "load_function",
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_an_old_path_serves_its_names_and_states_the_removal_release(old):
    new = importlib.import_module(MOVED_MODULES[old])
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    assert alias is new and getattr(alias, OLD_NAMES[old]) is getattr(new, OLD_NAMES[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(old in m and MOVED_MODULES[old] in m and f"removed in ustat-rl {REMOVED_IN}" in m
               for m in messages), messages


def test_the_removal_release_is_stated_and_later_than_this_one():
    assert f"({REMOVED_IN})" in importlib.import_module("ustat_rl._moved").__doc__
    assert tuple(map(int, REMOVED_IN.split("."))) > tuple(map(int, ustat_rl.__version__.split(".")))


def _shadowed(moved: dict[str, str]) -> list[str]:
    """Old paths named like a module that exists (the finder answers before the path finders,
    so such an alias would hide the real module)."""
    root = Path(LIBRARY).parent
    return sorted(old for old in moved
                  if root.joinpath(*old.split(".")).with_suffix(".py").is_file()
                  or root.joinpath(*old.split("."), "__init__.py").is_file())


def test_no_old_path_shadows_a_module_that_exists():
    assert _shadowed(MOVED_MODULES) == []
    assert all(new not in MOVED_MODULES for new in MOVED_MODULES.values())  # no chains


def test_the_shadow_scan_flags_the_alias_the_kit_package_replaced():
    # negative control: the alias this move removed, ``ustat_rl.conformance``, is now a package
    planted = {**MOVED_MODULES, "ustat_rl.conformance": "ustat_rl.conformance.kit"}
    assert _shadowed(planted) == ["ustat_rl.conformance"]


def test_public_names_come_from_the_new_homes():
    from ustat_rl.stats import rates, ustatistics

    assert ustat_rl.RateFit is rates.RateFit and ustat_rl.u_statistic is ustatistics.u_statistic
    assert {ustat_rl._ORIGIN[n] for n in ("RateFit", "u_statistic")} == {".stats.rates",
                                                                         ".stats.ustatistics"}


def test_the_conformance_package_serves_the_kit():
    import ustat_rl.conformance as package
    from ustat_rl.conformance import kit, multichannel

    assert package.check_conformance is kit.check_conformance
    assert package.run_multichannel_command is multichannel.run_multichannel_command
    assert all(hasattr(package, name) for name in package.__all__)


def test_trainer_weights_are_read_from_the_aggregation_weights():
    from ustat_rl.frameworks.aggregation import aggregation_weights
    from ustat_rl.frameworks.trainer_units import LOSS_WEIGHTS, completion_weights

    lengths = np.array([1, 3, 2, 5])
    n = lengths.size
    expected = {"one": n * aggregation_weights(lengths, "seq-mean-token-sum"),
                "length": n * aggregation_weights(lengths, "seq-mean-token-mean"),
                "batch_tokens": n * aggregation_weights(lengths, "token-mean"),
                "max_length": aggregation_weights(lengths, "seq-mean-token-sum-norm", 6)}
    for loss, kind in LOSS_WEIGHTS.items():
        np.testing.assert_allclose(completion_weights(loss, lengths, 6), expected[kind],
                                   rtol=1e-15)
    # the trainer's own token count replaces the lengths' sum; a count of 0 names the parameter
    np.testing.assert_allclose(completion_weights("dapo", lengths, total_tokens=22.0),
                               np.full(n, n / 22.0), rtol=1e-15)
    with pytest.raises(ValueError, match="`total_tokens`"):
        aggregation_weights(lengths, "token-mean", total_tokens=0.0)
