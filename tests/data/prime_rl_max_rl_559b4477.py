"""prime-rl's MaxRL advantage (``[orchestrator.algo] type = "max_rl"``), as test data.

Extracted for tests/advantages/test_new_rules.py, which runs the conformance kit on prime-rl's own
arithmetic. Source: PrimeIntellect-ai/prime-rl at commit
559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21), src/prime_rl/orchestrator/algo/max_rl.py
lines 22-28 (MaxRLAlgorithm.score_group). Apache License 2.0
(http://www.apache.org/licenses/LICENSE-2.0).

``score_group`` is an async method over one group's episodes that reads each trace's reward
and hands each advantage to ``assign_advantages``; :func:`max_rl_group` is lines 24-26, which
compute the advantages, with line 24's ``[trace.reward for trace in traces]`` replaced by the
group's rewards and lines 25-26 unchanged; :func:`max_rl` applies it to each group, as the
orchestrator calls ``score_group`` once per group. Nothing in ustat_rl imports this file.
"""
# ruff: noqa

import numpy as np
import torch


def max_rl_group(group_rewards):
    rewards = torch.tensor(group_rewards, dtype=torch.float32)
    mean = rewards.mean()
    advantages = torch.zeros_like(rewards) if mean <= 0 else (rewards - mean) / mean
    return advantages


def max_rl(rewards, group_ids):
    """The plain signature: ``rewards (n,)``, ``group_ids (n,)`` in any order."""
    rewards, group_ids = np.asarray(rewards), np.asarray(group_ids)
    out = np.zeros(rewards.shape, dtype=np.float32)
    for g in np.unique(group_ids):
        members = group_ids == g
        out[members] = max_rl_group(rewards[members].tolist()).numpy()
    return out
