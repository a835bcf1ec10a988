"""slime's REINFORCE++ baseline advantage (``--advantage-estimator
reinforce_plus_plus_baseline --normalize-advantages``), as test data.

Extracted for tests/advantages/test_more_rules.py, which runs the conformance kit on slime's own
arithmetic. Source: THUDM/slime at commit 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21):
slime/ray/rollout.py lines 608-633 (RolloutManager._post_process_rewards, the branch of
``reinforce_plus_plus_baseline`` with ``rewards_normalization`` on, the default: the group mean
subtracted, no std division), slime/utils/ppo_utils.py lines 448-475
(get_reinforce_plus_plus_baseline_advantages: the value broadcast to every token, less
``kl_coef`` times the KL), and slime/utils/distributed_utils.py lines 111-171
(distributed_masked_whiten, which slime/backends/megatron_utils/loss.py applies to every
response token because arguments.py requires ``--normalize-advantages`` for this estimator).
Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0).

Changes, none to the arithmetic: ``self.args`` replaced by the arguments the lines read; the
advantage-estimator checks dropped (``reinforce_plus_plus_baseline`` is fixed); and
``dist.all_reduce`` over the data-parallel group replaced by a stand-in for a group of one
process, whose sum over ranks is the identity. Nothing in ustat_rl imports this file.
"""
# ruff: noqa

from types import SimpleNamespace

import torch

# one data-parallel rank: the all-reduced sums are this rank's own
dist = SimpleNamespace(all_reduce=lambda tensor, group=None: None)


def post_process_rewards(raw_rewards, n_samples_per_prompt, rollout_batch_size):
    rewards = torch.tensor(raw_rewards, dtype=torch.float)
    if rewards.shape[-1] == n_samples_per_prompt * rollout_batch_size:
        rewards = rewards.reshape(-1, n_samples_per_prompt)
    else:
        # when samples count are not equal in each group
        rewards = rewards.view(-1, rewards.shape[-1])
    mean = rewards.mean(dim=-1, keepdim=True)
    rewards = rewards - mean

    return raw_rewards, rewards.flatten().tolist()


def get_reinforce_plus_plus_baseline_advantages(rewards, kl, loss_masks, kl_coef):
    # Broadcast to get unwhitened advantages
    unwhitened_advantages = [
        torch.ones_like(kl_tensor) * reward_val - kl_coef * kl_tensor
        for kl_tensor, reward_val in zip(kl, rewards, strict=False)
    ]

    return unwhitened_advantages


def distributed_masked_whiten(values, mask, process_group=None, shift_mean=True, epsilon=1e-8):
    # Calculate local intermediate statistics
    local_sum = (values * mask).sum()
    local_sum_sq = ((values**2) * mask).sum()
    local_mask_sum = mask.sum()

    stats_tensor = torch.tensor(
        [local_sum, local_sum_sq, local_mask_sum],
        device=values.device,
        dtype=torch.float32,
    )

    # Aggregate via all_reduce within the DP group
    dist.all_reduce(stats_tensor, group=process_group)

    # Calculate global stats from aggregated results
    global_sum, global_sum_sq, global_mask_sum = stats_tensor

    if global_mask_sum.item() == 0:
        raise ValueError("The global mask sum across all participating GPUs is zero.")

    global_mean = global_sum / global_mask_sum
    global_mean_sq = global_sum_sq / global_mask_sum
    global_var = global_mean_sq - global_mean**2

    # Bessel's correction for unbiased estimate
    if global_mask_sum.item() >= 2:
        bessel_correction = global_mask_sum / (global_mask_sum - 1)
        global_var = global_var * bessel_correction

    # Whiten local data using global stats
    whitened_values = (values - global_mean) * torch.rsqrt(global_var + epsilon)

    if not shift_mean:
        whitened_values += global_mean

    return whitened_values


def slime_reinforce_pp_baseline(rewards, n_samples_per_prompt, response_length=1):
    """TRL's signature (contiguous equal groups), the batch the size slime expects, every
    response ``response_length`` tokens, ``kl_coef`` 0 (the default), as loss.py chains them."""
    raw = list(map(float, rewards))
    _, centred = post_process_rewards(raw, n_samples_per_prompt, len(raw) // n_samples_per_prompt)
    centred = torch.tensor(centred, dtype=torch.float32)
    kl = [torch.zeros(response_length) for _ in raw]
    masks = [torch.ones(response_length) for _ in raw]
    advantages = get_reinforce_plus_plus_baseline_advantages(centred, kl, masks, 0.0)
    whitened = distributed_masked_whiten(torch.cat(advantages), torch.cat(masks))
    return whitened.reshape(len(raw), response_length)[:, 0].numpy()
