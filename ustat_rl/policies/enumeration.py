"""Every per-prompt estimate of a group, with its probability: the exact reference route.

Enumerating all ``(2K)^G`` outcomes of one group of a :class:`~ustat_rl.policies.SoftmaxBandit`
gives the exact law of any per-prompt estimator at small ``G``; enumerating every multiset of
``G`` (action, outcome) cells of a :class:`~ustat_rl.policies.multichannel.MultiChannelBandit`
does the same for the multi-reward rules. The claims' checks and the tests of the advantage rules
and U-statistics compare closed forms and Monte Carlo with it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import gammaln

from ..advantages.gradients import rule_gradient
from ..advantages.multichannel import get_multichannel_rule
from .softmax import SoftmaxBandit

__all__ = ["enumerate_prompt_estimates", "enumerate_multichannel_moments"]


def enumerate_prompt_estimates(bandit: SoftmaxBandit, prompt: int, group_size: int, estimator):
    """All per-prompt estimates of a group at ``prompt``, with their probabilities.

    Parameters
    ----------
    bandit : SoftmaxBandit
        The policy whose groups are enumerated (``bandit.enumerate_groups``).
    prompt : int
        The prompt index.
    group_size : int
        G; ``(2K)^G`` outcomes are enumerated.
    estimator : str or callable
        A rule name of :func:`ustat_rl.advantages.gradients.rule_gradient`, or a function
        ``f(scores (M, G, K), rewards (M, G)) -> (M, K)``.

    Returns
    -------
    values : ndarray, shape (M, K)
        The estimate of each outcome.
    prob : ndarray, shape (M,)
        The outcomes' probabilities (summing to 1).
    """
    if not isinstance(bandit, SoftmaxBandit):
        raise TypeError(f"`bandit` must be a SoftmaxBandit, not {type(bandit).__name__}")
    action, reward, prob = bandit.enumerate_groups(prompt, group_size)
    prompts = np.full(len(prob), prompt)
    score = bandit.scores(prompts, action)
    if callable(estimator):
        values = estimator(score, reward)
    else:
        values = rule_gradient(estimator, score, reward, bandit.value[prompts], per_prompt=True)
    return values, prob


def enumerate_multichannel_moments(bandit, estimator, group_size, weights):
    """``(E g_hat(x) (P, P A), E||g_hat(x) - t(x)||^2 (P,))`` by enumerating every multiset of
    ``G`` (action, outcome) cells with its multinomial probability and scoring it literally; a
    batch rule's large-batch limit with its batch mean and std enumerated the same way."""
    estimator = get_multichannel_rule(estimator)
    w = np.asarray(weights, dtype=np.float64)
    G, A, O = int(group_size), bandit.n_actions, bandit.outcomes.shape[0]
    cells = np.array(list(itertools.combinations_with_replacement(range(A * O), G)))  # (M, G)
    counts = np.stack([np.bincount(c, minlength=A * O) for c in cells])  # (M, A O)
    action, rows = cells // O, bandit.rewards(cells % O)  # (M, G), (M, G, K)
    probs, scores, targets = [], [], []
    for x in range(bandit.n_prompts):
        cell_p = (bandit.policy[x][:, None] * bandit.outcome_prob[x]).ravel()  # (A O,)
        with np.errstate(divide="ignore"):
            logp = counts @ np.log(cell_p)
        probs.append(np.exp(gammaln(G + 1) - gammaln(counts + 1).sum(axis=1) + logp))
        scores.append(bandit.scores(np.full(len(cells), x), action))  # (M, G, P A)
        block = np.einsum("a,ao,o,ab->b", bandit.policy[x], bandit.outcome_prob[x],
                          bandit.outcomes @ w, np.eye(A) - bandit.policy[x])
        targets.append(np.concatenate([np.zeros(x * A), block,
                                       np.zeros((bandit.n_prompts - x - 1) * A)]))
    if estimator.statistics == "group":
        adv = estimator.grouped(rows, w)
    else:
        x_rows = estimator.combined_grouped(rows, w)
        num = estimator.final_numerator.grouped(x_rows)
        stat = num if estimator.spread_of == "numerator" else x_rows
        mix = sum(f * p for f, p in zip(bandit.prompt_prob, probs))  # (M,)
        first, second = mix @ stat.mean(axis=1), mix @ (stat**2).mean(axis=1)
        centre = first if estimator.spread_of == "numerator" else 0.0
        adv = (num - centre) / estimator.final.scaling.divisor(math.sqrt(second - first**2))
    means, mses = [], []
    for p, s, t in zip(probs, scores, targets):
        g_hat = np.einsum("mg,mgd->md", adv, s) / G  # (M, P A)
        means.append(p @ g_hat)
        mses.append(p @ np.sum((g_hat - t) ** 2, axis=1))
    return np.array(means), np.array(mses)
