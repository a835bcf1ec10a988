"""Replicates shared by the pilot's interval methods (docs/theory.md section 7, C32).

The jackknife of :mod:`ustat_rl.pilot.uncertainty` and the bootstrap of
:mod:`ustat_rl.pilot.bootstrap` resample the same per-prompt, per-column summary of a pilot; this
module owns that summary, its delete-one replicates (over prompts, over projection rows or the
blocks of a factored sketch, and both at once), the affine map from a summary to any statistic of
the moments, and the checks a pilot must pass before either method runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..theory import PromptMoments, scaling_constants
from .estimate import SCORE_MOMENTS, PilotStatistics, pilot_statistics

__all__ = ["SUMMARY_FIELDS", "affine_map", "as_moments", "block_labels", "cell_replicates",
           "check_pilot_rule", "checked_statistics", "constants_vector", "jackknife_cov", "pilot_summary", "sketch_cov",
           "two_way_cov"]

NON_SCORE_FIELDS = ("value", "reward_var")
SUMMARY_FIELDS = NON_SCORE_FIELDS + SCORE_MOMENTS + ("grad_norm_sq",)


def block_labels(stats: PilotStatistics) -> np.ndarray:
    """``(k, m)`` indicator of the independent projection blocks: one per column unless the
    sketch is factored (``PilotStatistics.column_group``, C31)."""
    group = np.arange(stats.n_columns) if stats.column_group is None else stats.column_group
    return (np.asarray(group)[:, None] == np.unique(group)[None, :]).astype(float)


def pilot_summary(stats: PilotStatistics) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Prompt averages of every field and ``||g||^2``: full ``(9,)``, leave-one-prompt-out
    ``(P, 9)`` and leave-one-block-out ``(m, 9)`` (``None`` for full scores)."""
    P, k = stats.n_prompts, block_labels(stats).shape[1]
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
    n0 = len(NON_SCORE_FIELDS)
    shares = np.column_stack([stats.columns[n].mean(axis=0) for n in SCORE_MOMENTS]
                             + [(total * total - np.sum(gm * gm, axis=0)) / (P * (P - 1.0))])
    shares = block_labels(stats).T @ shares  # (k, 8): one share per block
    column_reps = np.tile(full, (k, 1))  # (k, 9); reward fields do not involve R
    column_reps[:, n0:] = k / (k - 1.0) * (full[None, n0:] - shares)
    return full, prompt_reps, column_reps


def cell_replicates(stats: PilotStatistics, prompts: slice) -> np.ndarray:
    """Summaries without prompt ``a`` and projection row ``r``: ``(p, k, 9)`` for ``a`` in
    ``prompts`` (the double deletions behind the interaction term); ``r`` runs over blocks."""
    blocks = block_labels(stats)  # (columns, k)
    P, k = stats.n_prompts, blocks.shape[1]
    n0 = len(NON_SCORE_FIELDS)
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


def jackknife_cov(values: np.ndarray) -> np.ndarray:
    """Delete-one jackknife covariance ``(m - 1)/m sum (t_i - t_bar)(t_i - t_bar)^T``."""
    m = values.shape[0]
    centred = values - values.mean(axis=0)
    return (m - 1.0) / m * centred.T @ centred


def sketch_cov(row_values: np.ndarray, interaction: np.ndarray, n_prompts: int) -> np.ndarray:
    """The jackknife over ``k`` projection rows (or blocks) less the prompt-by-row interaction
    both one-way jackknifes contain: ``jackknife_cov(row_values) - (P-1)(k-1)/(P k) interaction``,
    ``interaction = sum_ar D_ar D_ar^T`` over the double deletions (:func:`two_way_cov`)."""
    P, k = n_prompts, row_values.shape[0]
    return jackknife_cov(row_values) - (P - 1.0) * (k - 1.0) / (P * k) * interaction


#: Prompts per block of double-deletion replicates (bounds memory at ``block * k * 9`` floats).
CELL_BLOCK_ELEMENTS = 1 << 20


def two_way_cov(stats: PilotStatistics, fn: Callable[[np.ndarray], np.ndarray],
                 include_sketch: bool):
    """``(estimate, cov_prompt, cov_sketch)`` of the vectorised statistic ``fn(summary)``.

    ``cov_prompt`` is the jackknife over prompts. ``cov_sketch`` is the jackknife over
    projection rows minus the prompt-by-row interaction, which both one-way jackknifes contain:
    for a mean of a ``P x k`` two-way array the prompt jackknife estimates
    ``(s_A^2 + s_AR^2/k)/P`` and the row jackknife ``(s_R^2 + s_AR^2/P)/k``; the double
    deletions estimate ``s_AR^2/(P k)`` by ``(P-1)(k-1)/(P k) sum_ar D_ar D_ar^T`` with
    ``D_ar = t_(-a,-r) - t_(-a) - t_(-r) + t``.
    """
    full, prompt_reps, row_reps = pilot_summary(stats)
    estimate = fn(full[None, :])[0]
    t_prompt = fn(prompt_reps)  # (P, q)
    cov_prompt = jackknife_cov(t_prompt)
    cov_sketch = np.zeros_like(cov_prompt)
    if include_sketch and row_reps is not None:
        P, k = stats.n_prompts, row_reps.shape[0]
        t_row = fn(row_reps)  # (k, q)
        interaction = np.zeros_like(cov_prompt)
        block = max(1, CELL_BLOCK_ELEMENTS // (9 * k))
        for start in range(0, P, block):
            rows = slice(start, min(P, start + block))
            cells = fn(cell_replicates(stats, rows).reshape(-1, full.size))
            d = (cells.reshape(rows.stop - rows.start, k, -1) - t_prompt[rows, None, :]
                 - t_row[None, :, :] + estimate[None, None, :]).reshape(-1, estimate.size)
            interaction += d.T @ d
        cov_sketch = sketch_cov(t_row, interaction, P)
    return estimate, cov_prompt, cov_sketch


def as_moments(summary: np.ndarray) -> PromptMoments:
    """One pseudo-prompt holding the prompt averages: the scaling constants and minibatch MSEs
    depend on the moments only through them and ``||g||^2`` (C6, C17)."""
    fields = dict(zip(SUMMARY_FIELDS[:-1], (np.array([v]) for v in summary[:-1])))
    return PromptMoments(prompt_prob=np.ones(1), grad_gram=fields["grad_sq"][:, None],
                         kind="estimated", grad_norm_sq=float(summary[-1]), **fields)


def check_pilot_rule(name: str, estimator, binary: bool) -> None:
    """One-line ``ValueError`` when a pilot cannot give the MSE of ``estimator`` (the
    :class:`~ustat_rl.advantages.AdvantageRule` called ``name``): a rule that subtracts a
    baseline ``b(x)`` drawn apart from the group (verl's remax) needs ``b``, which no pilot
    holds (else :func:`affine_map` would refuse it in terms of its own ``statistic``); a rule
    that scales its advantages needs 0/1 rewards (``binary``) for its exact MSE."""
    if estimator.centring.kind == "baseline":
        raise ValueError(f"`estimator` {name!r} subtracts a baseline b(x) drawn apart from the "
                         "group (verl's remax: the greedy rollout's reward), which pilot "
                         "rollouts do not hold, so its MSE and G* cannot be estimated from them; "
                         "use a group rule (grpo, trl_group, verl_grpo, ...)")
    if not estimator.is_affine and not binary:
        raise ValueError(f"`estimator` {name!r} scales its advantages; its exact MSE needs "
                         "rewards in {0, 1}")


def affine_map(statistic: Callable[[PromptMoments], np.ndarray], full: np.ndarray):
    """``(t(full), J)`` with ``t(s) = t(full) + J (s - full)``, read off at unit steps; raises
    unless ``statistic`` is affine in the summary (checked at one more point)."""
    n = full.size

    def evaluate(summary):
        return np.atleast_1d(np.asarray(statistic(as_moments(summary)), dtype=float))

    estimate = evaluate(full)
    # steps away from 0, so that no coordinate lands on exactly 0, where a rule's formula may
    # take another (equal only for exact moments) form
    steps = np.where(full < 0.0, -1.0, 1.0) * np.maximum(np.abs(full), 1e-3)  # (n,)
    jac = np.column_stack([(evaluate(full + steps[j] * np.eye(n)[j]) - estimate) / steps[j]
                           for j in range(n)])  # (q, n)
    probe = full + 0.5 * steps * np.linspace(-1.0, 1.0, n)
    if not np.allclose(evaluate(probe), estimate + jac @ (probe - full), rtol=1e-6,
                       atol=1e-9 * max(1.0, float(np.max(np.abs(estimate))))):
        raise ValueError("`statistic` must be affine in the prompt-averaged moments and "
                         "||g||^2 (a scaling constant or a minibatch MSE)")
    return estimate, jac


def checked_statistics(rollouts) -> PilotStatistics:
    stats = rollouts if isinstance(rollouts, PilotStatistics) else pilot_statistics(rollouts)
    if stats.prompt_prob is not None:
        raise ValueError("`rollouts` must have i.i.d. prompts (no `prompt_weight`) for intervals: "
                         "the prompt jackknife resamples prompts drawn from f")
    if stats.n_prompts < 3:
        raise ValueError(f"`rollouts` must hold >= 3 prompts for a jackknife, got "
                         f"{stats.n_prompts}")
    return stats


def constants_vector(m: PromptMoments) -> np.ndarray:
    c = scaling_constants(m)
    return np.array([c.c1, c.c2, c.c3])
