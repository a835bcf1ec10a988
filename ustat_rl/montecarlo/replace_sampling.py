"""Monte Carlo of SkyRL's ``replace`` dynamic sampling (POLARIS) on a softmax bandit.

docs/theory.md section 7, "POLARIS's replace (beyond the paper)". The step of SkyRL's trainer
with ``trainer.algorithm.dynamic_sampling.type = replace``, written from its description
(``handle_replace_sampling``, ``get_bad_sample_replacements`` in
``skyrl/train/utils/trainer_utils.py`` @a956457) and run for many independent steps at once: draw
``B`` prompts from ``f`` with ``G`` answers each; a group is good when its rewards are not all
equal (SkyRL: ``np.std(rewards) > 0``); with ``J`` good groups and ``J > ratio * B`` every bad
group is overwritten by a copy of a good one (``B - J`` distinct good groups when ``J >= B - J``,
else ``B - J`` drawn uniformly with replacement); otherwise the batch is discarded and a new one
drawn, and after ``max_sample_batches`` discarded batches the step fails (SkyRL raises). A copy
shares its source's prompt id, so with ``merge_copies`` the advantages of a group copied into
``m`` slots are the rule's on the ``m G`` merged rewards. The exact counterparts are in
:mod:`ustat_rl.theory.replace_sampling`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int, as_rng
from ..policies.softmax import SoftmaxBandit
from ..theory.dynamic_sampling import keep_probability
from ..theory.replace_sampling import MIN_REPLACE_RATIO, replace_probability, replace_threshold
from .dynamic_sampling import binary_bandit_group_rule

__all__ = ["ReplaceLoop", "ReplaceRun", "simulate_replace_sampling"]


@dataclass(frozen=True)
class ReplaceRun:
    """Independent steps of SkyRL's ``replace`` loop.

    Attributes
    ----------
    gradients : ndarray (n_filled, P*K)
        ``g_R = (1/(B G)) sum over the batch's B G rows of A W``, copies included, one row per
        step that got a batch.
    gen_batches : ndarray (n_reps,)
        Batches each step drew (``max_sample_batches`` for a failed step).
    copies : ndarray (n_filled,)
        Bad groups overwritten in the batch used (``B - J``).
    filled : ndarray (n_reps,) of bool
        Whether the step got a batch within the cap.
    """

    gradients: np.ndarray
    gen_batches: np.ndarray
    copies: np.ndarray
    filled: np.ndarray


def _multiplicities(good: np.ndarray, rng) -> np.ndarray:
    """SkyRL's choice of copies for batches ``good (u, B)``: ``(u, B)`` multiplicities, 0 on the
    bad groups. With ``J`` good and ``d = B - J`` bad groups: ``d`` distinct good groups chosen
    at random when ``d <= J`` (a random order of the good ones, its first ``d``), else ``d``
    uniform draws from the good ones with replacement."""
    u, B = good.shape
    J = good.sum(axis=1)  # (u,)
    d = B - J
    mult = good.astype(np.int64)
    keys = np.where(good, rng.random((u, B)), np.inf)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)  # a random order of the good groups
    distinct = (d <= J)[:, None]
    mult += (distinct & good & (rank < d[:, None])).astype(np.int64)
    # with replacement: slot s < d of a row picks the floor(U J)-th good group of the row
    order = np.argsort(~good, axis=1, kind="stable")  # the good groups' positions first
    pick = np.minimum((rng.random((u, B)) * J[:, None]).astype(np.int64), B - 1)
    target = np.take_along_axis(order, pick, axis=1)  # (u, B)
    slot = (~distinct) & (np.arange(B)[None, :] < d[:, None])
    rows = np.broadcast_to(np.arange(u)[:, None], (u, B))
    np.add.at(mult, (rows[slot], target[slot]), 1)
    return mult


@dataclass(frozen=True)
class ReplaceLoop:
    """The settings of SkyRL's ``replace`` dynamic sampling loop, validated.

    Attributes
    ----------
    min_replace_ratio : float
        ``rho >= 0``; SkyRL's 0.3 by default.
    max_sample_batches : int
        ``K >= 0``; 0 for no cap.
    merge_copies : bool
        Advantages on the merged group of a copied prompt id (SkyRL) or per copy.
    """

    min_replace_ratio: float = MIN_REPLACE_RATIO
    max_sample_batches: int = 0
    merge_copies: bool = True

    def __post_init__(self):
        object.__setattr__(self, "min_replace_ratio",
                           as_float(self.min_replace_ratio, "min_replace_ratio", low=0.0))
        object.__setattr__(self, "max_sample_batches",
                           as_int(self.max_sample_batches, "max_sample_batches", 0,
                                  "(0 for no cap)"))


def simulate_replace_sampling(bandit: SoftmaxBandit, estimator, group_size, batch_size, n_reps,
                              rng, loop: ReplaceLoop = ReplaceLoop()) -> ReplaceRun:
    """Run ``n_reps`` independent steps of SkyRL's ``replace`` dynamic sampling on ``bandit``.

    Parameters
    ----------
    bandit : SoftmaxBandit
        Binary rewards (``reward_values=(0, 1)``).
    estimator : str or AdvantageRule
        A rule of :mod:`ustat_rl.advantages` whose statistics are per group.
    group_size, batch_size, n_reps : int
        ``G >= 2``, ``B >= 1`` and the steps.
    rng : numpy.random.Generator or int
    loop : ReplaceLoop
        ``rho``, ``K`` and how copies are grouped (SkyRL's defaults).

    Returns
    -------
    ReplaceRun

    Examples
    --------
    >>> from ustat_rl.policies.examples import known_value_bandit
    >>> run = simulate_replace_sampling(known_value_bandit([0.5]), "grpo", 4, 3, 5, 0)
    >>> run.gradients.shape, bool(run.filled.all())
    ((5, 3), True)
    """
    rule = binary_bandit_group_rule(bandit, estimator)
    G = as_int(group_size, "group_size", max(2, rule.min_group_size))
    B = as_int(batch_size, "batch_size", 1)
    n = as_int(n_reps, "n_reps", 1)
    if not isinstance(loop, ReplaceLoop):
        raise TypeError(f"`loop` must be a ReplaceLoop, got {type(loop).__name__}")
    ratio, K, merge_copies = loop.min_replace_ratio, loop.max_sample_batches, loop.merge_copies
    j0 = replace_threshold(B, ratio)
    if j0 > B:
        raise ValueError(f"`min_replace_ratio` {ratio:g} leaves no batch of B = {B} to replace")
    r = keep_probability(bandit.value, G, bandit.prompt_prob, "verl")
    if K == 0 and replace_probability(r, B, ratio) <= 0.0:
        raise ValueError("no batch of `bandit` is ever replaced (every group is all-equal with "
                         "probability 1): without a cap (`max_sample_batches`) the loop never ends")
    rng = as_rng(rng)
    grads, copies = np.zeros((n, bandit.dim)), np.zeros(n, dtype=np.int64)
    batches = np.zeros(n, dtype=np.int64)
    filled = np.zeros(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        s = bandit.sample_groups(G, idx.size * B, rng)
        reward = s.reward.reshape(idx.size, B, G)
        k = np.rint(reward.sum(axis=2)).astype(np.int64)
        good = (k > 0) & (k < G)  # std > 0
        batches[idx] += 1
        used = good.sum(axis=1) > B * ratio  # SkyRL's comparison, in floating point
        if used.any():
            mult = _multiplicities(good[used], rng)  # (u, B)
            score = bandit.scores(s.prompt, s.action, full=True).reshape(idx.size, B, G, -1)
            step = idx[used]
            for m in np.unique(mult[mult > 0]):
                u, b = np.nonzero(mult == m)
                rows = reward[used][u, b]  # (t, G)
                merged = np.tile(rows, (1, int(m))) if merge_copies else rows
                adv = rule.grouped(merged)[:, :G]
                part = m * np.einsum("tg,tgk->tk", adv, score[used][u, b]) / (B * G)
                np.add.at(grads, step[u], part)
            copies[step] = B - good[used].sum(axis=1)
            filled[step] = True
        done = used if K == 0 else used | (batches[idx] >= K)
        active[idx[done]] = False
    return ReplaceRun(grads[filled], batches, copies[filled], filled)
