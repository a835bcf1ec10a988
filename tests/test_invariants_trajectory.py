"""I9 of docs/invariants.md on generated windows: the records a monitored run writes, and
``gstar --trajectory`` on them.

Hypothesis draws pilots as tests/test_invariants.py does (tiny and large, all-equal groups, one
informative prompt, success rates near 0 and 1, continuous, huge and tiny rewards), cuts them
into generation batches of ``B`` groups (pooled 1 to 4 at a time), and runs each window the way
``GroupSizeMonitor`` does (``batch_problem``, then ``window_record``; a refusal becomes a skipped
record) under a run rule drawn from the registry (TRL's default group std among them) or none.
Each record is checked (:func:`check_window_record`), written and read back through the trajectory
format, and the run's records go to ``ustat-rl gstar --trajectory``, whose words are checked
against its windows' intervals (:func:`ustat_rl.claims.verdict_words.trajectory_mismatches`) and
whose messages against I6/I7.

Budget: ``EXAMPLES`` runs in the suite (about 2 s, the controls 1 s), ``LONG_EXAMPLES`` with
``USTAT_RL_INVARIANTS=long``. Derandomized: reproducible, no false-failure rate.
Planted-bug control: a window whose ``var_run`` interval is cut at its estimate from below
(an interval that does not hold the estimate) and one whose MSE's low end drops below 0 are caught.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invariant_checks import (
    INTERNAL_NAMES,
    LEVELS,
    LONG,
    NO_SHRINK,
    SETTINGS,
    check_cut_at_zero,
    check_messages,
    pilots,
    run_cli,
)

from ustat_rl.claims.verdict_words import trajectory_mismatches
from ustat_rl.frameworks import window as window_module
from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.trajectory import (
    CRITICAL_FIELDS,
    INTERVAL_FIELDS,
    WindowRecord,
    append_record,
    read_trajectory,
)
from ustat_rl.frameworks.universality import format_universality, gstar_universality
from ustat_rl.frameworks.window import Batch, batch_problem, skipped_record, window_record
from ustat_rl.scores.spec import SketchSpec

pytestmark = pytest.mark.fast

EXAMPLES, LONG_EXAMPLES = 25, 600
N = LONG_EXAMPLES if LONG else EXAMPLES

#: Run rules: none (the paper's GRPO stands in), TRL's three scalings, verl's, a leave-one-out.
RULES = (None, "trl_group", "trl_batch", "trl_none", "verl_grpo", "paper_algorithm2", "trl_rloo")
#: Fields that are probabilities.
PROBABILITIES = ("all_equal_predicted", "all_equal_observed", "ds_keep_prob")


def monitored_windows(pilot, batch_groups: int, pool: int, rule, level: float) -> list:
    """The records a monitor pooling ``pool`` batches writes, one per generation batch of
    ``batch_groups`` groups cut from ``pilot`` (rows grouped by prompt, equal group sizes)."""
    _, counts = np.unique(pilot.prompt_id, return_counts=True)
    G, P = int(counts[0]), counts.size
    B = max(1, min(batch_groups, P))
    rows = B * G
    meta = dict(sketch_kind="gaussian", sketch_seed=None, sketch_blocks=None,
                sketch_route="dense", model_name="drawn", param_dim=pilot.score.shape[1])
    config = MonitorConfig(G, sketch=SketchSpec(pilot.score.shape[1], blocks=1), level=level,
                           estimator=EstimatorConfig(rule, "drawn"))
    records, kept = [], []
    for b in range(P // B):
        part = slice(b * rows, (b + 1) * rows)
        batch = Batch(b, G, pilot.reward[part], pilot.score[part], b * B)
        reason = batch_problem(pilot.prompt_id[part], batch.reward, G)
        if reason is None:
            try:
                record, _ = window_record((kept + [batch])[-pool:], meta, rows, config)
            except ValueError as exc:  # the monitor records a refusal and goes on
                reason = str(exc)
            else:
                kept.append(batch)
        if reason is not None:
            record = skipped_record(b, reason, config, max(rows, 2))
        records.append(record)
    return records


def check_window_record(record: WindowRecord) -> None:
    """I1, I5 and I7 on one trajectory record."""
    if record.status == "skipped":
        reason = record.reason
        assert isinstance(reason, str) and reason and "\n" not in reason, f"I7 reason {reason!r}"
        assert "Traceback" not in reason and "ustat_rl/" not in reason, f"I7 reason {reason!r}"
        assert not any(name in reason for name in INTERNAL_NAMES), f"I7 reason {reason!r}"
        return
    assert record.ok, record.status
    for name in INTERVAL_FIELDS:
        part = getattr(record, name)
        if part is None:
            continue
        est, low, high = part.estimate, part.low, part.high
        assert not math.isnan(est), f"I5 {name}'s estimate is NaN in an estimated window"
        if math.isnan(low) or math.isnan(high):
            continue
        if name in ("c1", "c2", "c3") or name in CRITICAL_FIELDS[:-1]:
            # cut at 0; the estimate (a constant, or a count whose numerator is) may lie below
            check_cut_at_zero(dataclasses.asdict(part), name)
        else:
            assert low <= est <= high, f"I1 {name}: [{low}, {high}] does not hold {est}"
    for name in ("var_run", "mse_run"):  # a variance and an MSE (variance + squared bias)
        part = getattr(record, name)
        assert part.low >= 0.0 or part.estimate < 0.0, \
            f"I1 {name}'s interval reaches below 0: {part}"
        assert math.isfinite(part.estimate) and math.isfinite(part.high), \
            f"I5 {name} is not a finite number: {part}"
    assert record.var_run.estimate >= 0.0, f"I1 a variance below 0: {record.var_run}"
    assert record.gstar.low >= 1.0 or math.isnan(record.gstar.low), \
        f"I1 G* below 1: {record.gstar}"
    for name in PROBABILITIES:
        value = getattr(record, name)
        assert value is None or math.isnan(value) or 0.0 <= value <= 1.0, f"I1 {name} = {value}"
    gen = record.ds_gen_batches
    assert gen is None or math.isnan(gen) or gen >= 1.0, f"I1 ds_gen_batches = {gen}"


def check_trajectory(records: list, folder: Path, level: float) -> None:
    """The records survive the file format, and ``gstar --trajectory`` words what they allow."""
    path = folder / "trajectory.jsonl"
    for record in records:
        append_record(path, record)
    back = read_trajectory(path)
    assert [r.status for r in back] == [r.status for r in records]
    for record in back:
        check_window_record(record)
    result = gstar_universality(back, level)
    mismatches = trajectory_mismatches(result, format_universality(result))
    assert mismatches == [], f"I3 {mismatches}"
    code, out, err = run_cli(["gstar", "--trajectory", path, "--level", level])
    check_messages(code, out, err)
    assert code in (0, 2), (code, out, err)


@settings(max_examples=N, **SETTINGS)
@given(pilots(), st.integers(1, 12), st.integers(1, 4), st.sampled_from(RULES),
       st.sampled_from(LEVELS))
def test_window_records_and_trajectory_keep_the_invariants(pilot, batch_groups, pool, rule,
                                                          level):
    records = monitored_windows(pilot, batch_groups, pool, rule, level)
    for record in records:
        check_window_record(record)
    with tempfile.TemporaryDirectory() as folder:
        check_trajectory(records, Path(folder), level)


def _controls(examples: int = 40):
    @settings(max_examples=examples, phases=NO_SHRINK, **SETTINGS)
    @given(pilots(large=True), st.integers(3, 8), st.sampled_from(RULES))
    def run(pilot, batch_groups, rule):
        for record in monitored_windows(pilot, batch_groups, 2, rule, 0.9):
            check_window_record(record)
    return run


def _planted(monkeypatch, change) -> None:
    original = window_module._noise_interval

    def planted(interval):
        return change(original(interval))
    monkeypatch.setattr(window_module, "_noise_interval", planted)


def test_control_an_interval_that_misses_its_estimate_is_caught(monkeypatch):
    # low above the estimate, not above high (a reversed interval is refused when made)
    _planted(monkeypatch, lambda part: dataclasses.replace(
        part, low=min(part.estimate * 1.5 + 1e-12, part.high)))
    with pytest.raises(AssertionError, match="I1"):
        _controls()()


def test_control_an_interval_reaching_below_zero_is_caught(monkeypatch):
    _planted(monkeypatch, lambda part: dataclasses.replace(part, low=-abs(part.high) - 1.0))
    with pytest.raises(AssertionError, match="I1"):
        _controls()()
