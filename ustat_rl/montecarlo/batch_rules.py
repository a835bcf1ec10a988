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
(tests/montecarlo/test_batch_rules.py).
"""

from __future__ import annotations

import numpy as np

from ..advantages import get_rule
from ..advantages.multichannel import MultiChannelRule
from ..policies.multichannel import MultiChannelBandit
from .multichannel import multichannel_statistics

__all__ = ["as_one_channel", "batch_rule_statistics"]


def as_one_channel(bandit) -> MultiChannelBandit:
    """``bandit`` (a :class:`~ustat_rl.policies.SoftmaxBandit` with rewards 0 and 1) as a
    multi-channel bandit of one channel: same policy, prompts and success probabilities."""
    if tuple(bandit.reward_values) != (0.0, 1.0):
        raise ValueError("`bandit` must have rewards 0 and 1 (reward_values (0, 1)) to run on "
                         f"the one-channel sampler, got {tuple(bandit.reward_values)}")
    prob = np.asarray(bandit.reward_prob, dtype=np.float64)[:, :, None]
    return MultiChannelBandit.from_channels(bandit.logits, prob, bandit.prompt_prob)


def _one_channel_rule(name) -> MultiChannelRule:
    rule = get_rule(name, "rules")
    if rule.centring.reference_source == "baseline":
        raise ValueError(f"`rules` entry {rule.name!r} needs a baseline b(x) beyond the rewards, "
                         "which the sampler does not draw")
    return MultiChannelRule(rule.name, "sum_then_normalize", None, rule, rule.provenance,
                            rule.formula, working_precision=rule.working_precision)


def batch_rule_statistics(bandit, rules, group_sizes, batch_size=1, *, backend: str = "numba",
                          device=None):
    """Per-step squared errors of single-reward rules at batch size ``B``, for
    :func:`~ustat_rl.montecarlo.run_monte_carlo`.

    Parameters
    ----------
    bandit : SoftmaxBandit
        Rewards 0 and 1.
    rules : str, AdvantageRule or sequence of them
        Any registered rule of the rewards alone, group or batch statistics.
    group_sizes : int or sequence of int
        Groups of the sizes asked are nested (common random numbers).
    batch_size : int
        ``B`` groups per step, each at a prompt drawn from ``f``.
    backend : {"numba", "torch"}
    device : optional
        The torch device (``"cpu"``, ``"cuda"``; ``None``: CUDA when available).

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
    if isinstance(rules, str) or not np.iterable(rules):
        rules = (rules,)
    wrapped = tuple(_one_channel_rule(r) for r in rules)
    if not wrapped:
        raise ValueError("`rules` must name at least one rule")
    return multichannel_statistics(as_one_channel(bandit), wrapped, group_sizes, batch_size,
                                   backend=backend, device=device)
