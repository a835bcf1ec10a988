"""A monitor window's critical rollout count (docs/theory.md, "The critical rollout count").

The record's ``critical_*`` fields and ``grad_norm_sq`` must be exactly the pilot's
:func:`ustat_rl.pilot.critical_rollouts.critical_rollout_intervals` on the groups the window
pools, at the run's ``G`` and at ``min(G*, N)`` (one computation, two routes to it; compared to
rounding); they survive the trajectory file, and a version 3 line written before these fields
existed still reads, with ``None`` for them. Against exact values the estimator is tested in
tests/pilot/test_pilot_critical_rollouts.py and tests/theory/test_critical_rollouts.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.trajectory import (
    CRITICAL_FIELDS,
    WindowRecord,
    append_record,
    read_trajectory,
)
from ustat_rl.frameworks.window import Batch, window_record, window_rollouts
from ustat_rl.pilot.critical_rollouts import critical_rollout_intervals
from ustat_rl.policies.examples import small_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.sketch import SketchSpec
from ustat_rl.theory.group_size import gstar_within_budget

pytestmark = pytest.mark.fast

G, GROUPS, POOL, K = 4, 32, 2, 8
RTOL = 1e-12  # the same numbers by the same code: rounding only

META = dict(sketch_kind="gaussian", sketch_seed=None, sketch_blocks=None, sketch_route="dense",
            model_name="bandit", param_dim=None)


@pytest.fixture(scope="module")
def window():
    pilot = bandit_pilot(small_bandit(), GROUPS * POOL, G, rng=np.random.default_rng(7),
                         sketch=SketchSpec(K, seed=7))
    order = np.argsort(pilot.prompt_id, kind="stable")
    reward, score = pilot.reward[order], pilot.score[order]
    rows = GROUPS * G
    batches = [Batch(b, G, reward[b * rows:(b + 1) * rows], score[b * rows:(b + 1) * rows],
                     b * GROUPS) for b in range(POOL)]
    meta = dict(META, param_dim=pilot.param_dim)
    config = MonitorConfig(G, sketch=SketchSpec(K, blocks=1), level=0.9,
                           estimator=EstimatorConfig("trl_group", "test"))
    record, _ = window_record(batches, meta, rows, config)
    return record, window_rollouts(batches, meta), rows


def _same(field, part):
    return np.allclose([field.estimate, field.low, field.high],
                       [part.estimate, part.low, part.high], rtol=RTOL, atol=0.0)


def test_the_record_holds_the_pilots_count_at_the_runs_g_and_at_gstar(window):
    record, rollouts, budget = window
    assert record.ok
    at_run = critical_rollout_intervals(rollouts, G, record.level)
    gstar = gstar_within_budget(record.c1.estimate, record.c3.estimate, budget)
    at_gstar = critical_rollout_intervals(rollouts, gstar, record.level)
    for suffix, expected in (("run", at_run), ("gstar", at_gstar)):
        assert _same(getattr(record, f"critical_rollouts_{suffix}"), expected.total), suffix
        assert _same(getattr(record, f"critical_inter_{suffix}"), expected.inter), suffix
        assert _same(getattr(record, f"critical_intra_{suffix}"), expected.intra), suffix
    assert _same(record.grad_norm_sq, at_run.grad_norm_sq)
    # a count at another G (the control) is not what the record holds
    other = critical_rollout_intervals(rollouts, 2 * G, record.level)
    assert not _same(record.critical_rollouts_run, other.total)


def test_the_count_survives_the_file_and_old_lines_still_read(window, tmp_path):
    record, _, _ = window
    path = tmp_path / "run.jsonl"
    append_record(path, record)
    (back,) = read_trajectory(path)
    for name in CRITICAL_FIELDS:
        assert _same(getattr(back, name), getattr(record, name)), name
    line = json.loads(path.read_text())
    for name in CRITICAL_FIELDS:  # a version 3 line from before the count
        line.pop(name)
    old = WindowRecord.from_dict(line)
    assert old.ok and all(getattr(old, name) is None for name in CRITICAL_FIELDS)
    assert math.isfinite(old.c2.estimate)


def test_the_trl_monitor_logs_the_finite_counts(window):
    pytest.importorskip("transformers")
    from collections import defaultdict
    from dataclasses import replace
    from types import SimpleNamespace

    from ustat_rl.frameworks.trajectory import RecordInterval
    from ustat_rl.frameworks.trl_monitor import GroupSizeMonitor

    record, _, _ = window
    metrics = {"train": defaultdict(list)}
    GroupSizeMonitor._log(SimpleNamespace(trainer=SimpleNamespace(_metrics=metrics)), record)
    logged = metrics["train"]
    for name in ("critical_rollouts_run", "critical_inter_run", "critical_intra_run",
                 "critical_rollouts_gstar"):
        assert logged[f"ustat/{name}"] == [getattr(record, name).estimate], name
    # control: an infinite count (||g||^2 estimated <= 0) is left out, as loggers want finite
    metrics = {"train": defaultdict(list)}
    endless = replace(record, critical_rollouts_run=RecordInterval(math.inf, 0.0, math.inf))
    GroupSizeMonitor._log(SimpleNamespace(trainer=SimpleNamespace(_metrics=metrics)), endless)
    assert "ustat/critical_rollouts_run" not in metrics["train"]
    assert "ustat/critical_inter_run" in metrics["train"]
