"""Figure of the ``ustat-rl gstar`` report: predicted MSE against G at a fixed budget (C17, C32).

Plotting only: every number drawn comes from :class:`ustat_rl.pilot.report.GStarReport`. Points
whose estimate is not positive are left out (a log axis cannot show them, and they are below what
the pilot resolves), and interval bands are cut at the axis floor instead of diving to it.
"""

from __future__ import annotations

import math

import numpy as np

from ..pilot.report_text import format_percent
from .plotting import ESTIMATOR_STYLE, new_figure, set_group_size_ticks

__all__ = ["plot_gstar_report"]


def plot_gstar_report(report):
    """Predicted minibatch MSE of each estimator over the divisors of ``N`` with interval bands,
    ``G*`` and the recommended ``G`` marked, and the range of ``G*`` the pilot cannot resolve
    shaded. Returns the figure (save it with ``fig.savefig``)."""
    from matplotlib.patches import Patch

    fig, axes = new_figure(1, 1, panel_size=(5.4, 3.8))
    ax = axes[0, 0]
    sizes = np.asarray(report.group_sizes)
    curves = {name: {key: np.asarray(curve[key], dtype=float) for key in ("estimate", "low", "high")}
              for name, curve in report.mse.items()}
    positive = np.concatenate([c["estimate"][c["estimate"] > 0] for c in curves.values()])
    floor = 0.5 * positive.min() if positive.size else 1e-12
    banded = False
    for name, curve in curves.items():
        style = ESTIMATOR_STYLE.get(name, {"color": "0.3", "marker": "x", "label": name})
        shown = curve["estimate"] > 0  # (n_G,)
        ax.plot(sizes[shown], curve["estimate"][shown], marker=style["marker"], ms=3,
                color=style["color"], label=style["label"])
        if np.all(np.isfinite(curve["low"])):
            ax.fill_between(sizes, np.maximum(curve["low"], floor),
                            np.maximum(curve["high"], floor), color=style["color"], alpha=0.12,
                            lw=0)
            banded = True
    pct = f"{100 * report.level:g}%"
    handles, labels = ax.get_legend_handles_labels()
    if banded:
        handles.append(Patch(color="0.5", alpha=0.3, lw=0))
        labels.append(f"{pct} interval of each MSE")
    gstar = report.gstar
    if "low" in gstar and math.isfinite(gstar["low"]):
        high = gstar["high"] if math.isfinite(gstar["high"]) else sizes.max()
        span = ax.axvspan(gstar["low"], high, color="k", alpha=0.08, lw=0,
                          hatch=None if report.bounded else "//")
        handles.append(span)
        labels.append(f"{pct} interval for G*" if report.bounded else
                      f"G* not resolved: [{gstar['low']:.3g}, inf)")
    if math.isfinite(gstar["estimate"]):
        handles.append(ax.axvline(gstar["estimate"], color="k", lw=0.8, ls="--"))
        labels.append(f"G* estimate = {gstar['estimate']:.3g}")
    G = report.recommended_group_size
    handles.append(ax.axvline(G, color="tab:red", lw=1.4))
    labels.append(f"recommended G = {G}" + (f" (within {format_percent(report.worst_excess)} "
                                            "for every c1 allowed)"
                                            if math.isfinite(report.worst_excess) else ""))
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor)
    set_group_size_ticks(ax, sizes[:: max(1, sizes.size // 8)])
    ax.set_xlabel(f"group size G (budget N = {report.budget})")
    ax.set_ylabel("predicted E||g_hat - g||^2")
    ax.set_title("the pilot bounds G*" if report.bounded else
                 "the pilot cannot bound G* from above", fontsize=9)
    ax.legend(handles, labels, fontsize=6.5)
    return fig
