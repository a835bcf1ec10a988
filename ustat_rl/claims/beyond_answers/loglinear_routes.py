"""The log-linear bandit's exact covariance and MSE, and the moments' restriction and reweighting,
against every outcome of a group in parameter space (C76).

A log-linear policy ``pi(a|x) ~ exp(phi(x, a) . theta)`` whose features are shared across
prompts (so the prompts' gradients are not orthogonal) answers
:meth:`ustat_rl.policies.loglinear.LogLinearBandit.prompt_covariance` (``Cov(g_hat(x) | x)``,
``(d, d)``) and :meth:`~ustat_rl.policies.loglinear.LogLinearBandit.exact_mse` (the batch MSE of
``B`` i.i.d. prompts); :meth:`ustat_rl.theory.moments.PromptMoments.restrict` and
:meth:`~ustat_rl.theory.moments.PromptMoments.reweight` give the moments of a subset of prompts
(renormalised) and under other prompt weights. Each is set against the sum over all ``6^G``
outcomes of a group of the same policy (its tabular form's ``enumerate_groups``), every estimate
mapped to parameter space by ``phi(x)^T`` and the advantages written out (C71's: leave-one-out,
the full mean, and a prompt-only baseline ``z - b(x)``).

All exact (rtol 1e-10), no sampling: no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, register

__all__ = ["LOGLINEAR_SEED", "LOGLINEAR_SHAPE", "LOGLINEAR_REWARD_PROB", "LOGLINEAR_BASELINE",
           "LOGLINEAR_REWEIGHT", "loglinear_problem", "parameter_moments", "parameter_mse"]

#: Seed of the features and ``theta``; ``(P, K, d)``; success probabilities; the baseline's
#: ``b(x)``; other prompt weights for ``reweight``.
LOGLINEAR_SEED = 76
LOGLINEAR_SHAPE = (3, 3, 4)
LOGLINEAR_REWARD_PROB = ((0.9, 0.3, 0.1), (0.6, 0.2, 0.8), (0.05, 0.5, 0.35))
LOGLINEAR_BASELINE = (0.3, 0.6, 0.2)
LOGLINEAR_REWEIGHT = (0.5, 0.1, 0.4)
#: Group sizes and batch sizes compared.
LOGLINEAR_SIZES = (2, 3)
LOGLINEAR_BATCHES = (1, 4)


def loglinear_problem():
    """``(LogLinearBandit, theta)``: shared Gaussian features, ``tau = 0``, prompts ``f =
    (0.2, 0.3, 0.5)``."""
    from ...policies.loglinear import LogLinearBandit

    rng = np.random.default_rng(LOGLINEAR_SEED)
    features = rng.normal(size=LOGLINEAR_SHAPE)
    bandit = LogLinearBandit(features, np.array(LOGLINEAR_REWARD_PROB), np.array([0.2, 0.3, 0.5]))
    return bandit, rng.normal(size=LOGLINEAR_SHAPE[2])


def parameter_moments(bandit, theta, G: int, estimator):
    """Per prompt, ``(E g_hat(x), E||g_hat(x)||^2, Cov g_hat(x), g(x))`` in parameter space, by
    enumeration of the tabular policy's groups; ``advantage(rewards (M, G), x)``."""
    from .enumerated_routes import enumerated

    tabular = bandit.as_softmax_bandit(theta)
    out = []
    for x in range(bandit.n_prompts):
        est, prob, _ = enumerated(tabular, x, G, lambda z, x=x: estimator(z, x))  # (M, K)
        est = est @ bandit.features[x]  # (M, d) the score phi(x, a) - E phi mapped by phi^T
        mean = prob @ est
        out.append((mean, prob @ np.sum(est**2, axis=1),
                    np.einsum("m,mk,ml->kl", prob, est, est) - np.outer(mean, mean),
                    tabular.grad_per_prompt[x] @ bandit.features[x]))
    return out


def parameter_mse(per_prompt, prompt_prob, B: int) -> float:
    """``E||(1/B) sum_b g_hat(X_b) - g||^2`` for ``B`` i.i.d. prompts from ``prompt_prob``."""
    f = np.asarray(prompt_prob, dtype=np.float64)
    mean = sum(w * m for w, (m, _, _, _) in zip(f, per_prompt))
    second = sum(w * s for w, (_, s, _, _) in zip(f, per_prompt))
    g = sum(w * t for w, (_, _, _, t) in zip(f, per_prompt))
    return float(second / B + (1.0 - 1.0 / B) * mean @ mean - 2.0 * mean @ g + g @ g)


def _rules():
    from .enumerated_routes import full_mean, loo

    b = np.array(LOGLINEAR_BASELINE)
    return (("grpo", None, lambda z, x: loo(z)), ("fullmean", None, lambda z, x: full_mean(z)),
            ("baseline", b, lambda z, x: z - b[x]))


@register("C76", "Beyond the paper: the log-linear bandit's per-prompt covariance and batch "
          "MSE, and the moments restricted to a subset of prompts and reweighted, equal sums "
          "over every outcome of a group mapped to parameter space, advantages written out",
          "derived (docs/theory.md C76; Theorem 2 and Proposition 3, C5, C6, C22)",
          "LogLinearBandit.prompt_covariance and exact_mse (grpo, fullmean, a prompt-only "
          "baseline; G = 2, 3; B = 1, 4) on 3 prompts, 3 actions and 4 shared features; "
          "minibatch_mse on PromptMoments.restrict and reweight; against enumeration of all "
          "6^G outcomes; all exact (rtol 1e-10)")
def check_c76(ctx) -> list:
    from ...theory.mse import minibatch_mse

    bandit, theta = loglinear_problem()
    f = bandit.prompt_prob
    moments = bandit.moments(theta, matrices=False)
    checks = []
    for rule, b, written in _rules():
        per = {G: parameter_moments(bandit, theta, G, written) for G in LOGLINEAR_SIZES}
        checks.append(check_exact(
            f"LogLinearBandit.prompt_covariance ({rule}) at G = {LOGLINEAR_SIZES}: the (d, d) "
            "covariance of the enumerated estimates",
            [[c for _, _, c, _ in per[G]] for G in LOGLINEAR_SIZES],
            [bandit.prompt_covariance(theta, rule, G, b) for G in LOGLINEAR_SIZES],
            rtol=1e-10, atol=1e-13))
        pairs = [(G, B) for G in LOGLINEAR_SIZES for B in LOGLINEAR_BATCHES]
        checks.append(check_exact(
            f"LogLinearBandit.exact_mse ({rule}) at (G, B) in {pairs}: the enumeration",
            [parameter_mse(per[G], f, B) for G, B in pairs],
            [bandit.exact_mse(theta, rule, G, B, b) for G, B in pairs], rtol=1e-10))
        if rule != "grpo":
            continue
        subset = [0, 2]
        checks.append(check_exact(
            f"PromptMoments.restrict({subset}) (grpo): minibatch_mse at (G, B) in {pairs} is the "
            "enumeration over those prompts, their weights renormalised",
            [parameter_mse([per[G][x] for x in subset], f[subset] / f[subset].sum(), B)
             for G, B in pairs],
            [minibatch_mse(moments.restrict(subset), rule, G, B) for G, B in pairs],
            rtol=1e-10))
        other = np.array(LOGLINEAR_REWEIGHT)
        checks.append(check_exact(
            f"PromptMoments.reweight({LOGLINEAR_REWEIGHT}) (grpo): minibatch_mse at (G, B) in "
            f"{pairs} is the enumeration under those weights",
            [parameter_mse(per[G], other, B) for G, B in pairs],
            [minibatch_mse(moments.reweight(other), rule, G, B) for G, B in pairs], rtol=1e-10))
    return checks
