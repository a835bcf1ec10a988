"""The framework conventions as rules: what TRL, verl and OpenRLHF compute, option by option.

Each entry states a framework option as an :class:`~ustat_rl.advantages.rule.AdvantageRule`
(docs/conventions.md maps each (framework, option, version) to its name). Notation: ``z`` a
reward, ``m_g`` the mean of its group, ``s_g`` the Bessel-corrected standard deviation of its
group, ``s_B`` the same over the whole batch, ``n_g`` the size of the group.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .registry import GROUP_MEAN, LEAVE_ONE_OUT, register_rule
from .rule import AdvantageRule, Provenance, Scaling

__all__ = ["VERL_SINGLETON_DIVISOR", "FRAMEWORK_RULES", "convention_rule"]

_BASELINES = {"mean": GROUP_MEAN, "leave_one_out": LEAVE_ONE_OUT}
_SCALES = {"none": "none", "group": "group std", "leave_one_out": "others std",
           "batch": "batch std", "whiten": "batch whitening"}


def convention_rule(name, framework, option, repository, path, commit, commit_date, formula, *,
                    baseline="mean", scale="none", epsilon=0.0, epsilon_placement="none",
                    bessel=None, zero_std="divide", singleton_numerator="0",
                    singleton_divisor=1.0, count_epsilon=0.0, **fields) -> AdvantageRule:
    """An :class:`AdvantageRule` from a framework option stated in the conformance kit's words.

    ``baseline`` in ``{"mean", "leave_one_out"}``, ``scale`` in ``{"none", "group",
    "leave_one_out", "batch", "whiten"}``, ``zero_std`` in ``{"divide", "keep numerator",
    "zero"}`` and ``singleton_numerator`` in ``{"0", "z"}`` (docs/conventions.md); the other
    keyword arguments are :class:`AdvantageRule` fields.
    """
    if baseline not in _BASELINES:
        raise ValueError(f"`baseline` must be one of {tuple(_BASELINES)}, got {baseline!r}")
    if scale not in _SCALES:
        raise ValueError(f"`scale` must be one of {tuple(_SCALES)}, got {scale!r}")
    singleton = "reward" if singleton_numerator == "z" else "zero"
    centring = replace(_BASELINES[baseline], singleton=singleton)
    scaling = Scaling(_SCALES[scale], bessel=bessel, epsilon=epsilon,
                      epsilon_placement=epsilon_placement, all_equal=zero_std,
                      singleton_divisor=singleton_divisor, count_epsilon=count_epsilon)
    source = f"{path} ({repository} {commit[:8]})" if repository else path
    provenance = Provenance(framework, option, source, repository, path, commit, commit_date)
    return AdvantageRule(name, centring, scaling, provenance, formula, **fields)

#: verl substitutes ``torch.tensor(1.0)`` (float32) for a one-sample group's std, so ``std + 1e-6``
#: is rounded to float32 whatever the rewards' dtype: 1.0000009536743164, not 1.000001.
VERL_SINGLETON_DIVISOR = float(np.float32(1.0) + np.float32(1e-6))

_TRL_GRPO = ("trl/trainer/grpo_trainer.py (huggingface/trl main, scale_rewards as a string; "
             "older releases take a bool: True is 'group', False is 'none')")
_TRL_RLOO = "trl/trainer/rloo_trainer.py (huggingface/trl 00313f21)"
_VERL = "verl/trainer/ppo/core_algos.py (volcengine/verl 012be9d9)"
_ORLHF = ("openrlhf/trainer/ppo_utils/experience_maker.py (OpenRLHF/OpenRLHF main; "
          "dr_grpo in recent versions)")

_MEAN_KEEP_SINGLETON = replace(GROUP_MEAN, singleton="reward")
_LOO_KEEP_SINGLETON = replace(LEAVE_ONE_OUT, singleton="reward")
_LOO_ZERO_SINGLETON = replace(LEAVE_ONE_OUT, singleton="zero")
_NONE = Scaling()


def _std(epsilon, placement="added to std", singleton=np.nan, kind="group std"):
    return Scaling(kind, bessel=True, epsilon=epsilon, epsilon_placement=placement,
                   singleton_divisor=singleton)


def _rule(name, framework, option, source, formula, centring, scaling=_NONE, **kw):
    kw.setdefault("singleton", "0")
    return AdvantageRule(name, centring, scaling, Provenance(framework, option, source), formula,
                         **kw)


FRAMEWORK_RULES = (
    _rule("trl_group", "TRL", 'GRPOTrainer, scale_rewards="group" (default)', _TRL_GRPO,
          "(z - m_g) / (s_g + 1e-4)", GROUP_MEAN, _std(1e-4, singleton=1e-4),
          singleton="0 (std set to 0, numerator 0)", equal_group_sizes=True,
          project_name="std-normalised, full-mean numerator"),
    _rule("trl_batch", "TRL", 'GRPOTrainer, scale_rewards="batch"', _TRL_GRPO,
          "(z - m_g) / (s_B + 1e-4)", GROUP_MEAN, _std(1e-4, kind="batch std"),
          equal_group_sizes=True, project_name="full mean divided by the batch std"),
    _rule("trl_none", "TRL", 'GRPOTrainer, scale_rewards="none"', _TRL_GRPO, "z - m_g",
          GROUP_MEAN, equal_group_sizes=True, project_name="fullmean"),
    _rule("verl_grpo", "verl", "adv_estimator=grpo, norm_adv_by_std_in_grpo=True (default)",
          _VERL, "(z - m_g) / (s_g + 1e-6)", _MEAN_KEEP_SINGLETON,
          _std(1e-6, singleton=VERL_SINGLETON_DIVISOR),
          singleton="z / 1.0000009537 (mean 0 and a float32 std 1 are substituted; 1 + 1e-6 "
                    "rounds in float32)",
          project_name="std-normalised, full-mean numerator"),
    _rule("verl_grpo_nostd", "verl", "adv_estimator=grpo, norm_adv_by_std_in_grpo=False", _VERL,
          "z - m_g", _MEAN_KEEP_SINGLETON, singleton="z (mean 0 is substituted)",
          project_name="fullmean"),
    _rule("verl_rloo", "verl", "adv_estimator=rloo", _VERL,
          "z - (sum_g z - z)/(n_g - 1) = n_g (z - m_g)/(n_g - 1)", _LOO_KEEP_SINGLETON,
          singleton="z (left unchanged)", project_name="grpo"),
    _rule("verl_reinforce_pp_baseline", "verl", "adv_estimator=reinforce_plus_plus_baseline",
          _VERL, "c = z - m_g; (c - mean_B c) / sqrt(var_B c + 1e-8), one token per response",
          _MEAN_KEEP_SINGLETON, _std(1e-8, "inside sqrt", kind="batch whitening"),
          zero_variance="0 before whitening; then shifted by the batch mean",
          singleton="c = z (mean 0 is substituted)", min_batch_size=2,
          project_name="full mean, then whitened over the batch"),
    _rule("openrlhf_group_norm", "OpenRLHF", "--advantage_estimator group_norm", _ORLHF,
          "(z - m_g) / (s_g + 1e-9)", GROUP_MEAN, _std(1e-9),
          singleton="NaN (Bessel std of one sample)", min_group_size=2, equal_group_sizes=True,
          project_name="std-normalised, full-mean numerator"),
    _rule("openrlhf_dr_grpo", "OpenRLHF",
          "--advantage_estimator dr_grpo (and reinforce_baseline at this stage)", _ORLHF,
          "z - m_g", GROUP_MEAN, equal_group_sizes=True, project_name="fullmean"),
    _rule("openrlhf_rloo", "OpenRLHF", "--advantage_estimator rloo", _ORLHF,
          "z - (sum_g z - z)/(n_g - 1)", LEAVE_ONE_OUT,
          singleton="division by zero (n_samples_per_prompt - 1 = 0)", equal_group_sizes=True,
          project_name="grpo"),
    _rule("trl_rloo", "TRL", "RLOOTrainer, normalize_advantages=False (default)", _TRL_RLOO,
          "z - (sum_g z - z)/(n_g - 1)", _LOO_ZERO_SINGLETON,
          equal_group_sizes=True, project_name="grpo"),
    _rule("trl_rloo_normalized", "TRL", "RLOOTrainer, normalize_advantages=True", _TRL_RLOO,
          "a = leave-one-out; (a - mean_B a) / (s_B(a) + 1e-4)", _LOO_ZERO_SINGLETON,
          _std(1e-4, kind="batch whitening"),
          zero_variance="0 before the batch normalisation", singleton="0 before normalisation",
          min_batch_size=2, equal_group_sizes=True, project_name="grpo, whitened over the batch"),
)

for _r in FRAMEWORK_RULES:
    register_rule(_r)
