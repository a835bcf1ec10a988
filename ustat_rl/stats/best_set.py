"""The best-G confidence set of a study: the sizes not significantly below the empirically best.

A study trains at each group size ``G`` of a grid with several seeds and records a final reward
per run. The set keeps ``G`` unless the empirically best size's mean exceeds ``G``'s by a
one-sided Welch t test at ``alpha / (k - 1)`` (``k`` sizes, Bonferroni over the others). It holds
a truly best size with probability at least ``1 - alpha``: excluding it needs some other size
significantly above it, and there are ``k - 1`` such tests at ``alpha / (k - 1)`` each
(docs/theory.md C64, which measures that level on planted tables).

``simulations/advice_study.py`` summarises its runs with :func:`best_set`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["welch", "BestSet", "best_set", "best_sets"]


def welch(a, b) -> tuple[float, float, float]:
    """Difference of means ``a - b``, its standard error and Welch's degrees of freedom.

    Parameters
    ----------
    a, b : array_like (n_a,), (n_b,)
        Two samples of at least 2 values each.

    Returns
    -------
    (float, float, float)
        ``mean(a) - mean(b)``, ``se = sqrt(s_a^2/n_a + s_b^2/n_b)`` and
        ``df = se^4 / ((s_a^2/n_a)^2/(n_a - 1) + (s_b^2/n_b)^2/(n_b - 1))`` (``inf`` when
        ``se`` is 0).

    Examples
    --------
    >>> [round(v, 6) for v in welch([1.0, 2.0, 3.0], [0.0, 1.0])]
    [1.5, 0.763763, 2.882353]
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or a.size < 2 or b.size < 2:
        raise ValueError(f"`a` and `b` must be 1-D samples of at least 2 values, got shapes "
                         f"{a.shape} and {b.shape}")
    diff, se, df = _welch_parts(a.mean(), a.var(ddof=1), a.size, b.mean(), b.var(ddof=1), b.size)
    return float(diff), float(se), float(df)


def _welch_parts(mean_a, var_a, n_a, mean_b, var_b, n_b):
    """Welch's difference, standard error and degrees of freedom (``inf`` where ``se`` is 0)
    from summary statistics, elementwise over broadcast arrays."""
    va, vb = np.divide(var_a, n_a), np.divide(var_b, n_b)
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se > 0, (va + vb) ** 2 / (va ** 2 / np.subtract(n_a, 1)
                                                 + vb ** 2 / np.subtract(n_b, 1)), math.inf)
    return np.subtract(mean_a, mean_b), se, df


@dataclass(frozen=True)
class BestSet:
    """The best-G confidence set of one study cell.

    Attributes
    ----------
    sizes : tuple of int
        The grid, ascending.
    best : int
        The size with the largest mean (the first of ties).
    members : tuple of int
        The sizes kept, ascending.
    p_below_best : tuple of float
        Per size, the one-sided Welch p-value of ``mean(best) > mean(G)`` (1 for ``best``).
    level : float
        The per-test level ``alpha / (k - 1)``.
    """

    sizes: tuple
    best: int
    members: tuple
    p_below_best: tuple
    level: float

    def contains(self, size: int) -> bool:
        """Whether ``size`` is in the set."""
        return int(size) in self.members


def best_sets(means, variances, counts, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The best-G sets of many study cells at once, from each size's summary statistics.

    Parameters
    ----------
    means, variances : array_like (..., k)
        Per cell and size, the mean final reward and its sample variance (``ddof=1``).
    counts : array_like (..., k)
        Seeds per size (at least 2), broadcast against ``means``.
    alpha : float
        The sets' level.

    Returns
    -------
    (ndarray (..., k) of bool, ndarray (..., k))
        Membership, and the one-sided Welch p-value of ``mean(best) > mean(G)`` (1 for the
        best size, the first of ties).
    """
    from scipy import stats

    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"`alpha` must be in (0, 1), got {alpha!r}")
    m = np.asarray(means, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    n = np.broadcast_to(np.asarray(counts, dtype=np.float64), m.shape)
    if m.ndim < 1 or v.shape != m.shape or np.any(n < 2) or not np.all(np.isfinite(m)) \
            or np.any(~(v >= 0)):
        raise ValueError("`means` and `variances` must be finite arrays of one shape (..., k), "
                         "variances >= 0, with `counts` >= 2")
    k = m.shape[-1]
    best = np.argmax(m, axis=-1)[..., None]  # (..., 1), the first of ties
    take = lambda x: np.take_along_axis(x, best, axis=-1)  # noqa: E731
    diff, se, df = _welch_parts(take(m), take(v), take(n), m, v, n)  # (..., k) each
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, stats.t.sf(diff / se, np.where(se > 0, df, 1.0)),
                     (diff <= 0).astype(np.float64))
    p = np.where(np.arange(k) == best, 1.0, p)
    level = float(alpha) / max(k - 1, 1)  # Bonferroni over the other sizes
    return p > level, p


def best_set(finals, alpha: float = 0.05) -> BestSet:
    """The best-G confidence set of ``finals`` (module docstring).

    Parameters
    ----------
    finals : mapping
        Group size -> 1-D array of final rewards, one per seed (at least 2 each; the sizes may
        have different numbers of seeds).
    alpha : float
        The set's level: it misses a truly best size with probability at most ``alpha``.

    Returns
    -------
    BestSet

    Examples
    --------
    >>> out = best_set({2: [0.1, 0.2, 0.15], 4: [0.5, 0.55, 0.6], 8: [0.52, 0.5, 0.58]})
    >>> out.best, out.members
    (4, (4, 8))
    """
    if len(finals) < 1:
        raise ValueError("`finals` must hold at least one group size")
    sizes = tuple(sorted(int(G) for G in finals))
    samples = {int(G): np.asarray(x, dtype=np.float64) for G, x in finals.items()}
    for G, x in samples.items():
        if x.ndim != 1 or x.size < 2 or not np.all(np.isfinite(x)):
            raise ValueError(f"`finals[{G}]` must be at least 2 finite rewards, got {x!r}")
    stacked = [samples[G] for G in sizes]
    inside, p = best_sets([x.mean() for x in stacked], [x.var(ddof=1) for x in stacked],
                          [x.size for x in stacked], alpha)
    best = sizes[int(np.argmax([x.mean() for x in stacked]))]
    members = tuple(G for G, keep in zip(sizes, inside) if keep)
    return BestSet(sizes, best, members, tuple(float(v) for v in p),
                   float(alpha) / max(len(sizes) - 1, 1))
