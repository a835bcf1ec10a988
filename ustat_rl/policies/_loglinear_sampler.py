"""Algorithm 1's minibatch sampler for the log-linear bandit, vectorised over runs.

Kept apart from :mod:`.loglinear` (the exact theory of the bandit) so each module stays small.
"""

from __future__ import annotations

import numpy as np

from ..advantages.registry import get_rule

__all__ = ["sample_gradient"]


def sample_gradient(bandit, theta, uniforms, estimator, group_size, batch_size):
    """Algorithm 1's minibatch estimate on a :class:`LogLinearBandit`.

    Per run: ``B`` prompts from ``f`` and, per prompt, ``G`` actions from ``pi_theta`` and
    rewards, all by inverse-CDF from the uniforms; then ``g_hat = (1/(BG)) sum W (Z~ - C)``
    with the centred rewards of any group rule of :mod:`ustat_rl.advantages` (``C`` = 0 for
    vanilla, the leave-one-out mean for GRPO, ``V(x)`` for the oracle, the group mean for the
    full mean), the value being that of the shaped reward. Per-sample contributions are summed into per-(prompt, action)
    coefficients with one ``bincount`` and mapped through the features once.
    """
    rule = get_rule(estimator, "estimator")
    if rule.statistics != "group" or rule.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` {rule.name!r} needs a batch statistic or a baseline b(x); "
                         "the sampler takes rules of the group alone")
    n_runs = theta.shape[0]
    P, K, B, G = bandit.n_prompts, bandit.n_actions, batch_size, group_size
    lo, hi = bandit.reward_values
    logits = np.einsum("pkd,rd->rpk", bandit.features, theta)  # (R, P, K)
    logits -= logits.max(axis=2, keepdims=True)
    pi = np.exp(logits)
    pi /= pi.sum(axis=2, keepdims=True)
    if bandit.prompt_sampling == "stratified":
        # B // P full passes, then the first B mod P prompts of a uniform random permutation
        order = np.argsort(uniforms[:, :P], axis=1)  # (R, P)
        passes = np.broadcast_to(np.arange(P), (n_runs, P))
        prompt = np.concatenate([passes] * (B // P) + [order[:, :B % P]], axis=1)  # (R, B)
        used = P
    else:
        cum_f = np.cumsum(bandit.prompt_prob)[:-1]
        prompt = np.searchsorted(cum_f, uniforms[:, :B], side="right")  # (R, B)
        used = B
    u_action = uniforms[:, used:used + B * G].reshape(n_runs, B, G)
    u_reward = uniforms[:, used + B * G:].reshape(n_runs, B, G)
    rows = np.arange(n_runs)[:, None]
    cum_pi = np.cumsum(pi, axis=2)[rows, prompt, :-1]  # (R, B, K-1)
    action = np.sum(u_action[..., None] >= cum_pi[:, :, None, :], axis=3)  # (R, B, G)
    cell = prompt[:, :, None] * K + action  # (R, B, G)  flat (prompt, action)
    success = u_reward < bandit.reward_prob.ravel()[cell]
    reward = lo + (hi - lo) * success  # (R, B, G)
    if bandit.kl_weight:
        log_ratio = np.log(pi) - bandit.ref_log_policy  # (R, P, K)
        reward = reward - bandit.kl_weight * log_ratio.reshape(n_runs, -1)[rows[:, :, None], cell]
    value = None
    if rule.centring.reference_source == "value":
        shaped = bandit.reward_mean - (bandit.kl_weight * log_ratio if bandit.kl_weight else 0.0)
        value = np.sum(pi * shaped, axis=2)[rows, prompt].reshape(-1)  # (R B,)
    centred = rule.grouped(reward.reshape(-1, G), value).reshape(reward.shape)
    index = (np.arange(n_runs)[:, None, None] * (P * K) + cell).ravel()
    coef = np.bincount(index, weights=centred.ravel() / (B * G),
                       minlength=n_runs * P * K).reshape(n_runs, P, K)  # sum of (Z~ - C)/(BG)
    coef -= pi * coef.sum(axis=2, keepdims=True)  # score centring: e_a - pi(x)
    return np.einsum("rpk,pkd->rd", coef, bandit.features)
