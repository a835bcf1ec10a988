r"""ROLL's running reward normalisation on the softmax bandit: its long-run form and its loop.

ROLL's ``reward_norm`` with ``norm_mean_type=running`` and ``norm_std_type=running``
(alibaba/ROLL 8eb27cc2, ``roll/utils/functionals.py``) first merges the batch's rewards into a
``RunningMoments`` state (mean 0, variance 1 and count 1e-24 at the start, no decay; each
batch merged with its population variance, Chan's pooled update) and then gives every reward
``(z - mean) / (std + 1e-6)``, ``std`` the state's Bessel std. After ``t`` batches the state is
the mean and Bessel std of all ``t`` batches' rewards pooled (the start's weight 1e-24 aside),
so on a fresh state it is ``roll_batch`` and with a fixed policy, as ``t`` grows, it tends to
the fixed-statistics form

.. math::

    a = \frac{z - \mu}{\sigma + 10^{-6}}, \qquad
    \mu = \sum_x f(x) V(x), \quad
    \sigma^2 = \sum_x f(x)\big[\mathrm{Var}(Z \mid x) + V(x)^2\big] - \mu^2,

``mu`` and ``sigma`` the mean and sd of one response's reward under the sampling distribution
(a prompt from ``f``, a response from ``pi(. | x)``): the pooled rewards of many batches are
draws of that marginal law. That form is a constant baseline times a constant ``c = 1/(sigma +
1e-6)``: with ``g_b`` the estimator with the prompt-only baseline ``b(x) = mu`` (unbiased,
Corollary 5), ``E g_hat = c g`` and

.. math::

    \mathrm{MSE}_B = c^2\,E\|\hat g_b\|^2 - 2c\|g\|^2 + \|g\|^2, \qquad
    E\|\hat g_b\|^2 = \|g\|^2 + \frac{1}{B}\Big(\sum_x f(x)\big[M_x(\mu) + \|g(x)\|^2\big]
    - \|g\|^2\Big),

``M_x(mu)`` the per-prompt MSE of ``z - mu`` (:func:`~ustat_rl.theory.mse.per_prompt_mse`).
The Monte Carlo runs ROLL's loop, written from that description (in float64; ROLL's state is
float32): independent chains, each a fresh state updated step by step with its own batches, the
state applied to the batch just merged; the MSE at step ``t`` is over the chains, so it starts
at ``roll_batch``'s and tends to the fixed form's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int, as_rng
from .mse import per_prompt_mse
from .shrinkage import MonteCarloMoments, ShrinkageMoments, batch_moments, draw_batches

__all__ = ["ROLL_EPSILON", "RunningState", "RunningSteps", "fresh_state", "merge_batch",
           "reward_population", "fixed_statistics_exact", "running_norm_monte_carlo"]

#: ROLL's epsilon, added to the running Bessel std.
ROLL_EPSILON = 1e-6


def reward_population(bandit) -> tuple[float, float]:
    """``(mu, sigma)``: the mean and sd of one response's reward, a prompt drawn from ``f`` and
    a response from the policy (module docstring)."""
    m = bandit.moments()
    mu = float(m.prompt_prob @ m.value)
    second = float(m.prompt_prob @ (m.reward_var + m.value**2))
    return mu, float(np.sqrt(max(second - mu * mu, 0.0)))


def fixed_statistics_exact(bandit, group_size, batch_size=1,
                           epsilon: float = ROLL_EPSILON) -> ShrinkageMoments:
    """Exact mean factor, squared bias and MSE of ``(z - mu)/(sigma + epsilon)`` at ``B``
    groups of ``G``: the running option's long-run form (module docstring)."""
    G = as_int(group_size, "group_size", 1)
    B = as_int(batch_size, "batch_size", 1)
    m = bandit.moments()
    mu, sigma = reward_population(bandit)
    c = 1.0 / (sigma + float(epsilon))
    norm_sq = float(m.grad_norm_sq)
    second = float(m.prompt_prob @ (per_prompt_mse(m, "baseline", G, baseline=mu) + m.grad_sq))
    second_b = norm_sq + (second - norm_sq) / B
    return ShrinkageMoments(c, (c - 1.0) ** 2 * norm_sq,
                            c * c * second_b - 2.0 * c * norm_sq + norm_sq, G, B)


@dataclass(frozen=True)
class RunningState:
    """One ``RunningMoments`` state per chain, each ``(n,)``: mean, population variance, count
    and the Bessel std ``sqrt(var count / (count - 1))``."""

    mean: np.ndarray
    var: np.ndarray
    count: np.ndarray
    std: np.ndarray


def fresh_state(n_chains) -> RunningState:
    """ROLL's starting state, for each of ``n_chains`` chains: mean 0, variance 1, count
    1e-24."""
    n = as_int(n_chains, "n_chains", 1)
    return RunningState(np.zeros(n), np.ones(n), np.full(n, 1e-24), np.ones(n))


def merge_batch(state: RunningState, rewards) -> RunningState:
    """The state with each chain's batch ``rewards (n, k)`` merged in: the batch's mean and
    population variance pooled with the state's (Chan's update, as ROLL's ``update``)."""
    z = np.asarray(rewards, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] != state.mean.size or z.shape[1] < 1:
        raise ValueError(f"`rewards` must have shape ({state.mean.size}, k >= 1), one batch per "
                         f"chain, got {z.shape}")
    k = z.shape[1]
    total = state.count + k
    delta = z.mean(axis=1) - state.mean
    var = (state.var * state.count + z.var(axis=1) * k + delta**2 * state.count * k / total) / total
    return RunningState(state.mean + delta * k / total, var, total,
                        np.sqrt(var / (1.0 - 1.0 / total)))  # Bessel, over the count


@dataclass(frozen=True)
class RunningSteps:
    """The running loop's Monte Carlo: ``steps (k,)`` and the moments at each, over the
    chains."""

    steps: tuple[int, ...]
    moments: tuple[MonteCarloMoments, ...]


def running_norm_monte_carlo(bandit, group_size, batch_size, steps, n_chains, rng,
                             epsilon: float = ROLL_EPSILON) -> RunningSteps:
    """ROLL's running normalisation over ``max(steps)`` steps of ``n_chains`` independent
    chains (each a fresh state and its own batches of ``B`` groups of ``G``); the batch
    estimator's mean factor and MSE at each step of ``steps`` (1 is the fresh state)."""
    want = sorted({as_int(t, "steps", 1) for t in np.atleast_1d(steps)})
    if not want:
        raise ValueError("`steps` must name at least one step")
    rng = as_rng(rng)
    n = as_int(n_chains, "n_chains", 2)
    state = fresh_state(n)
    out = []
    for t in range(1, want[-1] + 1):
        s, score, n, B, G = draw_batches(bandit, group_size, batch_size, n, rng)
        z = s.reward.reshape(n, B * G)
        state = merge_batch(state, z)
        if t in want:
            adv = ((z - state.mean[:, None]) / (state.std[:, None] + float(epsilon)))
            adv = adv.reshape(n, B, G)
            out.append(batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G)))
    return RunningSteps(tuple(want), tuple(out))
