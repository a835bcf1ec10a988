"""slime's default GRPO advantage (``--advantage-estimator grpo``), as test data.

Extracted for tests/advantages/test_beyond_group_rules.py, which runs the conformance kit on
slime's own arithmetic. Source: THUDM/slime at commit 624b824a898ab0ec1fcb4d373004c7f3852bf515
(2026-08-21), slime/ray/rollout.py lines 618-631 (RolloutManager._post_process_rewards, the
branch of ``advantage_estimator="grpo"`` with ``rewards_normalization`` and
``grpo_std_normalization`` on, both defaults). Apache License 2.0
(http://www.apache.org/licenses/LICENSE-2.0).

:func:`post_process_rewards` is those lines with ``self.args`` replaced by the two arguments
they read and the advantage-estimator checks dropped (``grpo`` is fixed); the arithmetic is
unchanged. When the batch is not ``n_samples_per_prompt * rollout_batch_size`` rewards, slime
takes the whole batch as one group (the ``else`` branch). Nothing in ustat_rl imports this file.
"""
# ruff: noqa

import torch


def post_process_rewards(raw_rewards, n_samples_per_prompt, rollout_batch_size):
    rewards = torch.tensor(raw_rewards, dtype=torch.float)
    if rewards.shape[-1] == n_samples_per_prompt * rollout_batch_size:
        rewards = rewards.reshape(-1, n_samples_per_prompt)
    else:
        # when samples count are not equal in each group
        rewards = rewards.view(-1, rewards.shape[-1])
    mean = rewards.mean(dim=-1, keepdim=True)
    rewards = rewards - mean

    std = rewards.std(dim=-1, keepdim=True)
    rewards = rewards / (std + 1e-6)

    return rewards.flatten().tolist()


def slime_grpo(rewards, n_samples_per_prompt):
    """TRL's signature (contiguous equal groups), the batch the size slime expects."""
    rewards = list(map(float, rewards))
    return post_process_rewards(rewards, n_samples_per_prompt,
                                len(rewards) // n_samples_per_prompt)
