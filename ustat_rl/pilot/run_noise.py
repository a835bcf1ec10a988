"""A rule's gradient noise at the group size the rollouts were drawn with, without a moment model.

A training step's gradient is a mean over its ``B`` groups of one term per group,

.. math::

    \\hat g = \\frac{1}{B} \\sum_b t_b, \\qquad t_b = \\frac{1}{G} \\sum_g A_{bg} S_{bg},

``A`` the rule's advantages and ``S`` each completion's (sketched, weighted) score. When every
``t_b`` is a function of its own group (group statistics; a batch statistic held at its value, to
first order in ``1/B``) and the prompts are i.i.d., the ``t_b`` are i.i.d. too, so

* the step's variance ``tr Cov(g_hat) = tr Cov(t)/B`` is estimated without bias by the sample
  covariance trace of the observed ``t_b``;
* its squared bias against the policy gradient ``g``, ``||E t - g||^2``, by the cross-group
  U-statistic ``sum_{a != b} <d_a, d_b> / (P (P - 1))`` with ``d_b = t_b - u_b`` and ``u_b`` the
  leave-one-out (paper's GRPO) term of the same group, which is unbiased for ``g(x_b)``;
* and the MSE ``E||g_hat - g||^2`` by their sum.

No formula of the rule's moments is used, so these are unbiased for every rule, the
std-normalised ones included, whose exact formulas are not linear in the per-prompt moments and
are biased low when evaluated at plug-in moments (docs/theory.md section 8, "Unbiased at the
run's group size"). At another group size the moment model is still needed.

Intervals: each estimate is a sum over score columns of a U-statistic over groups, so the same
two-way delete-one jackknife as the pilot's (:mod:`ustat_rl.pilot.replicates`) applies in
``O(P k)``: over groups, over the sketch's independent blocks, less their interaction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int
from .replicates import jackknife_cov, sketch_cov
from .uncertainty import Interval, student_quantile

__all__ = ["RunNoise", "group_terms", "run_noise"]


@dataclass(frozen=True)
class RunNoise:
    """A rule's gradient noise at the rollouts' own group size, with intervals.

    Attributes
    ----------
    variance : Interval
        ``tr Cov`` of a step's gradient, a mean over ``batch_size`` i.i.d. groups.
    bias_sq : Interval
        ``||E t - g||^2``: the rule's squared bias against the policy gradient (0 for the
        paper's GRPO rule; the unbiased estimate may come out below 0).
    mse : Interval
        ``variance + bias_sq``: the step's gradient MSE against ``g``.
    n_groups : int
        ``P``, the groups the estimates pool.
    group_size, batch_size : int
        ``G`` and ``B`` of the step the estimates are for.
    sketch_included : bool
        Whether the intervals resample the projection (a sketched score with at least two
        independent blocks) as well as the groups.
    """

    variance: Interval
    bias_sq: Interval
    mse: Interval
    n_groups: int
    group_size: int
    batch_size: int
    sketch_included: bool


def group_terms(advantage, score, group_size: int) -> np.ndarray:
    """``t_b = (1/G) sum_g A_bg S_bg`` of contiguous groups: ``(P G,), (P G, k) -> (P, k)``."""
    advantage = np.asarray(advantage, dtype=np.float64)
    score = np.asarray(score, dtype=np.float64)
    G = as_int(group_size, "group_size", 1)
    if advantage.ndim != 1 or score.ndim != 2 or score.shape[0] != advantage.size \
            or advantage.size % G:
        raise ValueError(f"`advantage` (n,) and `score` (n, k) must hold whole groups of "
                         f"{G} rows, got shapes {advantage.shape} and {score.shape}")
    P = advantage.size // G
    return np.einsum("pg,pgk->pk", advantage.reshape(P, G),
                     score.reshape(P, G, score.shape[1])) / G  # (P, k)


def _variance_shares(t: np.ndarray):
    """Per column: the sample variance of the ``P`` rows ``(k,)``, and the same without row
    ``a`` ``(P, k)`` (Bessel: unbiased for every column's variance)."""
    P = t.shape[0]
    total, squares = t.sum(axis=0), np.sum(t * t, axis=0)  # (k,)
    full = (squares - total * total / P) / (P - 1.0)
    rest = total[None, :] - t
    deleted = ((squares[None, :] - t * t) - rest * rest / (P - 1.0)) / (P - 2.0)  # (P, k)
    return full, deleted


def _cross_shares(d: np.ndarray):
    """Per column: the mean over ordered pairs ``a != b`` of ``d_a d_b`` ``(k,)``, and the same
    without row ``a`` ``(P, k)`` (unbiased for the square of each column's mean)."""
    P = d.shape[0]
    total, squares = d.sum(axis=0), np.sum(d * d, axis=0)  # (k,)
    full = (total * total - squares) / (P * (P - 1.0))
    rest = total[None, :] - d
    deleted = (rest * rest - (squares[None, :] - d * d)) / ((P - 1.0) * (P - 2.0))  # (P, k)
    return full, deleted


def _two_way(full: np.ndarray, deleted: np.ndarray, labels: np.ndarray | None):
    """``(estimate, prompt_var, sketch_var, n_blocks)`` of ``sum_c full[c]``.

    ``deleted[a, c]`` is column ``c``'s share without group ``a``. Leaving block ``r`` of
    ``m`` independent blocks out rescales the rest by ``m/(m - 1)`` (so ``E[R^T R] = I`` is
    kept); the prompt-by-block interaction, which both one-way jackknifes contain, is estimated
    from the double deletions and removed once (:func:`ustat_rl.pilot.replicates.sketch_cov`).
    """
    estimate = float(full.sum())
    by_prompt = deleted.sum(axis=1)  # (P,)
    prompt_var = float(jackknife_cov(by_prompt[:, None])[0, 0])
    if labels is None:
        return estimate, prompt_var, 0.0, None
    blocks = (labels[:, None] == np.unique(labels)[None, :]).astype(float)  # (k, m)
    m = blocks.shape[1]
    if m < 2:
        return estimate, prompt_var, 0.0, None
    P = deleted.shape[0]
    scale = m / (m - 1.0)
    by_block = scale * (estimate - full @ blocks)  # (m,)
    cells = scale * (by_prompt[:, None] - deleted @ blocks)  # (P, m)
    interaction = cells - by_prompt[:, None] - by_block[None, :] + estimate
    sketch_var = float(sketch_cov(by_block[:, None], np.sum(interaction ** 2), P)[0, 0])
    return estimate, prompt_var, max(sketch_var, 0.0), m


def _interval(parts, level: float, n_groups: int, floor: float = 0.0) -> Interval:
    """Student-t interval from the two jackknife variances (C32's construction), its lower end
    raised to the quantity's floor (it cannot be negative) unless the estimate lies below it."""
    estimate, prompt_var, sketch_var, units = parts
    se = math.sqrt(prompt_var + sketch_var)
    t = student_quantile(level, prompt_var, sketch_var, n_groups, units)
    low = max(estimate - t * se, min(floor, estimate))
    return Interval(estimate, low, estimate + t * se, se, math.sqrt(prompt_var),
                    math.sqrt(sketch_var))


def run_noise(terms, target_terms, batch_size: int, group_size: int, level: float = 0.9,
              column_group=None) -> RunNoise:
    """Unbiased variance, squared bias and MSE of a step of ``batch_size`` groups, with intervals.

    Parameters
    ----------
    terms : array_like (P, k)
        The rule's per-group terms ``t_b`` (:func:`group_terms`) of ``P >= 3`` i.i.d. groups.
    target_terms : array_like (P, k)
        The same groups' leave-one-out terms ``u_b`` (the paper's GRPO rule), unbiased for the
        policy gradient of each group's prompt.
    batch_size : int
        ``B``, groups in one step of the run.
    group_size : int
        ``G`` of every group (recorded; the terms already hold it).
    level : float
        Two-sided interval level in [0.5, 1).
    column_group : array_like (k,) of int, optional
        The independent projection block of each column (``Rollouts.column_groups()``), to
        resample the sketch too; ``None`` for full scores or a projection held fixed.

    Returns
    -------
    RunNoise

    Examples
    --------
    >>> t = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    >>> r = run_noise(t, t, batch_size=2, group_size=4)
    >>> round(r.variance.estimate, 4), r.bias_sq.estimate, round(r.mse.estimate, 4)
    (0.3333, 0.0, 0.3333)
    """
    t = np.asarray(terms, dtype=np.float64)
    u = np.asarray(target_terms, dtype=np.float64)
    if t.ndim != 2 or t.shape != u.shape:
        raise ValueError(f"`terms` and `target_terms` must be (P, k) arrays of one shape, got "
                         f"{t.shape} and {u.shape}")
    P = t.shape[0]
    if P < 3:
        raise ValueError(f"`terms` must hold >= 3 groups for a jackknife, got {P}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(u))):
        raise ValueError("`terms` and `target_terms` must be finite")
    B = as_int(batch_size, "batch_size", 1)
    G = as_int(group_size, "group_size", 2)
    level = as_float(level, "level", low=0.5)
    if not level < 1.0:
        raise ValueError(f"`level` must be in [0.5, 1), got {level!r}")
    labels = None
    if column_group is not None:
        labels = np.asarray(column_group)
        if labels.shape != (t.shape[1],):
            raise ValueError(f"`column_group` must have one label per column ({t.shape[1]}), "
                             f"got shape {labels.shape}")
    var_full, var_deleted = _variance_shares(t)
    bias_full, bias_deleted = _cross_shares(t - u)
    variance = _two_way(var_full / B, var_deleted / B, labels)
    bias_sq = _two_way(bias_full, bias_deleted, labels)
    mse = _two_way(var_full / B + bias_full, var_deleted / B + bias_deleted, labels)
    return RunNoise(variance=_interval(variance, level, P), bias_sq=_interval(bias_sq, level, P),
                    mse=_interval(mse, level, P), n_groups=P, group_size=G, batch_size=B,
                    sketch_included=variance[3] is not None)
