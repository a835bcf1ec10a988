"""The trajectory file: one JSON record per monitored window of a training run (C17, C18, C32).

A monitor (:class:`ustat_rl.frameworks.trl_monitor.GroupSizeMonitor`) appends one line per window
to a JSON-lines file, so an interrupted run keeps every finished window. Each window is a
:class:`WindowRecord`; its line is :meth:`WindowRecord.to_dict`, a JSON object with the fields of
:data:`TRAJECTORY_FIELDS` and the file's layout ``version`` (:data:`TRAJECTORY_VERSION`). An
interval is ``{"estimate", "low", "high"}`` with ``null`` for NaN and the string ``"inf"`` for an
unbounded end (:func:`ustat_rl.formatting.json_ready`). A window the monitor could not estimate
is a record too, with ``status`` ``"skipped"``, its ``reason`` in words, and ``null`` estimates.

Layouts read (:meth:`WindowRecord.from_dict`): version 5, written now; version 4, which lacked
the advice for the run's own rule and the flat-group figures (:data:`ADDED_IN_5`, read as
``None``; a version 4 line holding one of them is refused); version 3, which named the
dynamic-sampling group filter ``ds_keep_rule`` (read into ``ds_group_filter``); versions 2 and 1
(and a line without ``version``), which named the group filter as version 3 did, the run's
advantage rule ``rule`` (with ``rule_source``), the rule ``mse_best`` is for ``estimator``, and the
words behind ``mse_run`` ``run_estimator``; they are read into the fields ``estimator``, ``estimator_source``, ``mse_best_estimator`` and
``run_method``. Version 1 wrote ``var_run`` as a plug-in number without an interval; it is read
as an interval with NaN ends. Any other version is refused. The critical rollout count's fields
(:data:`CRITICAL_FIELDS`) come last and may be absent from a line (files written before they
existed), so a line of version 3 or 4 is read with or without them; the fields of
:data:`ADDED_IN_5` come after them and may be absent from a version 5 line too.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from ..formatting import json_ready, parse_number

__all__ = ["WindowRecord", "RecordInterval", "TRAJECTORY_FIELDS", "INTERVAL_FIELDS",
           "CRITICAL_FIELDS", "ADDED_IN_5",
           "GSTAR_ERROR_FIELDS", "TRAJECTORY_VERSION", "READABLE_VERSIONS", "append_record",
           "read_trajectory", "gstar_errors_of"]

#: The layout written: 3 renamed version 2's ``rule``, ``rule_source``, ``estimator`` and
#: ``run_estimator``, 4 version 3's ``ds_keep_rule``, 5 added :data:`ADDED_IN_5` (the module's
#: docstring).
TRAJECTORY_VERSION = 5

#: The layouts :meth:`WindowRecord.from_dict` reads (``None``: a line without ``version``).
READABLE_VERSIONS = (None, 1, 2, 3, 4, 5)

#: Version 2's names of the fields version 3 renamed.
_RENAMED_IN_3 = {"rule": "estimator", "rule_source": "estimator_source",
                 "estimator": "mse_best_estimator", "run_estimator": "run_method"}

#: Version 3's names (and the earlier versions') of the fields version 4 renamed.
_RENAMED_IN_4 = {"ds_keep_rule": "ds_group_filter"}

#: What ``gstar_errors`` holds: :func:`ustat_rl.pilot.uncertainty.fieller_gstar`'s inputs besides
#: the estimates of ``c1``, ``c3'`` and the record's ``n_prompts`` (``sketch_units`` ``None``
#: when the projection was not resampled).
GSTAR_ERROR_FIELDS = ("c1_prompt_se", "c1_sketch_se", "c3_se", "cov13", "sketch_units")


@dataclass(frozen=True)
class RecordInterval:
    """A window's estimate with its two-sided interval (NaN where not estimated; ``high`` ``inf``
    when unbounded)."""

    estimate: float
    low: float = math.nan
    high: float = math.nan

    def covers(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return bool(self.low <= value <= self.high)



@dataclass(frozen=True)
class WindowRecord:
    """One monitored window of a run: what ``ustat-rl gstar`` reports for the groups it pooled.

    A skipped window (``status`` ``"skipped"``) is the same record with its ``reason`` and no
    estimates (``None`` intervals, NaN numbers): a trajectory is one kind of line, every window
    in step order, and a reader picks the estimated ones by :attr:`ok`.

    Attributes
    ----------
    step : int
        The trainer's global step when the window was estimated.
    status : str
        ``"ok"`` or ``"skipped"``.
    reason : str or None
        Why the window was skipped (``None`` when ok).
    windows_pooled, n_prompts, n_samples : int
        Generation batches pooled into the estimate, their groups and their completions.
    group_size : int
        The run's ``G`` (``num_generations``).
    budget : int
        The run's ``N = B G``, completions per generation batch.
    level : float
        Two-sided level of every interval.
    sketch_dim : int or None
        ``k``, columns of the sketched scores.
    estimator : str or None
        The run's advantage rule, a registry name (``None``: not a rule of the registry; the
        paper's GRPO rule stands in).
    estimator_source : str or None
        The trainer option ``estimator`` was read from, in words.
    mse_best_estimator : str or None
        The advantage rule whose moment-model curve gives ``mse_best``: ``estimator``, or
        ``"grpo"`` where the run's rule has no such curve.
    c1, c2, c3 : RecordInterval or None
        The constants of the scaling law (``c3`` is ``c3'``).
    gstar : RecordInterval or None
        ``G* = 1 + sqrt(c3'/c1)``; ``high`` ``inf`` when unbounded.
    bounded : bool or None
        Whether the window bounds ``G*`` from above.
    recommended_group_size : int or None
        The pilot advice for GRPO (minimax regret over the ``G*`` interval).
    mse_run : RecordInterval or None
        The run rule's gradient MSE at the run's ``G`` (unbiased, no moment model).
    mse_gstar : float
        Predicted fixed-budget MSE of GRPO at ``G*`` (continuous ``G``, C17).
    mse_best : float
        Predicted MSE of ``mse_best_estimator`` at the best divisor of ``N``.
    grpo_beats_vanilla : bool or None
        Whether GRPO's predicted MSE is below vanilla's at the run's ``G``.
    all_equal_predicted, all_equal_observed : float
        The fraction of all-equal groups at the run's ``G`` predicted from the earlier batches
        (binary rewards), and observed in the newest batch.
    gstar_errors : dict or None
        The standard errors and covariance (:data:`GSTAR_ERROR_FIELDS`) from which ``gstar``'s
        interval is Fieller's (C32), so a reader can rebuild it at another level
        (:mod:`ustat_rl.frameworks.universality`).
    var_run : RecordInterval or None
        The variance of the run's gradient at its ``G`` (unbiased).
    run_method : str or None
        The rule and the method behind ``mse_run`` and ``var_run``, in words.
    units : str or None
        Which gradient the estimates are of (the trainer's, per ``loss_type``), in words.
    ds_keep_prob, ds_gen_batches : float or None
        Dynamic sampling at the run's ``G``: the chance a group is kept, and the generation
        batches per step.
    ds_group_filter : str or None
        The group filter of ``ds_*`` when one was asked for (``None``: verl's all-equal filter).
    ds_filtered_mse : float or None
        GRPO's kept-batch MSE under ``ds_group_filter`` (a point estimate).
    critical_rollouts_run, critical_inter_run, critical_intra_run : RecordInterval or None
        GRPO's critical rollout count ``B_noise = tr(Sigma_G)/||g||^2`` at the run's ``G``, in
        rollouts, and its inter- and intra-prompt parts (docs/theory.md, "The critical rollout
        count"; :mod:`ustat_rl.pilot.critical_rollouts`): estimate ``inf`` where ``||g||^2`` is
        estimated at or below 0, ``high`` ``inf`` where the window cannot bound it.
    critical_rollouts_gstar, critical_inter_gstar, critical_intra_gstar : RecordInterval or None
        The same at ``min(G*, N)`` (``None`` where ``G*`` is undefined).
    grad_norm_sq : RecordInterval or None
        ``||g||^2``, the mean of ``<g_a, g_b>`` over pairs of distinct groups, with its interval.
    advice_target : str or None
        The advice's target the run's optimiser pays for
        (:data:`~ustat_rl.theory.group_size.ADVICE_TARGETS`; docs/theory.md, "What a step's
        progress depends on"): ``"scale_free"`` for one that removes the gradient's scale (Adam),
        ``"mse"`` for a step of fixed size (SGD).
    run_rule_advice_mse, run_rule_advice_scale_free : int or None
        The advice for the run's own rule (``estimator``) under each target: what
        ``ustat-rl gstar --estimator <estimator> --target <target>`` answers on the window's
        groups; ``None`` where it cannot be computed (``run_rule_advice_note`` says why).
    run_rule_advice_note : str or None
        Why the run rule's advice is absent (under one target or both), in words.
    advised_group_size : int or None
        The ``G`` to follow: the run rule's advice under ``advice_target``, else (it is absent)
        the paper's ``recommended_group_size``.
    flat_share : dict or None
        The share of the window's groups (every pooled batch) with no signal, all rewards equal,
        by reason (:data:`~ustat_rl.frameworks.flat_groups.REASONS`).
    flat_expected_run, flat_expected_advised : RecordInterval or None
        The expected share of flat groups, the prompt average of ``p^G + (1 - p)^G``, at the
        run's ``G`` and at ``advised_group_size`` (binary rewards; a plug-in, biased upward,
        where that ``G`` exceeds the run's; :func:`~ustat_rl.frameworks.flat_groups.
        expected_flat_share`).
    """

    step: int
    status: str
    reason: str | None = None
    windows_pooled: int = 0
    n_prompts: int = 0
    n_samples: int = 0
    group_size: int | None = None
    budget: int | None = None
    level: float = math.nan
    sketch_dim: int | None = None
    estimator: str | None = None
    estimator_source: str | None = None
    mse_best_estimator: str | None = None
    c1: RecordInterval | None = None
    c2: RecordInterval | None = None
    c3: RecordInterval | None = None
    gstar: RecordInterval | None = None
    bounded: bool | None = None
    recommended_group_size: int | None = None
    mse_run: RecordInterval | None = None
    mse_gstar: float = math.nan
    mse_best: float = math.nan
    grpo_beats_vanilla: bool | None = None
    all_equal_predicted: float = math.nan
    all_equal_observed: float = math.nan
    gstar_errors: dict | None = None
    var_run: RecordInterval | None = None
    run_method: str | None = None
    units: str | None = None
    ds_keep_prob: float | None = None
    ds_gen_batches: float | None = None
    ds_group_filter: str | None = None
    ds_filtered_mse: float | None = None
    critical_rollouts_run: RecordInterval | None = None
    critical_inter_run: RecordInterval | None = None
    critical_intra_run: RecordInterval | None = None
    critical_rollouts_gstar: RecordInterval | None = None
    critical_inter_gstar: RecordInterval | None = None
    critical_intra_gstar: RecordInterval | None = None
    grad_norm_sq: RecordInterval | None = None
    advice_target: str | None = None
    run_rule_advice_mse: int | None = None
    run_rule_advice_scale_free: int | None = None
    run_rule_advice_note: str | None = None
    advised_group_size: int | None = None
    flat_share: dict | None = None
    flat_expected_run: RecordInterval | None = None
    flat_expected_advised: RecordInterval | None = None

    def __post_init__(self):
        if self.status not in ("ok", "skipped"):
            raise ValueError(f"`status` must be 'ok' or 'skipped', got {self.status!r}")
        if isinstance(self.step, bool) or not isinstance(self.step, int):
            raise ValueError(f"`step` must be an integer, got {self.step!r}")
        for name in INTERVAL_FIELDS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, RecordInterval):
                raise ValueError(f"`{name}` must be a RecordInterval or None, got {value!r}")
            if value is not None and value.low > value.high:
                raise ValueError(f"`{name}` is reversed: low {value.low:g} > high {value.high:g}")
        errors = self.gstar_errors
        if errors is not None and (not isinstance(errors, dict)
                                   or set(errors) != set(GSTAR_ERROR_FIELDS)):
            raise ValueError(f"`gstar_errors` must be None or hold {list(GSTAR_ERROR_FIELDS)}, "
                             f"got {errors!r}")
        if self.ds_group_filter is not None and not isinstance(self.ds_group_filter, str):
            raise ValueError(f"`ds_group_filter` must be a filter name or None, got "
                             f"{self.ds_group_filter!r}")
        if self.advice_target is not None and self.advice_target not in ("mse", "scale_free"):
            raise ValueError(f"`advice_target` must be 'mse', 'scale_free' or None, got "
                             f"{self.advice_target!r}")
        for name in ("run_rule_advice_mse", "run_rule_advice_scale_free", "advised_group_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"`{name}` must be a group size (an integer >= 1) or None, got "
                                 f"{value!r}")
        if self.flat_share is not None and not isinstance(self.flat_share, dict):
            raise ValueError(f"`flat_share` must be a dict of shares by reason or None, got "
                             f"{self.flat_share!r}")
        if self.ok:
            if not 0.0 < self.level < 1.0:
                raise ValueError(f"`level` must lie strictly between 0 and 1, got {self.level!r}")
            for name in ("c1", "c3", "gstar"):
                if getattr(self, name) is None:
                    raise ValueError(f"`{name}` of a window with status 'ok' must be an interval "
                                     "{estimate, low, high}")

    @property
    def ok(self) -> bool:
        """Whether the window was estimated (``status`` ``"ok"``)."""
        return self.status == "ok"

    def to_dict(self) -> dict:
        """The record's line in the trajectory file: JSON-ready (NaN as ``None``, ``inf`` as
        ``"inf"``), ``version`` first, then :data:`TRAJECTORY_FIELDS` in order."""
        out = {"version": TRAJECTORY_VERSION}
        for name in TRAJECTORY_FIELDS:
            value = getattr(self, name)
            if isinstance(value, RecordInterval):
                value = {"estimate": value.estimate, "low": value.low, "high": value.high}
            out[name] = dict(value) if isinstance(value, dict) else value
        return json_ready(out)

    @classmethod
    def from_dict(cls, raw: dict) -> WindowRecord:
        """The record of one trajectory line ``raw`` of any layout in :data:`READABLE_VERSIONS`
        (numbers restored: ``null`` to NaN, ``"inf"`` to inf); a one-line ``ValueError`` for
        anything else."""
        if not isinstance(raw, dict):
            raise ValueError(f"not a trajectory record (a {type(raw).__name__}, not an object)")
        version = raw.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ValueError(f"`version` {version!r} is not a trajectory layout this reader knows "
                             f"({', '.join(str(v) for v in READABLE_VERSIONS[1:])}, or absent)")
        names = set(raw) - {"version"}
        newer = sorted(names & set(ADDED_IN_5)) if version != TRAJECTORY_VERSION else []
        if newer:  # a field version 5 added, in a line that says it is older
            raise ValueError(f"not a trajectory record of version {version} (unknown {newer})")
        if version not in (4, TRAJECTORY_VERSION):  # version 5 renamed nothing
            renamed = dict(_RENAMED_IN_4, **({} if version == 3 else _RENAMED_IN_3))
            raw = {renamed.get(k, k): v for k, v in raw.items()}
            names = {renamed.get(k, k) for k in names}
        unknown = sorted(names - set(TRAJECTORY_FIELDS))
        if not _REQUIRED <= names or unknown:
            raise ValueError(f"not a trajectory record of version {version} (missing "
                             f"{sorted(_REQUIRED - names)}, unknown {unknown})")
        values = {f: raw.get(f) for f in TRAJECTORY_FIELDS}
        old = values["var_run"]
        if old is not None and not isinstance(old, dict):  # version 1: a number, no interval
            values["var_run"] = {"estimate": old, "low": None, "high": None}
        for name in INTERVAL_FIELDS:
            values[name] = _interval_of(values[name], name)
        for name in ("level", "mse_gstar", "mse_best", "all_equal_predicted",
                     "all_equal_observed"):
            values[name] = _number(values[name], name)
        for name in ("ds_keep_prob", "ds_gen_batches", "ds_filtered_mse"):
            if values[name] is not None:
                values[name] = _number(values[name], name)
        errors = values["gstar_errors"]
        if isinstance(errors, dict) and set(errors) == set(GSTAR_ERROR_FIELDS):
            values["gstar_errors"] = {k: v if k == "sketch_units" else
                                      _number(v, f"gstar_errors.{k}") for k, v in errors.items()}
        share = values["flat_share"]
        if isinstance(share, dict):
            values["flat_share"] = {k: _number(v, f"flat_share.{k}") for k, v in share.items()}
        for name in ("windows_pooled", "n_prompts", "n_samples"):
            values[name] = 0 if values[name] is None else values[name]
        return cls(**values)


#: Every record's fields, in the order written (after ``version``).
TRAJECTORY_FIELDS = tuple(f.name for f in fields(WindowRecord))

#: The fields that hold an interval ``{"estimate", "low", "high"}``.
INTERVAL_FIELDS = ("c1", "c2", "c3", "gstar", "mse_run", "var_run", "critical_rollouts_run",
                   "critical_inter_run", "critical_intra_run", "critical_rollouts_gstar",
                   "critical_inter_gstar", "critical_intra_gstar", "grad_norm_sq",
                   "flat_expected_run", "flat_expected_advised")

#: The critical rollout count's fields (``critical_*``) and ``grad_norm_sq``: version 3 lines
#: written before 0.2.0 added them omit them, and read as ``None``.
CRITICAL_FIELDS = INTERVAL_FIELDS[6:13]

#: The fields version 5 added, last in a line: the advice for the run's own rule and the
#: flat-group figures (read as ``None`` from an older line, and refused in one).
ADDED_IN_5 = TRAJECTORY_FIELDS[TRAJECTORY_FIELDS.index("advice_target"):]

#: Fields every line holds; version 2 wrote every field but the eight of
#: ``gstar_errors`` .. ``ds_filtered_mse``, which a line may omit (as it may the
#: :data:`CRITICAL_FIELDS` after them).
_REQUIRED = set(TRAJECTORY_FIELDS[:TRAJECTORY_FIELDS.index("gstar_errors")])


def _interval_of(value, name: str) -> RecordInterval | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"`{name}` must be an interval {{estimate, low, high}} or null, "
                         f"got {value!r}")
    parts = {k: _number(v, f"{name}.{k}") for k, v in value.items()}
    if not set(parts) <= {"estimate", "low", "high"}:
        raise ValueError(f"`{name}` must be an interval {{estimate, low, high}}, got {value!r}")
    if "estimate" not in parts:
        raise ValueError(f"`{name}` must be an interval {{estimate, low, high}}, got {value!r}")
    return RecordInterval(**parts)


def append_record(path, record: WindowRecord) -> None:
    """Append one window's ``record`` to the trajectory file ``path`` (created if missing).

    The line is written with one ``write`` and flushed, so a run stopped between windows leaves
    every finished window readable.
    """
    if not isinstance(record, WindowRecord):
        raise TypeError(f"`record` must be a WindowRecord, got {type(record).__name__}")
    line = json.dumps(record.to_dict(), allow_nan=False)
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


def read_trajectory(path) -> list[WindowRecord]:
    """The records of a trajectory file (:meth:`WindowRecord.from_dict`, every readable layout).

    Raises a one-line ``ValueError`` naming the file (and the line) for anything that is not a
    file of records: a file that is not UTF-8 text, holds no line, or has a line that is not such
    a record (an unknown ``version`` included). Only a last line cut short by an interrupted
    write is ignored: one with no newline at its end (a record is written with its newline in
    one write) that begins as every record does, with ``{``; a file whose only line is cut short
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
        try:
            records.append(WindowRecord.from_dict(raw))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    return records


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
    >>> from ustat_rl.scores.spec import SketchSpec
    >>> pilot = bandit_pilot(interior_optimum_bandit(), 64, 16, rng=1,
    ...                      sketch=SketchSpec(16, seed=1169290205))
    >>> out = pilot_intervals(pilot)
    >>> sorted(gstar_errors_of(out)) == sorted(GSTAR_ERROR_FIELDS)
    True
    """
    if hasattr(estimates, "fieller_inputs"):
        return estimates.fieller_inputs()
    if hasattr(estimates, "gstar_errors"):
        return estimates.gstar_errors
    raise TypeError(f"`estimates` must be PilotIntervals or GStarReport, got "
                    f"{type(estimates).__name__}")
