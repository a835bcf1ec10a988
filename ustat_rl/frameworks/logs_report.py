"""What a trainer's per-step logs alone determine (docs/theory.md, "Training logs alone").

From :class:`~ustat_rl.frameworks.logs.LogHistory` (mean reward and all-equal fraction per
logged step) and the run's group size ``G0``:

* **dead steps**: entries whose every group was all-equal (``frac_reward_zero_std = 1``): a
  group-normalised rule gives every advantage 0 there, and the gradient is that of any KL or
  auxiliary term alone; with a logged ``grad_norm`` the steps where it is 0 are counted too;
* **windows**: consecutive blocks of ``window`` entries. Steps within a run are dependent (each
  policy is trained on the batches before it) and the success rates drift, so no interval over
  the whole run is given; each window's target is the average over its steps, and its interval
  is a Student-t interval on the window's entries, which treats them as exchangeable (drift
  within the window widens it). Intervals are per window, not simultaneous;
* **bounds at other G** (0/1 rewards): the window's intervals for ``E p`` and ``a(G0)``, each at
  level ``(1 + level)/2`` so that both hold together at ``level`` (Bonferroni), bound the
  all-equal fraction ``a(G)`` (the waste: groups, hence rollouts, with zero advantage) at every
  ``G``, and ``E[p(1 - p)]``, by :mod:`ustat_rl.theory.all_equal_bounds`: valid bounds, not
  values; and the rollouts per kept group under dynamic sampling at ``G``
  (:func:`~ustat_rl.theory.dynamic_sampling_cost.cost_at_keep_probability`).

What the logs cannot decide is listed in :data:`CANNOT`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import t as student_t

from .._validation import as_float, as_int
from ..formatting import json_ready
from ..theory.all_equal_bounds import all_equal_bounds, reward_variance_bounds
from ..theory.dynamic_sampling_cost import cost_at_keep_probability
from .logs import LogHistory, check_binary, check_group_size

__all__ = ["LogsReport", "logs_report", "format_logs_report", "DEFAULT_SIZES", "CANNOT",
           "window_slices"]

#: Group sizes at which the all-equal fraction is bounded (the run's own ``G0`` is added).
DEFAULT_SIZES = (2, 4, 8, 16, 32, 64)

#: What per-step reward logs cannot determine, one line each.
CANNOT = (
    "G* = 1 + sqrt(c3'/c1): c1 = E||g(X) - g||^2 and the score-norm factor E||W||^2 of c3' need "
    "per-sample scores, which no reward log carries, so these logs bound neither c1, c3' nor G* "
    "(`ustat-rl gstar` on pilot rollouts with scores does); the E[p(1-p)] bounded here is the "
    "reward part of c3' only",
    "the all-equal fraction at G != G0 is bounded, not determined: the two logged moments "
    "(mean reward, all-equal fraction at G0) fit many success-rate distributions",
    "non-binary rewards: the all-equal fraction at G0 is not a moment of a success-rate "
    "distribution, and nothing at other G follows",
)


@dataclass(frozen=True)
class LogsReport:
    """What ``ustat-rl logs`` prints (module docstring).

    Attributes
    ----------
    source : str
    n_steps, window : int
    logging_steps : int or None
    run_group_size : int or None
        ``G0`` (``--group-size``); without it no bounds at other ``G``.
    confirming_steps : int
        Entries whose ``reward_std`` and all-equal fraction pin down their batch and agree with
        ``G0`` (:func:`~ustat_rl.frameworks.logs.check_group_size`; an entry that disagrees is
        refused); 0 without ``G0``.
    level : float
    binary : str
        ``"checked"`` (:func:`~ustat_rl.frameworks.logs.check_binary` passed), ``"assumed"`` or
        ``"not checked"`` (no ``G0``: no bounds).
    reward_functions : list of str
    dead_steps, zero_grad_steps : list of int
    group_sizes : list of int
    windows : list of dict
        ``first_step``, ``last_step``, ``entries``, ``reward`` and ``all_equal`` (``mean``,
        ``low``, ``high`` at ``level``), ``dead_steps``, and with ``G0``: ``feasible``,
        ``all_equal_low``/``all_equal_high`` (one per ``group_sizes``),
        ``rollouts_per_kept_low``/``_high``, ``reward_variance_low``/``_high``.
    cannot : list of str
    """

    source: str
    n_steps: int
    window: int
    logging_steps: int | None
    run_group_size: int | None
    confirming_steps: int
    level: float
    binary: str
    reward_functions: list
    dead_steps: list
    zero_grad_steps: list
    group_sizes: list
    windows: list
    cannot: list

    def to_dict(self) -> dict:
        """JSON-ready (:func:`ustat_rl.formatting.json_ready`)."""
        return json_ready(asdict(self))


def window_slices(n: int, window: int) -> list[slice]:
    """Consecutive blocks of ``window`` entries; a last block of one entry joins the one before."""
    starts = list(range(0, n, window))
    if len(starts) > 1 and n - starts[-1] < 2:
        starts.pop()
    ends = starts[1:] + [n]
    return [slice(a, b) for a, b in zip(starts, ends)]


def _interval(values: np.ndarray, level: float) -> dict:
    """Student-t interval for the window average, clipped to ``[0, 1]`` (module docstring)."""
    mean = float(values.mean())
    half = float(student_t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1)
                 / math.sqrt(values.size))
    return {"mean": mean, "low": max(mean - half, 0.0), "high": min(mean + half, 1.0)}


def _bounds(row: dict, reward: dict, all_equal: dict, sizes, G0: int) -> None:
    box_m, box_a = (reward["low"], reward["high"]), (all_equal["low"], all_equal["high"])
    found = [all_equal_bounds(G, box_m, box_a, G0) for G in sizes]
    row["feasible"] = all(b.feasible for b in found)
    row["all_equal_low"] = [b.low for b in found]
    row["all_equal_high"] = [b.high for b in found]

    def per_kept(a: float, G: int) -> float:  # expected rollouts generated per kept group
        if math.isnan(a):
            return math.nan
        return cost_at_keep_probability(min(max(1.0 - a, 0.0), 1.0), G, 1).expected_rollouts

    row["rollouts_per_kept_low"] = [per_kept(b.low, G) for b, G in zip(found, sizes)]
    row["rollouts_per_kept_high"] = [per_kept(b.high, G) for b, G in zip(found, sizes)]
    var = reward_variance_bounds(box_m, box_a, G0)
    row["reward_variance_low"], row["reward_variance_high"] = var.low, var.high


def logs_report(history: LogHistory, run_group_size: int | None = None, window: int = 10,
                level: float = 0.9, assume_binary: bool = False,
                group_sizes=DEFAULT_SIZES) -> LogsReport:
    """Windows, dead steps and, with ``run_group_size``, bounds at other ``G`` (module docstring).

    ``ValueError`` (one line) when the history has fewer than 2 entries, ``window < 2``, or,
    with ``run_group_size``: a logged step contradicts it
    (:func:`~ustat_rl.frameworks.logs.check_group_size`, naming the group sizes the logs fit),
    or, unless ``assume_binary``, the logs are not those of one 0/1 reward.
    """
    if not isinstance(history, LogHistory):
        raise TypeError(f"`history` must be a LogHistory, got {type(history).__name__}")
    W = as_int(window, "window", 2, "(a window's interval needs two entries)")
    level = as_float(level, "level", low=0.0, high=1.0)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    G0 = None if run_group_size is None else as_int(run_group_size, "group_size", 2)
    if history.n_steps < 2:
        raise ValueError(f"{history.source}: {history.n_steps} logged training step(s); the "
                         "windows need at least 2")
    binary, confirming = "not checked", 0
    if G0 is not None:
        confirming = check_group_size(history, G0, "group_size")
        binary = "assumed" if assume_binary else "checked"
        if not assume_binary:
            check_binary(history, G0)
    sizes = sorted(set(as_int(g, "group_sizes", 2) for g in group_sizes) | ({G0} - {None}))
    dead = history.all_equal >= 1.0
    each = (1.0 + level) / 2.0  # two intervals that hold together at `level`
    windows = []
    for part in window_slices(history.n_steps, W):
        steps = history.step[part]
        row = {"first_step": int(steps[0]), "last_step": int(steps[-1]),
               "entries": int(steps.size), "dead_steps": int(dead[part].sum())}
        reward = _interval(history.reward[part], each if G0 else level)
        all_equal = _interval(history.all_equal[part], each if G0 else level)
        row["reward"], row["all_equal"] = reward, all_equal
        if G0 is not None:
            _bounds(row, reward, all_equal, sizes, G0)
        windows.append(row)
    return LogsReport(
        history.source, history.n_steps, W, history.logging_steps, G0, confirming, level, binary,
        list(history.reward_functions), history.step[dead].tolist(),
        history.step[history.grad_norm == 0.0].tolist(), sizes if G0 else [], windows,
        list(CANNOT) if G0 else [CANNOT[0], "the run's G (num_generations) is not in "
                                 "trainer_state.json: give --group-size for the all-equal "
                                 "fraction at other G"])


def _steps(steps: list, limit: int = 12) -> str:
    if not steps:
        return "none"
    shown = ", ".join(map(str, steps[:limit]))
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > limit else "")


def _short(value) -> str:
    value = float("nan") if value is None else float(value)
    return "-" if math.isnan(value) else f"{value:.3g}"


def _range(low, high) -> str:
    return f"{_short(low)}-{_short(high)}"


def format_logs_report(report: LogsReport, max_windows: int = 30) -> str:
    """Plain-text tables of a :class:`LogsReport`."""
    G0 = report.run_group_size
    lines = [f"{report.source}: {report.n_steps} logged training steps"
             + (f" (each averages {report.logging_steps} optimizer steps)"
                if report.logging_steps and report.logging_steps > 1 else "")
             + (f"; reward functions: {', '.join(report.reward_functions)}"
                if report.reward_functions else ""),
             f"run's G: {G0 if G0 else 'not given'}"
             + (f" (the batch size and all-equal fraction of {report.confirming_steps} of "
                f"{report.n_steps} logged steps agree)" if G0 else "")
             + f"; 0/1 rewards: {report.binary}",
             f"dead steps (every group all-equal, zero advantages): {_steps(report.dead_steps)}",
             f"steps with grad_norm 0: {_steps(report.zero_grad_steps)}", ""]
    pct = f"{100 * report.level:g}%"
    lines.append(f"windows of {report.window} logged steps (steps are dependent: each interval, "
                 f"{pct}, is for its window's average, not simultaneous)")
    head = f"{'steps':>13} {'mean reward':>21} {'all-equal (logged)':>21} {'dead':>5}"
    if G0:
        head += "".join(f" {'a(' + str(G) + ')':>13}" for G in report.group_sizes)
    lines.append(head)
    shown = report.windows[-max_windows:]
    for row in shown:
        r, a = row["reward"], row["all_equal"]
        line = (f"{str(row['first_step']) + '-' + str(row['last_step']):>13} "
                f"{_short(r['mean']) + ' [' + _range(r['low'], r['high']) + ']':>21} "
                f"{_short(a['mean']) + ' [' + _range(a['low'], a['high']) + ']':>21} "
                f"{row['dead_steps']:>5}")
        if G0:
            line += "".join(f" {_range(lo, hi):>13}" if row["feasible"] else f" {'no fit':>13}"
                            for lo, hi in zip(row["all_equal_low"], row["all_equal_high"]))
        lines.append(line)
    if len(report.windows) > len(shown):
        lines.append(f"({len(report.windows) - len(shown)} earlier windows in the JSON)")
    if G0:
        last = report.windows[-1]
        lines += ["", f"a(G): bounds on the all-equal fraction (the share of groups, and of "
                      f"rollouts, with zero advantage) at G, from the window's mean reward and "
                      f"all-equal fraction at G0 = {G0} together at {pct}; bounds, not values",
                  "no fit: no success-rate distribution has both intervals' moments (sampling "
                  "noise with few groups per step, or not 0/1 rewards)"]
        if last["feasible"]:
            lines += ["", f"last window, steps {last['first_step']}-{last['last_step']}:",
                      f"{'G':>6}{'all-equal a(G)':>20}  rollouts per kept group (DAPO filter)"]
            for i, G in enumerate(report.group_sizes):
                waste = _range(last["all_equal_low"][i], last["all_equal_high"][i])
                cost = _range(last["rollouts_per_kept_low"][i], last["rollouts_per_kept_high"][i])
                lines.append(f"{G:>6}{waste:>20}  {cost}")
            lines.append("mean within-prompt reward variance E[p(1-p)]: "
                         f"{_range(last['reward_variance_low'], last['reward_variance_high'])}")
    lines += ["", "what these logs cannot decide:"] + [f"  - {c}" for c in report.cannot]
    return "\n".join(lines)
