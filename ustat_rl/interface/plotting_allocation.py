"""Figures for per-prompt allocations (docs/theory.md C40): sizes side by side, MSE curves."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_allocations", "plot_mse_curves"]


def plot_allocations(allocations: dict, prompt_ids=None, ax=None):
    """Grouped bars: each allocation's ``G_x`` per prompt, the legend giving its MSE ratio to uniform.

    ``allocations`` maps an allocation's name to an :class:`~ustat_rl.theory.allocation.Allocation`; returns the
    figure.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    names = list(allocations)
    P = allocations[names[0]].group_sizes.size
    x = np.arange(P)
    width = 0.8 / len(names)
    uniform = allocations.get("uniform", allocations[names[0]]).mse
    for i, name in enumerate(names):
        a = allocations[name]
        ax.bar(x + (i - (len(names) - 1) / 2) * width, a.group_sizes, width,
               label=f"{name} (MSE x{a.mse / uniform:.2f})")
    ax.set_xticks(x)
    ax.set_xticklabels([str(p) for p in (range(P) if prompt_ids is None else prompt_ids)],
                       rotation=90 if P > 12 else 0)
    ax.set_xlabel("prompt")
    ax.set_ylabel("group size $G_x$")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


def plot_mse_curves(sizes, terms, labels=None, ax=None):
    """Each prompt's ``f^2 MSE_x(G)`` against ``G`` on log-log axes (``terms`` is ``(P, n_G)``)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    for p, row in enumerate(np.asarray(terms)):
        ax.loglog(sizes, row, label=None if labels is None else labels[p])
    ax.set_xlabel("group size $G$")
    ax.set_ylabel(r"$f(x)^2\,\mathrm{MSE}_x(G)$")
    if labels is not None:
        ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure
