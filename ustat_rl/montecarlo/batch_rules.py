"""Monte Carlo of single-reward rules at a finite batch, batch rules included, on both backends.

The bandit kernels (:func:`~ustat_rl.montecarlo.bandit_squared_errors`) take rules of the group
alone: a rule with a batch statistic (whitening over the batch, a batch std, GPG's count of
nonzero rewards, ROLL's and slime's normalisations) couples the groups of a step, so its MSE
depends on the batch size ``B`` and no per-group kernel can measure it. This module measures such
rules with the multi-channel sampler (:func:`~ustat_rl.montecarlo.multichannel
.multichannel_statistics`) at one channel:

* a :class:`~ustat_rl.policies.SoftmaxBandit` with rewards 0 and 1 is a
  :class:`~ustat_rl.policies.multichannel.MultiChannelBandit` of ``K = 1``, the channel
  succeeding with the bandit's reward probability (:func:`as_one_channel`);
* a single-reward rule is the multi-channel rule with no channel stage and that rule as its
  final stage, at weight 1: the weighted sum of one channel is its reward.

Both backends (``"numba"``, ``"torch"`` on CPU or CUDA) draw each step's ``B`` groups and hand
them to the rule's own evaluator, batch statistics taken within each batch. Group rules give the
per-group kernels' law too, so the two routes can be compared
(tests/advantages/test_batch_rules_backends.py).

verl's ``remax`` (``verl_remax``) subtracts the reward ``b`` of one greedy rollout of the prompt,
drawn independently of the group (:mod:`ustat_rl.theory.greedy_baseline`). With such a rule the
bandit gets a second channel that ignores the action: it succeeds with the greedy action's
reward probability ``r[x, a*(x)]`` on every draw, independently of everything else, and the
group's ``b`` is that channel on its first draw. The other rules read the first channel alone
(weights ``(1, 0)``), and since the second channel's law does not depend on the action its
gradient is 0: the target is still the bandit's ``g``.
"""

from __future__ import annotations

import numpy as np

from ..advantages import get_rule
from ..advantages.conventions import VERL_REMAX
from ..advantages.multichannel import MultiChannelRule
from ..policies.multichannel import MultiChannelBandit
from .engine import Backend
from .multichannel import multichannel_statistics

__all__ = ["as_one_channel", "batch_rule_statistics"]


def as_one_channel(bandit, greedy: bool = False) -> MultiChannelBandit:
    """``bandit`` (a :class:`~ustat_rl.policies.SoftmaxBandit` with rewards 0 and 1) as a
    multi-channel bandit of one channel: same policy, prompts and success probabilities; with
    ``greedy``, a second channel, the greedy rollout's reward drawn afresh on every draw
    (module docstring)."""
    if tuple(bandit.reward_values) != (0.0, 1.0):
        raise ValueError("`bandit` must have rewards 0 and 1 (reward_values (0, 1)) to run on "
                         f"the one-channel sampler, got {tuple(bandit.reward_values)}")
    prob = np.asarray(bandit.reward_prob, dtype=np.float64)[:, :, None]
    if greedy:
        from ..theory.greedy_baseline import greedy_baseline

        success = greedy_baseline(bandit).success  # (P,)
        prob = np.concatenate([prob, np.broadcast_to(success[:, None, None], prob.shape)],
                              axis=2)
    return MultiChannelBandit.from_channels(bandit.logits, prob, bandit.prompt_prob)


class _GreedyReference(MultiChannelRule):
    """A rule subtracting a prompt baseline, fed the greedy channel's first draw as ``b``."""

    def batched(self, rewards, weights) -> np.ndarray:
        rewards = np.asarray(rewards, dtype=np.float64)
        R, B, G, _ = rewards.shape
        b = rewards[:, :, 0, 1].reshape(R * B)  # one greedy rollout per group
        return self.final.grouped(rewards[..., 0].reshape(R * B, G), reference=b).reshape(R, B, G)


def _one_channel_rule(name) -> MultiChannelRule:
    rule = get_rule(name, "estimators")
    if rule.centring.reference_source == "baseline":
        if rule.name != VERL_REMAX.name:
            raise ValueError(f"`estimators` entry {rule.name!r} needs a baseline b(x) the sampler "
                             "does not draw (it draws a greedy rollout's reward, for verl_remax)")
        return _GreedyReference(rule.name, "sum_then_normalize", None, rule, rule.provenance,
                                rule.formula, working_precision=rule.working_precision)
    return MultiChannelRule(rule.name, "sum_then_normalize", None, rule, rule.provenance,
                            rule.formula, working_precision=rule.working_precision)


def batch_rule_statistics(bandit, estimators, group_sizes, batch_size=1, *,
                          backend: Backend | str = "numba"):
    """Per-step squared errors of single-reward advantage rules at batch size ``B``, for
    :func:`~ustat_rl.montecarlo.run_monte_carlo`.

    Parameters
    ----------
    bandit : SoftmaxBandit
        Rewards 0 and 1.
    estimators : str, AdvantageRule or sequence of them
        Any registered rule of the rewards alone, group or batch statistics, and verl's
        ``remax`` (its baseline the greedy rollout's reward, drawn for each group).
    group_sizes : int or sequence of int
        Groups of the sizes asked are nested (common random numbers).
    batch_size : int
        ``B`` groups per step, each at a prompt drawn from ``f``.
    backend : {"numba", "torch"} or Backend
        The sampler, and for torch its device (``Backend("torch", "cuda")``; the name alone:
        CUDA when available).

    Returns
    -------
    statistic : callable
        ``statistic(rng, n) -> (n, 3 L)``.
    labels : tuple
        ``(kind, rule, G)`` per column: ``"sq"`` (its mean is the MSE of the step's estimate
        ``g_hat_B`` against the gradient ``g``), ``"proj"`` (``<g_hat_B, g>``) and ``"second"``
        (``||g_hat_B||^2``).

    Examples
    --------
    >>> from ustat_rl.montecarlo import run_monte_carlo
    >>> from ustat_rl.policies.examples import small_bandit
    >>> stat, labels = batch_rule_statistics(small_bandit(), "roll_batch", 2, 2)
    >>> est = run_monte_carlo(stat, 2_000, seed=0, labels=labels)
    >>> bool(est.mean[est.index(("sq", "roll_batch", 2))] > 0)
    True
    """
    if isinstance(estimators, str) or not np.iterable(estimators):
        estimators = (estimators,)
    wrapped = tuple(_one_channel_rule(r) for r in estimators)
    if not wrapped:
        raise ValueError("`estimators` must name at least one rule")
    greedy = any(isinstance(r, _GreedyReference) for r in wrapped)
    return multichannel_statistics(as_one_channel(bandit, greedy), wrapped, group_sizes,
                                   batch_size, (1.0, 0.0) if greedy else None, backend=backend)
