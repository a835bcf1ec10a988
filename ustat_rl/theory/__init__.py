"""The paper's finite-G theory as functions of one moments contract (docs/theory.md).

A policy supplies :class:`PromptMoments` (exactly, or estimated from rollouts); everything here
turns them into results, each stated once:

* :mod:`.mse`: exact per-prompt and minibatch MSE of every estimator (Theorem 2, Proposition 3,
  Corollaries 4-5), the reversal condition (C10) and the matrix forms;
* :mod:`.hoeffding`: the Hoeffding variances of the GRPO kernel (Lemma 1);
* :mod:`.scaling`: :class:`ScalingConstants`, the constants of Theorem 7's law;
* :mod:`.group_size`: the one owner of the group size: ``G*``, the budget and its grid, every
  fixed-budget curve, the best ``G`` for any rule, and :func:`group_size_answer`;
* :mod:`.gram`: a pilot's Gram matrix held as its ``(P, k)`` factor;
* :mod:`.optimisation`: Lemma 6's bounds (C14, C15);
* :mod:`.limit_law`: Theorem 8's weighted chi-square weights (C20);
* :mod:`.advantage`: exact moments of any group-relative advantage for binary rewards
  (docs/theory.md section 7, C24, C26).
"""

from .advantage import (
    AdvantageMoments,
    AdvantageTable,
    advantage_moments,
    advantage_table,
    all_equal_probability,
    dynamic_sampling_mse,
    minibatch_advantage_mse,
    per_prompt_advantage_mse,
)
from .group_size import (
    GroupSizeAnswer,
    admissible_group_sizes,
    budget_optimal_group_size,
    fixed_budget_mse,
    group_size_answer,
    optimal_group_size,
)
from .hoeffding import KernelZetas, kernel_zetas
from .limit_law import (
    LimitLaw,
    bandit_limit_law,
    eigenbasis_covariance,
    limit_weights,
    lyapunov_covariance,
    noise_omega,
    quadratic_limit_law,
    scalar_limit_weight,
)
from .moments import MOMENT_KINDS, PromptMoments, validate_moments
from .mse import (
    ESTIMATOR_NAMES,
    assumption2_baseline_mse,
    between_prompt_covariance,
    grpo_vanilla_margin,
    minibatch_covariance,
    minibatch_mse,
    optimal_constant_baseline,
    per_prompt_covariance,
    per_prompt_mse,
    prompt_averaged_mse,
    prompt_heterogeneity,
    reversal_condition,
    score_reward_covariance,
    shrink_factor,
)
from .noise import minibatch_variance
from .optimisation import (
    contraction_factor,
    lemma6_constant_bound,
    lemma6_inverse_bound,
    lemma14_start,
)
from .scaling import C1_RTOL, ScalingConstants, scaling_constants

__all__ = [
    "AdvantageMoments",
    "AdvantageTable",
    "C1_RTOL",
    "ESTIMATOR_NAMES",
    "MOMENT_KINDS",
    "KernelZetas",
    "LimitLaw",
    "PromptMoments",
    "ScalingConstants",
    "admissible_group_sizes",
    "GroupSizeAnswer",
    "group_size_answer",
    "optimal_group_size",
    "fixed_budget_mse",
    "advantage_moments",
    "advantage_table",
    "all_equal_probability",
    "assumption2_baseline_mse",
    "bandit_limit_law",
    "between_prompt_covariance",
    "budget_optimal_group_size",
    "contraction_factor",
    "eigenbasis_covariance",
    "grpo_vanilla_margin",
    "kernel_zetas",
    "lemma14_start",
    "lemma6_constant_bound",
    "lemma6_inverse_bound",
    "limit_weights",
    "lyapunov_covariance",
    "minibatch_advantage_mse",
    "dynamic_sampling_mse",
    "minibatch_covariance",
    "minibatch_mse",
    "minibatch_variance",
    "noise_omega",
    "optimal_constant_baseline",
    "per_prompt_advantage_mse",
    "per_prompt_covariance",
    "per_prompt_mse",
    "prompt_averaged_mse",
    "prompt_heterogeneity",
    "quadratic_limit_law",
    "reversal_condition",
    "scalar_limit_weight",
    "scaling_constants",
    "score_reward_covariance",
    "shrink_factor",
    "validate_moments",
]
