"""Algorithm 1 with per-prompt group sizes at a fixed budget per iteration (docs/theory.md C40).

Each iteration of each run: the exact moments of a log-linear bandit at the current iterate give
the group sizes of the chosen allocation (:mod:`ustat_rl.theory.allocation`,
:mod:`ustat_rl.theory.allocation_baselines`), every prompt then draws its own group of ``G_x`` samples, and
``theta <- theta + beta g_hat`` with ``g_hat = sum_x f(x) g_hat_x``. The sizes depend on the
iterate only, never on the groups they are used with, so the gradient stays unbiased (C41).
Runs are seeded one generator per run (:func:`ustat_rl.training.run_generators`), and every
allocation consumes ``2N`` uniforms per step, so runs of different allocations with the same
seed share their random stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int
from ..advantages.gradients import fullmean_gradient, grpo_gradient
from ..theory.allocation import optimal_allocation
from ..theory.allocation_baselines import BASELINE_ALLOCATIONS, baseline_allocation
from .algorithm1 import run_generators

__all__ = ["TRAINING_ALLOCATIONS", "AllocatedTraining", "allocated_sizes", "allocated_gradient",
           "train_allocated"]

#: ``"optimal"`` and the reward-only allocations.
TRAINING_ALLOCATIONS = ("optimal",) + BASELINE_ALLOCATIONS
_ESTIMATORS = {"grpo": grpo_gradient, "fullmean": fullmean_gradient}


def allocated_sizes(bandit, theta, allocation: str, estimator: str, budget: int) -> np.ndarray:
    """The allocation's ``G_x`` from the exact moments at ``theta``."""
    m = bandit.moments(theta, matrices=False)
    if allocation == "optimal":
        return optimal_allocation(m, estimator, budget).group_sizes
    return baseline_allocation(m, allocation, estimator, budget).group_sizes


def allocated_gradient(bandit, theta, sizes, uniforms, estimator: str = "grpo") -> np.ndarray:
    """``g_hat = sum_x f(x) g_hat_x`` from ``2 sum G_x`` uniforms (actions, then rewards).

    Inverse-CDF sampling of each prompt's ``G_x`` actions, then Bernoulli rewards; ``(d,)``.
    """
    state = bandit.state(theta)
    lo, hi = bandit.reward_values
    n = int(np.sum(sizes))
    u_action, u_reward = uniforms[:n], uniforms[n:2 * n]
    grad = np.zeros(bandit.dim)
    start = 0
    for x, G in enumerate(sizes):
        cum = np.cumsum(state.policy[x])
        cum[-1] = 1.0
        stop = start + int(G)
        action = np.minimum(np.searchsorted(cum, u_action[start:stop], side="right"),
                            cum.size - 1)
        shaping = state.shaped_mean[x, action] - bandit.reward_mean[x, action]  # -tau log ratio
        reward = lo + (hi - lo) * (u_reward[start:stop] < bandit.reward_prob[x, action]) + shaping
        grad += bandit.prompt_prob[x] * _ESTIMATORS[estimator](state.score[x][action], reward)
        start = stop
    return grad


@dataclass(frozen=True)
class AllocatedTraining:
    """The settings of Algorithm 1 with per-prompt group sizes (constant rate), validated.

    Attributes
    ----------
    n_iter : int
        Iterations ``n``.
    allocation : str
        One of :data:`TRAINING_ALLOCATIONS`: how the budget is split over the prompts.
    budget : int
        Samples per iteration, ``N = sum_x G_x`` (at least 2 per prompt).
    learning_rate : float
        ``beta``.
    estimator : {"grpo", "fullmean"}
        The gradient estimator within each prompt's group.
    checkpoints : sequence of int, optional
        Iterations at which ``J(theta)`` is recorded (default ``[0, n_iter]``); stored sorted.
    """

    n_iter: int
    allocation: str
    budget: int
    learning_rate: float
    estimator: str = "grpo"
    checkpoints: tuple[int, ...] | None = None

    def __post_init__(self):
        if self.allocation not in TRAINING_ALLOCATIONS:
            raise ValueError(f"`allocation` must be one of {TRAINING_ALLOCATIONS}, got "
                             f"{self.allocation!r}")
        if self.estimator not in _ESTIMATORS:
            raise ValueError(f"`estimator` must be one of {tuple(_ESTIMATORS)}, got "
                             f"{self.estimator!r}")
        n_iter = as_int(self.n_iter, "n_iter", 1)
        marks = tuple(sorted({0, n_iter} if self.checkpoints is None else
                             {as_int(c, "checkpoints", 0) for c in self.checkpoints}))
        if not marks or marks[-1] > n_iter:
            raise ValueError(f"`checkpoints` must lie in [0, {n_iter}]")
        for name, value in (("n_iter", n_iter), ("budget", as_int(self.budget, "budget", 2)),
                            ("learning_rate", as_float(self.learning_rate, "learning_rate",
                                                       low=0.0)),
                            ("checkpoints", marks)):
            object.__setattr__(self, name, value)


def train_allocated(bandit, theta0, config: AllocatedTraining, *, n_runs=1, seed=0,
                    run_offset=0):
    """Run Algorithm 1 (constant rate) with the allocation's sizes recomputed at every iterate.

    Returns
    -------
    checkpoints : ndarray (C,)
    objective : ndarray (R, C)
        ``J(theta_n)`` of every run at every checkpoint.
    """
    if not isinstance(config, AllocatedTraining):
        raise TypeError(f"`config` must be an AllocatedTraining, got {type(config).__name__}")
    n_runs = as_int(n_runs, "n_runs", 1)
    budget = as_int(config.budget, "budget", 2 * bandit.n_prompts)
    n_iter, beta, estimator = config.n_iter, config.learning_rate, config.estimator
    marks = np.array(config.checkpoints)
    theta0 = np.asarray(theta0, dtype=np.float64)
    objective = np.empty((n_runs, marks.size))
    for r, gen in enumerate(run_generators(seed, n_runs, run_offset)):
        theta = theta0.copy()
        for i in range(n_iter + 1):
            hit = np.flatnonzero(marks == i)
            if hit.size:
                objective[r, hit[0]] = bandit.objective(theta)
            if i == n_iter:
                break
            sizes = allocated_sizes(bandit, theta, config.allocation, estimator, budget)
            theta = theta + beta * allocated_gradient(bandit, theta, sizes,
                                                      gen.random(2 * budget), estimator)
    return marks, objective
