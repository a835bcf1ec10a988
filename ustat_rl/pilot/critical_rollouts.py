"""Intervals for the critical rollout count from a pilot (docs/theory.md, "The critical rollout
count").

``B_noise(G) = tr(Sigma_G)/||g||^2`` (:func:`ustat_rl.theory.group_size.critical_rollouts`, its
one formula) is a ratio of two estimates, each affine in the pilot's summary: the numerator
``G c1 + c2 + c3'/(G - 1)`` (or one of its two parts, ``G c1`` between prompts and
``c2 + c3'/(G - 1)`` within them) and the denominator ``||g||^2``, the mean of ``<g_a, g_b>`` over
pairs of distinct prompts. Their covariances come from the same two-way jackknife as the
constants' (:func:`ustat_rl.pilot.replicates.two_way_cov`: over prompts, over the sketch's
blocks, less their interaction), and each ratio gets Fieller's interval
(:func:`ustat_rl.pilot.fieller.fieller_nonnegative`), the non-negative part of the set of ``r``
with ``(num - r den)^2 <= t^2 Var(num - r den)``. It is bounded exactly when ``||g||^2``'s interval
at the same quantile stays above 0: a pilot that cannot tell ``||g||^2`` from 0 cannot bound the
count from above, and says so rather than print a ratio of noise (its lower end still holds).
The quantile is the larger of the numerator's and the denominator's Student quantiles
(Welch-Satterthwaite degrees of freedom, :func:`~ustat_rl.pilot.uncertainty.student_quantile`).
The counts are at least 0, so each interval is cut at 0 (and holds 0 where a numerator's estimate
lies below 0). Below 32 prompts the jackknife's own noise makes these intervals less reliable
than the constants' cautious small-pilot intervals (docs/theory.md C32), which they do not use.

At ``G*`` the count is read at the pilot's estimate of ``G*`` (capped at ``N``) taken as given:
``tr(Sigma_G)`` is stationary in ``G`` at ``G*``, so the estimate's noise in ``G*`` moves the count
only to second order, and the interval is the ratio's at that ``G``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import as_float
from ..theory.group_size import critical_rollouts, grpo_law
from .fieller import fieller_nonnegative
from .replicates import (
    affine_map,
    block_labels,
    checked_statistics,
    constants_vector,
    pilot_summary,
    two_way_cov,
)
from .uncertainty import Interval, student_interval, student_quantile

__all__ = ["CriticalRolloutIntervals", "critical_rollout_intervals"]

#: The ratios' numerators, in the order of :func:`_coefficients`' rows.
PARTS = ("inter", "intra", "total")


@dataclass(frozen=True)
class CriticalRolloutIntervals:
    """The critical rollout count at one ``G`` from a pilot, with its split and intervals.

    Attributes
    ----------
    level : float
        Two-sided level of every interval.
    group_size : float
        ``G`` the count is read at.
    total, inter, intra : Interval
        ``B_noise`` and its inter- and intra-prompt parts, in rollouts: the point estimates of
        :func:`~ustat_rl.theory.group_size.critical_rollouts` (``inf`` where ``||g||^2``'s
        estimate is ``<= 0``) with Fieller's intervals cut at 0 (``high`` ``inf`` when the pilot
        cannot bound the count). The standard errors are the delta method's, for reference.
    grad_norm_sq : Interval
        ``||g||^2`` with its jackknife interval (not cut at 0).
    noise : Interval
        ``tr(Sigma_G) = G c1 + c2 + c3'/(G - 1)``, one rollout's share of the step's noise (the
        count's numerator), with its jackknife interval (not cut at 0).
    note : str or None
        Why the point estimate is infinite or undefined, in words (``None`` when finite).
    """

    level: float
    group_size: float
    total: Interval
    inter: Interval
    intra: Interval
    grad_norm_sq: Interval
    noise: Interval
    note: str | None = None

    @property
    def bounded(self) -> bool:
        """Whether the pilot bounds the count from above (``||g||^2``'s interval stays above 0)."""
        return bool(math.isfinite(self.total.high))

    def to_dict(self) -> dict:
        """Plain numbers: ``group_size``, ``note`` and an ``{estimate, low, high, std_error}``
        dict per part and for ``grad_norm_sq`` and ``noise``."""
        out = {"group_size": self.group_size, "note": self.note}
        for name in PARTS + ("grad_norm_sq", "noise"):
            part = getattr(self, name)
            out[name] = {"estimate": part.estimate, "low": part.low, "high": part.high,
                         "std_error": part.std_error}
        return out


def _constants_and_signal(stats):
    """The vectorised statistic ``summary rows (m, 9) -> (c1, c2, c3', ||g||^2)``. Every
    numerator of the count is linear in the constants (:func:`_coefficients`), so one two-way
    jackknife of these four serves every ``G``."""
    full, _, _ = pilot_summary(stats)
    at_full, jac = affine_map(constants_vector, full)

    def fn(summary):
        c = at_full[None, :] + (summary - full[None, :]) @ jac.T  # (m, 3): c1, c2, c3'
        return np.column_stack([c, summary[:, -1]])

    return fn


def _coefficients(G: float) -> np.ndarray:
    """``(3, 4)``: rows inter, intra, total as linear maps of ``(c1, c2, c3', ||g||^2)``, read
    off :func:`~ustat_rl.theory.group_size.grpo_law` at ``N = 1`` and unit constants."""
    c1, c2, c3 = (float(grpo_law(*unit, 1, G)) for unit in np.eye(3))
    inter, intra = [c1, 0.0, 0.0, 0.0], [0.0, c2, c3, 0.0]
    return np.array([inter, intra, np.add(inter, intra)])


def _checked_size(value) -> float:
    G = as_float(value, "group_size")
    if not G > 1.0 or not math.isfinite(G):
        raise ValueError(f"`group_size` must be a finite number > 1, got {value!r}")
    return G


def critical_rollout_intervals(rollouts, group_size, level: float = 0.9,
                               include_sketch: bool = True):
    """The critical rollout count at ``group_size`` with Fieller's intervals (beyond C17, C32).

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        A pilot with i.i.d. prompts (at least 3).
    group_size : float or sequence of float
        ``G > 1`` (real: the count at ``G*`` is read at a real ``G``); a sequence gives one
        answer per ``G`` from one jackknife.
    level : float
        Two-sided level in (0, 1).
    include_sketch : bool
        Resample the projection's blocks too (the default).

    Returns
    -------
    CriticalRolloutIntervals, or a tuple of them for a sequence of ``G``

    Examples
    --------
    >>> from ustat_rl.policies.examples import small_bandit
    >>> from ustat_rl.scores.bandit import bandit_pilot
    >>> out = critical_rollout_intervals(bandit_pilot(small_bandit(), 256, 8, rng=0), 4)
    >>> out.total.low < out.total.estimate < out.total.high
    True
    """
    many = np.ndim(group_size) == 1
    sizes = [_checked_size(g) for g in (group_size if many else [group_size])]
    level = as_float(level, "level", low=0.0, high=1.0)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    stats = checked_statistics(rollouts)
    est, cov_p, cov_s = two_way_cov(stats, _constants_and_signal(stats), include_sketch)
    units = block_labels(stats).shape[1] if (include_sketch and stats.sketched) else None
    out = tuple(_at(G, est, cov_p, cov_s, stats.n_prompts, units, level) for G in sizes)
    return out if many else out[0]


def _at(G, base, base_p, base_s, P, units, level) -> CriticalRolloutIntervals:
    """The count at ``G`` from the jackknife of ``(c1, c2, c3', ||g||^2)``."""
    a = np.vstack([_coefficients(G), [0.0, 0.0, 0.0, 1.0]])  # (4, 4): inter, intra, total, signal
    est, cov_p, cov_s = a @ base, a @ base_p @ a.T, a @ base_s @ a.T
    point = critical_rollouts(*(float(v) for v in base[:3]), float(base[3]), G)
    signal = student_interval(est[3], math.sqrt(max(cov_p[3, 3], 0.0)),
                              math.sqrt(max(cov_s[3, 3], 0.0)), level, P, units)
    t_signal = student_quantile(level, max(cov_p[3, 3], 0.0), max(cov_s[3, 3], 0.0), P, units)
    cov = cov_p + cov_s
    parts = {}
    for j, name in enumerate(PARTS):
        t = max(t_signal, student_quantile(level, max(cov_p[j, j], 0.0), max(cov_s[j, j], 0.0),
                                           P, units))
        v_num, v_den = max(cov[j, j], 0.0), max(cov[3, 3], 0.0)
        bound = math.sqrt(v_num * v_den)  # Cauchy-Schwarz, as fieller_from_errors clips it
        low, high = fieller_nonnegative(float(est[j]), float(est[3]), v_num,
                                        min(max(float(cov[j, 3]), -bound), bound), v_den, t)
        if not est[3] > 0.0:  # ||g||^2 estimated <= 0: the set's lower end, no upper end
            high = math.inf
        ratio = getattr(point, name)
        # a numerator estimated below 0 (c1's noise) leaves 0 in the count's range, whatever
        # Fieller's set (which then excludes 0 on a numerator it reads as negative) says
        low = min(low, max(ratio, 0.0))
        high = max(high, ratio)  # Fieller's set holds the estimate; this only undoes rounding
        parts[name] = Interval(ratio, float(low), float(high),
                               *_delta_errors(est, cov_p, cov_s, j, ratio))
    noise = student_interval(point.noise, math.sqrt(max(cov_p[2, 2], 0.0)),
                             math.sqrt(max(cov_s[2, 2], 0.0)), level, P, units)
    return CriticalRolloutIntervals(level, G, parts["total"], parts["inter"], parts["intra"],
                                    signal, noise, point.note)


def _delta_errors(est, cov_p, cov_s, j, ratio):
    """Delta-method standard errors of ``est[j]/est[3]``: total, prompt part, sketch part."""
    if not (est[3] > 0.0 and math.isfinite(ratio)):
        return math.nan, math.nan, math.nan

    def var(c):
        return max(c[j, j] - 2.0 * ratio * c[j, 3] + ratio * ratio * c[3, 3], 0.0) / est[3] ** 2

    p, s = var(cov_p), var(cov_s)
    return math.sqrt(p + s), math.sqrt(p), math.sqrt(s)
