"""A monitor's window reports RAGEN-2's reward-variance filter on request
(``EstimatorConfig(group_filter="reward_variance_top_p")``).

Three batches of 4 groups of 10 binary rewards with chosen success counts. ``ds_keep_prob`` must
equal the share of the earlier batches' groups kept by the filter applied batch by batch, written
out here from the definition (the variances of the counts, largest first, the shortest prefix
reaching top_p of their sum); ``ds_filtered_mse`` the exact kept batch at the window's moments
made binary (1e-13, the same arithmetic). Negative control: a top_p of 1 keeps more of these
groups than 0.5. The rest of the record is the default record's.
"""

from __future__ import annotations

import pytest
from filter_windows import COUNTS, GROUPS, META, G, filter_batches

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.window import window_record
from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.theory.advantage import binary_projection
from ustat_rl.theory.variance_filter import VarianceFilter, variance_filtered_moments

pytestmark = pytest.mark.fast



def _hand_keep(top_p: float) -> float:
    kept = 0
    for counts in COUNTS[:-1]:
        var = sorted((k * (G - k) / (G * (G - 1)) for k in counts), reverse=True)
        total, running = sum(var), 0.0
        for n, v in enumerate(var, start=1):  # noqa: B007 (n is read after the loop)
            running += v
            if running >= top_p * total:
                break
        kept += n
    return kept / (GROUPS * (len(COUNTS) - 1))


@pytest.mark.parametrize("top_p", [0.5, 1.0])
def test_window_reports_the_filters_figures(top_p):
    batches, budget = filter_batches(), G * GROUPS
    spec = VarianceFilter("top_p", top_p, name="reward_variance_top_p")
    plain, _ = window_record(batches, META, budget,
                             MonitorConfig(estimator=EstimatorConfig(source="test")))
    record, rollouts = window_record(batches, META, budget, MonitorConfig(
        estimator=EstimatorConfig(source="test", group_filter=spec)))
    assert record.ds_group_filter == "reward_variance_top_p"
    assert record.ds_keep_prob == pytest.approx(_hand_keep(top_p), abs=1e-15)
    assert record.ds_gen_batches == 1.0
    moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
    want = variance_filtered_moments(moments, "grpo", G, GROUPS, spec).mse
    assert record.ds_filtered_mse == pytest.approx(want, rel=1e-13)
    if top_p == 0.5:  # negative control: a smaller mass keeps fewer groups
        assert record.ds_keep_prob < _hand_keep(1.0)
    plain, line = plain.to_dict(), record.to_dict()
    same = {k for k in plain if not k.startswith("ds_")}
    assert {k: plain[k] for k in same} == {k: line[k] for k in same}


def test_the_filter_is_accepted_by_name():
    torch = pytest.importorskip("torch")  # noqa: F841
    assert EstimatorConfig(group_filter="reward_variance_top_p").group_filter.top_p == 0.9
