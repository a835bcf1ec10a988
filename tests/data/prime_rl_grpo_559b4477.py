"""prime-rl's default GRPO advantage (``[orchestrator.algo] type = "grpo"``), as test data.

Extracted for tests/advantages/test_beyond_group_rules.py, which runs the conformance kit on
prime-rl's own arithmetic. Source: PrimeIntellect-ai/prime-rl at commit
559b44772e471d1538537b8805cc77f3824a5e64 (2026-08-21), src/prime_rl/orchestrator/algo/grpo.py
lines 26-30 (GRPOAlgorithm.score_group). Apache License 2.0
(http://www.apache.org/licenses/LICENSE-2.0).

``score_group`` is an async method over one group's episodes; :func:`grpo_group` is lines 27
and 30, the branch ``length_penalty is None`` (the default of GRPOAlgoConfig), with line 27's
``[trace.reward for trace in traces]`` replaced by the group's rewards; :func:`grpo` applies it
to each group, as the orchestrator calls ``score_group`` once per group. Nothing in ustat_rl
imports this file.
"""
# ruff: noqa

import numpy as np
import torch


def grpo_group(group_rewards):
    rewards = torch.tensor(group_rewards, dtype=torch.float32)
    advantages = rewards - rewards.mean()
    return advantages


def grpo(rewards, group_ids):
    """The plain signature: ``rewards (n,)``, ``group_ids (n,)`` in any order."""
    rewards, group_ids = np.asarray(rewards), np.asarray(group_ids)
    out = np.zeros(rewards.shape, dtype=np.float32)
    for g in np.unique(group_ids):
        members = group_ids == g
        out[members] = grpo_group(rewards[members].tolist()).numpy()
    return out
