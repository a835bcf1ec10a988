"""Is one ``G*`` consistent with every window of a training run? (docs/theory.md C17, C18, C32).

Theorem 7's ``G* = 1 + sqrt(c3'/c1)`` does not depend on the training iteration (C17), and the
paper's runs found the best ``G`` stable along training (C18). A trajectory file
(:mod:`.trajectory`) holds one interval for ``G*`` per monitored window; one ``G`` inside all
``K`` of them is a statement about ``K`` intervals at once, so its level is the family's, not a
window's. As in C18 (:func:`ustat_rl.training.group_size.common_argmin`) the family is made
simultaneous by Bonferroni: when every window carries ``gstar_errors`` (the standard errors and
covariance its interval was built from), each window's interval is rebuilt at
``1 - (1 - level)/K`` (:func:`ustat_rl.pilot.uncertainty.fieller_gstar`, the same Fieller
inversion the monitor used), and the ``K`` intervals then hold the true ``G*`` together with
probability at least ``level``. A window without them, or with fewer than
:data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` prompts (whose own interval is widened
to cover, docs/invariants.md I8, and Fieller's alone would not), keeps its own interval at the
record's level ``L``; Bonferroni then only gives ``1 - sum(1 - L_i)``, which is at or below 0 (no
guarantee) once ``K (1 - L) >= 1``, and the summary says so.

Bonferroni needs no independence, so windows that pool earlier generation batches
(``windows_pooled > 1``), and are therefore dependent, are covered. Each window's coverage is
itself the jackknife's approximation (C32). Skipped windows are listed with their reasons and
left out of the family. An interval unbounded above (``c1``'s interval reaches 0) holds every
``G >= low``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..formatting import format_number, json_ready
from ..pilot.small_sample import SMALL_PILOT_PROMPTS
from ..pilot.uncertainty import RatioErrors, fieller_gstar
from .trajectory import WindowRecord

__all__ = ["WindowInterval", "Universality", "gstar_universality", "format_universality",
           "statement"]

#: Record fields each window of :meth:`Universality.to_dict` repeats.
_SHOWN_FIELDS = ("windows_pooled", "n_prompts", "group_size", "c1", "c2", "c3",
                 "all_equal_predicted", "all_equal_observed")


@dataclass(frozen=True)
class WindowInterval:
    """One window's interval for ``G*`` as the universality verdict uses it.

    Attributes
    ----------
    step : int
        The trainer's step of the window.
    estimate, low, high : float
        ``G*``'s point estimate and interval (``high`` ``inf`` when unbounded).
    level : float
        Two-sided level of ``[low, high]``.
    rebuilt : bool
        Whether the interval was rebuilt at the Bonferroni level from ``gstar_errors``
        (``False``: the record's own interval).
    record : WindowRecord
        The window's record, as :func:`~.trajectory.read_trajectory` returns it.
    """

    step: int
    estimate: float
    low: float
    high: float
    level: float
    rebuilt: bool
    record: WindowRecord

    def covers(self, group_size: float) -> bool:
        """Whether ``low <= group_size <= high``."""
        return bool(self.low <= group_size <= self.high)


@dataclass(frozen=True)
class Universality:
    """The universality verdict on one run's trajectory (C17, C18).

    Attributes
    ----------
    windows : tuple of WindowInterval
        The estimated windows in step order.
    skipped : tuple of (int, str)
        ``(step, reason)`` of each window left out.
    level : float
        The level asked for the family (``--level``).
    window_level : float
        Bonferroni level of each rebuilt interval, ``1 - (1 - level)/K``.
    simultaneous_level : float
        What the family of intervals actually used holds: ``1 - sum(1 - level_i)`` (equal to
        ``level`` when every window was rebuilt; at or below 0 means no guarantee).
    overlap_low, overlap_high : float
        The intersection of all intervals (``nan`` without windows; ``low > high`` when empty).
    common : tuple of int or None
        ``(first, last)`` integer ``G >= 2`` inside every interval (``last`` may be ``inf``);
        ``None`` when there is none.
    group_size : int or None
        The run's ``G`` when every window reports the same one.
    max_pooled : int
        The largest ``windows_pooled`` (``> 1``: windows overlap, hence are dependent).
    """

    windows: tuple
    skipped: tuple
    level: float
    window_level: float
    simultaneous_level: float
    overlap_low: float
    overlap_high: float
    common: tuple | None
    group_size: int | None
    max_pooled: int

    @property
    def consistent(self) -> bool:
        """Whether one real ``G*`` lies inside every window's interval (the intersection)."""
        return bool(self.windows) and self.overlap_low <= self.overlap_high

    @property
    def group_size_inside(self) -> bool | None:
        """Whether the run's ``G`` lies inside every interval (``None`` if it is not known)."""
        if self.group_size is None or not self.windows:
            return None
        return all(w.covers(self.group_size) for w in self.windows)

    def to_dict(self) -> dict:
        """A JSON-ready dict (NaN as ``null``, ``inf`` as a string)."""
        out = asdict(self)
        for window in out["windows"]:
            record = window.pop("record")
            window.update({f: record[f] for f in _SHOWN_FIELDS}, record_gstar=record["gstar"],
                          record_level=record["level"])
        out.update(consistent=self.consistent, group_size_inside=self.group_size_inside,
                   statement=statement(self))
        return json_ready(out)


def _window(record: WindowRecord, window_level: float) -> WindowInterval | str:
    """The window's interval, or the reason it cannot enter the family."""
    gstar, errors = record.gstar, record.gstar_errors
    low, high, level, rebuilt = gstar.low, gstar.high, record.level, False
    if errors is not None:
        values = (record.c1.estimate, record.c3.estimate, errors["c1_prompt_se"],
                  errors["c1_sketch_se"], errors["c3_se"], errors["cov13"])
        # a window under SMALL_PILOT_PROMPTS keeps its own (widened) interval at its own level:
        # Fieller's alone does not cover there (docs/invariants.md I8)
        if all(math.isfinite(v) for v in values) and \
                (record.n_prompts or 0) >= SMALL_PILOT_PROMPTS:
            ratio_errors = RatioErrors(*values[2:], errors["sketch_units"])
            _, (low, high) = fieller_gstar(*values[:2], ratio_errors, record.n_prompts,
                                           window_level)
            level, rebuilt = window_level, True
    if math.isnan(low) or math.isnan(high):
        return "its interval for G* is NaN"
    return WindowInterval(int(record.step), float(gstar.estimate), float(low), float(high),
                          float(level), rebuilt, record)


def gstar_universality(records, level: float = 0.9) -> Universality:
    """Whether one ``G`` lies inside every window's interval for ``G*``, at a stated level.

    Parameters
    ----------
    records : sequence of WindowRecord
        Trajectory records (:func:`~.trajectory.read_trajectory`).
    level : float
        Simultaneous level in (0, 1) aimed at for the family of windows.

    Returns
    -------
    Universality

    Notes
    -----
    The decision "G* moved during the run" is an empty intersection. When ``G*`` is constant
    and every window was rebuilt, the ``K`` intervals all hold it with probability at least
    ``level`` (Bonferroni, any dependence between windows), so the false-alarm rate is at most
    ``1 - level`` up to each interval's approximation; tests/frameworks/test_trajectory.py
    measures it, and the rate of the same rule with unadjusted intervals as negative control.

    Examples
    --------
    >>> from ustat_rl.frameworks.synthetic import SyntheticErrors, synthetic_record
    >>> errors = SyntheticErrors(0.05, 2.0)
    >>> recs = [synthetic_record(s, 1.0, 2.0, 49.0, errors) for s in (10, 20, 30)]
    >>> out = gstar_universality(recs, 0.9)
    >>> out.consistent, round(out.window_level, 4), out.group_size_inside
    (True, 0.9667, True)
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    ok = sorted((r for r in records if r.ok), key=lambda r: r.step)
    skipped = [(int(r.step), str(r.reason)) for r in records if not r.ok]
    window_level = 1.0 - (1.0 - level) / max(len(ok), 1)
    windows = []
    for record in ok:
        window = _window(record, window_level)
        if isinstance(window, str):
            skipped.append((int(record.step), window))
        else:
            windows.append(window)
    if len(windows) < len(ok):  # a window dropped above: rebuild the rest at the right K
        window_level = 1.0 - (1.0 - level) / max(len(windows), 1)
        windows = [_window(w.record, window_level) for w in windows]
    simultaneous = 1.0 - sum(1.0 - w.level for w in windows)
    low = max((w.low for w in windows), default=math.nan)
    high = min((w.high for w in windows), default=math.nan)
    first = max(2, math.ceil(low)) if windows else None
    last = (high if math.isinf(high) else math.floor(high)) if windows else None
    common = (first, last) if windows and first <= last else None
    sizes = {r.group_size for r in ok}
    group_size = int(sizes.pop()) if len(sizes) == 1 and None not in sizes else None
    pooled = max((int(r.windows_pooled or 1) for r in ok), default=1)
    return Universality(tuple(windows), tuple(sorted(skipped)), float(level), window_level,
                        simultaneous, low, high, common, group_size, pooled)


def _interval_text(low: float, high: float) -> str:
    return f"[{format_number(low)}, {format_number(high)}]"


def statement(result: Universality) -> str:
    """The verdict in words, with the simultaneous level and what it rests on."""
    k = len(result.windows)
    if k == 0:
        return "no window was estimated: nothing can be said about G* along this run"
    rebuilt = sum(w.rebuilt for w in result.windows)
    pct = f"{100 * result.level:g}%"
    if rebuilt == k:
        how = (f"each of the {k} windows' intervals rebuilt at 1 - (1 - {result.level:g})/{k} = "
               f"{100 * result.window_level:.4g}% from its standard errors (Fieller's interval "
               f"for c1/c3', C32), so together they hold at >= {pct} (Bonferroni)")
    else:
        levels = sorted({f"{100 * w.level:.4g}%" for w in result.windows if not w.rebuilt})
        how = (f"{k - rebuilt} of {k} windows carry no standard errors for G* (`gstar_errors`), "
               f"so their own intervals at {', '.join(levels)} are used; by Bonferroni the "
               "family holds at >= 1 - sum(1 - level) = ")
        if result.simultaneous_level <= 0:
            how += (f"{result.simultaneous_level:.4g} <= 0, no guarantee: the verdict above is "
                    "descriptive only (the monitor can write `gstar_errors` so that the "
                    "windows are rebuilt at a Bonferroni level)")
        else:
            how += f"{100 * result.simultaneous_level:.4g}%"
    how += ("; Bonferroni needs no independence, so it holds although windows pooling up to "
            f"{result.max_pooled} generation batches share groups" if result.max_pooled > 1 else
            "; Bonferroni needs no independence between windows")
    how += "; each interval's coverage is the jackknife's approximation"
    if result.consistent:
        overlap = _interval_text(result.overlap_low, result.overlap_high)
        if result.common is None:
            verdict = (f"one G* fits every window (the intervals meet in {overlap}), but no "
                       "integer G >= 2 lies inside all of them")
        else:
            first, last = result.common
            ints = f"G >= {first}" if math.isinf(last) else f"G in {first}..{last}"
            verdict = (f"one G lies inside every window's interval: {ints} (the intervals meet "
                       f"in {overlap}); consistent with a G* that does not change along the run")
    else:
        top = max(result.windows, key=lambda w: w.low)
        bottom = min(result.windows, key=lambda w: w.high)
        verdict = (f"no single G lies inside every window's interval: G* moved during the run "
                   f"(step {top.step}: {_interval_text(top.low, top.high)}, step {bottom.step}: "
                   f"{_interval_text(bottom.low, bottom.high)} do not meet)")
    if result.group_size_inside is not None:
        verdict += (f"; the run's G = {result.group_size} is "
                    f"{'inside every' if result.group_size_inside else 'outside some'} interval")
    return f"{verdict}.\nLevel: {how}."


def format_universality(result: Universality) -> str:
    """The text ``ustat-rl gstar --trajectory`` prints: one row per window, then the verdict."""
    lines = ["G* along the run (Theorem 7, docs/theory.md C17, C18, C32)",
             f"{'step':>8} {'pooled':>6} {'P':>6}  {'G*':>8} {'interval':>22} {'level':>7}"
             f" {'c1':>10} {'c1 low':>10} {'c3':>10}  {'all-equal pred/obs':>18}"]
    for w in result.windows:
        r = w.record
        equal = (f"{format_number(r.all_equal_predicted)}/"
                 f"{format_number(r.all_equal_observed)}")
        lines.append(f"{w.step:>8} {r.windows_pooled or 1:>6} {r.n_prompts or 0:>6}  "
                     f"{format_number(w.estimate):>8} {_interval_text(w.low, w.high):>22} "
                     f"{100 * w.level:>6.4g}% {format_number(r.c1.estimate):>10} "
                     f"{format_number(r.c1.low):>10} {format_number(r.c3.estimate):>10}"
                     f"  {equal:>18}")
    for step, reason in result.skipped:
        lines.append(f"{step:>8} skipped: {reason}")
    lines.append(statement(result))
    return "\n".join(lines)
