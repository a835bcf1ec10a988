"""A monitored window's MSE for a run with several reward functions (docs/theory.md C52).

When the trainer combines several reward functions (TRL ``multi_objective_aggregation``), the
run's advantage is a multi-reward rule (:mod:`ustat_rl.advantages.multichannel`); G* and the
constants stay those of the paper's GRPO rule on the combined reward, and the MSE at the run's
``G`` is the multi-reward rule's, against the gradient of the weighted objective: the exact
finite-G theory for binary channels (:mod:`ustat_rl.theory.multichannel`; the large-batch limit
for a rule with a batch step) on the window's channel moments
(:func:`ustat_rl.pilot.channels.estimate_channel_moments`), a plug-in without an interval.
"""

from __future__ import annotations

import math

import numpy as np

from ..advantages.multichannel import MULTI_CHANNEL_RULES, get_multichannel_rule
from ..pilot.channels import estimate_channel_moments
from ..theory.multichannel import multichannel_moments

__all__ = ["is_multichannel", "multichannel_fields"]


def is_multichannel(rule) -> bool:
    """Whether ``rule`` names a multi-reward rule (not a single-reward rule of the registry)."""
    return isinstance(rule, str) and rule in MULTI_CHANNEL_RULES


def multichannel_fields(batches, rule: str, weights, budget: int) -> dict:
    """``estimator``, ``mse_run`` (estimate; NaN ends), ``var_run`` and ``mse_best`` of a window
    whose batches carry their per-function rewards (``Batch.channels``).

    Where the channels are missing, not binary, or too few prompts have two draws, the record
    keeps the paper's GRPO rule's values and ``estimator`` says why.
    """
    spec = get_multichannel_rule(rule)
    G = batches[-1].group_size
    channels = [b.channels for b in batches]
    if any(c is None for c in channels):
        return dict(estimator=f"grpo ({rule}: per-function rewards were not captured)")
    z = np.concatenate(channels)
    if not np.all((z == 0.0) | (z == 1.0)):
        return dict(estimator=f"grpo ({rule}: its exact MSE needs binary reward functions)")
    ids = np.concatenate([b.first_id + np.repeat(np.arange(b.n_groups), G) for b in batches])
    score = np.concatenate([b.score for b in batches])
    moments = estimate_channel_moments(ids, z, score)
    out = multichannel_moments(moments, spec, G, weights, max(budget // G, 1))
    limit = " (large-B limit)" if out.limit else ""
    return dict(estimator=f"{rule}: exact for binary channels{limit}, plug-in",
                mse_run={"estimate": float(out.mse), "low": math.nan, "high": math.nan},
                var_run=float(out.second_moment - out.mean_norm_sq), mse_best=math.nan)
