"""ustat-rl: the executable theory companion to "Demystifying Group Relative Policy Optimization:
Its Policy Gradient is a U-Statistic" (arXiv:2603.01162).

The public API: estimators, U-statistic tools, the moments contract and the theory built on it
(:mod:`ustat_rl.theory`), policies with exact moments (:mod:`ustat_rl.policies`), the Monte Carlo
engine, rate fits and the claims registry behind ``ustat-rl verify``.

Names are imported on first use (PEP 562), so ``ustat-rl --version`` and ``--help`` start without
loading torch, numba, scipy or statsmodels; ``from ustat_rl import X`` works as before.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

#: Module (relative to this package) that defines each public name.
_EXPORTS = {
    ".advantages.gradients": ("ESTIMATORS", "baseline_gradient", "fullmean_gradient",
        "grpo_gradient", "grpo_gradient_pairwise", "grpo_kernel", "leave_one_out_baseline", "oracle_gradient",
        "vanilla_gradient"),
    ".montecarlo": ("MonteCarloEstimate", "bandit_squared_errors", "bandit_statistics",
        "per_sample_squared_errors", "prompt_averaged_squared_errors", "run_monte_carlo"),
    ".policies": ("GroupSample", "HoeffdingComponents", "LogLinearBandit", "Optimum",
        "PolicyMoments", "PolicyState", "SoftmaxBandit"),
    ".stats.rates": ("RateFit", "SlopeFit", "fit_mse_rate", "loglog_slope"),
    ".seeding": ("child_seed",),
    ".theory": ("PromptMoments", "ScalingConstants"),
    ".theory.limit_law": ("LimitLaw", "bandit_limit_law", "quadratic_limit_law"),
    ".training.algorithm1": ("Algorithm1Config", "NoisyQuadratic", "TrainingResult", "train"),
    ".stats.ustatistics": ("HoeffdingParts", "ZetaEstimate", "estimate_zetas", "hoeffding_parts",
        "pairwise_kernel_matrix", "u_statistic", "ustat_variance"),
    ".weighted_chi2": ("GofResult", "WeightedChiSquare", "goodness_of_fit_tests"),
}
_ORIGIN = {name: module for module, names in _EXPORTS.items() for name in names}


__all__ = [
    "Algorithm1Config",
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


def __getattr__(name: str):
    if name in _ORIGIN:
        value = getattr(importlib.import_module(_ORIGIN[name], __name__), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    try:
        return importlib.import_module(f".{name}", __name__)  # a submodule, e.g. ustat_rl.theory
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
