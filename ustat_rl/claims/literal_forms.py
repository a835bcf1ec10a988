"""Each framework's advantage formula as the framework writes it, for C46 (docs/theory.md C46).

The registry (:mod:`ustat_rl.advantages.conventions`) states every framework option as data (a
centring, a scaling, an epsilon and its placement, the edge-case rules) and one evaluator
computes all of them; a wrong field there would pass every check that compares a rule with
itself. The functions below are a second route: each option's arithmetic written out the way
its source computes it (reshape into ``(-1, G)`` for TRL and OpenRLHF, a loop over verl's uid
groups with the mean 0 and std 1 it substitutes for a singleton, the leave-one-out baseline and
its std of the others for NeMo-RL, ...), in the framework's own call signature, from the
sources at the commits the registry records; only formulas, epsilons and edge-case rules carry
over, no code. Arithmetic is float64 throughout: C46 compares them with the registry through
the conformance kit's comparison, whose bound covers any working precision from float32 up.

Each entry of :data:`LITERAL_FORMS` holds the form, the kit's signature that calls it (``"trl"``:
``fn(rewards, num_generations)`` on contiguous equal groups, as TRL and OpenRLHF reshape;
``"verl"``: ``fn(token_level_rewards, response_mask, index)`` returning ``(n, T)`` advantages;
``"plain"``: ``fn(rewards, group_ids)``) and the repository and commit it was read at, which the
claim compares with the registry's provenance, so that a re-pinned rule needs its form re-read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["LiteralForm", "LITERAL_FORMS", "masked_whiten"]

_TRL = ("huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8")
_VERL = ("verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9")
_ORLHF = ("OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7")
_NEMO = ("NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909")
_PRIME = ("PrimeIntellect-ai/prime-rl", "559b44772e471d1538537b8805cc77f3824a5e64")
_SKYRL = ("NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265")
_SLIME = ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515")
_ROLL = ("alibaba/ROLL", "8eb27cc2dc34c4d1310b169d9b86d339004d811a")
_AREAL = ("inclusionAI/AReaL", "4aef98d8d818af55b43621aaadba047ae10f4e77")
_RLLM = ("rllm-org/rllm", "9beb6e0f676a46d38858991fd79ac5f8e0b16d4c")
_AREAL_2 = ("areal-project/AReaL", "cbff54d645d2cd8ee1f1c358a82f3f473588433d")
_PAPER = ("", "")


@dataclass(frozen=True)
class LiteralForm:
    """One framework option written out: ``fn`` in the kit's ``signature``, read at ``commit``
    of ``repository`` (both empty for the paper's rules)."""

    fn: Callable
    signature: str
    repository: str
    commit: str


def _bessel_std(values) -> float:
    """``sqrt(sum (x - mean)^2 / (n - 1))`` about the first value (exact ties give exactly 0,
    as ``torch.std`` of equal values does)."""
    dev = values - values[0]
    dev = dev - dev.mean()
    return float(np.sqrt(np.sum(dev * dev) / (values.size - 1)))


# --------------------------------------------------------------------------------------------
# TRL, huggingface/trl at f2cd5771: trl/trainer/grpo_trainer.py
# (GRPOTrainer._generate_and_score_completions, multi_objective_aggregation="sum_then_normalize"
# with one reward function) and trl/trainer/rloo_trainer.py (RLOOTrainer's advantages).
# --------------------------------------------------------------------------------------------
def _trl_grpo(scale: str):
    def advantages(rewards, num_generations):
        z = np.asarray(rewards, dtype=np.float64)
        rows = z.reshape(-1, num_generations)  # rewards.view(-1, num_generations)
        mean = np.repeat(rows.mean(axis=1), num_generations)  # repeat_interleave
        if scale == "batch":  # nanstd over the batch, zeros for a batch of one
            std = np.full(z.shape, _bessel_std(z) if z.size > 1 else 0.0)
        elif num_generations > 1:  # "group" (and "none", where it is for logging only)
            std = np.repeat([_bessel_std(r) for r in rows], num_generations)
        else:
            std = np.zeros(z.shape)
        out = z - mean
        return out if scale == "none" else out / (std + 1e-4)
    return advantages


def _trl_rloo(normalize: bool):
    def advantages(rewards, num_generations):
        z = np.asarray(rewards, dtype=np.float64)
        rows = z.reshape(-1, num_generations)
        if num_generations > 1:  # baseline: the others' sum over num_generations - 1
            out = (rows - (rows.sum(axis=1, keepdims=True) - rows) / (num_generations - 1))
            out = out.reshape(-1)
        else:
            out = np.zeros(z.shape)
        if normalize:  # over the batch: (a - nanmean(a)) / (nanstd(a) + 1e-4)
            out = (out - out.mean()) / (_bessel_std(out) + 1e-4)
        return out
    return advantages


# --------------------------------------------------------------------------------------------
# OpenRLHF, OpenRLHF/OpenRLHF at 3c3be623: openrlhf/trainer/ppo_utils/experience_maker.py
# (compute_advantages_and_returns: rewards.reshape(-1, n_samples_per_prompt), then for
# "reinforce" and "reinforce_baseline" the whitening over all action tokens, at gamma = 1 with
# one token per response).
# --------------------------------------------------------------------------------------------
def _openrlhf(estimator: str):
    def advantages(rewards, n_samples_per_prompt):
        z = np.asarray(rewards, dtype=np.float64)
        rows = z.reshape(-1, n_samples_per_prompt)
        if estimator == "rloo":
            rows = rows - (rows.sum(axis=1, keepdims=True) - rows) / (n_samples_per_prompt - 1)
        elif estimator in ("reinforce_baseline", "dr_grpo"):
            rows = rows - rows.mean(axis=1, keepdims=True)
        elif estimator == "group_norm":
            std = np.array([[_bessel_std(r)] for r in rows])
            rows = (rows - rows.mean(axis=1, keepdims=True)) / (std + 1e-9)
        out = rows.reshape(-1)
        if estimator in ("reinforce", "reinforce_baseline"):  # population variance, floored
            mean = out.sum() / out.size
            var = ((out - mean) ** 2).sum() / out.size
            out = (out - mean) / np.sqrt(max(var, 1e-8))
        return out
    return advantages


# --------------------------------------------------------------------------------------------
# verl, verl-project/verl at 1dda039b: verl/trainer/ppo/core_algos.py (compute_*_advantage),
# verl/utils/groupwise.py (the vectorised GRPO's group statistics) and
# verl/utils/torch_functional.py (masked_mean, masked_var, masked_whiten).
# --------------------------------------------------------------------------------------------
def _uid_groups(index) -> dict:
    """verl's id2score loop: sample positions per uid, in order of first appearance."""
    groups: dict = {}
    for i, uid in enumerate(np.asarray(index).tolist()):
        groups.setdefault(uid, []).append(i)
    return groups


def masked_whiten(values, mask):
    """verl's masked_whiten: the mean and the Bessel-corrected variance over the mask, each sum
    divided by ``mask.sum() + 1e-8``, then ``(values - mean) / sqrt(var + 1e-8)``."""
    count = mask.sum()
    mean = (values * mask).sum() / (count + 1e-8)
    var = ((values - mean) ** 2 * mask).sum() / (count + 1e-8) * (count / (count - 1))
    return (values - mean) / np.sqrt(var + 1e-8)


def _verl_grpo(norm_by_std: bool, vectorized: bool = False, epsilon: float = 1e-6):
    def advantages(token_level_rewards, response_mask, index):
        scores = np.asarray(token_level_rewards, dtype=np.float64).sum(axis=-1)
        # the vectorised path computes the group statistics in float32 (groupwise.py)
        stats = scores.astype(np.float32) if vectorized else scores
        out = np.empty(scores.shape)
        for members in _uid_groups(index).values():
            if len(members) == 1:  # torch.tensor(0.0), and torch.tensor(1.0) + epsilon: float32
                mean, divisor = 0.0, float(np.float32(1.0) + np.float32(epsilon))
            else:
                mean = float(stats[members].mean())
                divisor = float(stats[members].std(ddof=1)) + epsilon
            centred = scores[members] - mean
            out[members] = centred / divisor if norm_by_std else centred
        return out[:, None] * np.asarray(response_mask)
    return advantages


def _verl_rloo(vectorized: bool):
    def advantages(token_level_rewards, response_mask, index):
        scores = np.asarray(token_level_rewards, dtype=np.float64).sum(axis=-1)
        out = np.empty(scores.shape)
        for members in _uid_groups(index).values():
            n = len(members)
            total = scores[members].sum()
            for i in members:
                if vectorized:  # (n s - sum)/(n - 1), times (n > 1)
                    out[i] = (n * scores[i] - total) / max(n - 1, 1) * (n > 1)
                elif n > 1:  # s n/(n - 1) - mean n/(n - 1)
                    out[i] = scores[i] * n / (n - 1) - total / n * n / (n - 1)
                else:  # a singleton is left as it is
                    out[i] = scores[i]
        return out[:, None] * np.asarray(response_mask)
    return advantages


def _verl_reinforce_pp(baseline: bool):
    def advantages(token_level_rewards, response_mask, index):
        rewards = np.asarray(token_level_rewards, dtype=np.float64)
        mask = np.asarray(response_mask, dtype=np.float64)
        if baseline:  # scores less the group mean (0 for a singleton), tiled over the tokens
            scores = rewards.sum(axis=-1)
            for members in _uid_groups(index).values():
                if len(members) > 1:
                    scores[members] = scores[members] - scores[members].mean()
            values = np.tile(scores[:, None], (1, rewards.shape[1])) * mask
        else:  # the returns at gamma = 1, carried through masked positions
            values, running = np.zeros(rewards.shape), np.zeros(rewards.shape[0])
            for t in reversed(range(rewards.shape[1])):
                new = rewards[:, t] + running
                values[:, t] = new * mask[:, t]
                running = new * mask[:, t] + running * (1 - mask[:, t])
        return masked_whiten(values, mask) * mask
    return advantages


def _verl_passk(norm_by_std: bool, epsilon: float = 1e-6):
    def advantages(token_level_rewards, response_mask, index):
        scores = np.asarray(token_level_rewards, dtype=np.float64).sum(axis=-1)
        out = np.zeros(scores.shape)
        for members in _uid_groups(index).values():
            group = scores[members]
            if group.size < 2:
                raise ValueError("Pass@k requires at least 2 samples per group")
            best, second = np.sort(group)[::-1][:2]  # torch.topk(rewards, 2)
            value = best - second
            if norm_by_std:
                value = value / (group.std(ddof=1) + epsilon)
            out[members[int(np.argmax(group))]] = value
        return out[:, None] * np.asarray(response_mask)
    return advantages


def _verl_gpg(token_level_rewards, response_mask, index):
    scores = np.asarray(token_level_rewards, dtype=np.float64).sum(axis=-1)
    # bsz / m.clamp(min=1): an int over torch's int64 count, which torch evaluates as the
    # count's float32 reciprocal times bsz (a float32 tensor); f_norm = 1
    count = np.float32(max(np.count_nonzero(scores), 1))
    alpha = float((np.float32(1.0) / count) * np.float32(scores.size))
    out = np.empty(scores.shape)
    for members in _uid_groups(index).values():
        mean = 0.0 if len(members) == 1 else scores[members].mean()
        out[members] = alpha * (scores[members] - mean)
    return out[:, None] * np.asarray(response_mask)


# --------------------------------------------------------------------------------------------
# NeMo-RL, NVIDIA-NeMo/RL at 7ea279ab: nemo_rl/algorithms/utils.py
# (calculate_baseline_and_std_per_prompt, leave_one_out_baseline=True) and
# nemo_rl/algorithms/advantage_estimator.py (GRPO's division where the std is positive). The
# std of the others is written as the formula states it, two-pass; NeMo-RL's one-pass
# E[x^2] - E[x]^2 is the arithmetic the kit rejects (docs/conventions.md).
# --------------------------------------------------------------------------------------------
def _nemo_rl_grpo(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    out = np.zeros(z.shape)
    for g in np.unique(ids):
        members = np.flatnonzero(ids == g)
        if members.size <= 1:  # the baseline is set to the reward
            continue
        for i in members:
            others = z[members[members != i]]
            centred = z[i] - others.sum() / (members.size - 1)
            std = _bessel_std(others) if others.size > 1 else 0.0
            out[i] = centred / (std + 1e-6) if std > 0 else centred
    return out


# --------------------------------------------------------------------------------------------
# prime-rl, PrimeIntellect-ai/prime-rl at 559b4477: src/prime_rl/orchestrator/algo/max_rl.py
# (MaxRLAlgorithm.score_group, once per group).
# --------------------------------------------------------------------------------------------
def _prime_rl_max_rl(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    out = np.zeros(z.shape)
    for g in np.unique(ids):
        members = ids == g
        mean = z[members].mean()
        out[members] = 0.0 if mean <= 0 else (z[members] - mean) / mean
    return out


# --------------------------------------------------------------------------------------------
# prime-rl at 559b4477: src/prime_rl/orchestrator/algo/grpo.py (GRPOAlgorithm.score_group, no
# length_penalty); TRL at f2cd5771: trl/experimental/async_grpo/async_rollout_worker.py
# (AsyncRolloutWorker._score_group, numpy's std with ddof 0), both once per group.
# --------------------------------------------------------------------------------------------
def _per_group(advantage):
    def advantages(rewards, group_ids):
        z = np.asarray(rewards, dtype=np.float64)
        ids = np.asarray(group_ids)
        out = np.zeros(z.shape)
        for g in np.unique(ids):
            out[ids == g] = advantage(z[ids == g])
        return out
    return advantages


def _async_grpo(r):
    dev = r - r[0]
    std = float(np.sqrt(np.mean((dev - dev.mean()) ** 2)))  # ddof 0, exact 0 for ties
    return (r - r.mean()) / (std + 1e-8)


# --------------------------------------------------------------------------------------------
# SkyRL, NovaSky-AI/SkyRL at a9564572: skyrl/backends/skyrl_train/utils/ppo_utils.py
# (compute_maxrl_advantage: a loop over uid groups, a singleton's mean set to 0 and undivided);
# slime, THUDM/slime at 624b824a: slime/ray/rollout.py (_post_process_rewards, reshaped into
# (-1, n_samples_per_prompt), the std of the centred rewards, 1e-6 added).
# --------------------------------------------------------------------------------------------
def _skyrl_maxrl(token_level_rewards, response_mask, index):
    scores = np.asarray(token_level_rewards, dtype=np.float64).sum(axis=-1)
    out = np.empty(scores.shape)
    for members in _uid_groups(index).values():
        r = scores[members]
        out[members] = r if len(members) == 1 else (r - r.mean()) / (r.mean() + 1e-6)
    return out[:, None] * np.asarray(response_mask)


def _slime_grpo(rewards, n_samples_per_prompt):
    rows = np.asarray(rewards, dtype=np.float64).reshape(-1, n_samples_per_prompt)
    centred = rows - rows.mean(axis=1, keepdims=True)
    std = np.array([[_bessel_std(r)] for r in centred])
    return (centred / (std + 1e-6)).reshape(-1)


# --------------------------------------------------------------------------------------------
# NeMo-RL at 7ea279ab: nemo_rl/algorithms/advantage_estimator.py
# (ReinforcePlusPlusAdvantageEstimator.compute_advantage, minus_baseline, no KL in the reward):
# the group mean of calculate_baseline_and_std_per_prompt (leave_one_out_baseline=False; a
# singleton's baseline is its reward), then the batch's population variance clamped at 1e-8.
# --------------------------------------------------------------------------------------------
def _nemo_rl_reinforce_pp(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    adv = np.zeros(z.shape)
    for g in np.unique(ids):
        members = ids == g
        adv[members] = 0.0 if members.sum() <= 1 else z[members] - z[members].mean()
    centred = adv - adv.mean()
    return centred / np.sqrt(max(float(np.mean(centred**2)), 1e-8))


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


# --------------------------------------------------------------------------------------------
# AReaL at cbff54d6 (areal-project/AReaL): the actor passes its trajectory group sizes to both
# stages, and reward_norm standardises each run of that many rewards (PR #1454) instead of
# fixed slices of group_size; the formulas are 4aef98d8's. Its rollout-time normalisation
# (areal/infra/remote_inf_engine.py, PR #1516) takes each prompt's complete group of rewards
# as a float32 tensor, subtracts its mean and divides by the population std (unbiased=False)
# plus 1e-8; a group_size of 1 is never normalised.
# --------------------------------------------------------------------------------------------
def _areal_ragged(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    order = np.argsort(ids, kind="stable")
    runs = np.split(z[order], np.flatnonzero(np.diff(ids[order])) + 1)
    first = np.concatenate([_standardise(run) for run in runs])
    out = np.empty(z.shape)
    out[order] = _standardise(first)
    return out


def _areal_rollout(r):
    if r.size == 1:
        return r.copy()
    dev = r - r[0]
    dev = dev - dev.mean()
    return dev / (float(np.sqrt(np.mean(dev * dev))) + 1e-8)


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


# --------------------------------------------------------------------------------------------
# The paper's rules (Algorithm 1, the full mean of docs/theory.md C2, Algorithm 2 with its
# all-equal groups zeroed): the formulas of docs/theory.md section 2.
# --------------------------------------------------------------------------------------------
def _paper(rule: str):
    def advantages(rewards, group_ids):
        z = np.asarray(rewards, dtype=np.float64)
        ids = np.asarray(group_ids)
        out = np.zeros(z.shape)
        for g in np.unique(ids):
            members = ids == g
            r, n = z[members], int(members.sum())
            if rule == "fullmean":
                out[members] = r - r.mean() if n > 1 else 0.0
                continue
            loo = r - (r.sum() - r) / (n - 1)
            if rule == "paper_algorithm2":
                std = _bessel_std(r)
                loo = loo / std if std > 0 else np.zeros(n)
            out[members] = loo
        return out
    return advantages


def _form(fn, signature, where):
    return LiteralForm(fn, signature, *where)


# --------------------------------------------------------------------------------------------
# rLLM at 9beb6e0f: rllm/trainer/algorithms/advantage.py and rl_algo.py. Each group's rewards
# arrive as one numpy array; np.std is the population std (ddof 0), 1e-6 added to it. grpo: a
# group of one takes mean 0 and std 1; prpo: every reward of the batch, its mean and std;
# reinforce_plus_plus_baseline: each group's rewards less their mean, divided by the population
# std of all of those (their mean not subtracted).
# --------------------------------------------------------------------------------------------
def _population_std(values) -> float:
    """``sqrt(mean (x - mean)^2)`` about the first value (exact ties give exactly 0)."""
    dev = values - values[0]
    return float(np.sqrt(np.mean((dev - dev.mean()) ** 2)))


def _rllm_grpo(r):
    if r.size <= 1:
        return r / (1.0 + 1e-6)
    return (r - r.mean()) / (_population_std(r) + 1e-6)


def _rllm_prpo(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    return (z - z.mean()) / (_population_std(z) + 1e-6)


def _rllm_reinforce_pp_baseline(rewards, group_ids):
    c = _per_group(lambda r: r - r.mean())(rewards, group_ids)
    return c / (float(np.sqrt(np.mean(c * c))) + 1e-6)


#: Every framework option of ``CONVENTION_NAMES`` and the paper's rules, written out.
LITERAL_FORMS: dict[str, LiteralForm] = {
    "trl_group": _form(_trl_grpo("group"), "trl", _TRL),
    "trl_batch": _form(_trl_grpo("batch"), "trl", _TRL),
    "trl_none": _form(_trl_grpo("none"), "trl", _TRL),
    "verl_grpo": _form(_verl_grpo(True), "verl", _VERL),
    "verl_grpo_vectorized": _form(_verl_grpo(True, vectorized=True), "verl", _VERL),
    "verl_grpo_nostd": _form(_verl_grpo(False), "verl", _VERL),
    "verl_rloo": _form(_verl_rloo(False), "verl", _VERL),
    "verl_rloo_vectorized": _form(_verl_rloo(True), "verl", _VERL),
    "verl_reinforce_pp_baseline": _form(_verl_reinforce_pp(True), "verl", _VERL),
    "openrlhf_group_norm": _form(_openrlhf("group_norm"), "trl", _ORLHF),
    "openrlhf_dr_grpo": _form(_openrlhf("dr_grpo"), "trl", _ORLHF),
    "openrlhf_reinforce_baseline": _form(_openrlhf("reinforce_baseline"), "trl", _ORLHF),
    "openrlhf_rloo": _form(_openrlhf("rloo"), "trl", _ORLHF),
    "trl_rloo": _form(_trl_rloo(False), "trl", _TRL),
    "trl_rloo_normalized": _form(_trl_rloo(True), "trl", _TRL),
    "nemo_rl_grpo": _form(_nemo_rl_grpo, "plain", _NEMO),
    "verl_grpo_passk": _form(_verl_passk(True), "verl", _VERL),
    "verl_grpo_passk_nostd": _form(_verl_passk(False), "verl", _VERL),
    "verl_gpg": _form(_verl_gpg, "verl", _VERL),
    "verl_reinforce_pp": _form(_verl_reinforce_pp(False), "verl", _VERL),
    "openrlhf_reinforce": _form(_openrlhf("reinforce"), "trl", _ORLHF),
    "prime_rl_max_rl": _form(_prime_rl_max_rl, "plain", _PRIME),
    "prime_rl_grpo": _form(_per_group(lambda r: r - r.mean()), "plain", _PRIME),
    "trl_async_grpo": _form(_per_group(_async_grpo), "plain", _TRL),
    "skyrl_maxrl": _form(_skyrl_maxrl, "verl", _SKYRL),
    "slime_grpo": _form(_slime_grpo, "trl", _SLIME),
    "nemo_rl_reinforce_pp": _form(_nemo_rl_reinforce_pp, "plain", _NEMO),
    "verl_opo": _form(_verl_opo, "plain", _VERL),
    "roll_batch": _form(_roll_batch, "plain", _ROLL),
    "areal_grpo": _form(_areal, "plain", _AREAL),
    "slime_reinforce_pp_baseline": _form(_slime_reinforce_pp_baseline, "trl", _SLIME),
    "rllm_grpo": _form(_per_group(_rllm_grpo), "plain", _RLLM),
    "rllm_prpo": _form(_rllm_prpo, "plain", _RLLM),
    "rllm_reinforce_pp_baseline": _form(_rllm_reinforce_pp_baseline, "plain", _RLLM),
    "areal_grpo_cbff54d6": _form(_areal_ragged, "plain", _AREAL_2),
    "areal_rollout_norm": _form(_per_group(_areal_rollout), "plain", _AREAL_2),
    "grpo": _form(_paper("grpo"), "plain", _PAPER),
    "fullmean": _form(_paper("fullmean"), "plain", _PAPER),
    "paper_algorithm2": _form(_paper("paper_algorithm2"), "plain", _PAPER),
}
