"""Monte Carlo of the allocated batch estimator on a log-linear bandit (docs/theory.md C40, C41).

One replicate draws, for every prompt ``x`` of the bandit, its own group of ``G_x`` actions and
rewards, forms the per-prompt estimator of :mod:`ustat_rl.advantages.gradients` from the literal scores
``W = phi(x, a) - E_pi phi(x, .)``, and returns ``g_hat = sum_x f(x) g_hat_x`` minus the
batch target ``sum_x f(x) g(x)``: the quantity whose mean square C40's exact formula predicts
and whose mean C41 says is zero for an allocation fixed before the groups are drawn.

``adaptive=True`` is the deliberately wrong allocation of C41's negative control: it looks at
the current group, and when the first ``G_x`` rewards are all equal it draws ``G_x`` more and
uses all ``2 G_x`` (the all-equal group would give a zero leave-one-out estimate). Its group
size depends on the group's own rewards, and the estimator is biased.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_rng
from ..advantages.gradients import fullmean_gradient, grpo_gradient, vanilla_gradient

__all__ = ["MC_ESTIMATORS", "allocated_errors"]

_ESTIMATORS = {"grpo": grpo_gradient, "fullmean": fullmean_gradient, "vanilla": vanilla_gradient}
#: Estimators the sampler implements (the closed-form rules of :mod:`ustat_rl.theory.mse`).
MC_ESTIMATORS = tuple(_ESTIMATORS)

#: Replicates per block (bounds memory at ``block * max G * d`` floats per prompt).
_BLOCK = 2048


def draw_groups(rng, pi_x, reward_x, n, size):
    """Actions by inverse CDF and Bernoulli rewards: ``(n, size)`` each."""
    cum = np.cumsum(pi_x)
    cum[-1] = 1.0
    action = np.minimum(np.searchsorted(cum, rng.random((n, size)), side="right"),
                        pi_x.size - 1)
    reward = (rng.random((n, size)) < reward_x[action]).astype(np.float64)
    return action, reward


def _prompt_estimate(fn, score_x, action, reward):
    return fn(score_x[action], reward, per_prompt=True)  # (n, d)


def allocated_errors(bandit, theta, estimator: str, group_sizes, n_reps, rng,
                     adaptive: bool = False) -> np.ndarray:
    """``g_hat - sum_x f(x) g(x)`` for ``n_reps`` independent batches, shape ``(n_reps, d)``.

    Parameters
    ----------
    bandit : LogLinearBandit
        With ``kl_weight = 0`` (the reward is the Bernoulli draw itself).
    theta : array_like (d,)
    estimator : {"grpo", "fullmean", "vanilla"}
    group_sizes : array_like of int (P,)
        ``G_x`` (at least 2 for the leave-one-out rules).
    n_reps : int
    rng : numpy.random.Generator or seed
    adaptive : bool
        Use the data-dependent allocation of the module docstring (a negative control).
    """
    if estimator not in _ESTIMATORS:
        raise ValueError(f"`estimator` must be one of {MC_ESTIMATORS}, got {estimator!r}")
    if bandit.kl_weight != 0.0:
        raise ValueError("`bandit` must have kl_weight = 0 for the allocated Monte Carlo")
    sizes = np.asarray(group_sizes)
    if sizes.shape != (bandit.n_prompts,):
        raise ValueError(f"`group_sizes` must have shape ({bandit.n_prompts},), got {sizes.shape}")
    low = 1 if estimator == "vanilla" else 2
    sizes = [as_int(s.item(), "group_sizes", low) for s in sizes]
    n_reps = as_int(n_reps, "n_reps", 1)
    rng = as_rng(rng)
    state = bandit.state(theta)
    lo, hi = bandit.reward_values
    fn = _ESTIMATORS[estimator]
    f = bandit.prompt_prob
    target = f @ state.grad_per_prompt  # (d,)
    out = np.empty((n_reps, bandit.dim))
    for start in range(0, n_reps, _BLOCK):
        n = min(_BLOCK, n_reps - start)
        total = np.zeros((n, bandit.dim))
        for x, G in enumerate(sizes):
            pi_x, r_x, w_x = state.policy[x], bandit.reward_prob[x], state.score[x]  # w_x (K, d)
            action, success = draw_groups(rng, pi_x, r_x, n, 2 * G if adaptive else G)
            reward = lo + (hi - lo) * success
            if not adaptive:
                total += f[x] * _prompt_estimate(fn, w_x, action, reward)
                continue
            first = reward[:, :G]
            equal = np.all(first == first[:, :1], axis=1)  # (n,) the first G all equal
            short = _prompt_estimate(fn, w_x, action[:, :G], first)
            full = _prompt_estimate(fn, w_x, action, reward)
            total += f[x] * np.where(equal[:, None], full, short)
        out[start:start + n] = total - target
    return out
