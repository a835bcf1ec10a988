"""The reward-variance filter's figures in a monitored window (beyond the paper).

``EstimatorConfig(group_filter="reward_variance_top_p")`` (or a
:class:`~ustat_rl.theory.variance_filter.VarianceFilter`) puts, in each window's record, the
filter's keep rate over the window's earlier batches, each filtered as the trainer filters its
batch of ``B`` groups (``ds_keep_prob``; the share of groups it kept, no moment model), and the
exact MSE of GRPO's kept batch of ``B = N/G`` groups at the window's moments made binary
(``ds_filtered_mse``, :func:`~ustat_rl.theory.variance_filter.variance_filtered_moments`; a
point estimate). The filter masks groups and draws nothing again, so ``ds_gen_batches`` is 1.
"""

from __future__ import annotations

import math

import numpy as np

from ..theory.variance_filter import VarianceFilter, kept_groups, variance_filtered_moments

__all__ = ["variance_filter_figures"]

#: Level-count vectors enumerated for a window's MSE at most (about a second).
MAX_WINDOW_LEVELS = 100_000


def variance_filter_figures(batches, rollouts, G: int, budget: int,
                            spec: VarianceFilter) -> dict:
    """``ds_*`` figures of the reward-variance filter at the run's ``G`` (binary rewards for the
    MSE; ``None`` where a figure does not apply)."""
    out = dict(ds_group_filter=spec.name, ds_keep_prob=None, ds_gen_batches=None,
               ds_filtered_mse=None)
    if budget % G:
        return out
    earlier = [np.asarray(b.reward, dtype=np.float64).reshape(-1, G) for b in batches[:-1]]
    if earlier:
        kept = [kept_groups(r.var(axis=1, ddof=spec.ddof) if G > spec.ddof
                            else np.zeros(len(r)), spec) for r in earlier]
        out.update(ds_keep_prob=float(np.mean(np.concatenate(kept))), ds_gen_batches=1.0)
    binary = bool(np.all((rollouts.reward == 0.0) | (rollouts.reward == 1.0)))
    B = budget // G
    if binary and math.comb(B + G // 2, G // 2) <= MAX_WINDOW_LEVELS:
        from ..pilot.estimate import estimate_moments, pilot_statistics
        from ..theory.advantage import binary_projection

        moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
        out["ds_filtered_mse"] = float(variance_filtered_moments(moments, "grpo", G, B,
                                                                 spec).mse)
    return out
