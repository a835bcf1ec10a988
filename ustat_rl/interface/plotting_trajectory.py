"""Figure of ``ustat-rl gstar --trajectory``: G*, c1, c2, c3' and all-equal groups along a run.

Plotting only: every number drawn comes from :class:`ustat_rl.frameworks.universality.Universality`
and the records it holds (C17, C18, C32). Intervals for ``G*`` unbounded above are clipped at the
top of the panel and marked with an upward arrow; skipped windows are dotted vertical lines.
"""

from __future__ import annotations

import math

import numpy as np

from .plotting import new_figure

__all__ = ["plot_trajectory"]


def _column(windows, name: str, key: str) -> np.ndarray:
    """The ``key`` end (or estimate) of the record's interval ``name`` per window, NaN where the
    record has no interval."""
    intervals = [getattr(w.record, name) for w in windows]
    return np.array([math.nan if i is None else getattr(i, key) for i in intervals], dtype=float)


def _gstar_panel(ax, result, steps) -> None:
    windows = result.windows
    est = np.array([w.estimate for w in windows])  # (K,)
    low = _column(windows, "gstar", "low")  # the records' own intervals
    high = _column(windows, "gstar", "high")
    sim_low = np.array([w.low for w in windows])  # the family's intervals
    sim_high = np.array([w.high for w in windows])
    finite = np.concatenate([v[np.isfinite(v)] for v in (est, high, sim_high, sim_low)])
    top = 2.0 * finite.max() if finite.size else 64.0
    if result.group_size is not None:
        top = max(top, 2.0 * result.group_size)
    clip = np.minimum(np.where(np.isnan(high), top, high), top)
    levels = sorted({f"{100 * w.record.level:g}%" for w in windows})
    ax.fill_between(steps, np.maximum(low, 1.0), clip, color="tab:blue", alpha=0.18, lw=0,
                    label=f"{'/'.join(levels)} interval of each window")
    ax.plot(steps, np.minimum(est, top), "o-", color="tab:blue", ms=3, label="G* estimate")
    sim_clip = np.minimum(sim_high, top)
    ax.vlines(steps, np.maximum(sim_low, 1.0), sim_clip, color="k", lw=0.8,
              label=f"intervals used for the verdict (together at "
                    f">= {max(result.simultaneous_level, 0.0):.3g})")
    ax.plot(np.concatenate([steps, steps]), np.concatenate([np.maximum(sim_low, 1.0), sim_clip]),
            "_", color="k", ms=5)
    unbounded = ~np.isfinite(sim_high)
    if unbounded.any():
        ax.plot(steps[unbounded], np.full(unbounded.sum(), top), "^", color="k", ms=6,
                label=f"unbounded above (clipped at {top:.3g})")
    if result.common is not None:
        first, last = result.common
        ax.axhspan(first, min(last, top), color="tab:green", alpha=0.15, lw=0,
                   label=f"G inside every interval: {first}.." + ("inf" if math.isinf(last)
                                                                  else f"{last}"))
    if result.group_size is not None:
        ax.axhline(result.group_size, color="tab:red", lw=1.2, label=f"run's G = {result.group_size}")
    for i, (step, _) in enumerate(result.skipped):
        ax.axvline(step, color="0.5", lw=0.8, ls=":", label="skipped window" if i == 0 else None)
    ax.set_yscale("log", base=2)
    ax.set_ylim(1.0, top * 1.1)
    ax.set_ylabel("G* = 1 + sqrt(c3'/c1)")
    ax.set_title("one G fits every window" if result.consistent else
                 "no single G fits every window", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def plot_trajectory(result):
    """Five panels against the training step: ``G*`` with its bands, ``c1``, ``c2``, ``c3'``
    with their intervals, and the predicted and observed fraction of all-equal groups. Returns
    the figure (save it with ``fig.savefig``)."""
    if not result.windows:
        raise ValueError("`trajectory`: no estimated window to plot")
    fig, axes = new_figure(5, 1, panel_size=(6.4, 2.1))
    steps = np.array([w.step for w in result.windows], dtype=float)
    _gstar_panel(axes[0, 0], result, steps)
    for ax, name, label in ((axes[1, 0], "c1", "c1 (prompt heterogeneity)"),
                            (axes[2, 0], "c2", "c2 (oracle noise)"),
                            (axes[3, 0], "c3", "c3' (within-group)")):
        ax.plot(steps, _column(result.windows, name, "estimate"), "o-", ms=3, color="tab:blue")
        ax.fill_between(steps, _column(result.windows, name, "low"),
                        _column(result.windows, name, "high"), color="tab:blue", alpha=0.18, lw=0)
        ax.axhline(0.0, color="0.6", lw=0.6)
        ax.set_ylabel(label, fontsize=8)
    ax = axes[4, 0]
    for key, style, text in (("all_equal_predicted", "o-", "predicted at the run's G"),
                             ("all_equal_observed", "s--", "observed in the window's batch")):
        ax.plot(steps, [getattr(w.record, key) for w in result.windows], style, ms=3, label=text)
    ax.set_ylabel("all-equal groups", fontsize=8)
    ax.set_xlabel("training step")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
