"""Why groups gave no signal: the flat-group report of a run's rewards (beyond the paper).

A group whose rewards are all equal gets zero advantage under every group-normalised rule, so it
adds nothing to the step but its cost. Per window (a training step of the table, or the whole
table when it has no steps) each flat group gets one reason, the first that holds:

1. **all errored**: every completion carries the trainer's ``errored`` mark (its reward could
   not be computed);
2. **all truncated**: every completion carries the ``truncated`` mark (it hit the length limit);
3. **all correct**: every reward is 1;
4. **all wrong**: every reward is 0;
5. **equal rewards**: every reward is the same other value (continuous rewards).

Marks count only where the table has them (:class:`~ustat_rl.frameworks.GroupedRewards`'
``truncated`` and ``errored``). Beside the shares, with binary rewards, the expected share of
flat groups at other group sizes ``G``: the prompt average of ``p^G + (1 - p)^G``, estimated
per group by the U-statistic ``(C(m, G) + C(n - m, G)) / C(n, G)`` (unbiased for ``G <= n``;
the plug-in ``p_hat^G + (1 - p_hat)^G`` above, marked) and averaged over the window's groups,
with a normal interval from the spread of the per-group estimates (the groups are i.i.d. prompt
draws), clipped to ``[0, 1]``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import norm

from .._validation import as_group_sizes
from ..formatting import format_number, json_ready
from ..pilot.report import all_equal_by_prompt
from .grouped import GroupedRewards

__all__ = ["REASONS", "FlatGroupWindow", "flat_group_reasons", "flat_group_report",
           "format_flat_groups", "expected_flat_share", "window_flat_groups"]

#: The reasons, in the order they are tried.
REASONS = ("all errored", "all truncated", "all correct", "all wrong", "equal rewards")
#: Group sizes the expected share is given at, by default (those above the window's own too).
DEFAULT_SIZES = (2, 4, 8, 16, 32)


@dataclass(frozen=True)
class FlatGroupWindow:
    """One window's flat groups.

    Attributes
    ----------
    window : str
        ``"step S"`` or ``"all rows"``.
    n_groups, n_flat : int
    counts : dict
        Flat groups per reason of :data:`REASONS`.
    group_sizes : list of int
        ``G`` of the expected shares (empty when the rewards are not binary).
    expected, low, high : list of float
        The expected share of flat groups at each ``G`` and its interval at ``level``.
    unbiased : list of bool
        Whether the estimate at each ``G`` is the U-statistic (every group has ``n >= G``).
    level : float
    """

    window: str
    n_groups: int
    n_flat: int
    counts: dict
    group_sizes: list
    expected: list
    low: list
    high: list
    unbiased: list
    level: float

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


def flat_group_reasons(reward, index, n_groups: int, truncated=None, errored=None) -> np.ndarray:
    """Each group's reason (an entry of :data:`REASONS`), or ``""`` when its rewards differ.

    ``reward (n,)``, ``index (n,)`` each row's group in ``0..n_groups-1``; ``truncated`` and
    ``errored`` ``(n,)`` bool or ``None``.

    Examples
    --------
    >>> flat_group_reasons([1, 1, 0, 0, 0.5, 0.5, 1, 0], [0, 0, 1, 1, 2, 2, 3, 3], 4).tolist()
    ['all correct', 'all wrong', 'equal rewards', '']
    """
    r = np.asarray(reward, dtype=np.float64)
    idx = np.asarray(index)
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    np.minimum.at(lo, idx, r)
    np.maximum.at(hi, idx, r)
    flat = lo == hi
    out = np.full(n_groups, "", dtype=object)
    out[flat & (lo == 0.0)] = "all wrong"
    out[flat & (lo == 1.0)] = "all correct"
    out[flat & (lo != 0.0) & (lo != 1.0)] = "equal rewards"
    for name, marks in (("all truncated", truncated), ("all errored", errored)):
        if marks is None:
            continue
        every = np.bincount(idx, np.asarray(marks, dtype=np.float64), n_groups) == np.bincount(
            idx, minlength=n_groups)
        out[flat & every] = name  # errored last: it wins over truncated
    return out.astype(str)


def expected_flat_share(successes, sizes_per_group, group_sizes, level: float = 0.9):
    """``(estimate, low, high, unbiased)`` of the prompt average of ``p^G + (1 - p)^G`` at each
    ``G`` of ``group_sizes``, from ``m_a`` successes of ``n_a`` per group: the per-group
    estimates of :func:`~ustat_rl.pilot.report.all_equal_by_prompt`, their mean, and a normal
    interval from their spread at ``level`` (clipped to ``[0, 1]``)."""
    per_group, unbiased = all_equal_by_prompt(successes, sizes_per_group, group_sizes)
    P = per_group.shape[0]
    mean = per_group.mean(axis=0)
    se = per_group.std(axis=0, ddof=1) / np.sqrt(P) if P > 1 else np.full(mean.shape, np.inf)
    z = norm.ppf(0.5 + level / 2.0)
    return (mean, np.clip(mean - z * se, 0.0, 1.0), np.clip(mean + z * se, 0.0, 1.0),
            np.all(unbiased, axis=0))


def _window(table: GroupedRewards, label: str, sizes, level: float) -> FlatGroupWindow:
    ids, index = table.groups()
    P = ids.size
    reasons = flat_group_reasons(table.reward, index, P, table.truncated, table.errored)
    counts = {name: int(np.sum(reasons == name)) for name in REASONS}
    expected = low = high = unbiased = []
    grid = []
    if table.binary:
        n = np.bincount(index, minlength=P)
        m = np.bincount(index, table.reward, P)
        grid = sorted(set(sizes))
        est, lo, hi, unb = expected_flat_share(m, n, grid, level)
        expected, low, high, unbiased = est.tolist(), lo.tolist(), hi.tolist(), unb.tolist()
    return FlatGroupWindow(label, int(P), int(np.sum(reasons != "")), counts, grid, expected,
                           low, high, unbiased, float(level))


def flat_group_report(table: GroupedRewards, group_sizes=DEFAULT_SIZES,
                      level: float = 0.9) -> list:
    """One :class:`FlatGroupWindow` per training step of ``table`` (one for the whole table
    without steps), steps in increasing order.

    Examples
    --------
    >>> from ustat_rl.frameworks import GroupedRewards
    >>> t = GroupedRewards(["a"] * 2 + ["b"] * 2 + ["c"] * 2, [1, 1, 0, 0, 1, 0])
    >>> w = flat_group_report(t, (2, 4))[0]
    >>> w.n_flat, w.counts["all correct"], w.counts["all wrong"], [round(e, 3) for e in w.expected]
    (2, 1, 1, [0.667, 0.708])
    """
    if not isinstance(table, GroupedRewards):
        raise TypeError(f"`table` must be a GroupedRewards, got {type(table).__name__}")
    sizes = as_group_sizes(group_sizes, "group_sizes", 1).tolist()
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    if table.step is None:
        return [_window(table, "all rows", sizes, level)]
    return [_window(table.select_step(int(s)), f"step {int(s)}", sizes, level)
            for s in np.unique(table.step)]


def window_flat_groups(batches, group_sizes=DEFAULT_SIZES, level: float = 0.9,
                       truncated=None, errored=None) -> FlatGroupWindow:
    """The flat-group report of a monitored window: its generation batches
    (:class:`~ustat_rl.frameworks.window.Batch`, group ``b`` in rows ``b G .. (b + 1) G - 1``)
    pooled as one window; ``truncated`` and ``errored`` the trainer's marks for those rows in
    order, where it has them."""
    batches = list(batches)
    if not batches:
        raise ValueError("`batches` must hold at least one batch")
    ids, rewards = [], []
    for batch in batches:
        reward = np.asarray(batch.reward, dtype=np.float64)
        G = int(batch.group_size)
        ids.append([f"{batch.step}:{batch.first_id + i // G}" for i in range(reward.size)])
        rewards.append(reward)
    table = GroupedRewards(np.concatenate(ids), np.concatenate(rewards), truncated=truncated,
                           errored=errored, source="monitored window")
    steps = sorted({int(b.step) for b in batches})
    label = f"steps {steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"
    window = flat_group_report(table, group_sizes, level)[0]
    return FlatGroupWindow(label, *[getattr(window, f) for f in
                                    ("n_groups", "n_flat", "counts", "group_sizes", "expected",
                                     "low", "high", "unbiased", "level")])


def format_flat_groups(windows) -> str:
    """The report in words: per window, how many groups were flat and why, and the share to
    expect at other group sizes."""
    lines = ["groups that gave no signal (all rewards equal: zero advantage under a "
             "group-normalised rule):"]
    for w in windows:
        if w.n_flat == 0:
            lines.append(f"  {w.window}: none of {w.n_groups} groups was flat.")
            continue
        why = ", ".join(f"{w.counts[name]} {name}" for name in REASONS if w.counts[name])
        lines.append(f"  {w.window}: {w.n_flat} of {w.n_groups} groups were flat "
                     f"({format_number(w.n_flat / w.n_groups)}): {why}.")
        if w.group_sizes:
            parts = []
            for G, e, lo, hi, ok in zip(w.group_sizes, w.expected, w.low, w.high, w.unbiased):
                mark = "" if ok else "*"
                parts.append(f"G = {G}: {format_number(e)}{mark} [{format_number(lo)}, "
                             f"{format_number(hi)}]")
            lines.append(f"    expected share of flat groups ({int(round(100 * w.level))}% "
                         "interval): " + "; ".join(parts))
    if any(not all(w.unbiased) for w in windows if w.group_sizes):
        lines.append("  * a G above some group's size: plug-in p^G + (1-p)^G, biased upward.")
    if not any(w.group_sizes for w in windows):
        lines.append("  (expected shares at other G need binary rewards)")
    return "\n".join(lines)
