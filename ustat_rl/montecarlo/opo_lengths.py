r"""verl's ``opo`` with response lengths: a Monte Carlo on the softmax bandit under a length model.

verl's ``algorithm.adv_estimator=opo`` (verl-project/verl 1dda039b,
``verl/trainer/ppo/core_algos.py``, ``compute_opo_outcome_advantage``) subtracts from each
reward the length-weighted mean of its group, itself included,

.. math::

    a_i = z_i - \frac{\sum_j T_j z_j}{\sum_j T_j},

``T_j`` the response lengths (a group of one: baseline 0). At equal lengths it is the full mean,
the registered ``verl_opo`` (= ``verl_grpo_nostd``). With ragged lengths it is not a rule of
the rewards alone, so its moments need a law of the lengths; the bandit has none, so a length
model is stated here and the estimator sampled:

* ``iid_lengths(low, high)``: each length uniform on ``{low, ..., high}``, independent of the
  prompt, the action and the reward. The weights ``w_i = T_i / sum T`` are exchangeable and
  independent of the draws, so ``E[w_i] = 1/G`` and the mean along ``g`` is the full mean's,
  ``(G - 1)/G``; only the MSE moves;
* ``action_lengths(table)``: the length of action ``a`` is ``table[a]`` (actions of different
  lengths, as a long chain of thought and a short guess): the weights now depend on the action,
  so on the score and on the reward, and the baseline is no longer exchangeable with the
  reward; the mean factor moves too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validation import as_int, as_rng
from ..advantages.registry import get_rule
from ..theory.shrinkage import MonteCarloMoments, batch_moments, draw_batches

__all__ = ["opo_advantages", "iid_lengths", "action_lengths", "OpoLengthStudy",
           "opo_monte_carlo"]


def opo_advantages(rewards, lengths) -> np.ndarray:
    """``rewards (M, G)``, ``lengths (M, G)`` (positive) -> ``(M, G)``: each reward less its
    group's length-weighted mean (module docstring); a group of one gets its reward."""
    z = np.asarray(rewards, dtype=np.float64)
    T = np.asarray(lengths, dtype=np.float64)
    if z.ndim != 2 or T.shape != z.shape:
        raise ValueError(f"`lengths` must have the shape of `rewards` (M, G), got {T.shape} "
                         f"and {z.shape}")
    if not np.all(T > 0):
        raise ValueError("`lengths` must be positive")
    if z.shape[1] == 1:
        return z.copy()
    return z - np.sum(T * z, axis=1, keepdims=True) / np.sum(T, axis=1, keepdims=True)


def iid_lengths(low: int = 1, high: int = 8) -> Callable:
    """Lengths uniform on ``{low, ..., high}``, independent of everything."""
    lo, hi = as_int(low, "low", 1), as_int(high, "high", 1)
    if hi < lo:
        raise ValueError(f"`high` must be at least `low` ({lo}), got {hi}")
    return lambda prompt, action, reward, rng: rng.integers(lo, hi + 1, size=np.shape(action))


def action_lengths(table) -> Callable:
    """The length of action ``a`` is ``table[a]`` (positive)."""
    lengths = np.asarray(table, dtype=np.float64)
    if lengths.ndim != 1 or not np.all(lengths > 0):
        raise ValueError("`table` must be a 1-D array of positive lengths, one per action")
    return lambda prompt, action, reward, rng: lengths[np.asarray(action)]


@dataclass(frozen=True)
class OpoLengthStudy:
    """``opo`` under a length model and ``verl_grpo_nostd`` (the full mean, opo at equal
    lengths) on the same batches, each a :class:`~ustat_rl.theory.shrinkage.MonteCarloMoments`."""

    opo: MonteCarloMoments
    full_mean: MonteCarloMoments


def opo_monte_carlo(bandit, group_size, batch_size, n_reps, rng,
                    lengths: Callable) -> OpoLengthStudy:
    """``n_reps`` batches of ``B`` groups of ``G``; ``lengths(prompt (M,), action (M, G),
    reward (M, G), rng) -> (M, G)`` draws the responses' lengths."""
    rng = as_rng(rng)
    s, score, n, B, G = draw_batches(bandit, group_size, batch_size, n_reps, rng)
    T = np.asarray(lengths(s.prompt, s.action, s.reward, rng), dtype=np.float64)
    out = []
    for adv in (opo_advantages(s.reward, T), get_rule("verl_grpo_nostd").grouped(s.reward)):
        out.append(batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv.reshape(n, B, G),
                                                   score) / (B * G)))
    return OpoLengthStudy(*out)
