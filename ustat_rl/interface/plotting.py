"""Figures for the simulations and notebooks: the plotting edge of the package.

Everything here draws on :class:`matplotlib.figure.Figure` objects created directly, never
through ``pyplot``, so importing this module changes no global state (no backend switch, no
style, no rcParams); files are rendered by the Agg canvas. The functions only draw numbers
computed elsewhere in the package: no estimator, MSE or rate is computed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "ESTIMATOR_STYLE",
    "new_figure",
    "plot_mse_curve",
    "plot_mse_grid",
    "save_figure",
    "set_group_size_ticks",
]

#: Colour, marker and legend label per estimator name (names of ``estimators.ESTIMATORS``).
ESTIMATOR_STYLE = {
    "vanilla": {"color": "#d95f02", "marker": "s", "label": "vanilla (REINFORCE)"},
    "grpo": {"color": "#1b9e77", "marker": "o", "label": "GRPO (leave-one-out)"},
    "oracle": {"color": "#7570b3", "marker": "^", "label": "oracle (baseline V(x))"},
    "fullmean": {"color": "#e7298a", "marker": "D", "label": "full-mean"},
}

_FALLBACK_STYLE = {"color": "0.3", "marker": "x"}


def _style(estimator: str) -> dict:
    style = dict(ESTIMATOR_STYLE.get(estimator, _FALLBACK_STYLE))
    style.setdefault("label", estimator)
    return style


def new_figure(n_rows: int = 1, n_cols: int = 1, *, panel_size=(3.6, 3.0), sharex: bool = True,
               sharey: bool = False) -> tuple[Figure, np.ndarray]:
    """A figure with an ``(n_rows, n_cols)`` array of axes, attached to an Agg canvas.

    Parameters
    ----------
    n_rows, n_cols : int
        Grid of panels.
    panel_size : (float, float)
        Width and height of one panel in inches.
    sharex, sharey : bool
        Share axes across panels.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : ndarray of Axes, shape (n_rows, n_cols)
    """
    if int(n_rows) < 1 or int(n_cols) < 1:
        raise ValueError(f"`n_rows` and `n_cols` must be >= 1, got {n_rows}, {n_cols}")
    fig = Figure(figsize=(panel_size[0] * n_cols, panel_size[1] * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(int(n_rows), int(n_cols), sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


def plot_mse_curve(ax, estimator: str, *, group_sizes=None, mse=None, interval=None, exact=None,
                   label: bool = True) -> None:
    """Draw Monte Carlo MSE points with interval bars and/or an exact curve for one estimator.

    Parameters
    ----------
    ax : matplotlib Axes
        Drawn in log-log scale.
    estimator : str
        Selects colour and marker from :data:`ESTIMATOR_STYLE`.
    group_sizes, mse : array_like (n,), optional
        Monte Carlo estimates.
    interval : (ci_low, ci_high) of array_like (n,), optional
        Their interval; ends below zero are drawn to the bottom of the panel (a log axis cannot
        show them).
    exact : (group_sizes, mse) of array_like (m,), optional
        Exact theory, drawn as a line.
    label : bool
        Attach the legend label (to the exact line if any, else to the points).
    """
    style = _style(estimator)
    has_exact = exact is not None
    if has_exact:
        exact_group_sizes, exact_mse = exact
        ax.plot(np.asarray(exact_group_sizes, dtype=float), np.asarray(exact_mse, dtype=float),
                color=style["color"], lw=1.4, label=style["label"] if label else None)
    if group_sizes is not None and mse is not None:
        x = np.asarray(group_sizes, dtype=float)
        y = np.asarray(mse, dtype=float)
        if interval is not None:
            ci_low, ci_high = interval
            # clip only for display: the lower end of a log axis cannot be non-positive
            low = np.maximum(np.asarray(ci_low, dtype=float), y * 1e-3)
            yerr = np.vstack([y - low, np.asarray(ci_high, dtype=float) - y])
        else:
            yerr = None
        ax.errorbar(x, y, yerr=yerr, ls="none", marker=style["marker"], ms=4, mfc="white",
                    color=style["color"], capsize=2, elinewidth=1,
                    label=style["label"] if label and not has_exact else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")


def plot_mse_grid(mc, exact=None, *, row: str, col: str, estimators: Sequence[str],
                  orders: Mapping[str, Sequence] | None = None,
                  title: Callable[[object, object, object], str] | None = None,
                  panel_size=(3.6, 3.0)) -> Figure:
    """Log-log panels of MSE against group size, one per ``(row, col)`` cell of a tidy table.

    Parameters
    ----------
    mc : pandas.DataFrame
        Tidy Monte Carlo table with columns ``row``, ``col``, ``estimator``, ``group_size``,
        ``mse_mc``, ``ci_low``, ``ci_high``.
    exact : pandas.DataFrame, optional
        Exact curves with columns ``row``, ``col``, ``estimator``, ``group_size``,
        ``mse_exact``.
    row, col : str
        Column names that index the panel grid.
    estimators : sequence of str
        Estimators to draw, in legend order.
    orders : mapping, optional
        ``{column name: order of its values}`` for ``row`` and/or ``col``: the order of the
        panel rows and columns (default: order of first appearance).
    title : callable, optional
        ``title(row_value, col_value, cell_table) -> str`` for each panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    for name in (row, col, "estimator", "group_size", "mse_mc", "ci_low", "ci_high"):
        if name not in mc.columns:
            raise ValueError(f"`mc` needs a column {name!r}; has {list(mc.columns)}")
    orders = dict(orders or {})
    rows = list(orders[row]) if row in orders else list(dict.fromkeys(mc[row]))
    cols = list(orders[col]) if col in orders else list(dict.fromkeys(mc[col]))
    fig, axes = new_figure(len(rows), len(cols), panel_size=panel_size)
    ticks = np.unique(np.asarray(mc["group_size"], dtype=int))
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            cell = mc[(mc[row] == r) & (mc[col] == c)]
            for est in estimators:
                pts = cell[cell["estimator"] == est].sort_values("group_size")
                kw = {}
                if exact is not None:
                    line = exact[(exact[row] == r) & (exact[col] == c)
                                 & (exact["estimator"] == est)].sort_values("group_size")
                    if len(line):
                        kw = {"exact": (line["group_size"], line["mse_exact"])}
                if len(pts):
                    kw.update(group_sizes=pts["group_size"], mse=pts["mse_mc"],
                              interval=(pts["ci_low"], pts["ci_high"]))
                if kw:
                    plot_mse_curve(ax, est, label=(i == 0 and j == 0), **kw)
            ax.set_title(title(r, c, cell) if title is not None else f"{r}, {c}", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
            set_group_size_ticks(ax, ticks)
            if i == len(rows) - 1:
                ax.set_xlabel("group size G")
            if j == 0:
                ax.set_ylabel("MSE")
    if len(axes[0, 0].get_legend_handles_labels()[0]):
        fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center",
                   ncol=len(estimators), fontsize=8, frameon=False)
    return fig


def set_group_size_ticks(ax, group_sizes) -> None:
    """Log base-2 x axis with one plain integer tick per group size (no minor ticks)."""
    ticks = np.unique(np.asarray(group_sizes, dtype=int))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks], minor=False)
    ax.set_xticks([], minor=True)


def save_figure(fig: Figure, stem, formats: Sequence[str] = ("png", "pdf"), dpi: int = 150
                ) -> list[Path]:
    """Write ``fig`` to ``stem.<format>`` for each format; returns the paths written.

    PNG files carry the figure's caption (its suptitle, else its axes titles joined by "; ") as
    the ``Title`` text chunk, which ``ustat-rl report`` shows under the figure.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    caption = fig._suptitle.get_text() if fig._suptitle is not None else ""
    caption = caption or "; ".join(t for t in (ax.get_title() for ax in fig.axes) if t)
    paths = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        metadata = {"Title": caption} if fmt == "png" and caption else None
        fig.savefig(path, dpi=dpi, format=fmt, metadata=metadata)
        paths.append(path)
    return paths
