"""The Examples blocks of the pilot modules run as doctests."""

import doctest
import importlib

import pytest

pytestmark = pytest.mark.fast

MODULES = ["ustat_rl.pilot.rollouts", "ustat_rl.pilot.estimate", "ustat_rl.scores.sketch",
           "ustat_rl.pilot.uncertainty", "ustat_rl.scores.bandit", "ustat_rl.scores.transformer",
           "ustat_rl.pilot.fieller", "ustat_rl.pilot.advice", "ustat_rl.scores.coverage",
           "ustat_rl.scores.families", "ustat_rl.scores.factored",
           "ustat_rl.scores.spec"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
