"""The trajectory file: one JSON record per monitored window of a training run (C17, C18, C32).

A monitor (:class:`ustat_rl.frameworks.trl_monitor.GroupSizeMonitor`) appends one line per window
to a JSON-lines file, so an interrupted run keeps every finished window. Each record is a JSON
object with the fields of :data:`TRAJECTORY_FIELDS`; an interval is ``{"estimate", "low",
"high"}`` with ``null`` for NaN and the string ``"inf"`` for an unbounded end
(:func:`ustat_rl.formatting.json_ready`). A window the monitor could not estimate has ``status``
``"skipped"``, its ``reason`` in words, and ``null`` estimates.

The fields ``var_run``, ``run_estimator`` and ``units`` (the variance of the run's gradient
around its mean with its interval, how the run's MSE and variance were estimated, and which
gradient the estimates are of: the trainer's, per ``loss_type``) are optional, as is
``gstar_errors`` (``null`` or absent in files written without it). Version 1 files wrote
``var_run`` as a plug-in number without an interval; it is read as an interval with ``null``
ends. ``gstar_errors`` holds
the standard errors and covariance from which ``G*``'s interval is Fieller's (C32), so a reader
can rebuild every window's interval at a simultaneous (Bonferroni) level
(:func:`gstar_errors_of`, :mod:`ustat_rl.frameworks.universality`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..formatting import json_ready, parse_number

__all__ = ["TRAJECTORY_FIELDS", "INTERVAL_FIELDS", "OPTIONAL_FIELDS", "GSTAR_ERROR_FIELDS",
           "append_record", "read_trajectory", "gstar_errors_of", "synthetic_record",
           "SyntheticErrors", "SyntheticWindow",
           "TRAJECTORY_VERSION"]

TRAJECTORY_VERSION = 2

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
    "estimator",          # the rule mse_best is for (the run's rule, or "grpo" where its curve
                          # has no moment model)
    "c1", "c2", "c3",     # intervals
    "gstar",              # interval for G* = 1 + sqrt(c3'/c1); high "inf" when unbounded
    "bounded",            # whether the window bounds G* from above
    "recommended_group_size",  # the pilot advice for GRPO (minimax regret over the G* interval)
    "mse_run",            # interval: the run rule's gradient MSE at the run's G (unbiased)
    "mse_gstar",          # predicted fixed-budget MSE of GRPO at G* (continuous G, C17)
    "mse_best",           # predicted MSE of `estimator` at the best divisor of N
    "grpo_beats_vanilla",  # whether GRPO's predicted MSE is below vanilla's at the run's G
    "all_equal_predicted",  # predicted fraction of all-equal groups at the run's G (binary rewards)
    "all_equal_observed",   # fraction of all-equal groups in the window's own batch
    "gstar_errors",       # optional: {GSTAR_ERROR_FIELDS} behind G*'s interval, or null
    "var_run",            # optional interval: variance of the run's gradient at its G (unbiased)
    "run_estimator",      # optional: the rule and method behind mse_run and var_run, in words
    "units",              # optional: which gradient the estimates are of, and how exactly
    "ds_keep_prob",       # optional: chance a group is not all-equal at the run's G (binary)
    "ds_gen_batches",     # optional: generation batches per step under dynamic sampling
    "ds_keep_rule",       # optional: the keep rule of ds_* when one was asked for (else verl's)
    "ds_filtered_mse",    # optional: GRPO's kept-batch MSE under ds_keep_rule (point estimate)
)

#: Fields a record may omit (read and written as ``null``).
OPTIONAL_FIELDS = ("gstar_errors", "var_run", "run_estimator", "units", "ds_keep_prob",
                   "ds_gen_batches", "ds_keep_rule", "ds_filtered_mse")

#: What ``gstar_errors`` holds: :func:`ustat_rl.pilot.uncertainty.fieller_gstar`'s inputs besides
#: the estimates of ``c1``, ``c3'`` and the record's ``n_prompts`` (``sketch_units`` ``null``
#: when the projection was not resampled).
GSTAR_ERROR_FIELDS = ("c1_prompt_se", "c1_sketch_se", "c3_se", "cov13", "sketch_units")

#: The fields that hold an interval ``{"estimate", "low", "high"}``.
INTERVAL_FIELDS = ("c1", "c2", "c3", "gstar", "mse_run", "var_run")


def append_record(path, record: dict) -> None:
    """Append one window's ``record`` to the trajectory file ``path`` (created if missing).

    The line is written with one ``write`` and flushed, so a run stopped between windows leaves
    every finished window readable.
    """
    missing = [f for f in TRAJECTORY_FIELDS if f not in record and f not in OPTIONAL_FIELDS]
    extra = [f for f in record if f not in TRAJECTORY_FIELDS]
    if missing or extra:
        raise ValueError(f"`record`: missing fields {missing}, unknown fields {extra}")
    errors = record.get("gstar_errors")
    if errors is not None and (not isinstance(errors, dict) or set(errors) != set(GSTAR_ERROR_FIELDS)):
        raise ValueError(f"`record`: `gstar_errors` must be null or hold {list(GSTAR_ERROR_FIELDS)}")
    line = json.dumps(json_ready({f: record.get(f) for f in TRAJECTORY_FIELDS}), allow_nan=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _number(value, name: str):
    """A number as :func:`~ustat_rl.formatting.json_ready` writes it (``null``, a JSON number,
    ``"inf"``, ``"-inf"``, or an older ``"nan"``); anything else is an error, not a NaN."""
    if value is None:
        return math.nan
    number = parse_number(value)
    valid = (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and (not math.isnan(number) or value.strip().lower() == "nan"))
    if not valid:
        raise ValueError(f"`{name}` must be a number, null or 'inf', got {value!r}")
    return number


def read_trajectory(path) -> list[dict]:
    """The records of a trajectory file, numbers restored (``null`` to NaN, ``"inf"`` to inf).

    Raises a one-line ``ValueError`` naming the file (and the line) for anything that is not a
    file of records of :data:`TRAJECTORY_FIELDS`: a file that is not UTF-8 text, holds no line,
    or has a line that is not such a record. Only a last line cut short by an interrupted write
    is ignored: one with no newline at its end (a record is written with its newline in one
    write) that begins as every record does, with ``{``; a file whose only line is cut short
    holds no record and is an error too.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"trajectory file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a trajectory file (byte {exc.start} is not UTF-8 text; "
                         "a trajectory file holds one JSON record a line)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise ValueError(f"{path}: not a trajectory file (it is empty; a trajectory file holds "
                         "one JSON record a line)")
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            cut_short = (number == len(lines) and not text.endswith(("\n", "\r"))
                         and line.lstrip().startswith("{"))
            if cut_short and records:  # a write cut short by an interrupted run
                break
            what = "its only line is cut short" if cut_short else f"not JSON ({exc.msg})"
            raise ValueError(f"{path}, line {number}: {what}; a trajectory file holds one JSON "
                             "record a line") from None
        required = set(TRAJECTORY_FIELDS) - set(OPTIONAL_FIELDS)
        if not isinstance(raw, dict) or not required <= set(raw) <= set(TRAJECTORY_FIELDS):
            got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
            raise ValueError(f"{path}, line {number}: not a trajectory record (fields {got})")
        try:
            records.append(_restored(raw))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    return records


def _restored(raw: dict) -> dict:
    """``raw`` with numbers restored and the fields a reader relies on checked."""
    record = {f: raw.get(f) for f in TRAJECTORY_FIELDS}
    old = record["var_run"]
    if old is not None and not isinstance(old, dict):  # version 1: a number, no interval
        record["var_run"] = {"estimate": old, "low": None, "high": None}
    if record["status"] not in ("ok", "skipped"):
        raise ValueError(f"`status` must be 'ok' or 'skipped', got {record['status']!r}")
    if isinstance(record["step"], bool) or not isinstance(record["step"], int):
        raise ValueError(f"`step` must be an integer, got {record['step']!r}")
    for name in INTERVAL_FIELDS:
        if record[name] is not None:
            if not isinstance(record[name], dict):
                raise ValueError(f"`{name}` must be an interval {{estimate, low, high}} or null, "
                                 f"got {record[name]!r}")
            record[name] = {k: _number(v, f"{name}.{k}") for k, v in record[name].items()}
            low, high = record[name].get("low", math.nan), record[name].get("high", math.nan)
            if low > high:
                raise ValueError(f"`{name}` is reversed: low {low:g} > high {high:g}")
    for name in ("level", "mse_gstar", "mse_best", "all_equal_predicted", "all_equal_observed"):
        record[name] = _number(record[name], name)
    if record["ds_keep_rule"] is not None and not isinstance(record["ds_keep_rule"], str):
        raise ValueError(f"`ds_keep_rule` must be a rule name or null, got "
                         f"{record['ds_keep_rule']!r}")
    for name in ("ds_keep_prob", "ds_gen_batches", "ds_filtered_mse"):
        if record[name] is not None:
            record[name] = _number(record[name], name)
    if record["gstar_errors"] is not None:
        errors = record["gstar_errors"]
        if not isinstance(errors, dict) or set(errors) != set(GSTAR_ERROR_FIELDS):
            raise ValueError(f"`gstar_errors` must be null or hold {list(GSTAR_ERROR_FIELDS)}, "
                             f"got {errors!r}")
        record["gstar_errors"] = {k: v if k == "sketch_units" else _number(v, f"gstar_errors.{k}")
                                  for k, v in errors.items()}
    if record["status"] == "ok":
        if not 0.0 < record["level"] < 1.0:
            raise ValueError(f"`level` must lie strictly between 0 and 1, got {raw['level']!r}")
        for name in ("c1", "c3", "gstar"):
            if record[name] is None or not {"estimate", "low", "high"} <= set(record[name]):
                raise ValueError(f"`{name}` of a window with status 'ok' must be an interval "
                                 "{estimate, low, high}")
    return record


def gstar_errors_of(estimates) -> dict | None:
    """The ``gstar_errors`` field of a window from its pilot estimates.

    Parameters
    ----------
    estimates : PilotIntervals or GStarReport
        The window's :class:`~ustat_rl.pilot.uncertainty.PilotIntervals`, or the
        :class:`~ustat_rl.pilot.report.GStarReport` that ``ustat-rl gstar`` computes (``None``
        when that report has no intervals).

    Examples
    --------
    >>> from ustat_rl.policies.examples import interior_optimum_bandit
    >>> from ustat_rl.scores.bandit import bandit_pilot
    >>> from ustat_rl.pilot.uncertainty import pilot_intervals
    >>> out = pilot_intervals(bandit_pilot(interior_optimum_bandit(), 64, 16, rng=1, sketch_dim=16))
    >>> sorted(gstar_errors_of(out)) == sorted(GSTAR_ERROR_FIELDS)
    True
    """
    if hasattr(estimates, "fieller_inputs"):
        return estimates.fieller_inputs()
    if hasattr(estimates, "gstar_errors"):
        return estimates.gstar_errors
    raise TypeError(f"`estimates` must be PilotIntervals or GStarReport, got "
                    f"{type(estimates).__name__}")


@dataclass(frozen=True)
class SyntheticErrors:
    """Standard errors of a synthetic window's estimates (:func:`synthetic_record`).

    Parameters
    ----------
    c1, c3 : float
        Standard errors of ``c1`` and ``c3'``.
    c2 : float
        Standard error of ``c2`` (default 0).
    cov13 : float
        Covariance of the ``c1`` and ``c3'`` estimates (default 0).
    stored : bool
        Whether the record carries them as ``gstar_errors`` (a writer that predates the field
        does not).
    """

    c1: float
    c3: float
    c2: float = 0.0
    cov13: float = 0.0
    stored: bool = True


@dataclass(frozen=True)
class SyntheticWindow:
    """What a synthetic window pooled (:func:`synthetic_record`): ``n_prompts`` groups of
    ``group_size`` in ``windows_pooled`` batches of a run with ``budget`` completions per batch,
    intervals at ``level``, and the all-equal fractions ``(predicted, observed)``."""

    n_prompts: int = 64
    level: float = 0.9
    group_size: int = 8
    budget: int = 256
    windows_pooled: int = 1
    all_equal: tuple = (math.nan, math.nan)


def synthetic_record(step: int, c1: float, c2: float, c3: float, errors: SyntheticErrors, *,
                     window: SyntheticWindow | None = None, reason: str | None = None) -> dict:
    """A valid record for estimates ``c1, c2, c3'`` with standard errors, for tests and examples.

    The intervals are built as :func:`~ustat_rl.pilot.uncertainty.pilot_intervals` builds them
    for full scores (``estimate +- t se`` with ``P - 1`` degrees of freedom, ``G*`` by
    :func:`~ustat_rl.pilot.uncertainty.fieller_gstar`); the MSE fields are ``NaN``. ``window``
    (default :class:`SyntheticWindow()`) says what the window pooled. With ``reason`` the record
    is a skipped window (``null`` estimates).

    Examples
    --------
    >>> rec = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.01, 0.5))
    >>> rec["gstar"]["estimate"], rec["bounded"]
    (8.0, True)
    """
    from ..pilot.uncertainty import fieller_gstar, student_quantile
    from ..theory import ScalingConstants

    window = SyntheticWindow() if window is None else window
    n_prompts, level, group_size = window.n_prompts, window.level, window.group_size
    se1, se2, se3, cov13 = errors.c1, errors.c2, errors.c3, errors.cov13
    record = dict.fromkeys(TRAJECTORY_FIELDS)
    record.update(version=TRAJECTORY_VERSION, step=int(step), windows_pooled=window.windows_pooled,
                  n_prompts=n_prompts, n_samples=n_prompts * group_size, group_size=group_size,
                  budget=window.budget, level=level, sketch_dim=None, rule="grpo",
                  rule_source="synthetic", estimator="grpo", mse_gstar=math.nan,
                  mse_best=math.nan, all_equal_predicted=window.all_equal[0],
                  all_equal_observed=window.all_equal[1])
    if reason is not None:
        record.update(status="skipped", reason=reason)
        return record
    t = student_quantile(level, 1.0, 0.0, n_prompts, None)
    for name, value, se in (("c1", c1, se1), ("c2", c2, se2), ("c3", c3, se3)):
        record[name] = {"estimate": value, "low": value - t * se, "high": value + t * se}
    _, (low, high) = fieller_gstar(c1, c3, se1, 0.0, se3, cov13, n_prompts, None, level)
    point = (ScalingConstants(c1, c2, c3, estimated=True).optimal_group_size() if c3 >= 0
             else math.nan)
    record.update(status="ok", gstar={"estimate": point, "low": low, "high": high},
                  bounded=math.isfinite(high),
                  recommended_group_size=group_size,
                  mse_run={"estimate": math.nan, "low": math.nan, "high": math.nan},
                  grpo_beats_vanilla=None)
    if errors.stored:
        record["gstar_errors"] = {"c1_prompt_se": se1, "c1_sketch_se": 0.0, "c3_se": se3,
                                  "cov13": cov13, "sketch_units": None}
    return record
