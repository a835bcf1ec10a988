"""The trajectory file: one JSON record per monitored window of a training run (C17, C18, C32).

A monitor (:class:`ustat_rl.frameworks.trl_monitor.GroupSizeMonitor`) appends one line per window
to a JSON-lines file, so an interrupted run keeps every finished window. Each record is a JSON
object with the fields of :data:`TRAJECTORY_FIELDS`; an interval is ``{"estimate", "low",
"high"}`` with ``null`` for NaN and the string ``"inf"`` for an unbounded end
(:func:`ustat_rl.formatting.json_ready`). A window the monitor could not estimate has ``status``
``"skipped"``, its ``reason`` in words, and ``null`` estimates.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..formatting import json_ready, parse_number

__all__ = ["TRAJECTORY_FIELDS", "INTERVAL_FIELDS", "append_record", "read_trajectory",
           "TRAJECTORY_VERSION"]

TRAJECTORY_VERSION = 1

#: Every record's fields, in the order written.
TRAJECTORY_FIELDS = (
    "version",            # TRAJECTORY_VERSION
    "step",               # the trainer's global step when the window was estimated
    "status",             # "ok" or "skipped"
    "reason",             # why the window was skipped (null when ok)
    "windows_pooled",     # generation batches pooled into this estimate
    "n_prompts",          # groups in the pooled windows
    "n_samples",          # completions in the pooled windows
    "group_size",         # the run's G (num_generations)
    "budget",             # the run's N = B G, completions per generation batch
    "level",              # two-sided level of every interval
    "sketch_dim",         # k, columns of the sketched scores
    "rule",               # the run's advantage rule, a registry name
    "rule_source",        # the trainer option it was read from, in words
    "estimator",          # the rule the MSEs below are for (the run's rule or "grpo")
    "c1", "c2", "c3",     # intervals
    "gstar",              # interval for G* = 1 + sqrt(c3'/c1); high "inf" when unbounded
    "bounded",            # whether the window bounds G* from above
    "recommended_group_size",  # the pilot advice for GRPO (minimax regret over the G* interval)
    "mse_run",            # interval: predicted gradient MSE of `estimator` at the run's G
    "mse_gstar",          # predicted fixed-budget MSE of GRPO at G* (continuous G, C17)
    "mse_best",           # predicted MSE of `estimator` at the best divisor of N
    "grpo_beats_vanilla",  # whether GRPO's predicted MSE is below vanilla's at the run's G
    "all_equal_predicted",  # predicted fraction of all-equal groups at the run's G (binary rewards)
    "all_equal_observed",   # fraction of all-equal groups in the window's own batch
)

#: The fields that hold an interval ``{"estimate", "low", "high"}``.
INTERVAL_FIELDS = ("c1", "c2", "c3", "gstar", "mse_run")


def append_record(path, record: dict) -> None:
    """Append one window's ``record`` to the trajectory file ``path`` (created if missing).

    The line is written with one ``write`` and flushed, so a run stopped between windows leaves
    every finished window readable.
    """
    missing = [f for f in TRAJECTORY_FIELDS if f not in record]
    extra = [f for f in record if f not in TRAJECTORY_FIELDS]
    if missing or extra:
        raise ValueError(f"`record`: missing fields {missing}, unknown fields {extra}")
    line = json.dumps(json_ready({f: record[f] for f in TRAJECTORY_FIELDS}), allow_nan=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _number(value):
    return math.nan if value is None else parse_number(value)


def read_trajectory(path) -> list[dict]:
    """The records of a trajectory file, numbers restored (``null`` to NaN, ``"inf"`` to inf).

    Raises a one-line ``ValueError`` naming the line for anything that is not a record of
    :data:`TRAJECTORY_FIELDS`; a last line cut short by an interrupted write is ignored.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"trajectory file {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):  # a write cut short by an interrupted run
                break
            raise ValueError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(raw, dict) or set(raw) != set(TRAJECTORY_FIELDS):
            got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
            raise ValueError(f"{path}, line {number}: not a trajectory record (fields {got})")
        for name in INTERVAL_FIELDS:
            if raw[name] is not None:
                raw[name] = {k: _number(v) for k, v in raw[name].items()}
        for name in ("mse_gstar", "mse_best", "all_equal_predicted", "all_equal_observed"):
            raw[name] = _number(raw[name])
        records.append(raw)
    return records
