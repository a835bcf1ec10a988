"""Monte Carlo: a reproducible streaming engine and the bandit statistics built on it.

* :mod:`.engine`: :func:`run_monte_carlo` and :class:`MonteCarloEstimate` for any statistic;
* :mod:`.bandit`: the softmax bandit's squared errors (numba kernel, or ``backend="torch"``,
  :class:`Backend` naming a device);
* :mod:`.torch_backend`: the torch implementation of the same law, on CPU or CUDA;
* :mod:`.batch_rules`: rules with batch statistics at a finite batch, on both backends.
"""

from .bandit import (
    bandit_squared_errors,
    bandit_statistics,
    per_sample_squared_errors,
    prompt_averaged_squared_errors,
)
from .engine import (
    Backend,
    Execution,
    MonteCarloEstimate,
    Statistic,
    run_monte_carlo,
    stratified_estimate,
)

__all__ = [
    "Backend",
    "Execution",
    "MonteCarloEstimate",
    "Statistic",
    "bandit_squared_errors",
    "bandit_statistics",
    "per_sample_squared_errors",
    "prompt_averaged_squared_errors",
    "run_monte_carlo",
    "stratified_estimate",
]
