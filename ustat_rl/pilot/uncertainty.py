"""Intervals for c1, c2, c3', G* and predicted MSEs from a pilot (docs/theory.md section 7, C32).

The estimates of :mod:`ustat_rl.pilot.estimate` vary with the prompts drawn and, for projected
scores, with the projection ``R``. Both sources are resampled by a delete-one jackknife:

* over prompts: leaving prompt ``a`` out recomputes every prompt average and the cross-prompt
  term ``||g||^2`` from the other ``P - 1`` prompts, so the correlation that the shared ``g``
  induces between prompts is part of the replicates;
* over projection rows: the rows of ``R`` are i.i.d. and every score moment is a sum of one
  share per row, so leaving row ``r`` out gives ``k/(k - 1)`` times the other rows' shares. A
  factored sketch (``Rollouts.sketch_blocks = m``) has ``m`` i.i.d. blocks of dependent rows, and
  the same jackknife runs over blocks (a block's share is the sum of its rows' shares, ``k``
  becomes ``m``; :func:`block_labels`).

Both one-way jackknifes also see the prompt-by-row interaction, so it is estimated from double
deletions (prompt ``a`` and row ``r``) and removed once before the variances add. Intervals are ``estimate +- t se`` with a Student quantile whose degrees of freedom combine
the two parts (Welch-Satterthwaite; :func:`student_quantile`). ``G*`` is monotone in
``rho = c1/c3'``, so its interval is the image (``G* = 1 + rho^(-1/2)``, ``inf`` where
``rho <= 0``) of Fieller's interval for the ratio (:mod:`ustat_rl.pilot.fieller`), built from the
jackknife covariance of ``(c1, c3')`` with ``c1``'s quantile: ``G*`` is unbounded above exactly
when ``c1``'s interval reaches 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
from scipy import stats as sps

from .._validation import as_float, as_instance
from ..theory import PromptMoments, ScalingConstants
from ..theory.group_size import gstar_interval, gstar_or_nan
from .estimate import PilotStatistics
from .fieller import fieller_from_errors
from .replicates import (
    affine_map,
    block_labels,
    checked_statistics,
    constants_vector,
    pilot_summary,
    two_way_cov,
)
from .rollouts import Rollouts
from .small_sample import c1_upper_end, is_small_pilot, per_prompt_values, prompt_mean_interval

__all__ = ["Interval", "PilotIntervals", "pilot_intervals", "jackknife", "student_interval",
           "prompts_to_halve_width", "student_quantile", "RatioErrors", "fieller_gstar"]



@dataclass(frozen=True)
class Interval:
    """A point estimate with its jackknife standard error and two-sided interval.

    Attributes
    ----------
    estimate, low, high : float
    std_error : float
        Total jackknife standard error (prompts and projection rows).
    prompt_std_error, sketch_std_error : float
        The two parts (``sketch_std_error`` is 0 for full scores or when ignored).
    """

    estimate: float
    low: float
    high: float
    std_error: float
    prompt_std_error: float
    sketch_std_error: float

    def covers(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return bool(self.low <= value <= self.high)

    @property
    def width(self) -> float:
        """``high - low`` (``inf`` for an unbounded interval)."""
        return self.high - self.low


@dataclass(frozen=True)
class PilotIntervals:
    """Intervals for the scaling law from one pilot (Theorem 7, docs/theory.md C17, C32).

    Attributes
    ----------
    level : float
        Two-sided coverage aimed at, e.g. 0.9.
    constants : ScalingConstants
        Point estimates of ``c1``, ``c2``, ``c3'``.
    c1, c2, c3 : Interval
    ratio : Interval
        ``rho = c1/c3'`` with Fieller's interval (its standard errors are the delta method's,
        for reference only), the scale on which ``G*`` is inverted.
    optimal_group_size : Interval
        ``G* = 1 + sqrt(c3'/c1)``; its upper end is ``inf`` when ``rho`` may be ``<= 0``
        (the pilot cannot bound ``G*`` from above: :attr:`bounded` is ``False``).
    n_prompts, n_columns : int
        ``P`` and ``k``.
    sketch_included : bool
        Whether the projection was resampled (``False`` for full scores or when ignored).
    cov13 : float
        Jackknife covariance of ``(c1_hat, c3_hat)`` (prompts plus projection), before
        :func:`fieller_from_errors` clips it.
    sketch_units : int or None
        The projection's resampled units in ``c1``'s degrees of freedom (rows, or blocks of a
        factored sketch; ``None`` when the projection was not resampled). With ``cov13`` they
        let :meth:`gstar_at` rebuild ``G*``'s interval at another level.
    small_pilot : bool
        Whether the pilot has fewer than
        :data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` prompts, so that each end of
        the constants' intervals is the more cautious of the jackknife's and a chi-square
        model's (:mod:`ustat_rl.pilot.small_sample`), and ``rho`` and ``G*`` take the image of
        that box beside Fieller's set.

    Notes
    -----
    ``c1``, ``c2`` and ``c3'`` are at least 0, so their intervals are cut at 0 (an end below 0
    becomes 0); the estimates are the unbiased ones and may still lie below 0, where the
    interval holds ``max(estimate, 0)``.
    """

    level: float
    constants: ScalingConstants
    c1: Interval
    c2: Interval
    c3: Interval
    ratio: Interval
    optimal_group_size: Interval
    n_prompts: int
    n_columns: int
    sketch_included: bool
    cov13: float = math.nan
    sketch_units: int | None = None
    small_pilot: bool = False

    @property
    def bounded(self) -> bool:
        """Whether the pilot bounds ``G*`` from above (``c1``'s interval stays above 0)."""
        return bool(math.isfinite(self.optimal_group_size.high))

    def fieller_inputs(self) -> dict:
        """What :func:`fieller_gstar` needs besides the estimates and ``n_prompts``: ``c1``'s two
        standard errors, ``c3'``'s, their covariance and the projection units."""
        return {"c1_prompt_se": self.c1.prompt_std_error,
                "c1_sketch_se": self.c1.sketch_std_error, "c3_se": self.c3.std_error,
                "cov13": self.cov13, "sketch_units": self.sketch_units}

    def c1_quantile(self) -> float:
        """The Student quantile of ``c1``'s jackknife interval at :attr:`level`."""
        return student_quantile(self.level, self.c1.prompt_std_error**2,
                                self.c1.sketch_std_error**2, self.n_prompts, self.sketch_units)

    def gstar_at(self, level: float) -> tuple[float, float]:
        """``G*``'s interval ``(low, high)`` at another two-sided ``level`` (:func:`fieller_gstar`;
        a small pilot's box is not rebuilt, so this is Fieller's part of it)."""
        errors = RatioErrors(self.c1.prompt_std_error, self.c1.sketch_std_error,
                             self.c3.std_error, self.cov13, self.sketch_units)
        return fieller_gstar(self.c1.estimate, self.c3.estimate, errors, self.n_prompts, level)[1]


# ---------------------------------------------------------------------- replicates
def jackknife(rollouts, statistic: Callable[[PromptMoments], np.ndarray],
              include_sketch: bool = True):
    """Jackknife standard errors of an affine ``statistic(moments)`` over prompts and rows.

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        i.i.d. prompts (no ``prompt_weight``), at least 3.
    statistic : callable
        ``statistic(moments) -> float or 1-D array``, applied to the pilot's prompt-averaged
        moments (a one-prompt :class:`PromptMoments` whose ``grad_norm_sq`` is the unbiased
        cross-prompt estimate). It must be affine in those averages and ``grad_norm_sq``, as
        every scaling constant and minibatch MSE is (C6, C17); this is checked.
    include_sketch : bool
        Add the variance over projection rows (ignored for full scores).

    Returns
    -------
    estimate, prompt_se, sketch_se : ndarray
        The statistic and the two standard errors, each shaped like the statistic.

    Notes
    -----
    For ``t = a^T s + b`` with ``s`` the summary vector, the variances are ``a^T C a`` with ``C``
    the two-way jackknife covariances of ``s`` (see :func:`two_way_cov`); ``a`` is read off
    ``statistic`` at unit steps.
    """
    stats = checked_statistics(rollouts)
    full, cov_prompt, cov_sketch = two_way_cov(stats, lambda x: x, include_sketch)
    estimate, jac = affine_map(statistic, full)
    prompt_var = np.einsum("qi,ij,qj->q", jac, cov_prompt, jac)
    sketch_var = np.einsum("qi,ij,qj->q", jac, cov_sketch, jac)
    return estimate, np.sqrt(np.maximum(prompt_var, 0.0)), np.sqrt(np.maximum(sketch_var, 0.0))


def _constants_and_ratio(stats: PilotStatistics):
    """The vectorised statistic ``summary rows (m, 9) -> (c1, c2, c3', c1/c3')`` (C17).

    ``c1, c2, c3'`` are affine in the summary, so their map is read off
    :func:`ustat_rl.theory.scaling_constants` once and applied to every replicate at once.
    """
    full, _, _ = pilot_summary(stats)
    at_full, jac = affine_map(constants_vector, full)

    def fn(summary):
        c = at_full[None, :] + (summary - full[None, :]) @ jac.T  # (m, 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(c[:, 2] > 0, c[:, 0] / c[:, 2], np.nan)
        return np.column_stack([c, ratio])

    return fn


def student_quantile(level: float, prompt_var: float, sketch_var: float, n_prompts: int,
                     n_columns: int | None) -> float:
    """The two-sided Student-t quantile with Welch-Satterthwaite degrees of freedom (C32).

    A delete-one jackknife variance over ``m`` units has ``m - 1`` degrees of freedom; the sum of
    the prompt part (``P - 1``) and the projection part (``k - 1``) gets
    ``(v_p + v_s)^2 / (v_p^2/(P - 1) + v_s^2/(k - 1))``.
    """
    terms = prompt_var**2 / (n_prompts - 1.0)
    if n_columns is not None and n_columns >= 2:
        terms += sketch_var**2 / (n_columns - 1.0)
    total = prompt_var + sketch_var
    df = total**2 / terms if terms > 0 else math.inf
    return float(sps.t.ppf(0.5 + level / 2.0, df)) if np.isfinite(df) else \
        float(sps.norm.ppf(0.5 + level / 2.0))


def _interval(estimate, prompt_se, sketch_se, level, n_prompts, n_columns) -> Interval:
    se = math.hypot(prompt_se, sketch_se)
    t = student_quantile(level, prompt_se**2, sketch_se**2, n_prompts, n_columns)
    return Interval(float(estimate), float(estimate - t * se), float(estimate + t * se), float(se),
                    float(prompt_se), float(sketch_se))


def student_interval(estimate, prompt_se, sketch_se, level, n_prompts, n_columns) -> Interval:
    """The pilot's Student-t interval of one estimate from its two standard errors (C32)."""
    return _interval(estimate, prompt_se, sketch_se, level, n_prompts, n_columns)


@dataclass(frozen=True)
class RatioErrors:
    """The standard errors Fieller's interval for ``rho = c1/c3'`` is built from (C32).

    Attributes
    ----------
    c1_prompt_se, c1_sketch_se : float
        ``c1``'s standard error over prompts and over the sketch's blocks (0 without a sketch).
    c3_se : float
        ``c3'``'s standard error.
    cov13 : float
        The covariance of the estimates of ``c1`` and ``c3'``.
    sketch_units : int or None
        The sketch's independent blocks (the degrees of freedom of ``c1_sketch_se``), or None.
    """

    c1_prompt_se: float
    c1_sketch_se: float
    c3_se: float
    cov13: float
    sketch_units: int | None = None


def fieller_gstar(c1, c3, errors: RatioErrors, n_prompts, level):
    """Fieller's interval for ``rho = c1/c3'`` and its image for ``G*`` at ``level`` (C32).

    The quantile is ``c1``'s (:func:`student_quantile` from its two variance parts), so ``G*`` is
    unbounded above exactly when ``c1``'s interval at ``level`` reaches 0.

    Returns
    -------
    (rho_low, rho_high), (gstar_low, gstar_high) : tuple of float pairs
        ``G* = 1 + rho^(-1/2)`` is decreasing in ``rho``, so ``gstar_low`` is the image of
        ``rho_high``; ``gstar_high`` is ``inf`` where ``rho <= 0`` is allowed. Where the set lies
        wholly at or below 0 (the pilot cannot tell ``c1`` from 0; ``rho >= 0``) ``G*``'s
        interval is all of ``(1, inf)``, never ``[inf, inf]``.
    """
    e = as_instance(errors, RatioErrors, "errors")
    t = student_quantile(level, e.c1_prompt_se**2, e.c1_sketch_se**2, n_prompts, e.sketch_units)
    low, high = fieller_from_errors(c1, c3, math.hypot(e.c1_prompt_se, e.c1_sketch_se), e.c3_se,
                                    e.cov13, t)
    return (low, high), gstar_interval(low, high)


def pilot_intervals(rollouts, level: float = 0.9, include_sketch: bool = True) -> PilotIntervals:
    """Jackknife intervals for ``c1``, ``c2``, ``c3'``, ``c1/c3'`` and ``G*`` (C17, C32).

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        A pilot with i.i.d. prompts (at least 3).
    level : float
        Two-sided level in (0, 1).
    include_sketch : bool
        Resample the projection rows too (the default); ``False`` ignores the projection noise
        (a deliberately wrong interval, kept for the negative control of the coverage check).

    Returns
    -------
    PilotIntervals

    Examples
    --------
    >>> from ustat_rl.policies.examples import interior_optimum_bandit
    >>> from ustat_rl.scores.bandit import bandit_pilot
    >>> from ustat_rl.scores.spec import SketchSpec
    >>> pilot = bandit_pilot(interior_optimum_bandit(), 64, 16, rng=1,
    ...                      sketch=SketchSpec(16, seed=1169290205))
    >>> out = pilot_intervals(pilot)
    >>> out.c3.low < out.constants.c3 < out.c3.high
    True
    """
    level = as_float(level, "level", low=0.0, high=1.0)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    if not isinstance(rollouts, (Rollouts, PilotStatistics)):
        raise TypeError(f"`rollouts` must be Rollouts or PilotStatistics, got "
                        f"{type(rollouts).__name__}")
    stats = checked_statistics(rollouts)
    est, cov_prompt, cov_sketch = two_way_cov(stats, _constants_and_ratio(stats),
                                               include_sketch)
    p_se = np.sqrt(np.maximum(np.diag(cov_prompt), 0.0))
    s_se = np.sqrt(np.maximum(np.diag(cov_sketch), 0.0))
    k = block_labels(stats).shape[1] if (include_sketch and stats.sketched) else None
    parts = [_interval(e, p, q, level, stats.n_prompts, k) for e, p, q in zip(est, p_se, s_se)]
    cov13 = float(cov_prompt[0, 2] + cov_sketch[0, 2])
    errors = RatioErrors(p_se[0], s_se[0], parts[2].std_error, cov13, k)
    (r_low, r_high), (g_low, g_high) = fieller_gstar(est[0], est[2], errors, stats.n_prompts,
                                                     level)
    small = is_small_pilot(stats.n_prompts)
    if small:
        parts[:3], (r_low, r_high) = _small_pilot_parts(stats, parts[:3], (r_low, r_high),
                                                        level, k)
    parts[:3] = [_in_range(p) for p in parts[:3]]
    se = (parts[3].std_error, parts[3].prompt_std_error, parts[3].sketch_std_error)  # delta
    ratio = Interval(float(est[0] / est[2]) if est[2] > 0 else math.nan, r_low, r_high, *se)
    constants = ScalingConstants(float(est[0]), float(est[1]), float(est[2]), estimated=True)
    slope = 0.5 * ratio.estimate ** -1.5 if ratio.estimate > 0 else math.inf  # |dG*/drho|
    point = gstar_or_nan(constants.c1, constants.c3)  # nan where c3' <= 0: no G* follows
    if small:  # the widened set's image, by fieller_gstar's rule ((1, inf) for a set <= 0)
        g_low, g_high = gstar_interval(r_low, r_high)
    gstar = Interval(point, g_low, g_high, *(slope * e for e in se))
    return PilotIntervals(level, constants, parts[0], parts[1], parts[2], ratio, gstar,
                          stats.n_prompts, stats.n_columns,
                          bool(include_sketch and stats.sketched and block_labels(stats).shape[1] >= 2),
                          cov13, k, small)


def _in_range(part: Interval) -> Interval:
    """A constant's interval cut at 0 (``c1``, ``c2``, ``c3'`` are at least 0)."""
    return replace(part, low=max(part.low, 0.0), high=max(part.high, 0.0))


def _small_pilot_parts(stats, parts, ratio, level, sketch_units):
    """The constants' intervals and ``rho``'s of a small pilot (:mod:`.small_sample`)."""
    c1, c2, c3 = parts
    high = max(c1.high, c1_upper_end(stats, level, c1.estimate, c1.sketch_std_error,
                                     sketch_units))
    c1 = replace(c1, high=high)
    values = per_prompt_values(stats)
    widened = []
    for part, name in ((c2, "c2"), (c3, "c3")):
        low, high = prompt_mean_interval(values[name], level)
        widened.append(replace(part, low=min(part.low, low), high=max(part.high, high)))
    c2, c3 = widened
    # rho's box: c1 in [c1_low, c1_high] and c3' in [c3_low, c3_high]; its low end keeps the sign
    # of c1's low end, so G* is unbounded above exactly when c1's interval reaches 0
    r_low, r_high = ratio
    box_high = c1.high / c3.low if c3.low > 0.0 else math.inf
    box_low = c1.low / c3.high if c3.high > 0.0 else -math.inf
    return [c1, c2, c3], (min(r_low, box_low), max(r_high, box_high))


def prompts_to_halve_width(interval: Interval, n_prompts: int) -> float:
    """Prompts needed for half the width, if the prompt variance falls as ``1/P`` (C32).

    The projection part of the variance does not shrink with ``P``; when it alone exceeds a
    quarter of the total variance no number of prompts halves the width and ``inf`` is returned
    (more projection rows are needed).
    """
    total = interval.std_error**2
    prompt, sketch = interval.prompt_std_error**2, interval.sketch_std_error**2
    target = total / 4.0
    if not np.isfinite(total) or sketch >= target or prompt <= 0:
        return math.inf
    return float(n_prompts * prompt / (target - sketch))
