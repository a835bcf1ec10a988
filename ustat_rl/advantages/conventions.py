"""Named advantage conventions: the group-relative advantages that RL frameworks actually compute.

The paper analyses the leave-one-out baseline (Algorithm 1) and a std-normalised variant
(Algorithm 2); the frameworks people run differ from both in small ways that matter: a full
group mean instead of leave-one-out, a Bessel-corrected standard deviation with an epsilon
*added to it*, batch instead of group statistics, and rules for all-equal and one-sample groups.
Each convention is ``advantages(rewards (n,), group_ids (n,)) -> (n,)``, computed from the fields
of its :class:`ConventionSpec` (baseline, scale, epsilon and its placement, the singleton and
zero-std rules) by one evaluator, so the rule's data is all there is to it. The table in
``docs/conventions.md`` maps each (framework, option, commit) to its name here; the exact
finite-G moments of the group conventions, for binary rewards, are in
:mod:`ustat_rl.theory.advantage` (docs/theory.md section 7).

Notation: ``z`` is a reward, ``m_g`` the mean of its group, ``s_g`` the Bessel-corrected standard
deviation of its group (``sqrt(sum (z - m_g)^2 / (n_g - 1))``), ``s_B`` the same over the whole
batch, and ``n_g`` the size of the group.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .frameworks import KitWords, convention_rule, framework_provenance
from .registry import BASELINE, get_rule, register_rule, rule_names
from .rule import AdvantageRule, Centring, Provenance

__all__ = ["ConventionSpec", "CONVENTIONS", "CONVENTION_NAMES", "VERL_SINGLETON_DIVISOR",
           "VERL_REMAX", "AREAL_REWARD_NORM", "advantages", "batch_rule_names", "get_convention"]

#: A framework option's rule is the registry's one rule type; the kit reads the same fields.
ConventionSpec = AdvantageRule


#: verl substitutes ``torch.tensor(1.0)`` (float32) for a one-sample group's std, so ``std + 1e-6``
#: is rounded to float32 whatever the rewards' dtype: 1.0000009536743164, not 1.000001.
VERL_SINGLETON_DIVISOR = float(np.float32(1.0) + np.float32(1e-6))

def _at(pin, path):
    return (pin[0], path, *pin[1:])


# Re-read on 2026-12-07 (issue 47, docs/conventions.md "Re-read at each framework's newest
# commit"): each pin below is still its repository's newest readable commit, and each rule read
# there is unchanged, except AReaL's, which moved to areal-project/AReaL (_AREAL_2).
_TRL = ("huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8", "2026-07-24")
_VERL = ("verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9", "2026-08-22")
_ORLHF = ("OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7", "2026-08-13")
_NEMO = ("NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909", "2026-08-22")
_PRIME = ("PrimeIntellect-ai/prime-rl", "559b44772e471d1538537b8805cc77f3824a5e64", "2026-08-21")
_SKYRL = ("NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265", "2026-08-21")
_SLIME = ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "2026-08-21")
_ROLL = ("alibaba/ROLL", "8eb27cc2dc34c4d1310b169d9b86d339004d811a", "2026-08-19")
_TRL_G, _TRL_R = _at(_TRL, "trl/trainer/grpo_trainer.py"), _at(_TRL, "trl/trainer/rloo_trainer.py")
_VERL_C = _at(_VERL, "verl/trainer/ppo/core_algos.py")
_VERL_V, _VERL_W = (_at(_VERL, f"verl/trainer/ppo/core_algos.py, verl/utils/{f}.py")
                    for f in ("groupwise", "torch_functional"))
_ORL = _at(_ORLHF, "openrlhf/trainer/ppo_utils/experience_maker.py")
_NEMO_A = _at(_NEMO, "nemo_rl/algorithms/advantage_estimator.py, nemo_rl/algorithms/utils.py")
_MAXRL = _at(_PRIME, "src/prime_rl/orchestrator/algo/max_rl.py")
_PRIME_G = _at(_PRIME, "src/prime_rl/orchestrator/algo/grpo.py")
_TRL_A = _at(_TRL, "trl/experimental/async_grpo/async_rollout_worker.py")
_SKY = _at(_SKYRL, "skyrl/backends/skyrl_train/utils/ppo_utils.py")
_SLI = _at(_SLIME, "slime/ray/rollout.py")
_SLI_W = _at(_SLIME, "slime/ray/rollout.py, slime/backends/megatron_utils/loss.py, "
                     "slime/utils/distributed_utils.py")
_ROLL_F = _at(_ROLL, "roll/utils/functionals.py")
_AREAL = ("inclusionAI/AReaL", "4aef98d8d818af55b43621aaadba047ae10f4e77", "2026-05-21")
_AREAL_N = _at(_AREAL, "areal/utils/data.py, areal/trainer/ppo/actor.py, areal/api/cli_args.py")
#: AReaL moved from inclusionAI/AReaL to areal-project/AReaL; the newest commit read there.
_AREAL_2 = ("areal-project/AReaL", "cbff54d645d2cd8ee1f1c358a82f3f473588433d", "2026-08-22")
_AREAL_2N = _at(_AREAL_2, "areal/utils/data.py, areal/trainer/ppo/actor.py, areal/api/cli_args.py")
_AREAL_2R = _at(_AREAL_2, "areal/infra/remote_inf_engine.py, areal/api/cli_args.py")
_F64_STATS = "float64 statistics, each stage's output cast to float32"
_RLLM = ("rllm-org/rllm", "9beb6e0f676a46d38858991fd79ac5f8e0b16d4c", "2026-08-15")
_RLLM_A = _at(_RLLM, "rllm/trainer/algorithms/advantage.py")
_RLLM_G = _at(_RLLM, "rllm/trainer/algorithms/advantage.py, rllm/trainer/algorithms/rl_algo.py")
_VERL_R = _at(_VERL, "verl/trainer/ppo/core_algos.py, verl/trainer/ppo/ray_trainer.py")
_LOO, _F32 = "z - (sum_g z - z)/(n_g - 1)", "float32"
_STD = dict(scale="group", epsilon_placement="added to std", bessel=True)
_STD_MEAN, _WHITENED = "std-normalised, full-mean numerator", "full mean, then batch-whitened"
_ZV_WHITEN = "0 before whitening; then shifted by the batch mean"


def _spec(name, framework, option, where, formula, **settings):
    words, fields = KitWords.split(settings)
    return convention_rule(name, framework_provenance(framework, option, *where), formula, words,
                           **fields)


def _best_minus_second(rows):
    """verl's Pass@k numerator, ``rewards (M, n) -> (M, n)``: ``r_max - r_second`` on the best
    sample of each row, 0 elsewhere; a tied best gets 0, whichever tied sample ``topk`` picks."""
    rows = np.asarray(rows, dtype=np.float64)
    out = np.zeros(rows.shape)
    if rows.shape[1] >= 2:
        top = np.sort(rows, axis=1)[:, -2:]  # (M, 2): second best, best
        out[np.arange(rows.shape[0]), np.argmax(rows, axis=1)] = top[:, 1] - top[:, 0]
    return out


def _group_mean(rows):
    """``rewards (M, n) -> (M,)``: the group mean MaxRL divides by."""
    return np.mean(np.asarray(rows, dtype=np.float64), axis=1)


_PASSK = Centring("group function", function=_best_minus_second)

#: AReaL's first stage, ``reward_norm`` at group level: ``(z - m_g) / (s_g + 1e-5)``, Bessel std
#: (``NormConfig.std_unbiased=True``); its advantages are the numerator that the second stage,
#: ``adv_norm`` at batch level, whitens (the rule ``areal_grpo``).
AREAL_REWARD_NORM = _spec(
    "areal_grpo:reward_norm", "AReaL", "actor.reward_norm: mean_level=group, std_level=group",
    _AREAL_N, "(z - m_g) / (s_g + 1e-5)", **_STD, epsilon=1e-5, singleton_divisor=1.0 + 1e-5,
    equal_group_sizes=True, working_precision=_F64_STATS)
_WHITEN_Z = "z less the batch mean, whitened (no group baseline)"

#: AReaL's first stage at cbff54d6 (PR #1454): the same formula, but its groups are the actor's
#: trajectory group sizes (``TrajBatchMeta.traj_group_sizes``), so a group that lost a failed or
#: filtered sample is normalised on its own instead of a fixed-size slice straddling two groups.
_AREAL_REWARD_NORM_2 = replace(
    AREAL_REWARD_NORM, name="areal_grpo_cbff54d6:reward_norm", equal_group_sizes=False,
    provenance=framework_provenance("AReaL", "actor.reward_norm: mean_level=group, "
                                    "std_level=group, groups of the trajectory group sizes",
                                    *_AREAL_2N))


_SPECS = (
    _spec("trl_group", "TRL", 'GRPOTrainer, scale_rewards="group" (default)', _TRL_G,
          "(z - m_g) / (s_g + 1e-4)", **_STD, epsilon=1e-4, singleton_divisor=1e-4,
          singleton="0 (std set to 0, numerator 0)", equal_group_sizes=True,
          working_precision=_F32, project_name=_STD_MEAN),
    _spec("trl_batch", "TRL", 'GRPOTrainer, scale_rewards="batch"', _TRL_G,
          "(z - m_g) / (s_B + 1e-4)", scale="batch", epsilon=1e-4, bessel=True,
          epsilon_placement="added to std", equal_group_sizes=True, working_precision=_F32,
          project_name="full mean divided by the batch std"),
    _spec("trl_none", "TRL", 'GRPOTrainer, scale_rewards="none"', _TRL_G, "z - m_g",
          equal_group_sizes=True, working_precision=_F32, project_name="fullmean"),
    _spec("verl_grpo", "verl", "algorithm.adv_estimator=grpo, norm_adv_by_std_in_grpo=True "
          "(default)", _VERL_C, "(z - m_g) / (s_g + 1e-6)", **_STD, epsilon=1e-6,
          singleton_numerator="z", singleton_divisor=VERL_SINGLETON_DIVISOR,
          singleton="z / 1.0000009537 (mean 0 and a float32 std 1 are substituted; 1 + 1e-6 "
                    "rounds in float32)", project_name=_STD_MEAN),
    _spec("verl_grpo_vectorized", "verl", "algorithm.adv_estimator=grpo_vectorized", _VERL_V,
          "(z - m_g) / (s_g + 1e-6), m_g and s_g computed in float32", **_STD, epsilon=1e-6,
          singleton_numerator="z", singleton_divisor=VERL_SINGLETON_DIVISOR,
          working_precision="float32 statistics whatever the rewards' dtype",
          singleton="z / 1.0000009537 (as verl_grpo)", project_name=_STD_MEAN),
    _spec("verl_grpo_nostd", "verl", "algorithm.adv_estimator=grpo, norm_adv_by_std_in_grpo=False",
          _VERL_C, "z - m_g", singleton_numerator="z", singleton="z (mean 0 is substituted)",
          project_name="fullmean"),
    _spec("verl_rloo", "verl", "algorithm.adv_estimator=rloo", _VERL_C,
          "z - (sum_g z - z)/(n_g - 1) = n_g (z - m_g)/(n_g - 1)", baseline="leave_one_out",
          singleton_numerator="z", singleton="z (left unchanged)", project_name="grpo"),
    _spec("verl_rloo_vectorized", "verl", "algorithm.adv_estimator=rloo_vectorized", _VERL_C,
          "(n_g z - sum_g z)/(n_g - 1), 0 for a singleton", baseline="leave_one_out",
          singleton="0 (multiplied by n_g > 1)", project_name="grpo"),
    _spec("verl_reinforce_pp_baseline", "verl",
          "algorithm.adv_estimator=reinforce_plus_plus_baseline", _VERL_W,
          "c = z - m_g; (c - mean_B c) / sqrt(var_B c + 1e-8), mean_B and var_B dividing by "
          "N + 1e-8 (masked_mean), one token per response", scale="whiten", epsilon=1e-8,
          epsilon_placement="inside sqrt", bessel=True, count_epsilon=1e-8,
          singleton_numerator="z", zero_variance=_ZV_WHITEN,
          singleton="c = z (mean 0 is substituted)", min_batch_size=2, project_name=_WHITENED),
    _spec("openrlhf_group_norm", "OpenRLHF", "--algo.advantage.estimator group_norm", _ORL,
          "(z - m_g) / (s_g + 1e-9)", **_STD, epsilon=1e-9, singleton_divisor=np.nan,
          singleton="NaN (Bessel std of one sample)", min_group_size=2, equal_group_sizes=True,
          project_name=_STD_MEAN),
    _spec("openrlhf_dr_grpo", "OpenRLHF", "--algo.advantage.estimator dr_grpo", _ORL, "z - m_g",
          equal_group_sizes=True, project_name="fullmean"),
    _spec("openrlhf_reinforce_baseline", "OpenRLHF",
          "--algo.advantage.estimator reinforce_baseline", _ORL,
          "c = z - m_g; (c - mean_B c) / sqrt(max(var_B c, 1e-8)), population variance, one "
          "token per response", scale="whiten", epsilon=1e-8, epsilon_placement="variance floor",
          bessel=False, working_precision="float32 (whitened after .float())",
          zero_variance=_ZV_WHITEN, equal_group_sizes=True, project_name=_WHITENED),
    _spec("openrlhf_rloo", "OpenRLHF", "--algo.advantage.estimator rloo", _ORL, _LOO,
          baseline="leave_one_out", singleton="division by zero (n_samples_per_prompt - 1 = 0)",
          min_group_size=2, equal_group_sizes=True, project_name="grpo"),
    _spec("trl_rloo", "TRL", "RLOOTrainer, normalize_advantages=False (default)", _TRL_R, _LOO,
          baseline="leave_one_out", working_precision=_F32, equal_group_sizes=True,
          project_name="grpo"),
    _spec("trl_rloo_normalized", "TRL", "RLOOTrainer, normalize_advantages=True", _TRL_R,
          "a = leave-one-out; (a - mean_B a) / (s_B(a) + 1e-4)", baseline="leave_one_out",
          scale="whiten", epsilon=1e-4, epsilon_placement="added to std", bessel=True,
          working_precision=_F32, zero_variance="0 before the batch normalisation",
          singleton="0 before normalisation", min_batch_size=2, equal_group_sizes=True,
          project_name="grpo, whitened over the batch"),
    _spec("nemo_rl_grpo", "NeMo-RL", "grpo.use_leave_one_out_baseline=true, "
          "grpo.normalize_rewards=true (the defaults)", _NEMO_A,
          f"({_LOO}) / (s_-i + 1e-6), s_-i the Bessel std of the other n_g - 1 rewards; "
          "undivided where s_-i = 0", baseline="leave_one_out", scale="leave_one_out",
          epsilon=1e-6, epsilon_placement="added to std", bessel=True, zero_std="keep numerator",
          zero_variance="0; a sample whose n_g - 1 others are equal keeps its undivided numerator",
          singleton="0 (baseline set to the reward)", min_group_size=3,
          project_name="leave-one-out, divided by the others' std"),
    # read after the first rows (project issue 29): a non-affine numerator (Pass@k), a
    # batch's nonzero fraction (GPG), whitening without a group baseline (REINFORCE++,
    # OpenRLHF's reinforce) and a division by the group mean (MaxRL)
    _spec("verl_grpo_passk", "verl", "algorithm.adv_estimator=grpo_passk, "
          "norm_adv_by_std_in_grpo=True (default)", _VERL_C,
          "(r_max - r_second) / (s_g + 1e-6) for the best sample of a group, 0 for the others",
          baseline=_PASSK, **_STD, epsilon=1e-6, min_group_size=2,
          zero_variance="0 (r_max - r_second = 0; so is a tied best)",
          singleton="ValueError (Pass@k requires at least 2 samples per group)"),
    _spec("verl_grpo_passk_nostd", "verl", "algorithm.adv_estimator=grpo_passk, "
          "norm_adv_by_std_in_grpo=False", _VERL_C,
          "r_max - r_second for the best sample of a group, 0 for the others", baseline=_PASSK,
          min_group_size=2, zero_variance="0 (r_max - r_second = 0; so is a tied best)",
          singleton="ValueError (Pass@k requires at least 2 samples per group)"),
    _spec("verl_gpg", "verl", "algorithm.adv_estimator=gpg", _VERL_C,
          "N (z - m_g) / max(#{z != 0}, 1): N the batch's responses, f_norm = 1; the group std "
          "is computed and not used", scale="nonzero", singleton_numerator="z",
          singleton="N z / max(#{z != 0}, 1) (mean 0 is substituted)",
          project_name="fullmean, times N over the batch's nonzero rewards"),
    _spec("verl_reinforce_pp", "verl", "algorithm.adv_estimator=reinforce_plus_plus", _VERL_W,
          "(z - mean_B z) / sqrt(var_B z + 1e-8) (masked_whiten of the returns, which are z on "
          "every token at algorithm.gamma = 1, the default), one token per response",
          baseline="none", scale="whiten", epsilon=1e-8, epsilon_placement="inside sqrt",
          bessel=True, count_epsilon=1e-8, singleton_numerator="z", zero_variance=_WHITEN_Z,
          singleton="z, whitened with the batch", min_batch_size=2,
          project_name="vanilla, whitened over the batch"),
    _spec("openrlhf_reinforce", "OpenRLHF", "--algo.advantage.estimator reinforce", _ORL,
          "(z - mean_B z) / sqrt(max(var_B z, 1e-8)), population variance, one token per "
          "response (--algo.advantage.gamma 1, the default)", baseline="none", scale="whiten",
          epsilon=1e-8, epsilon_placement="variance floor", bessel=False,
          singleton_numerator="z", working_precision="float32 (whitened after .float())",
          zero_variance=_WHITEN_Z, singleton="z, whitened with the batch",
          equal_group_sizes=True, project_name="vanilla, whitened over the batch"),
    _spec("prime_rl_max_rl", "prime-rl", '[orchestrator.algo] type = "max_rl"', _MAXRL,
          "(z - m_g) / m_g, 0 where m_g <= 0 (MaxRL, arXiv:2602.02710)", scale="statistic",
          statistic=_group_mean, zero_std="zero", working_precision=_F32,
          zero_variance="0 (numerator 0); a group of mean <= 0 (all failures) gets 0",
          singleton="0 ((z - z)/z, or 0 when z <= 0)",
          project_name="full mean over the group mean (MaxRL)"),
    # read for the issue "Beyond the group": the defaults of prime-rl, TRL's asynchronous
    # GRPO and slime, and SkyRL's MaxRL (an epsilon where prime-rl's zeroes)
    _spec("prime_rl_grpo", "prime-rl", '[orchestrator.algo] type = "grpo" (default, no '
          "length_penalty)", _PRIME_G, "z - m_g, in float32", working_precision=_F32,
          singleton="0 (z - z)", project_name="fullmean"),
    _spec("trl_async_grpo", "TRL", "experimental AsyncGRPOTrainer (trl.experimental.async_grpo)",
          _TRL_A, "(z - m_g) / (s_g + 1e-8), s_g the population std (numpy's ddof 0), float64",
          scale="group", epsilon_placement="added to std", bessel=False, epsilon=1e-8,
          singleton_divisor=1e-8, singleton="0 (std 0, numerator 0)",
          working_precision="float64 (np.array(..., dtype=float))",
          project_name="std-normalised (population std), full-mean numerator"),
    _spec("skyrl_maxrl", "SkyRL", "trainer.algorithm.advantage_estimator=maxrl", _SKY,
          "(z - m_g) / (m_g + 1e-6) (MaxRL with an epsilon; no zero rule)", scale="statistic",
          statistic=_group_mean, epsilon=1e-6, epsilon_placement="added to std",
          singleton_numerator="z", singleton_divisor=1.0,
          zero_variance="0 (numerator 0, divided by m_g + 1e-6)",
          singleton="z (mean 0 is substituted, no division)",
          project_name="full mean over the group mean plus 1e-6 (MaxRL)"),
    _spec("slime_grpo", "slime", "--advantage-estimator grpo (default), rewards and std "
          "normalisation on (default)", _SLI, "(z - m_g) / (s_g + 1e-6), in float32; the "
          "whole batch one group when its size is not n_samples_per_prompt x "
          "rollout_batch_size", **_STD, epsilon=1e-6, singleton_divisor=np.nan,
          singleton="NaN (Bessel std of one sample)", min_group_size=2, equal_group_sizes=True,
          working_precision=_F32, project_name=_STD_MEAN),
    _spec("nemo_rl_reinforce_pp", "NeMo-RL", "grpo.adv_estimator.name=reinforce_plus_plus, "
          "minus_baseline=true (default), loss_fn.use_kl_in_reward=false", _NEMO_A,
          "c = z - m_g; (c - mean_B c) / sqrt(max(var_B c, 1e-8)), population variance, one "
          "token per response", scale="whiten", epsilon=1e-8, epsilon_placement="variance floor",
          bessel=False, zero_variance=_ZV_WHITEN, singleton="c = 0 (baseline set to the reward)",
          project_name=_WHITENED),
    # read for issue 38: verl's opo at equal response lengths (its baseline weighs each reward
    # by its response's length, so with ragged lengths it is not a rule of rewards alone), and
    # ROLL's batch normalisation, which its running option equals on the first step
    _spec("verl_opo", "verl", "algorithm.adv_estimator=opo, equal response lengths", _VERL_C,
          "z - sum_g T z / sum_g T (T the response length): z - m_g at equal lengths",
          singleton_numerator="z", singleton="z (baseline 0)",
          project_name="fullmean (at equal response lengths)"),
    _spec("roll_batch", "ROLL", "norm_mean_type=batch, norm_std_type=batch (reward_norm; "
          "norm_*_type=running on its first step from a fresh RunningMoments)", _ROLL_F,
          "(z - mean_B z) / (s_B + 1e-6), s_B the Bessel std of the batch's rewards",
          baseline="none", scale="whiten", epsilon=1e-6, epsilon_placement="added to std",
          bessel=True, singleton_numerator="z", zero_variance=_WHITEN_Z,
          singleton="z, normalised with the batch", min_batch_size=2,
          project_name="vanilla, whitened over the batch"),
    # read for issue 38: AReaL's two stages as its GRPO examples set them (examples/math/
    # gsm8k_grpo.yaml; both default to None, no normalisation): reward_norm per group, then
    # adv_norm over the batch, each with NormConfig's defaults (no leave-one-out, Bessel std,
    # 1e-5 added); the second stage whitens the first's output, a group function here
    _spec("areal_grpo", "AReaL", "actor.reward_norm: {mean_level: group, std_level: group, "
          "group_size: n_samples}, actor.adv_norm: {mean_level: batch, std_level: batch}, "
          "kl_ctl=0, discount=gae_lambda=1, no critic", _AREAL_N,
          "a = (z - m_g) / (s_g + 1e-5); (a - mean_B a) / (s_B(a) + 1e-5), Bessel stds, "
          "one token per response", baseline=Centring("group function",
                                                      function=AREAL_REWARD_NORM.grouped),
          scale="whiten", epsilon=1e-5, epsilon_placement="added to std", bessel=True,
          zero_variance="0 after reward_norm; then shifted by the batch mean",
          singleton="0 (group_size 1: mean z, std set to 1)", min_batch_size=2,
          equal_group_sizes=True, working_precision=_F64_STATS,
          project_name="std-normalised full mean, then batch-whitened"),
    # read for issue 38: slime's REINFORCE++ baseline, which slime runs only with
    # --normalize-advantages (arguments.py asserts it): the group mean of _post_process_rewards,
    # then distributed_masked_whiten over every response token of the data-parallel group, its
    # variance the one-pass E[c^2] - E[c]^2 in float32, Bessel-corrected from two tokens on
    # (unlike NeMo-RL's population variance floored at 1e-8)
    _spec("slime_reinforce_pp_baseline", "slime", "--advantage-estimator "
          "reinforce_plus_plus_baseline --normalize-advantages (required), rewards "
          "normalisation on (default), --kl-coef 0", _SLI_W,
          "c = z - m_g; (c - mean_B c) / sqrt(var_B c + 1e-8), var_B the one-pass "
          "E[c^2] - E[c]^2 times N/(N - 1) (N >= 2), float32, one token per response; the "
          "whole batch one group when its size is not n_samples_per_prompt x "
          "rollout_batch_size", scale="whiten", epsilon=1e-8, epsilon_placement="inside sqrt",
          bessel=True, zero_variance=_ZV_WHITEN, singleton="c = 0 (z - z)",
          equal_group_sizes=True, working_precision=_F32, project_name=_WHITENED),
    # read for issue 47: rLLM (rllm-org/rllm), numpy on each group's (or the batch's) rewards,
    # np.std the population std, 1e-6 added to it
    _spec("rllm_grpo", "rLLM", "algorithm.adv_estimator=grpo, norm_adv_by_std_in_grpo=True "
          "(default)", _RLLM_G, "(z - m_g) / (sigma_g + 1e-6), sigma_g the population std; a "
          "one-sample group: mean 0 and std 1 substituted, z / (1 + 1e-6)",
          scale="group", epsilon=1e-6, epsilon_placement="added to std", bessel=False,
          singleton_numerator="z", singleton_divisor=1.0 + 1e-6,
          singleton="z / (1 + 1e-6) (mean 0, std 1 substituted)",
          working_precision="the rewards' dtype (numpy)", project_name=_STD_MEAN),
    _spec("rllm_prpo", "rLLM", "algorithm.adv_estimator=prpo", _RLLM_A,
          "(z - mean_B z) / (sigma_B + 1e-6), sigma_B the population std of the batch's "
          "rewards: no group baseline", baseline="none", scale="whiten", epsilon=1e-6,
          epsilon_placement="added to std", bessel=False, singleton_numerator="z",
          zero_variance=_WHITEN_Z, singleton="z, normalised with the batch",
          working_precision="the rewards' dtype (numpy)",
          project_name="vanilla, whitened over the batch"),
    _spec("rllm_reinforce_pp_baseline", "rLLM",
          "algorithm.adv_estimator=reinforce_plus_plus_baseline", _RLLM_A,
          "c = z - m_g; c / (sigma_B(c) + 1e-6), sigma_B the population std of every c (their "
          "batch mean is 0, so this is the whitening of c)", scale="whiten", epsilon=1e-6,
          epsilon_placement="added to std", bessel=False, zero_variance=_ZV_WHITEN,
          singleton="c = 0 (z - z)", working_precision="the rewards' dtype (numpy)",
          project_name=_WHITENED),
    # read for issue 47 at areal-project/AReaL cbff54d6: the two stages of areal_grpo are the
    # same formulas, but since PR #1454 the actor normalises each group of its trajectory group
    # sizes, so ragged groups (a failed or filtered sample) are each their own group;
    # areal_grpo, pinned at 4aef98d8, slices fixed group_size blocks and needs equal groups
    _spec("areal_grpo_cbff54d6", "AReaL", "actor.reward_norm: {mean_level: group, std_level: "
          "group}, actor.adv_norm: {mean_level: batch, std_level: batch}, kl_ctl=0, "
          "discount=gae_lambda=1, no critic; groups of the trajectory group sizes (ragged "
          "groups allowed)", _AREAL_2N,
          "a = (z - m_g) / (s_g + 1e-5) per trajectory group; (a - mean_B a) / (s_B(a) + "
          "1e-5), Bessel stds, one token per response", baseline=Centring(
              "group function", function=_AREAL_REWARD_NORM_2.grouped),
          scale="whiten", epsilon=1e-5, epsilon_placement="added to std", bessel=True,
          zero_variance="0 after reward_norm; then shifted by the batch mean",
          singleton="0 (a group of one: mean z, std set to 1)", min_batch_size=2,
          working_precision=_F64_STATS,
          project_name="std-normalised full mean, then batch-whitened"),
    # AReaL's rollout-time normalisation (PR #1516), first read at cbff54d6: each prompt's
    # n_samples rewards in float32, the population std with 1e-8 added; a group with a failed
    # rollout is dropped, so groups are complete; group_size 1 is not wrapped (raw z)
    _spec("areal_rollout_norm", "AReaL", "gconfig.reward_normalization=true (grouped "
          "InteractionWithTokenLogpReward workflows; actor.reward_norm unset, as PPOConfig "
          "requires), actor.adv_norm unset (default), kl_ctl=0, discount=gae_lambda=1, no "
          "critic", _AREAL_2R, "(z - m_g) / (sigma_g + 1e-8), sigma_g the population std, "
          "in float32; a group with a failed rollout is dropped", scale="group",
          epsilon=1e-8, epsilon_placement="added to std", bessel=False,
          singleton_numerator="z", singleton_divisor=1.0,
          singleton="z (group_size 1 is not normalised)", equal_group_sizes=True,
          working_precision=_F32,
          project_name="std-normalised (population std), full-mean numerator"),
    get_rule("grpo"),
    get_rule("fullmean"),
    get_rule("paper_algorithm2"),
)

#: Every named convention, by name (the framework ones registered with the registry here; the
#: paper's are the registry's own).
CONVENTIONS: dict[str, ConventionSpec] = {
    s.name: s if s.name in rule_names() else register_rule(s) for s in _SPECS}

#: The names, in the order of docs/conventions.md.
CONVENTION_NAMES: tuple[str, ...] = tuple(CONVENTIONS)

#: verl's ``remax``: ``z - b``, ``b`` the reward of one greedy rollout of the prompt, repeated
#: over its samples. It takes that reward as its reference (``advantages(..., reference=b)``),
#: so it is registered outside :data:`CONVENTION_NAMES`, whose rules take rewards and groups
#: alone; its exact moments on the bandit are :mod:`ustat_rl.theory.greedy_baseline`.
VERL_REMAX = register_rule(AdvantageRule(
    "verl_remax", BASELINE, provenance=Provenance(
        "verl", "algorithm.adv_estimator=remax", f"{_VERL_R[1]} ({_VERL[0]} {_VERL[1][:8]})",
        *_VERL_R),
    formula="z - b, b the reward of the prompt's greedy rollout (reward_baselines), on every "
            "token of the response",
    zero_variance="z - b (b is not a reward of the group)", singleton="z - b",
    project_name="baseline: a prompt-only baseline drawn independently of the group"))


def get_convention(name) -> ConventionSpec:
    """The rule called ``name`` (any registered one; :data:`CONVENTION_NAMES` are the
    frameworks'); ``ValueError`` listing the names otherwise."""
    if isinstance(name, AdvantageRule):
        return name
    return get_rule(name)


def advantages(estimator, rewards, group_ids) -> np.ndarray:
    """The advantages a named framework option computes (docs/theory.md section 2).

    Parameters
    ----------
    estimator : str or ConventionSpec
        One of :data:`CONVENTION_NAMES`.
    rewards : array_like, shape (n,)
        One scalar reward per response (float32 inputs are computed in float64).
    group_ids : array_like of int, shape (n,)
        The prompt (group) of each response, in any order; groups may be ragged unless the
        convention reshapes into equal groups.

    Returns
    -------
    ndarray, shape (n,)
        float64 advantages.

    Notes
    -----
    Each convention's formula, epsilon and rules are in its :class:`ConventionSpec` and in
    docs/conventions.md. The frameworks that subtract the full group mean compute
    ``z - m_g = ((n_g - 1)/n_g) (z - leave-one-out mean)``, so without the std division they are
    ``(G - 1)/G`` times the unbiased leave-one-out estimator (docs/theory.md C2); with it, they
    are ``(G - 1)/G`` times Algorithm 2's advantage, up to the epsilon and the all-equal rule.

    Examples
    --------
    >>> r = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    >>> ids = [0, 0, 0, 1, 1, 1]
    >>> [round(float(a), 4) for a in advantages("trl_group", r, ids)]
    [1.1545, -0.5773, -0.5773, 0.0, 0.0, 0.0]
    >>> [round(float(a), 4) for a in advantages("grpo", r, ids)]
    [1.0, -0.5, -0.5, 0.0, 0.0, 0.0]
    """
    spec = get_convention(estimator)
    return spec.advantages(rewards, group_ids)


def batch_rule_names(group_size: int, batch_size: int) -> tuple[str, ...]:
    """Every framework option with batch statistics (a whitening or a std over the whole batch)
    that admits a batch of ``batch_size`` groups of ``group_size``, in ``CONVENTION_NAMES`` order.

    >>> "roll_batch" in batch_rule_names(2, 2), "grpo" in batch_rule_names(2, 2)
    (True, False)
    """
    rules = [get_rule(name) for name in CONVENTION_NAMES]
    return tuple(rule.name for rule in rules if rule.statistics == "batch"
                 and group_size * batch_size >= rule.min_batch_size
                 and group_size >= rule.min_group_size)
