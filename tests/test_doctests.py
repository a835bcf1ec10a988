"""Run the Examples blocks of the public modules as doctests."""

import doctest
import importlib

import pytest

pytestmark = pytest.mark.fast

MODULES = ["ustat_rl.advantages.gradients", "ustat_rl.policies.softmax", "ustat_rl.montecarlo.bandit",
           "ustat_rl.stats.rates", "ustat_rl.stats.ustatistics", "ustat_rl.policies.loglinear",
           "ustat_rl.training.algorithm1", "ustat_rl.seeding", "ustat_rl.theory.mse", "ustat_rl.theory.scaling",
           "ustat_rl.theory.hoeffding", "ustat_rl.interface.claims_display", "ustat_rl.frameworks.aggregation",
           "ustat_rl.training.algorithm2", "ustat_rl.formatting", "ustat_rl.stats.intervals",
           "ustat_rl.theory.all_equal_bounds", "ustat_rl.frameworks.entry", "ustat_rl.stats.best_set"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
