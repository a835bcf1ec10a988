"""NeMo-RL's REINFORCE++ advantage estimator (``grpo.adv_estimator.name=reinforce_plus_plus``),
as test data.

Extracted for tests/advantages/test_beyond_group_rules.py, which runs the conformance kit on
NeMo-RL's own code. Source: NVIDIA-NeMo/RL at commit 7ea279abfbeb698b092856d0dab61e7cf39bc909
(2026-08-22): nemo_rl/algorithms/advantage_estimator.py lines 193-267
(ReinforcePlusPlusAdvantageEstimator). Copyright (c) 2025, NVIDIA CORPORATION, Apache License
2.0 (http://www.apache.org/licenses/LICENSE-2.0).

The body is NeMo-RL's, unchanged. Changed around it: the two config classes in the annotations
(``AdvEstimatorConfig``, ``ClippedPGLossConfig``) are quoted, as their modules are not imported;
``calculate_baseline_and_std_per_prompt`` (nemo_rl/algorithms/utils.py lines 104-198) is the
copy in tests/data/nemo_rl_gdpo_7ea279ab.py, which the test sets on this module;
``calculate_kl`` is not called with ``use_kl_in_reward=False`` (the default of
examples/configs/grpo_math_1B.yaml). Nothing in ustat_rl imports this file.
"""
# ruff: noqa

import torch

calculate_baseline_and_std_per_prompt = None  # set by the test (see the docstring)
calculate_kl = None  # not called without a KL penalty in the reward


class ReinforcePlusPlusAdvantageEstimator:
    """Reinforce++ advantage estimator with optional baseline subtraction and KL penalty in reward.

    Args:
        minus_baseline: If True, subtract per-prompt mean baseline from rewards.
        use_kl_in_reward: If True, add KL penalty to reward instead of loss.
    """

    def __init__(
        self, estimator_config: "AdvEstimatorConfig", loss_config: "ClippedPGLossConfig"
    ):
        self.minus_baseline = estimator_config.minus_baseline
        self.use_kl_in_reward = loss_config.use_kl_in_reward
        self.kl_coef = loss_config.reference_policy_kl_penalty
        self.kl_type = loss_config.reference_policy_kl_type

    def compute_advantage(
        self,
        prompt_ids,
        rewards,
        mask,
        logprobs_policy=None,
        logprobs_reference=None,
        **kwargs,
    ):
        """Compute Reinforce++ advantages with optional KL penalty.

        Args:
            prompt_ids: Tensor of shape [batch_size] identifying which prompt each sample belongs to.
            rewards: Tensor of shape [batch_size] containing reward for each sample.
            mask: Response token mask of shape [batch_size, seq_len], 1 for valid response tokens, 0 for padding.
                  Used for: (1) expanding advantages to token-level shape, (2) global normalization
                  that only considers valid tokens.
            logprobs_policy: Policy log probabilities of shape [batch_size, seq_len], required if use_kl_in_reward.
            logprobs_reference: Reference policy log probabilities of shape [batch_size, seq_len], required if use_kl_in_reward.
            **kwargs: Additional arguments (unused).

        Returns:
            Advantages tensor of shape [batch_size, seq_len], globally normalized across valid tokens.
        """
        # minus baseline
        if self.minus_baseline:
            mean, _ = calculate_baseline_and_std_per_prompt(
                prompt_ids,
                rewards,
                torch.ones_like(rewards),
                leave_one_out_baseline=False,
            )
            adv = rewards - mean
        else:
            adv = rewards

        adv = adv.unsqueeze(-1)
        adv = adv.expand(mask.shape)

        # add kl penalty to reward (token-level)
        if (
            self.use_kl_in_reward
            and logprobs_policy is not None
            and logprobs_reference is not None
        ):
            kl = calculate_kl(
                logprobs_policy,
                logprobs_reference,
                kl_type=self.kl_type,
            )
            adv = adv - self.kl_coef * kl

        # global normalization across the batch
        adv_mean = (adv * mask).sum() / mask.sum()
        adv_var = ((adv - adv_mean).pow(2) * mask).sum() / mask.sum()
        adv_rstd = adv_var.clamp(min=1e-8).rsqrt()
        adv = (adv - adv_mean) * adv_rstd

        return adv
