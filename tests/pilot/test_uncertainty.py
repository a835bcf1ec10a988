"""Tests of the pilot intervals (ustat_rl/pilot/uncertainty.py, docs/theory.md C32).

The jackknife replicates are checked against recomputing the estimates from scratch without a
prompt or a projection row; the intervals' coverage over 400 pilots a design is
tests/pilot/test_uncertainty_coverage.py's (integration tier).
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.pilot.estimate import estimate_constants
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.pilot.uncertainty import (
    jackknife,
    pilot_intervals,
    prompts_to_halve_width,
    student_quantile,
)
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import SketchSpec
from ustat_rl.seeding import child_rng
from ustat_rl.theory import scaling_constants

pytestmark = pytest.mark.fast

SEED = 20260301


def _constants(m):
    c = scaling_constants(m)
    return np.array([c.c1, c.c2, c.c3])


def _brute_force_jackknife_var(replicates):
    reps = np.array(replicates)
    m = len(reps)
    return (m - 1) / m * np.sum((reps - reps.mean(axis=0)) ** 2, axis=0)


def test_replicates_equal_recomputation_from_scratch():
    bandit = interior_optimum_bandit()
    # R's seed is the one this pilot's stream drew before pilots took a SketchSpec
    pilot = bandit_pilot(bandit, 6, 5, child_rng(SEED, 1), sketch=SketchSpec(4, seed=2061808154))
    ids, index = pilot.groups()
    by_prompt = []
    for a in range(ids.size):
        keep = index != a
        by_prompt.append(_constants_from(pilot, keep, slice(None), 1.0))
    by_row = [_constants_from(pilot, slice(None), np.arange(4) != r, np.sqrt(4 / 3))
              for r in range(4)]
    by_cell = np.array([[_constants_from(pilot, index != a, np.arange(4) != r, np.sqrt(4 / 3))
                         for r in range(4)] for a in range(ids.size)])  # (P, k, 3)
    estimate, prompt_se, sketch_se = jackknife(pilot, _constants)
    c = estimate_constants(pilot)
    assert np.allclose(estimate, [c.c1, c.c2, c.c3], rtol=1e-10)
    assert np.allclose(prompt_se**2, _brute_force_jackknife_var(by_prompt), rtol=1e-9)
    # the row jackknife minus the prompt-by-row interaction of the double deletions
    P, k = ids.size, 4
    d = (by_cell - np.array(by_prompt)[:, None, :] - np.array(by_row)[None, :, :]
         + estimate[None, None, :])
    interaction = (P - 1) * (k - 1) / (P * k) * np.sum(d**2, axis=(0, 1))
    expected = np.maximum(_brute_force_jackknife_var(by_row) - interaction, 0.0)
    assert np.allclose(sketch_se**2, expected, rtol=1e-9, atol=1e-15)
    assert np.all(interaction > 0)


def _constants_from(pilot, rows, cols, scale):
    r = Rollouts(prompt_id=pilot.prompt_id[rows], reward=pilot.reward[rows],
                 score=pilot.score[rows][:, cols] * scale, sketch_kind=pilot.sketch_kind)
    c = estimate_constants(r)
    return [c.c1, c.c2, c.c3]


def test_gstar_interval_is_the_image_of_the_ratio_interval():
    pilot = bandit_pilot(interior_optimum_bandit(), 64, 16, child_rng(SEED, 4))
    out = pilot_intervals(pilot)
    assert out.optimal_group_size.low == pytest.approx(1 + out.ratio.high ** -0.5)
    expected_high = 1 + out.ratio.low ** -0.5 if out.ratio.low > 0 else np.inf
    assert out.optimal_group_size.high == pytest.approx(expected_high)
    assert out.optimal_group_size.estimate == pytest.approx(out.constants.optimal_group_size())
    assert out.sketch_included is False and out.c1.sketch_std_error == 0.0


def test_prompts_to_halve_width():
    pilot = bandit_pilot(interior_optimum_bandit(), 32, 8, child_rng(SEED, 5))
    out = pilot_intervals(pilot)
    assert prompts_to_halve_width(out.c1, 32) == pytest.approx(128)  # no projection: 4 P
    # R's seed is the one this pilot's stream drew before pilots took a SketchSpec
    sketched = pilot_intervals(bandit_pilot(interior_optimum_bandit(), 32, 8, child_rng(SEED, 6),
                                            sketch=SketchSpec(2, seed=477659657)))
    iv = sketched.c3
    expected = np.inf if iv.sketch_std_error**2 >= iv.std_error**2 / 4 else \
        32 * iv.prompt_std_error**2 / (iv.std_error**2 / 4 - iv.sketch_std_error**2)
    assert prompts_to_halve_width(iv, 32) == pytest.approx(expected)


def test_student_quantile_limits():
    assert student_quantile(0.9, 1.0, 0.0, 10**9, None) == pytest.approx(1.6449, abs=1e-4)
    assert student_quantile(0.9, 1.0, 0.0, 3, None) == pytest.approx(2.9200, abs=1e-4)  # t_2
    assert student_quantile(0.9, 0.0, 1.0, 10**9, 4) == pytest.approx(2.3534, abs=1e-4)  # t_3


def test_bad_input():
    pilot = bandit_pilot(interior_optimum_bandit(), 4, 3, child_rng(SEED, 7))
    with pytest.raises(ValueError, match="`level`"):
        pilot_intervals(pilot, level=1.0)
    weighted = bandit_pilot(interior_optimum_bandit(), 0, 3, child_rng(SEED, 8),
                            fixed_prompts=True)
    with pytest.raises(ValueError, match="`rollouts`"):
        pilot_intervals(weighted)
    with pytest.raises(TypeError, match="`rollouts`"):
        pilot_intervals("pilot.npz")


def test_report_curves_take_the_projection_units_as_degrees_of_freedom():
    """A factored sketch's projection part is resampled by blocks, so the report's MSE-curve
    intervals use m - 1 degrees of freedom for it, as the constants' intervals do: they equal
    Student intervals rebuilt from the same jackknife with m units, and differ from those
    rebuilt with the k column count (the negative control)."""
    import dataclasses

    from ustat_rl.pilot.estimate import pilot_statistics
    from ustat_rl.pilot.report import gstar_report
    from ustat_rl.pilot.uncertainty import jackknife, student_interval
    from ustat_rl.policies.examples import interior_optimum_bandit
    from ustat_rl.scores.bandit import bandit_pilot
    from ustat_rl.theory import minibatch_mse

    # R's seed is the one this pilot's stream drew before pilots took a SketchSpec
    pilot = dataclasses.replace(bandit_pilot(interior_optimum_bandit(), 32, 8, rng=3,
                                             sketch=SketchSpec(16, seed=1704920223)),
                                sketch_blocks=4)
    report = gstar_report(pilot, 64)
    stats = pilot_statistics(pilot)
    sizes = report.group_sizes
    est, p_se, s_se = jackknife(stats, lambda m: np.array(
        [minibatch_mse(m, "grpo", G, 64 // G) for G in sizes]))
    for units, equal in ((4, True), (16, False)):
        rebuilt = [student_interval(e, p, q, 0.9, stats.n_prompts, units)
                   for e, p, q in zip(est, p_se, s_se)]
        same = np.allclose([r.high for r in rebuilt], report.mse["grpo"]["high"], rtol=1e-12)
        assert same == equal, units
