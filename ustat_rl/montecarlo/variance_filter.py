"""Monte Carlo of the reward-variance filter's kept batch, on both backends (beyond the paper).

The filter (:mod:`ustat_rl.theory.variance_filter`) reads the whole batch, so no per-group kernel
measures it. It is measured here with the multi-channel sampler at one channel, as the batch
rules are (:mod:`ustat_rl.montecarlo.batch_rules`): a step draws ``B`` groups of ``G``, the rule
gives each group its advantages, and the filter weights each group by ``w_b``
(:func:`~ustat_rl.theory.variance_filter.batch_group_weights`: ``1/D`` if kept, 0 if dropped);
the sampler divides by ``B G``, so the rule handed to it returns ``B w_b A_bg``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..advantages import get_rule
from ..advantages.multichannel import MultiChannelRule
from ..theory.variance_filter import VarianceFilter, batch_group_weights, get_variance_filter
from .batch_rules import as_one_channel
from .engine import Backend
from .multichannel import multichannel_statistics

__all__ = ["FilteredRule", "variance_filter_statistics"]


@dataclass(frozen=True)
class FilteredRule(MultiChannelRule):
    """A single-reward rule of one channel followed by the reward-variance filter."""

    group_filter: VarianceFilter | None = None

    def batched(self, rewards, weights) -> np.ndarray:
        adv = super().batched(rewards, weights)  # (R, B, G)
        B = adv.shape[1]
        w = batch_group_weights(np.asarray(rewards, dtype=np.float64)[..., 0], self.group_filter)
        return adv * (B * w)[:, :, None]


def variance_filter_statistics(bandit, estimator, group_size, batch_size, group_filter=None, *,
                               backend: Backend | str = "numba"):
    """Per-step squared errors of ``estimator`` on the batch the filter keeps, for
    :func:`~ustat_rl.montecarlo.run_monte_carlo`.

    Parameters
    ----------
    bandit : SoftmaxBandit
        Rewards 0 and 1.
    estimator : str or AdvantageRule
        An advantage rule of the group's rewards.
    group_size, batch_size : int
        ``G`` and ``B`` (groups per step before filtering).
    group_filter : VarianceFilter or str, optional
        RAGEN-2's ``top_p = 0.9`` by default.
    backend : {"numba", "torch"} or Backend

    Returns
    -------
    statistic, labels
        As :func:`~ustat_rl.montecarlo.batch_rules.batch_rule_statistics`; the rule's label is
        ``"<estimator>|<filter name>"``.
    """
    spec = get_variance_filter("reward_variance_top_p" if group_filter is None else group_filter)
    base = get_rule(estimator, "estimator")
    if base.statistics != "group" or base.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` must be a rule of the group's rewards alone, got "
                         f"{base.name!r}")
    wrapped = FilteredRule(f"{base.name}|{spec.name}", "sum_then_normalize", None, base,
                           base.provenance, base.formula,
                           working_precision=base.working_precision, group_filter=spec)
    return multichannel_statistics(as_one_channel(bandit), (wrapped,), group_size, batch_size,
                                   backend=backend)
