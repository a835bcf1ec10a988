"""Algorithm 1 with per-prompt group sizes at a fixed budget per iteration (docs/theory.md C40).

Each iteration of each run: the exact moments of a log-linear bandit at the current iterate give
the group sizes of the chosen rule (:mod:`ustat_rl.theory.allocation`, :mod:`ustat_rl.theory.allocation_rules`),
every prompt then draws its own group of ``G_x`` samples, and
``theta <- theta + beta g_hat`` with ``g_hat = sum_x f(x) g_hat_x``. The sizes depend on the
iterate only, never on the groups they are used with, so the gradient stays unbiased (C41).
Runs are seeded one generator per run (:func:`ustat_rl.training.run_generators`), and every rule
consumes ``2N`` uniforms per step, so runs of different rules with the same seed share their
random stream.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float, as_int
from ..advantages.gradients import fullmean_gradient, grpo_gradient
from ..theory.allocation import optimal_allocation
from ..theory.allocation_rules import BASELINE_RULES, baseline_allocation
from .algorithm1 import run_generators

__all__ = ["TRAINING_RULES", "allocated_sizes", "allocated_gradient", "train_allocated"]

#: ``"optimal"`` and the reward-only rules.
TRAINING_RULES = ("optimal",) + BASELINE_RULES
_ESTIMATORS = {"grpo": grpo_gradient, "fullmean": fullmean_gradient}


def allocated_sizes(bandit, theta, rule: str, estimator: str, budget: int) -> np.ndarray:
    """The rule's ``G_x`` from the exact moments at ``theta``."""
    m = bandit.moments(theta, matrices=False)
    if rule == "optimal":
        return optimal_allocation(m, estimator, budget).group_sizes
    return baseline_allocation(m, rule, estimator, budget).group_sizes


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


def train_allocated(bandit, theta0, n_iter, *, rule: str, budget, learning_rate, n_runs=1,
                    seed=0, estimator: str = "grpo", checkpoints=None, run_offset=0):
    """Run Algorithm 1 (constant rate) with the rule's sizes recomputed at every iterate.

    Returns
    -------
    checkpoints : ndarray (C,)
    objective : ndarray (R, C)
        ``J(theta_n)`` of every run at every checkpoint.
    """
    if rule not in TRAINING_RULES:
        raise ValueError(f"`rule` must be one of {TRAINING_RULES}, got {rule!r}")
    if estimator not in _ESTIMATORS:
        raise ValueError(f"`estimator` must be one of {tuple(_ESTIMATORS)}, got {estimator!r}")
    n_iter = as_int(n_iter, "n_iter", 1)
    n_runs = as_int(n_runs, "n_runs", 1)
    budget = as_int(budget, "budget", 2 * bandit.n_prompts)
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    marks = np.array(sorted({0, n_iter} if checkpoints is None else set(checkpoints)))
    if marks.min() < 0 or marks.max() > n_iter:
        raise ValueError(f"`checkpoints` must lie in [0, {n_iter}]")
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
            sizes = allocated_sizes(bandit, theta, rule, estimator, budget)
            theta = theta + beta * allocated_gradient(bandit, theta, sizes,
                                                      gen.random(2 * budget), estimator)
    return marks, objective
