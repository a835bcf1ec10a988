"""Policies with exact moments: each supplies :class:`~ustat_rl.theory.PromptMoments` and a sampler.

* :class:`SoftmaxBandit`: the tabular contextual softmax bandit (closed form);
* :class:`LogLinearBandit`: shared-parameter log-linear bandit with a KL objective (closed form);
* :mod:`ustat_rl.policies.transformer`: small transformer policies on an arithmetic task
  (enumeration of every answer).
"""

from .loglinear import LogLinearBandit, Optimum, PolicyMoments, PolicyState
from .softmax import GroupSample, HoeffdingComponents, SoftmaxBandit

__all__ = ["GroupSample", "HoeffdingComponents", "LogLinearBandit", "Optimum", "PolicyMoments",
           "PolicyState", "SoftmaxBandit"]
