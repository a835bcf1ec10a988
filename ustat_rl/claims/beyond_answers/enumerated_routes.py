"""Four exact moment routes against every outcome of a group, advantages written out (C71).

Each route answers a user's question in closed form from a bandit's
:class:`~ustat_rl.theory.moments.PromptMoments`; here each is set against the sum over all
``(2K)^G`` outcomes of a group of a softmax bandit (``bandit.enumerate_groups``, the problem's
exact law), each outcome's advantages written out in this module, never read from a rule:

* :func:`ustat_rl.theory.advantage.per_prompt_advantage_mse`: ``E||g_hat(x) - t(x)||^2`` per
  prompt for ``t = g(x)`` and for the arcsin target ``g(x)/sqrt(V(1 - V))``, for the
  leave-one-out baseline and TRL's group-standardised advantage (``std`` with Bessel's
  correction, ``+ 1e-4``);
* :func:`ustat_rl.theory.advantage.dynamic_sampling_mse`: DAPO's batch refilled until no group
  is all-equal, its scale ``1/(1 - Q)`` and its MSE at ``B`` kept groups, from the outcomes
  whose rewards are not all equal, renormalised here prompt by prompt;
* :func:`ustat_rl.theory.mse.per_prompt_covariance`: ``Cov(g_hat(x) | x)`` as a ``(d, d)``
  matrix per prompt for the leave-one-out, full-mean and vanilla estimators;
* :func:`ustat_rl.theory.ebpo.ebpo_advantages`: EBPO's shrunk advantages at a fixed prior
  against ``z - (1 - S) zbar - S mu`` with ``S`` written out, and the batch MSE of the
  enumerated advantages against :func:`~ustat_rl.theory.ebpo.ebpo_exact`'s table route.

All exact (rtol 1e-10 on sums of at most 4096 terms), no sampling: no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, register

__all__ = ["ROUTE_LOGITS", "ROUTE_REWARD_PROB", "ROUTE_PROMPT_PROB", "ROUTE_GROUP_SIZES",
           "ROUTE_BATCH_SIZES", "ROUTE_PRIOR", "ROUTE_RTOL", "route_bandit", "loo", "full_mean",
           "trl_group", "vanilla", "enumerated", "prompt_mse", "dynamic_sampling",
           "covariance", "batch_mse"]

#: The bandit: two prompts of three actions, unequal prompt weights, one prompt near-solved.
ROUTE_LOGITS = ((0.4, -0.3, 0.0), (-0.2, 0.5, 0.1))
ROUTE_REWARD_PROB = ((0.9, 0.3, 0.0), (0.95, 0.8, 0.97))
ROUTE_PROMPT_PROB = (0.35, 0.65)
#: Group sizes enumerated (6^G outcomes each) and batch sizes of the batch routes.
ROUTE_GROUP_SIZES = (2, 3, 4)
ROUTE_BATCH_SIZES = (1, 3)
#: EBPO's fixed prior ``(mu, sigma^2, tau^2)``: not the stationary one, so ``S`` is an input.
ROUTE_PRIOR = (0.55, 0.23, 0.04)
#: Sums of at most 4096 products of probabilities and scores: rounding only.
ROUTE_RTOL = 1e-10


def route_bandit():
    from ...policies.softmax import SoftmaxBandit

    return SoftmaxBandit(np.array(ROUTE_LOGITS), np.array(ROUTE_REWARD_PROB),
                         np.array(ROUTE_PROMPT_PROB))


# advantages of outcomes (M, G) written out: each returns (M, G)
def loo(z):
    """``z_i - mean of the others``."""
    G = z.shape[1]
    return z - (z.sum(axis=1, keepdims=True) - z) / (G - 1)


def full_mean(z):
    """``z_i - zbar`` (the response's own reward in the mean)."""
    return z - z.mean(axis=1, keepdims=True)


def trl_group(z):
    """TRL's default: ``(z_i - zbar)/(std + 1e-4)``, ``std`` with Bessel's correction."""
    dev = z - z.mean(axis=1, keepdims=True)
    std = np.sqrt((dev**2).sum(axis=1, keepdims=True) / (z.shape[1] - 1))
    return dev / (std + 1e-4)


def vanilla(z):
    """``z_i`` (no baseline)."""
    return z


def enumerated(bandit, prompt: int, G: int, estimator, full: bool = False):
    """``(estimates (M, d), probabilities (M,), rewards (M, G))`` of every outcome of a group,
    ``g_hat = (1/G) sum_i a_i W_i`` with ``a = advantage(rewards)``; ``full`` embeds the scores
    in the whole parameter (else the prompt's own block)."""
    action, reward, prob = bandit.enumerate_groups(prompt, G)
    score = bandit.scores(np.full(len(prob), prompt), action, full=full)  # (M, G, d)
    return np.einsum("mg,mgd->md", estimator(reward), score) / G, prob, reward


def prompt_mse(bandit, G: int, estimator, arcsin: bool = False) -> np.ndarray:
    """``E||g_hat(x) - t(x)||^2`` per prompt by enumeration, ``t = g(x)`` or
    ``g(x)/sqrt(V(1 - V))``."""
    out = []
    for x in range(bandit.n_prompts):
        est, prob, _ = enumerated(bandit, x, G, estimator)
        target = bandit.grad_per_prompt[x]
        if arcsin:
            target = target / np.sqrt(bandit.value[x] * (1.0 - bandit.value[x]))
        out.append(prob @ np.sum((est - target) ** 2, axis=1))
    return np.array(out)


def batch_mse(bandit, G: int, B: int, estimator) -> float:
    """``E||(1/B) sum_b g_hat(X_b) - g||^2`` over ``B`` i.i.d. prompts, by enumeration."""
    f = bandit.prompt_prob
    mean, second = np.zeros(bandit.grad.size), 0.0
    for x in range(bandit.n_prompts):
        est, prob, _ = enumerated(bandit, x, G, estimator, full=True)
        mean += f[x] * (prob @ est)
        second += f[x] * (prob @ np.sum(est**2, axis=1))
    g = bandit.grad
    return float(second / B + (1.0 - 1.0 / B) * mean @ mean - 2.0 * mean @ g + g @ g)


def dynamic_sampling(bandit, G: int, B: int, estimator) -> tuple[float, float]:
    """``(1/(1 - Q), MSE)`` of ``B`` groups kept from draws whose rewards are not all equal:
    each kept group is a draw of ``(x, outcome)`` with probability ``f(x) P(outcome)/(1 - Q)``
    over the outcomes kept."""
    f = bandit.prompt_prob
    mean, second, keep = np.zeros(bandit.grad.size), 0.0, 0.0
    for x in range(bandit.n_prompts):
        est, prob, reward = enumerated(bandit, x, G, estimator, full=True)
        kept = reward.min(axis=1) != reward.max(axis=1)
        w = f[x] * prob * kept  # (M,) joint probability of (x, outcome) among kept draws
        keep += w.sum()
        mean += w @ est
        second += w @ np.sum(est**2, axis=1)
    mean, second = mean / keep, second / keep
    g = bandit.grad
    return 1.0 / keep, float(second / B + (1.0 - 1.0 / B) * mean @ mean - 2.0 * mean @ g + g @ g)


def covariance(bandit, G: int, estimator) -> np.ndarray:
    """``Cov(g_hat(x) | x)`` per prompt, ``(P, d, d)``, over the whole parameter."""
    out = []
    for x in range(bandit.n_prompts):
        est, prob, _ = enumerated(bandit, x, G, estimator, full=True)
        mean = prob @ est
        out.append(np.einsum("m,mk,ml->kl", prob, est, est) - np.outer(mean, mean))
    return np.array(out)


def _ebpo_written(z, G):
    mu, sigma2, tau2 = ROUTE_PRIOR
    S = (sigma2 / G) / (sigma2 / G + tau2)
    return z - (1.0 - S) * z.mean(axis=1, keepdims=True) - S * mu


def _mse_checks(bandit, moments) -> list:
    from ...theory.advantage import per_prompt_advantage_mse

    checks = []
    for rule, written in (("grpo", loo), ("trl_group", trl_group)):
        for target in ("grad", "arcsin"):
            exact = [per_prompt_advantage_mse(moments, rule, G, target) for G in ROUTE_GROUP_SIZES]
            enum = [prompt_mse(bandit, G, written, target == "arcsin") for G in ROUTE_GROUP_SIZES]
            checks.append(check_exact(f"per_prompt_advantage_mse ({rule}, target {target}) at "
                                      f"G = {ROUTE_GROUP_SIZES}: the enumeration", enum, exact,
                                      rtol=ROUTE_RTOL))
    return checks


def _dynamic_checks(bandit, moments) -> list:
    from ...theory.advantage import dynamic_sampling_mse

    checks = []
    for rule, written in (("grpo", loo), ("trl_group", trl_group)):
        exact = [dynamic_sampling_mse(moments, rule, G, B) for G in ROUTE_GROUP_SIZES
                 for B in ROUTE_BATCH_SIZES]
        enum = [dynamic_sampling(bandit, G, B, written) for G in ROUTE_GROUP_SIZES
                for B in ROUTE_BATCH_SIZES]
        checks.append(check_exact(f"dynamic_sampling_mse ({rule}): scale 1/(1 - Q) and MSE at "
                                  f"G = {ROUTE_GROUP_SIZES}, B = {ROUTE_BATCH_SIZES}: the kept "
                                  "outcomes enumerated", enum, exact, rtol=ROUTE_RTOL))
    return checks


def _covariance_checks(bandit) -> list:
    from ...theory.mse import per_prompt_covariance

    moments = bandit.moments(matrices=True)
    checks = []
    for rule, written in (("grpo", loo), ("fullmean", full_mean), ("vanilla", vanilla)):
        sizes = [G for G in ROUTE_GROUP_SIZES if G >= 2]
        exact = [per_prompt_covariance(moments, rule, G) for G in sizes]
        enum = [covariance(bandit, G, written) for G in sizes]
        checks.append(check_exact(f"per_prompt_covariance ({rule}) at G = {tuple(sizes)}: the "
                                  "(d, d) covariance of the enumerated estimates", enum, exact,
                                  rtol=ROUTE_RTOL))
    return checks


def _ebpo_checks(bandit, moments) -> list:
    from ...theory.ebpo import EBPOPrior, ebpo_advantages, ebpo_exact

    prior = EBPOPrior(*ROUTE_PRIOR)
    checks = []
    for G in ROUTE_GROUP_SIZES:
        reward = bandit.enumerate_groups(1, G)[1]  # (6^G, G) every reward row, with repeats
        checks.append(check_exact(f"ebpo_advantages at G = {G} on all {len(reward)} reward "
                                  "rows: z - (1 - S) zbar - S mu, S written out",
                                  _ebpo_written(reward, G), ebpo_advantages(reward, prior),
                                  rtol=ROUTE_RTOL))
    exact = [ebpo_exact(moments, G, B, prior).mse for G in ROUTE_GROUP_SIZES
             for B in ROUTE_BATCH_SIZES]
    enum = [batch_mse(bandit, G, B, lambda z, p=prior: ebpo_advantages(z, p))
            for G in ROUTE_GROUP_SIZES for B in ROUTE_BATCH_SIZES]
    checks.append(check_exact(f"ebpo_exact's batch MSE at G = {ROUTE_GROUP_SIZES}, B = "
                              f"{ROUTE_BATCH_SIZES}: ebpo_advantages on every outcome",
                              enum, exact, rtol=ROUTE_RTOL))
    return checks


@register("C71", "Beyond the paper: the exact per-prompt MSE (against g(x) and the arcsin "
          "target), DAPO's dynamic-sampling scale and MSE, the per-prompt covariance matrix and "
          "EBPO's advantages and batch MSE equal sums over every outcome of a group with the "
          "advantages written out",
          "derived (docs/theory.md C71; section 7's exact moments, C5, C26 and C54.ebpo)",
          "per_prompt_advantage_mse, dynamic_sampling_mse, per_prompt_covariance, "
          "ebpo_advantages and ebpo_exact on a 2-prompt, 3-action softmax bandit at G = 2, 3, "
          "4 against enumeration of all 6^G outcomes; all exact (rtol 1e-10)")
def check_c71(ctx) -> list:
    bandit = route_bandit()
    moments = bandit.moments()
    return (_mse_checks(bandit, moments) + _dynamic_checks(bandit, moments)
            + _covariance_checks(bandit) + _ebpo_checks(bandit, moments))
