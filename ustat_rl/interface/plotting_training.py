"""Figures for the training claims: limit-law QQ plots and histograms, gap-vs-G curves (C18, C20).

Plotting only: every number drawn here is computed by the library or read from a tidy CSV.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .plotting import new_figure, save_figure

__all__ = ["plot_limit_qq", "plot_limit_histogram", "plot_gap_vs_group_size", "new_figure",
           "save_figure"]

_LAW_STYLE = {"corrected": {"color": "#1b9e77", "label": "Omega = beta^2 Q'GammaQ (corrected)"},
              "printed": {"color": "#d95f02", "ls": "--", "label": "Omega = Q'GammaQ (printed)"}}


def plot_limit_qq(ax, sample, laws: dict, n_points: int = 200) -> None:
    """QQ plot of ``sample`` against each law in ``laws`` (``{"corrected": dist, ...}``)."""
    sample = np.sort(np.asarray(sample, dtype=float))
    probs = (np.arange(1, sample.size + 1) - 0.5) / sample.size
    keep = np.unique(np.linspace(0, sample.size - 1, min(n_points, sample.size)).astype(int))
    top = 0.0
    for name, dist in laws.items():
        theory = dist.ppf(probs[keep])
        style = _LAW_STYLE.get(name, {"label": name})
        ax.plot(theory, sample[keep], marker=".", ms=3, lw=0, color=style.get("color"),
                label=style["label"])
        top = max(top, float(np.nanmax(theory)))
    top = max(top, float(sample[keep].max()))
    ax.plot([0, top], [0, top], color="0.4", lw=0.8)
    ax.set_xlabel("weighted chi-square quantile")
    ax.set_ylabel("n Delta_n quantile")


def plot_limit_histogram(ax, sample, laws: dict, bins: int = 60) -> None:
    """Density histogram of ``sample`` with the pdf of each law."""
    sample = np.asarray(sample, dtype=float)
    hi = float(np.quantile(sample, 0.995))
    ax.hist(sample, bins=bins, range=(0, hi), density=True, color="0.8", label="runs")
    grid = np.linspace(hi / 400, hi, 400)
    for name, dist in laws.items():
        style = _LAW_STYLE.get(name, {"label": name})
        ax.plot(grid, dist.pdf(grid), color=style.get("color"), ls=style.get("ls", "-"),
                label=style["label"])
    ax.set_xlabel("n Delta_n")
    ax.set_ylabel("density")


def plot_gap_vs_group_size(ax, group_sizes, mean, interval, *, predicted=None,
                           g_stars: dict | None = None, label: str = "", color=None) -> None:
    """Final gap against ``G`` (log-log) with intervals, a predicted curve and ``G*`` markers.

    ``interval`` is ``(ci_low, ci_high)``, each of the length of ``group_sizes``.
    """
    ci_low, ci_high = interval
    g = np.asarray(group_sizes, dtype=float)
    mean = np.asarray(mean, dtype=float)
    line = ax.errorbar(g, mean, yerr=[mean - np.asarray(ci_low), np.asarray(ci_high) - mean],
                       marker="o", ms=4, capsize=2, lw=1, label=label, color=color)
    if predicted is not None:
        ax.plot(g, predicted, ls=":", color=line[0].get_color(), lw=1)
    for name, value in (g_stars or {}).items():
        ax.axvline(value, color="0.5", lw=0.8, ls=_STAR_LS.get(name, "-"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size G (B = N / G)")
    ax.set_ylabel("final gap")


_STAR_LS = {"at_start": ":", "at_optimum": "-", "path_average": "--", "sup_form": "-."}


def star_legend(ax, g_stars: dict, loc: str = "upper center") -> None:
    """A legend entry for each ``G*`` marker line."""
    handles = [ax.plot([], [], color="0.5", lw=0.8, ls=_STAR_LS.get(k, "-"),
                       label=f"G* {k.replace('_', ' ')} = {v:.1f}")[0] for k, v in g_stars.items()]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc=loc)


def tidy_axes(axes: Sequence) -> None:
    """Small legends on every panel that has labelled artists."""
    for ax in np.ravel(axes):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, frameon=False)
