"""SkyRL's loss reductions as advantage scalings, as test data.

Extracted for tests/frameworks/test_prompt_mean.py, which checks
ustat_rl.frameworks.aggregation.prompt_mean_weights against SkyRL's own arithmetic. Source:
NovaSky-AI/SkyRL at commit a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21),
skyrl/backends/skyrl_train/utils/ppo_utils.py lines 1152-1220
(apply_loss_reduction_to_advantages_minibatch) and its imports. Apache License 2.0
(http://www.apache.org/licenses/LICENSE-2.0).

The function is unchanged. SkyRL's trainer (skyrl/train/trainer.py) calls it once per
mini-batch with ``prompt_boundaries`` the mini-batch-relative ``(start, end)`` slices of each
prompt's samples, which lie together. Nothing in ustat_rl imports this file.
"""
# ruff: noqa

from typing import List, Optional, Tuple

import torch


def apply_loss_reduction_to_advantages_minibatch(
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_reduction: str,
    micro_batch_size: int,
    max_seq_len: int,
    prompt_boundaries: Optional[List[Tuple[int, int]]] = None,
) -> torch.Tensor:
    """Scale advantages so that summing produces the desired loss reduction.

    Args:
        advantages: Advantage tensor of shape (minibatch_size, seq_len).
            For step-wise training, minibatch_size can be variable.
        loss_mask: Mask of shape (minibatch_size, seq_len) indicating valid loss tokens.
        loss_reduction: One of "token_mean", "token_mean_legacy", "sequence_mean",
            "seq_mean_token_sum_norm", "prompt_mean".
        micro_batch_size: Number of sequences per micro-batch
        max_seq_len: Maximum sequence length.
        prompt_boundaries: Mini-batch-relative (start, end) slices grouping the sequences of
            each prompt. Required for "prompt_mean"; ignored otherwise.

    Returns:
        Scaled advantages tensor.
    """
    batch_size = advantages.shape[0]
    normalized_advantages = torch.zeros_like(advantages)

    # Option 1: token mean
    if loss_reduction == "token_mean":
        normalized_advantages = advantages / loss_mask.sum().clamp(min=1)

    # Option 1b: legacy token-mean that normalizes per-microbatch then averages across microbatches.
    elif loss_reduction == "token_mean_legacy":
        # FIXME(Charlie): For step-wise training, mini_batch_size can be variable, so the number of
        # microbatches depends on how we pad.
        num_micro_batches = batch_size // micro_batch_size
        for i in range(num_micro_batches):
            start_idx = i * micro_batch_size
            end_idx = (i + 1) * micro_batch_size
            mb_advantages = advantages[start_idx:end_idx]
            mb_loss_mask = loss_mask[start_idx:end_idx]
            mb_advantages = mb_advantages / mb_loss_mask.sum().clamp(min=1)
            mb_advantages /= num_micro_batches
            normalized_advantages[start_idx:end_idx] = mb_advantages

    # Option 2: sequence mean
    elif loss_reduction == "sequence_mean":
        normalized_advantages = advantages / (batch_size * loss_mask.sum(dim=-1, keepdim=True).clamp(min=1))

    # Option 3: Dr. GRPO style loss reduction to avoid length bias by normalizing by a constant
    elif loss_reduction == "seq_mean_token_sum_norm":
        normalized_advantages = advantages / (batch_size * max_seq_len)

    # Option 4: Prompt level mean - token mean within each prompt, then average over all prompts.
    # A "prompt" is a group of sequences sharing the same prompt (e.g. the n_samples_per_prompt
    # GRPO responses). Scale token [i, t] in prompt p by 1 / (num_prompts * tokens_in_prompt_p)
    # so that summing the per-token policy loss yields mean_p(token_mean within prompt p).
    elif loss_reduction == "prompt_mean":
        if prompt_boundaries is None:
            raise ValueError("`prompt_mean` loss reduction requires `prompt_boundaries`")
        num_prompts = len(prompt_boundaries)
        for p_start, p_end in prompt_boundaries:
            prompt_tokens = loss_mask[p_start:p_end].sum().clamp(min=1)
            normalized_advantages[p_start:p_end] = advantages[p_start:p_end] / (num_prompts * prompt_tokens)

    else:
        raise ValueError(f"Invalid loss reduction type: {loss_reduction}")

    return normalized_advantages
