"""OpenRLHF's REINFORCE advantage path (``--algo.advantage.estimator reinforce``), as test data.

Extracted for tests/advantages/test_new_rules.py, which runs the conformance kit on OpenRLHF's own code.
Source: OpenRLHF/OpenRLHF at commit 3c3be6234e0cb353e76bb8019947db9dfe99fca7 (2026-08-13),
openrlhf/trainer/ppo_utils/experience_maker.py lines 237-331
(RemoteExperienceMaker.compute_advantages_and_returns) and 379-411 (get_cumulative_returns),
and openrlhf/models/utils.py lines 98-126 (compute_reward). Apache License 2.0
(http://www.apache.org/licenses/LICENSE-2.0).

The bodies are OpenRLHF's, unchanged; the two methods are dedented to module functions that
take ``self``. Stubbed around them: ``apply_length_penalties`` (a no-op with
``--reward.overlong_buffer_len`` and ``--reward.stop_properly_penalty_coef`` unset, their
defaults) and ``logger``. :func:`reinforce` builds one experience of one-token responses and
calls the method with the KL coefficient 0 and no reward clip: the KL shaping and the
``--reward.clip_range`` clamp (default -10, 10) are not functions of the rewards alone, and the
conformance kit draws rewards offset by 1e6. Nothing in ustat_rl imports this file.
"""
# ruff: noqa

import itertools
import logging
from types import SimpleNamespace
from typing import List, Optional, Tuple, Union

import torch

logger = logging.getLogger(__name__)
Experience = SimpleNamespace  # the annotations name it


def apply_length_penalties(experiences, args):
    return None


def compute_reward(
    r: Union[torch.Tensor, float],
    kl_coef: float,
    kl: Union[torch.Tensor, list[torch.Tensor]],
    action_mask: Optional[torch.Tensor] = None,
    reward_clip_range: Tuple[float, float] = None,
) -> Union[torch.Tensor, list[torch.Tensor]]:
    if kl_coef <= 0.0:
        kl_coef = 0.0

    if reward_clip_range:
        r = r.clamp(min=reward_clip_range[0], max=reward_clip_range[1])

    kl_reward = -kl_coef * kl
    # The following code is equivalent to:
    #
    # last_reward = torch.zeros_like(kl)
    # for i in range(last_reward.size(0)):
    #     for t in reversed(range(last_reward.size(1))):
    #         if action_mask[i][t] > 0.5:
    #             last_reward[i][t] = r[i]
    #             break
    #
    eos_indices = action_mask.size(1) - 1 - action_mask.long().fliplr().argmax(dim=1, keepdim=True)
    last_reward = torch.zeros_like(kl).scatter_(dim=1, index=eos_indices, src=r.unsqueeze(1).to(kl.dtype))

    reward = last_reward + kl_reward

    return reward


@torch.no_grad()
def compute_advantages_and_returns(self, experiences: List[Experience]) -> List[Experience]:
    """Compute shaped rewards, advantages, and returns for a batch of experiences."""
    args = self.strategy.args

    # ── Length penalties (DAPO overlong / ProRL stop properly) ──
    apply_length_penalties(experiences, args)

    # ── Reward shaping (baseline subtraction) ──
    exp_len = [len(experience.index) for experience in experiences]
    indices = torch.tensor(list(itertools.chain.from_iterable(experience.index for experience in experiences)))
    raw_rewards = torch.cat([experience.rewards for experience in experiences], dim=0)
    rewards = torch.empty_like(raw_rewards)
    rewards[indices] = raw_rewards  # sorted by original prompt order

    rewards = rewards.reshape(-1, args.rollout.n_samples_per_prompt)

    if args.rollout.n_samples_per_prompt > 1:
        group_reward_stds = (
            rewards.std(-1, keepdim=True)
            .repeat(1, args.rollout.n_samples_per_prompt)
            .reshape(-1)[indices]
            .split(exp_len)
        )
        for experience, group_reward_std in zip(experiences, group_reward_stds):
            experience.info["group_reward_std"] = group_reward_std

    if args.algo.advantage.estimator == "rloo":
        baseline = (rewards.sum(-1, keepdim=True) - rewards) / (args.rollout.n_samples_per_prompt - 1)
        rewards = rewards - baseline
    elif args.algo.advantage.estimator in ["reinforce_baseline", "dr_grpo"]:
        rewards = rewards - rewards.mean(-1, keepdim=True)
    elif args.algo.advantage.estimator == "group_norm":
        rewards = (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-9)

    rewards = rewards.reshape(-1)[indices].split(exp_len)

    # ── Per-token advantages and returns ──
    for experience, reward in zip(experiences, rewards):
        reward = compute_reward(
            reward,
            self.kl_ctl.value,
            experience.kl,
            action_mask=experience.action_mask,
            reward_clip_range=args.reward.clip_range,
        )

        if self.advantage_estimator == "gae":
            experience.advantages, experience.returns = self.get_advantages_and_returns(
                experience.values,
                reward,
                experience.action_mask,
                args.algo.advantage.gamma,
                args.algo.advantage.lambd,
            )
        elif self.advantage_estimator in ["reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo"]:
            if args.algo.advantage.gamma != 1.0 and self.advantage_estimator in [
                "rloo",
                "reinforce_baseline",
                "group_norm",
                "dr_grpo",
            ]:
                logger.warning("gamma is set to 1.0 for rloo, reinforce_baseline, and group_norm")
                args.algo.advantage.gamma = 1.0

            experience.returns = self.get_cumulative_returns(
                reward,
                experience.action_mask,
                args.algo.advantage.gamma,
            )
            experience.advantages = experience.returns.clone()
        else:
            raise Exception(f"Unkown advantage_estimator {self.advantage_estimator}")

        experience.info["return"] = reward.sum(dim=-1)
        experience.kl = None

    # ── Normalize advantages across all experiences ──
    if args.algo.advantage.estimator in ["gae", "reinforce", "reinforce_baseline"]:
        all_advantages = torch.cat([exp.advantages.flatten() for exp in experiences], dim=0).float()
        all_action_masks = torch.cat([exp.action_mask.flatten() for exp in experiences], dim=0)
        num_actions = all_action_masks.sum()

        mean = (all_advantages * all_action_masks).sum() / num_actions
        if not args.algo.advantage.no_std_norm:
            var = ((all_advantages - mean).pow(2) * all_action_masks).sum() / num_actions
            rstd = var.clamp(min=1e-8).rsqrt()
        else:
            rstd = 1

        for exp in experiences:
            exp.advantages = (exp.advantages - mean) * rstd

    return experiences



@torch.no_grad()
def get_cumulative_returns(
    self,
    rewards: torch.Tensor,
    action_mask: torch.Tensor,
    gamma: float,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    Function that computes advantages and returns from rewards using REINFORCE.
    REINFORCE uses cumulative returns without the GAE (Generalized Advantage Estimation).

    Input:
    - rewards: Tensor of shape (batch_size, response_size)
    - action_mask: Tensor of shape (batch_size, response_size), binary mask
    - gamma: discount factor

    Output:
    - returns: Tensor of shape (batch_size, response_size)
    """
    response_length = rewards.size(1)
    returns = torch.zeros_like(rewards)
    cumulative_return = torch.zeros(rewards.size(0), device=rewards.device)

    # Mask invalid responses if action_mask is provided
    if action_mask is not None:
        rewards = action_mask * rewards

    # Calculate returns by accumulating discounted rewards
    for t in reversed(range(response_length)):
        cumulative_return = rewards[:, t] + gamma * cumulative_return
        returns[:, t] = cumulative_return

    return returns


def reinforce(rewards, n_samples_per_prompt):
    """``--algo.advantage.estimator reinforce`` on one batch of one-token responses, rewards
    ``(n,)`` in prompt order, through the method above; returns the advantages ``(n,)``."""
    rewards = torch.as_tensor(rewards)
    n = rewards.numel()
    experience = SimpleNamespace(index=list(range(n)), rewards=rewards, info={},
                                 action_mask=torch.ones(n, 1, dtype=torch.bool),
                                 kl=torch.zeros(n, 1, dtype=rewards.dtype), values=None)
    args = SimpleNamespace(
        rollout=SimpleNamespace(n_samples_per_prompt=n_samples_per_prompt),
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator="reinforce", gamma=1.0,
                                                       lambd=1.0, no_std_norm=False)),
        reward=SimpleNamespace(clip_range=None))
    maker = SimpleNamespace(strategy=SimpleNamespace(args=args), kl_ctl=SimpleNamespace(value=0.0),
                            advantage_estimator="reinforce")
    maker.get_cumulative_returns = lambda *a: get_cumulative_returns(maker, *a)
    (out,) = compute_advantages_and_returns(maker, [experience])
    return out.advantages[:, 0]
