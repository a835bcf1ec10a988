"""A monitor's window reports a dynamic-sampling group filter on request (window_record's group_filter).

Three batches of 4 groups of 10 binary rewards with chosen success counts (ROLL's filter drops
k = 1 at G = 10, verl's keeps it) and random sketched scores. The window's ``ds_keep_prob`` must
equal the kept fraction of the earlier batches' groups written out here from the filter's own
statistic (exact), ``ds_gen_batches`` the cost at it, and ``ds_filtered_mse`` the exact kept
batch at the window's moments made binary (1e-13, the same arithmetic). Under verl's filter the
keep probability is ``1 - all_equal_predicted`` of the default record; negative control: ROLL's
differs from verl's on these batches. Without a group filter the record is unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
from filter_windows import COUNTS, GROUPS, META, G, filter_batches

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.trajectory import append_record, read_trajectory
from ustat_rl.frameworks.window import window_record
from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.theory.advantage import binary_projection
from ustat_rl.theory.dynamic_sampling import filtered_batch_moments
from ustat_rl.theory.dynamic_sampling_cost import cost_at_keep_probability

pytestmark = pytest.mark.fast



def _hand_keep(name: str) -> float:
    """The kept fraction of the earlier batches' groups, from each framework's statistic."""
    kept = []
    for counts in COUNTS[:-1]:
        for k in counts:
            rewards = np.repeat([1.0, 0.0], [k, G - k])
            kept.append(np.std(rewards) > 0 if name == "verl" else 0.1 < rewards.mean() < 0.95)
    return float(np.mean(kept))


@pytest.mark.parametrize("name", ["verl", "roll"])
def test_window_reports_the_group_filters_figures(tmp_path, name):
    batches, budget = filter_batches(), G * GROUPS
    plain, _ = window_record(batches, META, budget,
                             MonitorConfig(estimator=EstimatorConfig(source="test")))
    record, rollouts = window_record(batches, META, budget, MonitorConfig(
        estimator=EstimatorConfig(source="test", group_filter=name)))
    keep = _hand_keep(name)
    assert record.ds_group_filter == name and record.ds_keep_prob == keep
    assert record.ds_gen_batches == cost_at_keep_probability(keep, G, GROUPS).expected_gen_batches
    moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
    want = filtered_batch_moments(moments, "grpo", G, GROUPS, name).mse
    assert record.ds_filtered_mse == pytest.approx(want, rel=1e-13)
    if name == "verl":
        assert record.ds_keep_prob == pytest.approx(1.0 - plain.all_equal_predicted,
                                                       abs=1e-15)
        assert record.ds_gen_batches == pytest.approx(plain.ds_gen_batches, rel=1e-15)
    else:  # negative control: ROLL's filter drops the k = 1 groups verl keeps
        assert record.ds_keep_prob < 1.0 - plain.all_equal_predicted - 0.1
    # everything else is the default record's, which has no group filter and no filtered MSE
    assert plain.ds_group_filter is None and plain.ds_filtered_mse is None
    plain, line = plain.to_dict(), record.to_dict()
    same = {k for k in plain if not k.startswith("ds_")}
    assert {k: plain[k] for k in same} == {k: line[k] for k in same}
    append_record(tmp_path / "t.jsonl", record)
    assert read_trajectory(tmp_path / "t.jsonl")[0].ds_group_filter == name


def test_a_bad_group_filter_is_refused_naming_the_parameter():
    torch = pytest.importorskip("torch")  # noqa: F841
    with pytest.raises(ValueError, match="group_filter"):
        EstimatorConfig(group_filter="rol")
    assert EstimatorConfig(group_filter="roll").group_filter.name == "roll"
