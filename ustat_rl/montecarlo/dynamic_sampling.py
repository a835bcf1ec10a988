"""Monte Carlo of verl's dynamic sampling loop (DAPO's ``filter_groups``) on a softmax bandit.

docs/theory.md section 7, "Dynamic sampling (beyond the paper)". The loop of verl's
``RayDAPOTrainer.fit`` (``recipe/dapo/dapo_ray_trainer.py``), run for many independent steps at
once: draw a generation batch of ``b`` prompts from ``f`` with ``G`` answers each, keep the groups
whose rewards are not all equal (verl keeps ``np.std(rewards) > 0``), append them in order, and
stop when ``B`` groups are kept, cutting the batch to its first ``B`` groups; after
``max_num_gen_batches`` batches without filling, the step fails (verl raises). The exact
counterparts are in :mod:`ustat_rl.theory.dynamic_sampling`.

Beyond the paper, ``group_filter`` swaps verl's filter for another framework's
(:mod:`ustat_rl.theory.group_filters`), applied to each group's success count. OpenRLHF's loop,
which replaces each dropped prompt by one new prompt, is this loop with ``gen_batch_size=1`` in
law (each prompt is kept independently, and the batch is the first ``B`` kept); slime's
over-sampling loop is this loop with ``gen_batch_size`` its ``over_sampling_batch_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int, as_rng
from ..advantages.registry import get_rule
from ..policies.softmax import SoftmaxBandit
from ..theory.dynamic_sampling import keep_probability
from ..theory.group_filters import get_group_filter, keep_mask

__all__ = ["DynamicSamplingRun", "FilterLoop", "simulate_dynamic_sampling",
           "binary_bandit_group_rule"]


def binary_bandit_group_rule(bandit, estimator):
    """The registered rule ``estimator``, checked to be a rule of the group's rewards alone, for
    a :class:`SoftmaxBandit` with binary rewards (the refill and replace loops' common input)."""
    if not isinstance(bandit, SoftmaxBandit):
        raise TypeError(f"`bandit` must be a SoftmaxBandit, got {type(bandit).__name__}")
    if bandit.reward_values != (0.0, 1.0):
        raise ValueError(f"`bandit` must have binary rewards (0, 1), got {bandit.reward_values}")
    rule = get_rule(estimator)
    if rule.statistics != "group" or rule.centring.reference_source is not None:
        raise ValueError(f"`estimator` {rule.name!r} must be a rule of the group's rewards alone "
                         "(no batch statistics, no V(x) or b(x) reference)")
    return rule


@dataclass(frozen=True)
class DynamicSamplingRun:
    """Independent steps of the dynamic sampling loop.

    Attributes
    ----------
    gradients : ndarray (n_filled, P*K)
        ``g_DS = (1/(B G)) sum_b sum_g A_bg W_bg`` over the first ``B`` kept groups, one row per
        step that filled its batch.
    gen_batches : ndarray (n_reps,)
        Generation batches each step drew (``max_num_gen_batches`` for a failed step).
    kept_groups : ndarray (n_reps,)
        Groups each step kept, the ``B`` used and the overflow of its last batch.
    filled : ndarray (n_reps,) of bool
        Whether the step found ``B`` groups within the cap.
    group_size, batch_size, gen_batch_size, max_num_gen_batches : int
        ``G``, ``B``, ``b`` and ``K`` (0: no cap).
    """

    gradients: np.ndarray
    gen_batches: np.ndarray
    kept_groups: np.ndarray
    filled: np.ndarray
    group_size: int
    batch_size: int
    gen_batch_size: int
    max_num_gen_batches: int


@dataclass(frozen=True)
class FilterLoop:
    """The settings of verl's ``filter_groups`` refill loop, validated.

    Attributes
    ----------
    gen_batch_size : int, optional
        ``b >= 1`` groups drawn per generation batch; the step's ``B`` when None.
    max_num_gen_batches : int
        ``K >= 0``; 0 for no cap.
    group_filter : str or GroupFilter, optional
        Which groups are kept (:data:`~ustat_rl.theory.group_filters.GROUP_FILTERS`); verl's
        all-equal filter by default.
    """

    gen_batch_size: int | None = None
    max_num_gen_batches: int = 0
    group_filter: object = None

    def __post_init__(self):
        if self.gen_batch_size is not None:
            object.__setattr__(self, "gen_batch_size",
                               as_int(self.gen_batch_size, "gen_batch_size", 1))
        object.__setattr__(self, "max_num_gen_batches",
                           as_int(self.max_num_gen_batches, "max_num_gen_batches", 0,
                                  "(0 for no cap)"))
        get_group_filter(self.group_filter)  # a ValueError naming `group_filter` for an unknown one


def simulate_dynamic_sampling(bandit: SoftmaxBandit, estimator, group_size, batch_size, n_reps,
                              rng, loop: FilterLoop = FilterLoop()) -> DynamicSamplingRun:
    """Run ``n_reps`` independent steps of verl's ``filter_groups`` loop on ``bandit``.

    Parameters
    ----------
    bandit : SoftmaxBandit
        Binary rewards (``reward_values=(0, 1)``).
    estimator : str or AdvantageRule
        A rule of :mod:`ustat_rl.advantages` whose statistics are per group.
    group_size, batch_size : int
        ``G >= 2`` and ``B >= 1``.
    n_reps : int
        Steps.
    rng : numpy.random.Generator or int
    loop : FilterLoop
        ``b``, ``K`` and the group filter (verl's defaults: ``b = B``, no cap, all-equal filter).

    Returns
    -------
    DynamicSamplingRun

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> bandit = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]])
    >>> run = simulate_dynamic_sampling(bandit, "grpo", 2, 3, 5, 0)
    >>> run.gradients.shape, bool(run.filled.all()), bool((run.kept_groups >= 3).all())
    ((5, 2), True, True)
    """
    rule = binary_bandit_group_rule(bandit, estimator)
    G = as_int(group_size, "group_size", max(2, rule.min_group_size))
    B = as_int(batch_size, "batch_size", 1)
    n = as_int(n_reps, "n_reps", 1)
    if not isinstance(loop, FilterLoop):
        raise TypeError(f"`loop` must be a FilterLoop, got {type(loop).__name__}")
    b = B if loop.gen_batch_size is None else loop.gen_batch_size
    K = loop.max_num_gen_batches
    rng = as_rng(rng)
    keeper = get_group_filter(loop.group_filter)
    mask = keep_mask(keeper, G)  # (G + 1,)
    if K == 0 and keep_probability(bandit.value, G, bandit.prompt_prob, keeper) <= 0.0:
        raise ValueError(f"group filter {keeper.name!r} drops every group of `bandit` with "
                         "probability 1: without a cap (`max_num_gen_batches`) the loop never ends")
    grad_sum = np.zeros((n, bandit.dim))
    count = np.zeros(n, dtype=np.int64)  # kept groups used, at most B
    kept = np.zeros(n, dtype=np.int64)
    batches = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        s = bandit.sample_groups(G, idx.size * b, rng)
        reward = s.reward.reshape(idx.size, b, G)
        ok = mask[np.rint(reward.sum(axis=2)).astype(np.int64)]  # (m, b): keep(k, G)
        batches[idx] += 1
        kept[idx] += ok.sum(axis=1)
        # the first B kept groups in generation order enter the batch
        take = ok & (count[idx, None] + np.cumsum(ok, axis=1) <= B)  # (m, b)
        rows = np.flatnonzero(take.ravel())
        if rows.size:
            adv = rule.grouped(s.reward[rows])  # (t, G)
            score = bandit.scores(s.prompt[rows], s.action[rows], full=True)  # (t, G, P*K)
            per_group = np.einsum("tg,tgk->tk", adv, score) / G
            np.add.at(grad_sum, idx[rows // b], per_group)
        count[idx] += take.sum(axis=1)
        done = count[idx] >= B
        if K > 0:
            done |= batches[idx] >= K
        active[idx[done]] = False
    filled = count >= B
    return DynamicSamplingRun(grad_sum[filled] / B, batches, kept, filled, G, B, b, K)
