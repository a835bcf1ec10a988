"""TRL's experimental asynchronous GRPO advantage (``trl.experimental.async_grpo``), as test data.

Extracted for tests/advantages/test_beyond_group_rules.py, which runs the conformance kit on
TRL's own arithmetic. Source: huggingface/trl at commit
f2cd57710ae345ea6428ae95363267fcf38a3dc8 (2026-07-24),
trl/experimental/async_grpo/async_rollout_worker.py lines 828-839
(AsyncRolloutWorker._score_group; the same lines are in the TRL 1.16.0 release). Apache License
2.0 (http://www.apache.org/licenses/LICENSE-2.0).

``_score_group`` is an async method over one group: it calls the reward functions and sums
their columns; :func:`score_group` is lines 828-839 with the reward functions' output
``all_rewards`` (one column per function) as its argument, unchanged otherwise;
:func:`async_grpo` passes each group's rewards as one column, as the worker scores each group
once. Nothing in ustat_rl imports this file.
"""
# ruff: noqa

import numpy as np


def score_group(all_rewards):
    all_rewards = [[r if r is not None else float("nan") for r in row] for row in all_rewards]
    arr = np.array(all_rewards, dtype=float)
    all_nan_mask = np.all(np.isnan(arr), axis=0)
    rewards = np.nansum(arr, axis=0)
    rewards[all_nan_mask] = np.nan

    scored_mask = ~np.isnan(rewards)
    # NOTE: for NaN reward we set advantage to 0 !
    advantages = np.zeros_like(rewards)
    if scored_mask.any():
        scored = rewards[scored_mask]
        advantages[scored_mask] = (scored - scored.mean()) / (scored.std() + 1e-8)
    return advantages


def async_grpo(rewards, group_ids):
    """The plain signature: ``rewards (n,)``, ``group_ids (n,)`` in any order."""
    rewards, group_ids = np.asarray(rewards), np.asarray(group_ids)
    out = np.zeros(rewards.shape)
    for g in np.unique(group_ids):
        members = group_ids == g
        out[members] = score_group([rewards[members].tolist()])
    return out
