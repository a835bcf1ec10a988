"""Every per-prompt estimate of a group, with its probability: the exact reference route.

Enumerating all ``(2K)^G`` outcomes of one group of a :class:`~ustat_rl.policies.SoftmaxBandit`
gives the exact law of any per-prompt estimator at small ``G``. The claims' checks and the
tests of the advantage rules and U-statistics compare closed forms and Monte Carlo with it.
"""

from __future__ import annotations

import numpy as np

from ..advantages.gradients import rule_gradient
from .softmax import SoftmaxBandit

__all__ = ["enumerate_prompt_estimates"]


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
