r"""What the all-equal fraction at one group size says about other group sizes (beyond the paper).

docs/theory.md, "Training logs alone (beyond the paper)". With binary rewards a group of ``G``
answers to a prompt with success probability ``p`` is all-equal with probability
``h_G(p) = p^G + (1 - p)^G`` (:func:`~ustat_rl.theory.advantage.all_equal_probability`), so a
run's all-equal fraction at its own ``G0`` estimates the moment ``a(G0) = E h_G0(p)`` of the
success-rate distribution ``mu`` across prompts, and its mean reward estimates ``E p``. These two
moments do not determine ``mu``; they determine an interval for any other moment ``E t(p)``:

.. math::

    \inf / \sup \; E_\mu t(p) \quad \text{over } \mu \text{ on } [0, 1] \text{ with }
    E_\mu p \in [m_-, m_+], \; E_\mu h_{G_0}(p) \in [a_-, a_+]

(``t = h_G``: the all-equal fraction, the waste, at ``G``; ``t = p(1 - p)``: the mean
within-prompt reward variance). :func:`moment_bounds` solves the dual linear program
``min lambda_0 + sup_box(lambda_1 m + lambda_2 a)`` subject to ``lambda_0 + lambda_1 p +
lambda_2 h_G0(p) >= t(p)``, on a grid of ``p``, then certifies the multipliers on all of
``[0, 1]``: any such multipliers bound ``E t`` by weak duality, and the constraint's largest
violation on a finer grid plus a Lipschitz term for the gaps is added. The bounds are therefore
valid (never narrower than the truth), and tight up to that slack. Only bounds follow, never a
value, except at ``G = G0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import linprog

from .._validation import as_float, as_int
from .advantage import all_equal_probability

__all__ = ["MomentBounds", "moment_bounds", "all_equal_bounds", "reward_variance_bounds"]

#: Grid of ``p`` for the linear program (odd, so that ``p = 1/2`` is on it).
LP_GRID = 801
#: Grid on which the multipliers are certified (the Lipschitz slack uses its spacing).
CHECK_GRID = 50_001


@dataclass(frozen=True)
class MomentBounds:
    """An interval for ``E t(p)`` given intervals for ``E p`` and ``E h_G0(p)``.

    Attributes
    ----------
    low, high : float
        Valid bounds (``nan`` when no distribution meets the constraints).
    feasible : bool
        Whether some distribution on ``[0, 1]`` has moments in the box.
    slack : float
        The certification term added to each side (the grid's approximation error).
    """

    low: float
    high: float
    feasible: bool
    slack: float


def _check_box(box, name: str, high: float = 1.0) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in box)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a pair (low, high) of numbers, got {box!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"`{name}` must be a finite pair with low <= high, got ({lo}, {hi})")
    return max(lo, 0.0), min(hi, high)


@lru_cache(maxsize=64)
def _chord_gap(G0: int) -> float:
    """How far the grid's chords of the convex ``h_G0`` lie above it (at most)."""
    p, fine = np.linspace(0.0, 1.0, LP_GRID), np.linspace(0.0, 1.0, CHECK_GRID)
    chord = np.interp(fine, p, all_equal_probability(p, G0))
    return float(np.max(chord - all_equal_probability(fine, G0)))


def _upper(target, lipschitz: float, mean, all_equal, G0: int) -> tuple[float, float] | None:
    """``sup E t`` by the certified dual (module docstring); ``None`` when the box is infeasible.

    Splitting each atom of a distribution between its two neighbouring grid points keeps ``E p``
    and raises ``E h_G0`` by at most :func:`_chord_gap` (``h_G0`` is convex), so the grid
    problem's box is widened by that much above: every distribution in the box then has an image
    on the grid, and "infeasible" is certified too. The widening loosens, never invalidates,
    the bound (the multipliers are certified on all of ``[0, 1]``).
    """
    p = np.linspace(0.0, 1.0, LP_GRID)
    h0, t = all_equal_probability(p, G0), target(p)
    # variables: lambda_0 (free), lambda_1 = u1 - v1, lambda_2 = u2 - v2 (u, v >= 0)
    cost = [1.0, mean[1], -mean[0], all_equal[1] + _chord_gap(G0), -all_equal[0]]
    rows = -np.column_stack([np.ones_like(p), p, -p, h0, -h0])
    bounds = [(None, None)] + [(0.0, None)] * 4
    res = linprog(cost, A_ub=rows, b_ub=-t, bounds=bounds, method="highs")
    if res.status == 3:  # dual unbounded: no distribution in the box
        return None
    if res.status != 0:
        raise RuntimeError(f"the moment linear program failed: {res.message}")
    lam0, l1, l2 = res.x[0], res.x[1] - res.x[2], res.x[3] - res.x[4]
    fine = np.linspace(0.0, 1.0, CHECK_GRID)
    gap = target(fine) - (lam0 + l1 * fine + l2 * all_equal_probability(fine, G0))
    lip = lipschitz + abs(l1) + abs(l2) * G0  # |d h_G0/dp| <= G0
    slack = max(float(gap.max()), 0.0) + lip * 0.5 / (CHECK_GRID - 1)
    return float(res.fun) + slack, slack


def moment_bounds(target, lipschitz: float, target_range, mean, all_equal,
                  run_group_size) -> MomentBounds:
    """Valid bounds on ``E t(p)`` from boxes for ``E p`` and ``E h_G0(p)`` (module docstring).

    Parameters
    ----------
    target : callable
        ``t``, vectorised over ``p`` in ``[0, 1]``.
    lipschitz : float
        A Lipschitz constant of ``t`` on ``[0, 1]``.
    target_range : pair of float
        ``(min t, max t)`` on ``[0, 1]``; the bounds are clipped to it.
    mean, all_equal : pair of float
        ``[m_-, m_+]`` and ``[a_-, a_+]``, clipped to ``[0, 1]``.
    run_group_size : int
        ``G0 >= 2``, the group size at which the all-equal fraction was observed.
    """
    G0 = as_int(run_group_size, "run_group_size", 2)
    m, a = _check_box(mean, "mean"), _check_box(all_equal, "all_equal")
    lip = as_float(lipschitz, "lipschitz", low=0.0)
    if m[0] > m[1] or a[0] > a[1]:
        return MomentBounds(math.nan, math.nan, False, 0.0)
    up = _upper(target, lip, m, a, G0)
    down = _upper(lambda p: -target(p), lip, m, a, G0)
    if up is None or down is None:
        return MomentBounds(math.nan, math.nan, False, 0.0)
    low, high = max(-down[0], target_range[0]), min(up[0], target_range[1])
    return MomentBounds(float(low), float(high), True, float(max(up[1], down[1])))


def all_equal_bounds(group_size, mean, all_equal, run_group_size) -> MomentBounds:
    """Bounds on the all-equal fraction ``a(G) = E[p^G + (1 - p)^G]`` at another ``G``.

    Examples
    --------
    Every prompt at ``p = 1/2`` gives ``a(2) = 1/2`` and mean ``1/2``, which force ``mu`` to be
    that point mass: ``a(4) = 1/8`` exactly, up to the certification slack.

    >>> b = all_equal_bounds(4, (0.5, 0.5), (0.5, 0.5), 2)
    >>> round(b.low, 6), b.high - b.low < 1e-3
    (0.125, True)
    """
    G = as_int(group_size, "group_size", 1)
    return moment_bounds(lambda p: all_equal_probability(p, G), float(G),
                         (2.0 ** (1 - G), 1.0), mean, all_equal, run_group_size)


def reward_variance_bounds(mean, all_equal, run_group_size) -> MomentBounds:
    """Bounds on ``E[p(1 - p)]``, the mean within-prompt variance of a 0/1 reward."""
    return moment_bounds(lambda p: p * (1.0 - p), 1.0, (0.0, 0.25), mean, all_equal,
                         run_group_size)
