"""Tests of the bootstrap-t alternative (ustat_rl/pilot/bootstrap.py; docs/theory.md C32).

Its resampled summaries are checked against recomputation from the expanded resample, and the
unit resample against the pilot's own estimates; its coverage is measured by
simulations/pilot_coverage.py (the table in docs/theory.md C32), not asserted here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ustat_rl.pilot.bootstrap import _resampled, bootstrap_t_intervals
from ustat_rl.pilot.estimate import SCORE_MOMENTS, estimate_constants, pilot_statistics
from ustat_rl.pilot.replicates import pilot_summary as _summary
from ustat_rl.seeding import child_rng

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def stats(interior_pilot):
    return pilot_statistics(interior_pilot(12, 6, 20260304, 1))


def _per_prompt(stats):
    return np.column_stack([stats.value, stats.reward_var]
                           + [stats.columns[n].sum(axis=1) for n in SCORE_MOMENTS])


def test_unit_resample_is_the_pilot_summary(stats):
    summary, _ = _resampled(_per_prompt(stats), stats.grad_mean, np.ones((1, stats.n_prompts)))
    assert np.allclose(summary[0], _summary(stats)[0], rtol=1e-12)


def test_resampled_cross_term_averages_pairs_of_distinct_original_prompts(stats):
    P = stats.n_prompts
    w = np.zeros(P)
    np.add.at(w, [0, 0, 0, 3, 5, 5, 7, 8, 9, 10, 11, 11], 1)  # multiplicities summing to P
    index = np.repeat(np.arange(P), w.astype(int))  # the expanded resample
    pairs = [(i, j) for i, j in itertools.permutations(range(P), 2) if index[i] != index[j]]
    gm = stats.grad_mean
    brute = np.mean([gm[index[i]] @ gm[index[j]] for i, j in pairs])
    summary, _ = _resampled(_per_prompt(stats), gm, w[None, :])
    assert summary[0, -1] == pytest.approx(brute, rel=1e-12)
    assert np.allclose(summary[0, :-1], _per_prompt(stats)[index].mean(axis=0), rtol=1e-12)


def test_intervals_contain_the_estimates_and_bad_input(stats):
    out = bootstrap_t_intervals(stats, 0.9, 199, child_rng(20260304, 2))
    c = estimate_constants(stats)
    for name in ("c1", "c2", "c3"):
        low, high = out[name]
        assert low < getattr(c, name) < high
    with pytest.raises(ValueError, match="`n_boot`"):
        bootstrap_t_intervals(stats, 0.9, 10)
    with pytest.raises(ValueError, match="`level`"):
        bootstrap_t_intervals(stats, 1.5)


def test_the_projection_variance_widens_a_sketched_pilot_s_intervals(interior_pilot):
    """With a k = 4 projection the standard error adds the projection's variance: each interval
    is at least as wide as without it, and c1's (whose projection variance is positive here)
    strictly wider. A sign slip that subtracts the term narrows them (or leaves a NaN)."""
    from ustat_rl.scores.spec import SketchSpec

    sketched = pilot_statistics(interior_pilot(12, 6, 20260304, 1, SketchSpec(4, seed=11)))
    assert sketched.sketched
    width = {}
    for include in (True, False):
        out = bootstrap_t_intervals(sketched, 0.9, 199, child_rng(20260304, 3),
                                    include_sketch=include)
        width[include] = {name: out[name][1] - out[name][0] for name in ("c1", "c2", "c3")}
        assert all(np.isfinite(out[name]).all() for name in ("c1", "c2", "c3"))
    for name in ("c1", "c2", "c3"):
        assert width[True][name] >= width[False][name] * (1 - 1e-12), name
    assert width[True]["c1"] > width[False]["c1"] * 1.001
