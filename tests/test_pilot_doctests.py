"""The Examples blocks of the pilot modules run as doctests."""

import doctest
import importlib

import pytest

MODULES = ["ustat_rl.pilot.rollouts", "ustat_rl.pilot.estimate", "ustat_rl.pilot.sketch",
           "ustat_rl.pilot.uncertainty", "ustat_rl.pilot.bandit", "ustat_rl.pilot.transformer",
           "ustat_rl.pilot.fieller", "ustat_rl.pilot.advice", "ustat_rl.pilot.coverage",
           "ustat_rl.pilot.families", "ustat_rl.pilot.factored"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
