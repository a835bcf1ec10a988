"""The result types of the pilot's intervals (ustat_rl/pilot/uncertainty.py).

``Interval.covers`` is closed at both ends (C32 counts an estimate on an end as covered),
``width`` is ``high - low`` and ``inf`` when unbounded, ``PilotIntervals.bounded`` is a property
that follows the upper end of G*'s interval, and both results are frozen.
"""

import dataclasses
import math

import pytest

from ustat_rl.pilot.uncertainty import Interval, pilot_intervals
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.seeding import child_rng

pytestmark = pytest.mark.fast


def test_interval_is_closed_and_its_width_is_the_difference():
    iv = Interval(estimate=2.0, low=1.5, high=3.0, std_error=0.4, prompt_std_error=0.3,
                  sketch_std_error=0.1)
    assert iv.covers(1.5) and iv.covers(3.0) and iv.covers(2.0)
    assert not iv.covers(1.4999) and not iv.covers(3.0001)
    assert iv.width == 1.5
    assert Interval(1.0, 0.5, math.inf, 0.1, 0.1, 0.0).width == math.inf
    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.low = 0.0


def test_bounded_follows_the_upper_end_and_the_result_is_frozen():
    out = pilot_intervals(bandit_pilot(interior_optimum_bandit(), 64, 16, child_rng(3, 1)))
    assert out.bounded is math.isfinite(out.optimal_group_size.high)
    unbounded = dataclasses.replace(out, optimal_group_size=dataclasses.replace(
        out.optimal_group_size, high=math.inf))
    assert unbounded.bounded is False
    finite = dataclasses.replace(out, optimal_group_size=dataclasses.replace(
        out.optimal_group_size, high=100.0))
    assert finite.bounded is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.level = 0.5


def test_ratio_standard_error_is_the_jackknife_of_recomputed_ratios():
    """The ratio's (reference) standard error comes from the replicates c1/c3' of the pilot
    without each prompt, each recomputed here from scratch."""
    import numpy as np

    from ustat_rl.pilot.estimate import estimate_constants
    from ustat_rl.pilot.rollouts import Rollouts

    pilot = bandit_pilot(interior_optimum_bandit(), 12, 8, child_rng(3, 2))
    out = pilot_intervals(pilot)
    ids, index = pilot.groups()
    reps = []
    for a in range(ids.size):
        keep = index != a
        c = estimate_constants(Rollouts(prompt_id=pilot.prompt_id[keep],
                                        reward=pilot.reward[keep], score=pilot.score[keep]))
        reps.append(c.c1 / c.c3)
    reps = np.array(reps)
    var = (reps.size - 1) / reps.size * np.sum((reps - reps.mean()) ** 2)
    assert out.ratio.prompt_std_error == pytest.approx(math.sqrt(var), rel=1e-8)


@pytest.mark.parametrize("units, sketch_df", [(2, 1.0), (5, 4.0), (1, None), (None, None)])
def test_student_quantile_welch_satterthwaite(units, sketch_df):
    """Degrees of freedom (v_p + v_s)^2 / (v_p^2/(P - 1) + v_s^2/(k - 1)), the projection term
    present only for k >= 2 units (two units is the smallest jackknife), checked at k = 2."""
    from scipy import stats as sps

    from ustat_rl.pilot.uncertainty import student_quantile

    vp, vs, P = 1.0, 0.5, 10
    terms = vp**2 / (P - 1) + (0.0 if sketch_df is None else vs**2 / sketch_df)
    want = sps.t.ppf(0.95, (vp + vs) ** 2 / terms)
    assert student_quantile(0.9, vp, vs, P, units) == pytest.approx(want, rel=1e-12)
    # no variance at all: the normal quantile, not a NaN
    assert student_quantile(0.9, 0.0, 0.0, P, units) == pytest.approx(sps.norm.ppf(0.95))
