"""ustat-rl: the executable theory companion to "Demystifying Group Relative Policy Optimization:
Its Policy Gradient is a U-Statistic" (arXiv:2603.01162).

The public API: estimators, U-statistic tools, the moments contract and the theory built on it
(:mod:`ustat_rl.theory`), policies with exact moments (:mod:`ustat_rl.policies`), the Monte Carlo
engine, rate fits and the claims registry behind ``ustat-rl verify``.

Modules that moved into packages keep their old import paths through :mod:`ustat_rl._moved`.
"""

from . import _moved  # noqa: F401  (importing it installs the alias finder)
from .advantages.gradients import (
    ESTIMATORS,
    baseline_gradient,
    fullmean_gradient,
    grpo_gradient,
    grpo_gradient_pairwise,
    grpo_kernel,
    leave_one_out_baseline,
    oracle_gradient,
    vanilla_gradient,
)
from .montecarlo import (
    MonteCarloEstimate,
    bandit_squared_errors,
    bandit_statistics,
    per_sample_squared_errors,
    prompt_averaged_squared_errors,
    run_monte_carlo,
)
from .policies import (
    GroupSample,
    HoeffdingComponents,
    LogLinearBandit,
    Optimum,
    PolicyMoments,
    PolicyState,
    SoftmaxBandit,
)
from .rates import RateFit, SlopeFit, fit_mse_rate, loglog_slope
from .seeding import child_seed
from .theory import PromptMoments, ScalingConstants
from .theory.limit_law import LimitLaw, bandit_limit_law, quadratic_limit_law
from .training.algorithm1 import NoisyQuadratic, TrainingResult, train
from .ustatistics import (
    HoeffdingParts,
    ZetaEstimate,
    estimate_zetas,
    hoeffding_parts,
    pairwise_kernel_matrix,
    u_statistic,
    ustat_variance,
)
from .weighted_chi2 import GofResult, WeightedChiSquare, goodness_of_fit_tests

__version__ = "0.1.0"

__all__ = [
    "ESTIMATORS",
    "GofResult",
    "GroupSample",
    "HoeffdingComponents",
    "HoeffdingParts",
    "LimitLaw",
    "LogLinearBandit",
    "NoisyQuadratic",
    "Optimum",
    "PolicyMoments",
    "PolicyState",
    "PromptMoments",
    "TrainingResult",
    "MonteCarloEstimate",
    "RateFit",
    "ScalingConstants",
    "SlopeFit",
    "SoftmaxBandit",
    "ZetaEstimate",
    "bandit_statistics",
    "child_seed",
    "bandit_squared_errors",
    "baseline_gradient",
    "estimate_zetas",
    "fit_mse_rate",
    "fullmean_gradient",
    "grpo_gradient",
    "grpo_gradient_pairwise",
    "grpo_kernel",
    "hoeffding_parts",
    "leave_one_out_baseline",
    "loglog_slope",
    "oracle_gradient",
    "pairwise_kernel_matrix",
    "per_sample_squared_errors",
    "prompt_averaged_squared_errors",
    "run_monte_carlo",
    "u_statistic",
    "ustat_variance",
    "vanilla_gradient",
    "bandit_limit_law",
    "quadratic_limit_law",
    "train",
    "WeightedChiSquare",
    "goodness_of_fit_tests",
]
