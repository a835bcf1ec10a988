"""The frameworks' own normalisation code (copied to tests/data) called as their trainers call it,
in the ``rewards, group_ids -> advantages`` signature: the advantage tests pass it to the
conformance kit and the literal-form tests (C46) compare the literal forms with it."""

from __future__ import annotations

import numpy as np
import torch
from script_loader import load_data


def areal_normalization(reward_norm=None, adv_norm=None, second_stage=True):
    """AReaL's own Normalization, called as its actor calls it: ``reward_norm`` on the rewards
    in contiguous groups, then ``adv_norm`` on ``(n, 1)`` advantages with a loss mask of ones
    (one token per response). ``reward_norm`` and ``adv_norm`` override NormConfig fields."""
    areal = load_data("areal_normalization_4aef98d8")

    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards))
        ids = np.asarray(group_ids)
        order = torch.as_tensor(np.argsort(ids, kind="stable"))
        G = int(np.unique(ids, return_counts=True)[1][0])
        first = areal.Normalization(areal.NormConfig(
            mean_level="group", std_level="group", group_size=G, **(reward_norm or {})))
        score = first(z[order])
        if second_stage:
            second = areal.Normalization(areal.NormConfig(mean_level="batch", std_level="batch",
                                                          **(adv_norm or {})))
            score = second(score[:, None], torch.ones(z.numel(), 1))[:, 0]
        out = torch.empty_like(score)
        out[order] = score
        return out.numpy()
    return fn


def roll_reward_norm(norm, state=None):
    """ROLL's own reward_norm with mean and std of kind ``norm``; ``running`` uses ``state``
    (a fresh RunningMoments per call when None)."""
    roll = load_data("roll_reward_norm_8eb27cc2")

    def fn(rewards, group_ids):
        ctrl = {"domain": state if state is not None else roll.RunningMoments()}
        z = torch.as_tensor(np.asarray(rewards))
        return roll.reward_norm(z, running_ctrl=ctrl, norm_mean_type=norm,
                                norm_std_type=norm).numpy()
    return fn
