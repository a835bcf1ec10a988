"""allocate with a rule that scales its advantages (ustat_rl/pilot/allocation.py): its exact MSE
needs moments of binary rewards, so the pilot's estimates are projected onto them, as gstar's
report does; without the projection the same call refuses."""

from __future__ import annotations

import pytest

from ustat_rl.pilot.allocation import loglinear_pilot, pilot_allocation
from ustat_rl.pilot.estimate import estimate_moments
from ustat_rl.policies.examples import heterogeneous_score_bandit
from ustat_rl.theory.allocation_baselines import compare_allocations

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("estimator", ["trl_group", "verl_grpo"])
def test_scaled_rules_allocate_on_a_binary_pilot(estimator):
    bandit, theta = heterogeneous_score_bandit()
    pilot = loglinear_pilot(bandit, theta, 8, rng=0)
    out = pilot_allocation(pilot, 48, estimator)
    assert int(out.allocations["optimal"].group_sizes.sum()) == 48
    assert "biased" in out.note and not out.ratios  # no cross-fitted ratio for a biased rule
    with pytest.raises(ValueError, match="binary rewards"):  # the unprojected estimates
        compare_allocations(estimate_moments(pilot), estimator, 48)
