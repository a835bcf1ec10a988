"""Figure of the ``ustat-rl gstar`` report: predicted MSE against G at a fixed budget (C17, C32).

Plotting only: every number drawn comes from :class:`ustat_rl.pilot.report.GStarReport`.
"""

from __future__ import annotations

import math

import numpy as np

from .plotting import ESTIMATOR_STYLE, new_figure, set_group_size_ticks

__all__ = ["plot_gstar_report"]


def plot_gstar_report(report):
    """Predicted minibatch MSE of each estimator over the divisors of ``N``, with interval bands,
    and ``G*`` with its interval shaded. Returns the figure (save it with ``fig.savefig``)."""
    fig, axes = new_figure(1, 1, panel_size=(5.0, 3.6))
    ax = axes[0, 0]
    sizes = np.asarray(report.group_sizes)
    for name, curve in report.mse.items():
        style = ESTIMATOR_STYLE.get(name, {"color": "0.3", "marker": "x", "label": name})
        est = np.asarray(curve["estimate"], dtype=float)
        ax.plot(sizes, est, marker=style["marker"], ms=3, color=style["color"],
                label=style["label"])
        low, high = (np.asarray(curve[key], dtype=float) for key in ("low", "high"))
        if np.all(np.isfinite(low)):
            ax.fill_between(sizes, low, high, color=style["color"], alpha=0.15, lw=0)
    gstar = report.gstar
    if math.isfinite(gstar["estimate"]):
        ax.axvline(gstar["estimate"], color="k", lw=0.8, ls="--",
                   label=f"G* = {gstar['estimate']:.3g}")
    if "low" in gstar:
        high = gstar["high"] if math.isfinite(gstar["high"]) else sizes.max()
        ax.axvspan(gstar["low"], high, color="k", alpha=0.07, lw=0)
    ax.set_yscale("log")
    set_group_size_ticks(ax, sizes[:: max(1, sizes.size // 8)])
    ax.set_xlabel(f"group size G (budget N = {report.budget})")
    ax.set_ylabel("predicted E||g_hat - g||^2")
    ax.legend(fontsize=7)
    return fig
