"""Framework formulas written out for C46, continued: the options registered for issue 38.

:mod:`ustat_rl.claims.literal_forms` holds the form of every earlier option and the
:class:`~ustat_rl.claims.literal_forms.LiteralForm` record; the forms here join its
:data:`~ustat_rl.claims.literal_forms.LITERAL_FORMS` under the same rules (float64 arithmetic,
the framework's formula, epsilon and edge cases as read at the commit named, no code carried
over). Each entry of :data:`EXTRA_FORMS` is ``(fn, signature, repository, commit)``.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

__all__ = ["EXTRA_FORMS"]

_VERL = ("verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9")
_ROLL = ("alibaba/ROLL", "8eb27cc2dc34c4d1310b169d9b86d339004d811a")


# --------------------------------------------------------------------------------------------
# verl at 1dda039b: verl/trainer/ppo/core_algos.py (compute_opo_outcome_advantage). The
# baseline of a group of two or more is sum(T_i z_i) / sum(T_i), T_i the response lengths
# (response_mask.sum(-1)); a singleton's baseline is torch.tensor(0.0). The registered rule is
# the equal-length case, so the form is called with every T_i = 1 unless lengths are given.
# --------------------------------------------------------------------------------------------
def _verl_opo(rewards, group_ids, lengths=None):
    z = np.asarray(rewards, dtype=np.float64)
    T = np.ones(z.shape) if lengths is None else np.asarray(lengths, dtype=np.float64)
    members = defaultdict(list)
    for i, g in enumerate(np.asarray(group_ids).tolist()):
        members[g].append(i)
    out = np.empty(z.shape)
    for idx in members.values():
        baseline = 0.0 if len(idx) == 1 else float(T[idx] @ z[idx] / T[idx].sum())
        out[idx] = z[idx] - baseline
    return out


# --------------------------------------------------------------------------------------------
# ROLL at 8eb27cc2: roll/utils/functionals.py (reward_norm, norm_mean_type="batch",
# norm_std_type="batch"): the batch's mean, torch's Bessel std, 1e-6 added to it; the groups
# play no part.
# --------------------------------------------------------------------------------------------
def _roll_batch(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    dev = z - z[0]  # about the first value: an all-equal batch has std exactly 0, as torch's
    dev = dev - dev.mean()
    std = float(np.sqrt(np.sum(dev * dev) / (z.size - 1)))
    return dev / (std + 1e-6)


# --------------------------------------------------------------------------------------------
# AReaL at 4aef98d8: areal/utils/data.py (Normalization), areal/trainer/ppo/actor.py. The
# actor's reward_norm (mean_level="group", std_level="group", group_size = the samples per
# prompt) takes each slice of group_size rewards, its mean and its Bessel std (std_unbiased,
# the default; a slice of one: std 1), and gives (z - mean)/(std + 1e-5); adv_norm
# (mean_level="batch", std_level="batch") does the same over the whole batch of those values,
# one token per response. The rewards arrive with each prompt's samples together: ordered by
# group here, and put back in the caller's order.
# --------------------------------------------------------------------------------------------
def _standardise(x, eps=1e-5):
    dev = x - x[0]  # about the first value: a slice of equal values has deviations exactly 0
    dev = dev - dev.mean()
    std = float(np.sqrt(np.sum(dev * dev) / (x.size - 1))) if x.size > 1 else 1.0
    return dev / (std + eps)


def _areal(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    order = np.argsort(ids, kind="stable")
    size = int(np.count_nonzero(ids == ids[0]))
    first = np.concatenate([_standardise(z[order][i:i + size])
                            for i in range(0, z.size, size)])
    out = np.empty(z.shape)
    out[order] = _standardise(first)
    return out


_AREAL = ("inclusionAI/AReaL", "4aef98d8d818af55b43621aaadba047ae10f4e77")
_SLIME = ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515")


# --------------------------------------------------------------------------------------------
# slime at 624b824a: slime/ray/rollout.py (_post_process_rewards: rewards reshaped into
# (-1, n_samples_per_prompt), each row less its mean, no std division for
# reinforce_plus_plus_baseline), slime/backends/megatron_utils/loss.py (the value broadcast to
# every token, kl_coef 0) and slime/utils/distributed_utils.py (distributed_masked_whiten: mean
# and E[x^2] from sums over the tokens, variance E[x^2] - mean^2 times N/(N - 1) when N >= 2,
# multiplied by rsqrt(var + 1e-8)). One token per response.
# --------------------------------------------------------------------------------------------
def _slime_reinforce_pp_baseline(rewards, n_samples_per_prompt):
    rows = np.asarray(rewards, dtype=np.float64).reshape(-1, n_samples_per_prompt)
    c = (rows - rows.mean(axis=1, keepdims=True)).reshape(-1)
    n = c.size
    mean = c.sum() / n
    var = (c * c).sum() / n - mean**2
    if n >= 2:
        var = var * (n / (n - 1))
    return (c - mean) / np.sqrt(var + 1e-8)


#: ``name -> (fn, signature, repository, commit)``.
EXTRA_FORMS = {
    "verl_opo": (_verl_opo, "plain", *_VERL),
    "roll_batch": (_roll_batch, "plain", *_ROLL),
    "areal_grpo": (_areal, "plain", *_AREAL),
    "slime_reinforce_pp_baseline": (_slime_reinforce_pp_baseline, "trl", *_SLIME),
}
