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
  becomes ``m``; :func:`_blocks`).

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
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats as sps

from .._validation import as_float
from ..theory import PromptMoments, ScalingConstants, scaling_constants
from .estimate import SCORE_MOMENTS, PilotStatistics, pilot_statistics
from .fieller import fieller_from_errors, gstar_of_ratio
from .rollouts import Rollouts

__all__ = ["Interval", "PilotIntervals", "pilot_intervals", "jackknife", "student_interval",
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
        ``rho = c1/c3'`` with Fieller's interval (its standard errors are the delta method's,
        for reference only), the scale on which ``G*`` is inverted.
    optimal_group_size : Interval
        ``G* = 1 + sqrt(c3'/c1)``; its upper end is ``inf`` when ``rho`` may be ``<= 0``
        (the pilot cannot bound ``G*`` from above: :attr:`bounded` is ``False``).
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

    @property
    def bounded(self) -> bool:
        """Whether the pilot bounds ``G*`` from above (``c1``'s interval stays above 0)."""
        return bool(math.isfinite(self.optimal_group_size.high))


# ---------------------------------------------------------------------- replicates
def _blocks(stats: PilotStatistics) -> np.ndarray:
    """``(k, m)`` indicator of the independent projection blocks: one per column unless the
    sketch is factored (``PilotStatistics.column_group``, C31)."""
    group = np.arange(stats.n_columns) if stats.column_group is None else stats.column_group
    return (np.asarray(group)[:, None] == np.unique(group)[None, :]).astype(float)


def _summary(stats: PilotStatistics) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Prompt averages of every field and ``||g||^2``: full ``(9,)``, leave-one-prompt-out
    ``(P, 9)`` and leave-one-block-out ``(m, 9)`` (``None`` for full scores)."""
    P, k = stats.n_prompts, _blocks(stats).shape[1]
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
    shares = _blocks(stats).T @ shares  # (k, 8): one share per block
    column_reps = np.tile(full, (k, 1))  # (k, 9); reward fields do not involve R
    column_reps[:, n0:] = k / (k - 1.0) * (full[None, n0:] - shares)
    return full, prompt_reps, column_reps


def _cell_replicates(stats: PilotStatistics, prompts: slice) -> np.ndarray:
    """Summaries without prompt ``a`` and projection row ``r``: ``(p, k, 9)`` for ``a`` in
    ``prompts`` (the double deletions behind the interaction term); ``r`` runs over blocks."""
    blocks = _blocks(stats)  # (columns, k)
    P, k = stats.n_prompts, blocks.shape[1]
    n0 = len(_NON_SCORE)
    per_prompt = np.column_stack([stats.value, stats.reward_var])  # (P, 2)
    loo = (per_prompt.sum(axis=0)[None, :] - per_prompt[prompts]) / (P - 1.0)  # (p, 2)
    p = loo.shape[0]
    out = np.empty((p, k, n0 + len(SCORE_MOMENTS) + 1))
    out[:, :, :n0] = loo[:, None, :]
    scale = k / (k - 1.0) / (P - 1.0)
    for j, name in enumerate(SCORE_MOMENTS):
        x = stats.columns[name] @ blocks  # (P, k) prompt a's share from block r
        rest = x.sum() - x.sum(axis=1)[prompts, None] - x.sum(axis=0)[None, :] + x[prompts]
        out[:, :, n0 + j] = scale * rest
    gm = stats.grad_mean  # (P, k)
    total = gm.sum(axis=0)  # (k,)
    cross_r = total * total - np.sum(gm * gm, axis=0)  # (k,) ordered pairs, per row
    cut = (cross_r[None, :] - 2.0 * gm[prompts] * total[None, :] + 2.0 * gm[prompts] ** 2
           ) @ blocks  # (p, k)
    out[:, :, -1] = (k / (k - 1.0)) * (cut.sum(axis=1, keepdims=True) - cut) \
        / ((P - 1.0) * (P - 2.0))
    return out


def _jackknife_cov(values: np.ndarray) -> np.ndarray:
    """Delete-one jackknife covariance ``(m - 1)/m sum (t_i - t_bar)(t_i - t_bar)^T``."""
    m = values.shape[0]
    centred = values - values.mean(axis=0)
    return (m - 1.0) / m * centred.T @ centred


#: Prompts per block of double-deletion replicates (bounds memory at ``block * k * 9`` floats).
_CELL_BLOCK_ELEMENTS = 1 << 20


def _two_way_cov(stats: PilotStatistics, fn: Callable[[np.ndarray], np.ndarray],
                 include_sketch: bool):
    """``(estimate, cov_prompt, cov_sketch)`` of the vectorised statistic ``fn(summary)``.

    ``cov_prompt`` is the jackknife over prompts. ``cov_sketch`` is the jackknife over
    projection rows minus the prompt-by-row interaction, which both one-way jackknifes contain:
    for a mean of a ``P x k`` two-way array the prompt jackknife estimates
    ``(s_A^2 + s_AR^2/k)/P`` and the row jackknife ``(s_R^2 + s_AR^2/P)/k``; the double
    deletions estimate ``s_AR^2/(P k)`` by ``(P-1)(k-1)/(P k) sum_ar D_ar D_ar^T`` with
    ``D_ar = t_(-a,-r) - t_(-a) - t_(-r) + t``.
    """
    full, prompt_reps, row_reps = _summary(stats)
    estimate = fn(full[None, :])[0]
    t_prompt = fn(prompt_reps)  # (P, q)
    cov_prompt = _jackknife_cov(t_prompt)
    cov_sketch = np.zeros_like(cov_prompt)
    if include_sketch and row_reps is not None:
        P, k = stats.n_prompts, row_reps.shape[0]
        t_row = fn(row_reps)  # (k, q)
        interaction = np.zeros_like(cov_prompt)
        block = max(1, _CELL_BLOCK_ELEMENTS // (9 * k))
        for start in range(0, P, block):
            rows = slice(start, min(P, start + block))
            cells = fn(_cell_replicates(stats, rows).reshape(-1, full.size))
            d = (cells.reshape(rows.stop - rows.start, k, -1) - t_prompt[rows, None, :]
                 - t_row[None, :, :] + estimate[None, None, :]).reshape(-1, estimate.size)
            interaction += d.T @ d
        cov_sketch = _jackknife_cov(t_row) - (P - 1.0) * (k - 1.0) / (P * k) * interaction
    return estimate, cov_prompt, cov_sketch


def _as_moments(summary: np.ndarray) -> PromptMoments:
    """One pseudo-prompt holding the prompt averages: the scaling constants and minibatch MSEs
    depend on the moments only through them and ``||g||^2`` (C6, C17)."""
    fields = dict(zip(_SUMMARY[:-1], (np.array([v]) for v in summary[:-1])))
    return PromptMoments(prompt_prob=np.ones(1), grad_gram=fields["grad_sq"][:, None],
                         kind="estimated", grad_norm_sq=float(summary[-1]), **fields)


def _affine_map(statistic: Callable[[PromptMoments], np.ndarray], full: np.ndarray):
    """``(t(full), J)`` with ``t(s) = t(full) + J (s - full)``, read off at unit steps; raises
    unless ``statistic`` is affine in the summary (checked at one more point)."""
    n = full.size

    def evaluate(summary):
        return np.atleast_1d(np.asarray(statistic(_as_moments(summary)), dtype=float))

    estimate = evaluate(full)
    steps = np.maximum(np.abs(full), 1e-3)  # (n,)
    jac = np.column_stack([(evaluate(full + steps[j] * np.eye(n)[j]) - estimate) / steps[j]
                           for j in range(n)])  # (q, n)
    probe = full + 0.5 * steps * np.linspace(-1.0, 1.0, n)
    if not np.allclose(evaluate(probe), estimate + jac @ (probe - full), rtol=1e-6,
                       atol=1e-9 * max(1.0, float(np.max(np.abs(estimate))))):
        raise ValueError("`statistic` must be affine in the prompt-averaged moments and "
                         "||g||^2 (a scaling constant or a minibatch MSE)")
    return estimate, jac


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
    the two-way jackknife covariances of ``s`` (see :func:`_two_way_cov`); ``a`` is read off
    ``statistic`` at unit steps.
    """
    stats = _stats(rollouts)
    full, cov_prompt, cov_sketch = _two_way_cov(stats, lambda x: x, include_sketch)
    estimate, jac = _affine_map(statistic, full)
    prompt_var = np.einsum("qi,ij,qj->q", jac, cov_prompt, jac)
    sketch_var = np.einsum("qi,ij,qj->q", jac, cov_sketch, jac)
    return estimate, np.sqrt(np.maximum(prompt_var, 0.0)), np.sqrt(np.maximum(sketch_var, 0.0))


def _stats(rollouts) -> PilotStatistics:
    stats = rollouts if isinstance(rollouts, PilotStatistics) else pilot_statistics(rollouts)
    if stats.prompt_prob is not None:
        raise ValueError("`rollouts` must have i.i.d. prompts (no `prompt_weight`) for intervals: "
                         "the prompt jackknife resamples prompts drawn from f")
    if stats.n_prompts < 3:
        raise ValueError(f"`rollouts` must hold >= 3 prompts for a jackknife, got "
                         f"{stats.n_prompts}")
    return stats


def _constants(m: PromptMoments) -> np.ndarray:
    c = scaling_constants(m)
    return np.array([c.c1, c.c2, c.c3])


def _constants_and_ratio(stats: PilotStatistics):
    """The vectorised statistic ``summary rows (m, 9) -> (c1, c2, c3', c1/c3')`` (C17).

    ``c1, c2, c3'`` are affine in the summary, so their map is read off
    :func:`ustat_rl.theory.scaling_constants` once and applied to every replicate at once.
    """
    full, _, _ = _summary(stats)
    at_full, jac = _affine_map(_constants, full)

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
    est, cov_prompt, cov_sketch = _two_way_cov(stats, _constants_and_ratio(stats),
                                               include_sketch)
    p_se = np.sqrt(np.maximum(np.diag(cov_prompt), 0.0))
    s_se = np.sqrt(np.maximum(np.diag(cov_sketch), 0.0))
    k = _blocks(stats).shape[1] if (include_sketch and stats.sketched) else None
    parts = [_interval(e, p, q, level, stats.n_prompts, k) for e, p, q in zip(est, p_se, s_se)]
    t = student_quantile(level, p_se[0] ** 2, s_se[0] ** 2, stats.n_prompts, k)  # c1's quantile
    r_low, r_high = fieller_from_errors(est[0], est[2], parts[0].std_error, parts[2].std_error,
                                        cov_prompt[0, 2] + cov_sketch[0, 2], t)
    se = (parts[3].std_error, parts[3].prompt_std_error, parts[3].sketch_std_error)  # delta
    ratio = Interval(float(est[0] / est[2]) if est[2] > 0 else math.nan, r_low, r_high, *se)
    constants = ScalingConstants(float(est[0]), float(est[1]), float(est[2]))
    slope = 0.5 * ratio.estimate ** -1.5 if ratio.estimate > 0 else math.inf  # |dG*/drho|
    gstar = Interval(constants.optimal_group_size() if est[2] >= 0 else math.nan,
                     gstar_of_ratio(r_high), gstar_of_ratio(r_low), *(slope * e for e in se))
    return PilotIntervals(level, constants, parts[0], parts[1], parts[2], ratio, gstar,
                          stats.n_prompts, stats.n_columns,
                          bool(include_sketch and stats.sketched and _blocks(stats).shape[1] >= 2))


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
