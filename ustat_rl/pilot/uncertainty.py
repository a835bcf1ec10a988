"""Intervals for c1, c2, c3', G* and predicted MSEs from a pilot (docs/theory.md section 7, C32).

The estimates of :mod:`ustat_rl.pilot.estimate` vary with the prompts drawn and, for projected
scores, with the projection ``R``. Both sources are resampled by a delete-one jackknife:

* over prompts: leaving prompt ``a`` out recomputes every prompt average and the cross-prompt
  term ``||g||^2`` from the other ``P - 1`` prompts, so the correlation that the shared ``g``
  induces between prompts is part of the replicates;
* over projection rows: the rows of ``R`` are i.i.d. and every score moment is a sum of one
  share per row, so leaving row ``r`` out gives ``k/(k - 1)`` times the other rows' shares.

The two jackknife variances add (an interaction term of order ``1/(P k)`` is counted twice, a
slightly conservative choice). Intervals are ``estimate +- t se`` with a Student quantile whose degrees of freedom combine
the two parts (Welch-Satterthwaite; :func:`student_quantile`); ``G*`` is monotone
in ``rho = c1/c3'``, so its interval is the image of the interval for ``rho``
(``G* = 1 + rho^(-1/2)``, ``inf`` where ``rho <= 0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats as sps

from .._validation import as_float
from ..theory import PromptMoments, ScalingConstants, scaling_constants
from .estimate import SCORE_MOMENTS, PilotStatistics, pilot_statistics
from .rollouts import Rollouts

__all__ = ["Interval", "PilotIntervals", "pilot_intervals", "jackknife",
           "prompts_to_halve_width", "student_quantile"]

_NON_SCORE = ("value", "reward_var")
_SUMMARY = _NON_SCORE + SCORE_MOMENTS + ("grad_norm_sq",)


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
        ``rho = c1/c3'``, the scale on which ``G*`` is inverted.
    optimal_group_size : Interval
        ``G* = 1 + sqrt(c3'/c1)``; ``inf`` ends where ``rho`` may be ``<= 0``.
    n_prompts, n_columns : int
        ``P`` and ``k``.
    sketch_included : bool
        Whether the projection was resampled (``False`` for full scores or when ignored).
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


# ---------------------------------------------------------------------- replicates
def _summary(stats: PilotStatistics) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Prompt averages of every field and ``||g||^2``: full ``(9,)``, leave-one-prompt-out
    ``(P, 9)`` and leave-one-row-out ``(k, 9)`` (``None`` for full scores)."""
    P, k = stats.n_prompts, stats.n_columns
    per_prompt = np.column_stack([stats.value, stats.reward_var]
                                 + [stats.columns[n].sum(axis=1) for n in SCORE_MOMENTS])  # (P, 8)
    gm = stats.grad_mean  # (P, k)
    total = gm.sum(axis=0)  # (k,)
    own = np.sum(gm * gm, axis=1)  # (P,)
    cross = float(total @ total - own.sum())  # sum over ordered pairs a != b
    full = np.r_[per_prompt.mean(axis=0), cross / (P * (P - 1.0))]
    loo_means = (per_prompt.sum(axis=0)[None, :] - per_prompt) / (P - 1.0)  # (P, 8)
    loo_cross = cross - 2.0 * (gm @ total) + 2.0 * own  # pairs without prompt a
    prompt_reps = np.column_stack([loo_means, loo_cross / ((P - 1.0) * (P - 2.0))])
    if not stats.sketched or k < 2:
        return full, prompt_reps, None
    n0 = len(_NON_SCORE)
    shares = np.column_stack([stats.columns[n].mean(axis=0) for n in SCORE_MOMENTS]
                             + [(total * total - np.sum(gm * gm, axis=0)) / (P * (P - 1.0))])
    column_reps = np.tile(full, (k, 1))  # (k, 9); reward fields do not involve R
    column_reps[:, n0:] = k / (k - 1.0) * (full[None, n0:] - shares)
    return full, prompt_reps, column_reps


def _as_moments(summary: np.ndarray) -> PromptMoments:
    """One pseudo-prompt holding the prompt averages: every result of :mod:`ustat_rl.theory`
    used here is linear in them given ``||g||^2``, so it equals the result on the full set."""
    fields = dict(zip(_SUMMARY[:-1], (np.array([v]) for v in summary[:-1])))
    return PromptMoments(prompt_prob=np.ones(1), grad_gram=fields["grad_sq"][:, None],
                         kind="estimated", grad_norm_sq=float(summary[-1]), **fields)


def _jackknife_var(values: np.ndarray) -> np.ndarray:
    m = values.shape[0]
    centred = values - values.mean(axis=0)
    return (m - 1.0) / m * np.sum(centred * centred, axis=0)


def jackknife(rollouts, statistic: Callable[[PromptMoments], np.ndarray],
              include_sketch: bool = True):
    """Delete-one jackknife over prompts (and projection rows) of ``statistic(moments)``.

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        i.i.d. prompts (no ``prompt_weight``), at least 3.
    statistic : callable
        ``statistic(moments) -> float or 1-D array``, applied to the pilot's prompt-averaged
        moments (a one-prompt :class:`PromptMoments` whose ``grad_norm_sq`` is the unbiased
        cross-prompt estimate); it must depend on the moments only through prompt averages and
        ``grad_norm_sq``, as every scaling constant and minibatch MSE does (C6, C17).
    include_sketch : bool
        Add the variance over projection rows (ignored for full scores).

    Returns
    -------
    estimate, prompt_se, sketch_se : ndarray
        The statistic and the two standard errors, each shaped like the statistic.
    """
    stats = _stats(rollouts)
    full, prompt_reps, column_reps = _summary(stats)

    def apply(rows):
        return np.array([np.atleast_1d(np.asarray(statistic(_as_moments(r)), dtype=float))
                         for r in rows])

    estimate = np.atleast_1d(np.asarray(statistic(_as_moments(full)), dtype=float))
    prompt_se = np.sqrt(_jackknife_var(apply(prompt_reps)))
    sketch_se = np.zeros_like(prompt_se)
    if include_sketch and column_reps is not None:
        sketch_se = np.sqrt(_jackknife_var(apply(column_reps)))
    return estimate, prompt_se, sketch_se


def _stats(rollouts) -> PilotStatistics:
    stats = rollouts if isinstance(rollouts, PilotStatistics) else pilot_statistics(rollouts)
    if stats.prompt_prob is not None:
        raise ValueError("`rollouts` must have i.i.d. prompts (no `prompt_weight`) for intervals: "
                         "the prompt jackknife resamples prompts drawn from f")
    if stats.n_prompts < 3:
        raise ValueError(f"`rollouts` must hold >= 3 prompts for a jackknife, got "
                         f"{stats.n_prompts}")
    return stats


def _constants_vector(m: PromptMoments) -> np.ndarray:
    c = scaling_constants(m)
    return np.array([c.c1, c.c2, c.c3, c.c1 / c.c3 if c.c3 > 0 else math.nan])


def _gstar(ratio: float) -> float:
    return 1.0 + 1.0 / math.sqrt(ratio) if ratio > 0 else math.inf


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
    >>> from ustat_rl.examples import interior_optimum_bandit
    >>> from ustat_rl.pilot.bandit import bandit_pilot
    >>> pilot = bandit_pilot(interior_optimum_bandit(), 64, 16, rng=1, sketch_dim=16)
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
    stats = _stats(rollouts)
    est, p_se, s_se = jackknife(stats, _constants_vector, include_sketch)
    k = stats.n_columns if (include_sketch and stats.sketched) else None
    parts = [_interval(e, p, q, level, stats.n_prompts, k) for e, p, q in zip(est, p_se, s_se)]
    ratio = parts[3]
    g_low, g_high = _gstar(ratio.high), _gstar(ratio.low)
    constants = ScalingConstants(float(est[0]), float(est[1]), float(est[2]))
    g_point = constants.optimal_group_size() if est[2] >= 0 else math.nan
    slope = 0.5 * ratio.estimate ** -1.5 if ratio.estimate > 0 else math.inf  # |dG*/drho|
    gstar = Interval(g_point, g_low, g_high, slope * ratio.std_error,
                     slope * ratio.prompt_std_error, slope * ratio.sketch_std_error)
    return PilotIntervals(level, constants, parts[0], parts[1], parts[2], ratio, gstar,
                          stats.n_prompts, stats.n_columns,
                          bool(include_sketch and stats.sketched and stats.n_columns >= 2))


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
