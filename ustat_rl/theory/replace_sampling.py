r"""POLARIS's ``replace`` dynamic sampling as SkyRL runs it: the exact law of the batch (beyond the paper).

docs/theory.md section 7, "POLARIS's replace (beyond the paper)". SkyRL
(``skyrl/train/utils/trainer_utils.py``, ``handle_replace_sampling`` and
``get_bad_sample_replacements``, commit a956457) draws a batch of ``B`` prompts with ``G`` answers
each and calls a group good when the standard deviation of its rewards is positive (binary
rewards: ``0 < k < G``). When the number ``J`` of good groups exceeds ``min_replace_ratio * B``
(0.3 by default, a strict ``>``), every bad group is overwritten by a copy of a good group:
``B - J`` distinct good groups drawn at random when ``J >= B - J``, else ``B - J`` good groups
drawn uniformly with replacement. Otherwise the whole batch is discarded and a fresh one drawn,
at most ``max_sample_batches`` batches (30 by default; ``<= 0`` no cap) before SkyRL raises.

A copy keeps its source's prompt id, so the advantage is computed on the merged group of ``m G``
rewards (``m`` the group's multiplicity): with ``merge_copies`` the group's estimate is
``g_hat^(m) = (1/G) sum_g a_{mG}(Z_g, m k) W_g`` (:func:`merged_table`). Leave-one-out's factor
``mG/(mG - 1)`` and a standard deviation with ``ddof 1`` change with ``m``; a mean baseline does not.

Given ``J = j`` the good groups are i.i.d. draws of the kept law and the multiplicities are drawn
independently of them, so every moment of ``g_R = (1/B) sum_i m_i g_hat_i^(m_i)`` is a sum over
``j`` and the multiplicities' first and pairwise laws (:func:`multiplicity_law`), exact at any
``B``. Prompts are i.i.d. from ``f``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._validation import as_float, as_int
from . import advantage as section7
from .dynamic_sampling import keep_probability
from .dynamic_sampling_cost import MIN_GROUP_REASON, expected_gen_batches
from .group_filters import keep_mask
from .moments import PromptMoments

__all__ = ["MIN_REPLACE_RATIO", "MAX_SAMPLE_BATCHES", "PROVENANCE", "ReplaceBatch", "ReplaceCost",
           "replace_threshold", "replace_probability", "multiplicity_law", "merged_table",
           "replace_batch_moments", "replace_generation_cost", "replace_cost_at_keep_probability"]

#: SkyRL's defaults (skyrl/train/config/config.py, DynamicSamplingConfig, commit a956457).
MIN_REPLACE_RATIO, MAX_SAMPLE_BATCHES = 0.3, 30

#: Where the scheme is read from.
PROVENANCE = ("NovaSky-AI/SkyRL @a956457 skyrl/train/utils/trainer_utils.py lines 432-517 "
              "(handle_replace_sampling) and 610-620 (get_bad_sample_replacements); "
              "skyrl/train/trainer.py lines 1604-1644 (the max_sample_batches cap); "
              "defaults in skyrl/train/config/config.py lines 720-722")


def replace_threshold(batch_size, min_replace_ratio=MIN_REPLACE_RATIO) -> int:
    """The fewest good groups ``j`` with ``j > min_replace_ratio * B``, compared in floating point
    as SkyRL does (``B + 1`` when none: the branch is never taken).

    >>> replace_threshold(10), replace_threshold(4), replace_threshold(4, 0.0)
    (4, 2, 1)
    """
    B = as_int(batch_size, "batch_size", 1)
    ratio = as_float(min_replace_ratio, "min_replace_ratio", low=0.0)
    return next((j for j in range(B + 1) if j > B * ratio), B + 1)


def replace_probability(keep_prob, batch_size, min_replace_ratio=MIN_REPLACE_RATIO) -> float:
    r"""``pi = P(J > rho B)``, ``J ~ Binomial(B, r)``: the chance a batch is replaced, not redrawn.

    >>> round(replace_probability(0.5, 4), 6)  # J >= 2 of 4
    0.6875
    """
    r = as_float(keep_prob, "keep_prob", low=0.0, high=1.0)
    B = as_int(batch_size, "batch_size", 1)
    j0 = replace_threshold(B, min_replace_ratio)
    return float(binom.sf(j0 - 1, B, r)) if j0 <= B else 0.0


def multiplicity_law(keep_prob, batch_size, min_replace_ratio=MIN_REPLACE_RATIO):
    r"""The multiplicities of the good groups in a replaced batch, given the branch is taken.

    Returns ``(pi, counts, pairs)``: ``counts[m]`` is ``E #{i : m_i = m}`` and ``pairs[m, m']``
    ``E #{(i, i'), i != i' : m_i = m, m_{i'} = m'}`` over the good groups ``i``, both given
    ``J > rho B``. Given ``J = j`` with ``d = B - j`` bad groups: ``d`` of the good groups have
    ``m = 2`` and the others ``m = 1`` when ``j >= d``; else ``m_i = 1 + C_i``,
    ``C ~ Multinomial(d, (1/j, ..., 1/j))``, ``C_1 ~ Binomial(d, 1/j)`` and
    ``C_2 | C_1 = a ~ Binomial(d - a, 1/(j - 1))``. ``sum_m m counts[m] = B``.
    """
    r = as_float(keep_prob, "keep_prob", low=0.0, high=1.0)
    B = as_int(batch_size, "batch_size", 1)
    j0 = replace_threshold(B, min_replace_ratio)
    pi = replace_probability(r, B, min_replace_ratio)
    if pi <= 0.0:
        raise ValueError(f"with keep probability r = {r:g} the batch of B = {B} is never replaced "
                         f"(J > {min_replace_ratio:g} B has probability 0): SkyRL redraws forever")
    top = max(B - j0 + 1, 2)  # the largest multiplicity (at least 2, for the j >= d case)
    counts, pairs = np.zeros(top + 1), np.zeros((top + 1, top + 1))
    for j in range(j0, B + 1):
        weight = float(binom.pmf(j, B, r)) / pi
        d = B - j
        if weight == 0.0:
            continue
        if j >= d:
            n = np.zeros(top + 1)
            n[1], n[2] = j - d, d
            counts += weight * n
            pairs += weight * (np.outer(n, n) - np.diag(n))
            continue
        first = binom.pmf(np.arange(d + 1), d, 1.0 / j)  # P(C_1 = a)
        counts[1:d + 2] += weight * j * first
        if j >= 2:
            for a in range(d + 1):
                second = binom.pmf(np.arange(d - a + 1), d - a, 1.0 / (j - 1))
                pairs[a + 1, 1:d - a + 2] += weight * j * (j - 1) * first[a] * second
    return pi, counts, pairs


def merged_table(estimator, group_size, multiplicity) -> section7.AdvantageTable:
    """``a_{mG}(z, m k)`` for ``k = 0..G``: the rule on ``m`` merged copies of a group of ``G``.

    >>> t = merged_table("grpo", 2, 2)  # leave-one-out over 4 rewards [1, 0, 1, 0]
    >>> [round(float(v), 6) for v in t.success]
    [0.0, 0.666667, 0.0]
    """
    G = as_int(group_size, "group_size", 2, MIN_GROUP_REASON)
    m = as_int(multiplicity, "multiplicity", 1)
    if isinstance(estimator, section7.AdvantageTable):
        if m == 1:
            return section7.as_advantage_table(estimator, G)
        raise ValueError("`estimator` must be a rule name or function, not an AdvantageTable, "
                         "when copies are merged: the rule is needed at group size m G")
    big = section7.as_advantage_table(estimator, m * G)
    k = m * np.arange(G + 1)
    return section7.AdvantageTable(G, big.success[k], big.failure[k])


@dataclass(frozen=True)
class ReplaceBatch:
    """Exact moments of SkyRL's replaced batch ``g_R = (1/B) sum_i m_i g_hat_i^(m_i)``.

    Attributes
    ----------
    group_size, batch_size : int
        ``G`` and ``B``.
    min_replace_ratio : float
        ``rho``.
    keep_prob, replace_prob : float
        ``r`` (a group is good) and ``pi = P(J > rho B)`` (a batch is used).
    multiplicity_counts : ndarray (M + 1,)
        ``E #{good groups with multiplicity m} | replaced`` (:func:`multiplicity_law`).
    prompt_weight : ndarray (P,)
        ``W(x)`` with ``E g_R = sum_x W(x) g(x)``.
    mean_sq, bias_sq, variance, mse : float
        ``||E g_R||^2``, ``||E g_R - g||^2``, ``E||g_R - E g_R||^2`` and ``E||g_R - g||^2``.
    """

    group_size: int
    batch_size: int
    min_replace_ratio: float
    keep_prob: float
    replace_prob: float
    multiplicity_counts: np.ndarray
    prompt_weight: np.ndarray
    mean_sq: float
    bias_sq: float
    variance: float
    mse: float


def replace_batch_moments(moments: PromptMoments, estimator, group_size, batch_size,
                          min_replace_ratio=MIN_REPLACE_RATIO, merge_copies=True) -> ReplaceBatch:
    r"""Exact mean, bias and MSE of the batch SkyRL's ``replace`` trains on (binary rewards).

    .. math::

        E g_R = \frac{1}{B}\sum_m E[n_m]\, m\, \mu_m, \qquad
        E\|g_R\|^2 = \frac{1}{B^2}\Bigl(\sum_m E[n_m]\, m^2 S_m
        + \sum_{m, m'} E[n_{m m'}]\, m m' \langle \mu_m, \mu_{m'}\rangle\Bigr)

    with ``mu_m = E[g_hat^(m) | good] = sum_x f(x) c_m(x) g(x) / r`` and ``S_m = E[||g_hat^(m)||^2
    | good]`` from the section 7 moments of the merged table times the keep indicator, ``n_m``
    and ``n_{mm'}`` the counts of :func:`multiplicity_law`.

    Parameters
    ----------
    moments : PromptMoments
        Moments of a policy with binary rewards.
    estimator : str or callable
        A group rule (``"grpo"`` leave-one-out, ``"fullmean"``, ``"verl_grpo"``, ...); an
        :class:`~ustat_rl.theory.advantage.AdvantageTable` only with ``merge_copies=False``.
    group_size, batch_size : int
        ``G >= 2`` and ``B >= 1``.
    min_replace_ratio : float
        ``rho >= 0``; SkyRL's 0.3 by default.
    merge_copies : bool
        ``True`` (SkyRL): a copy shares its source's prompt id, and the advantage is computed on
        the merged group; ``False``: every copy keeps its own group's advantages.

    Returns
    -------
    ReplaceBatch

    Examples
    --------
    A mean baseline gives the copies the source's advantages, and the replaced batch estimates
    ``g/r`` as verl's regenerating filter does, with a larger variance:

    >>> from ustat_rl.policies.examples import known_value_bandit
    >>> from ustat_rl.theory.dynamic_sampling import filtered_batch_moments
    >>> m = known_value_bandit([0.2]).moments()
    >>> polaris = replace_batch_moments(m, "fullmean", 4, 4)
    >>> verl = filtered_batch_moments(m, "fullmean", 4, 4)
    >>> bool(np.allclose(polaris.prompt_weight, verl.prompt_weight)), bool(polaris.variance > verl.variance)
    (True, True)
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    G = as_int(group_size, "group_size", 2, MIN_GROUP_REASON)
    B = as_int(batch_size, "batch_size", 1)
    ratio = as_float(min_replace_ratio, "min_replace_ratio", low=0.0)
    if not isinstance(merge_copies, (bool, np.bool_)):
        raise TypeError(f"`merge_copies` must be a bool, got {merge_copies!r}")
    f, gram = moments.prompt_prob, moments.grad_gram
    r = keep_probability(np.clip(moments.value, 0.0, 1.0), G, f, "verl")
    pi, counts, pairs = multiplicity_law(r, B, ratio)
    mask = keep_mask("verl", G)
    mults = np.flatnonzero(counts > 0)
    weights, second = {}, {}
    for m in mults:
        table = merged_table(estimator, G, int(m) if merge_copies else 1)
        out = section7.advantage_moments(
            moments, section7.AdvantageTable(G, table.success * mask, table.failure * mask))
        weights[m], second[m] = f * out.mean_factor / r, float(f @ out.second_moment) / r
    W = sum(counts[m] * m * weights[m] for m in mults) / B
    sq = sum(counts[m] * m * m * second[m] for m in mults)
    sq += sum(pairs[m, n] * m * n * float(weights[m] @ gram @ weights[n])
              for m in mults for n in mults if pairs[m, n] > 0)
    mean_sq, cross = float(W @ gram @ W), float(W @ gram @ f)
    g_sq = float(moments.grad_norm_sq)
    variance = sq / B**2 - mean_sq
    bias_sq = mean_sq - 2.0 * cross + g_sq
    return ReplaceBatch(G, B, ratio, r, pi, counts, W, mean_sq, bias_sq, variance,
                        variance + bias_sq)


@dataclass(frozen=True)
class ReplaceCost:
    """Generation batches per step under SkyRL's ``replace`` (each batch used with probability ``pi``).

    Attributes
    ----------
    keep_prob, replace_prob : float
        ``r`` and ``pi``.
    batch_size, max_sample_batches : int
        ``B`` and the cap ``K`` (0: none).
    expected_gen_batches, cap_probability, expected_rollouts : float
        ``E min(N, K)`` with ``N`` geometric(``pi``), ``P(N > K) = (1 - pi)^K`` (SkyRL raises)
        and ``G B E min(N, K)``.
    """

    keep_prob: float
    replace_prob: float
    batch_size: int
    max_sample_batches: int
    expected_gen_batches: float
    cap_probability: float
    expected_rollouts: float


def replace_generation_cost(value, group_size, batch_size, min_replace_ratio=MIN_REPLACE_RATIO,
                            max_sample_batches=0, prompt_prob=None) -> ReplaceCost:
    """Expected batches drawn per step, and the chance of SkyRL's cap, under ``replace``.

    A batch is used when ``J > rho B``, independently across batches, so the batches drawn are
    the ``N = min{n : Binomial(n, pi) >= 1}`` of the regenerating filter with one "group" of one
    per batch (:func:`~ustat_rl.theory.dynamic_sampling_cost.expected_gen_batches` at ``B = b = 1``).

    >>> round(replace_generation_cost(0.5, 2, 4).expected_gen_batches, 6)  # 1/pi, r = 1/2
    1.454545
    """
    G = as_int(group_size, "group_size", 2, MIN_GROUP_REASON)
    return replace_cost_at_keep_probability(keep_probability(value, G, prompt_prob, "verl"), G,
                                            batch_size, min_replace_ratio, max_sample_batches)


def replace_cost_at_keep_probability(keep_prob, group_size, batch_size,
                                     min_replace_ratio=MIN_REPLACE_RATIO,
                                     max_sample_batches=0) -> ReplaceCost:
    """:func:`replace_generation_cost` from ``r`` itself (prompts i.i.d.: nothing else enters)."""
    r = as_float(keep_prob, "keep_prob", low=0.0, high=1.0)
    G = as_int(group_size, "group_size", 2, MIN_GROUP_REASON)
    B = as_int(batch_size, "batch_size", 1)
    K = as_int(max_sample_batches, "max_sample_batches", 0, "(0 for no cap, as SkyRL reads -1)")
    pi = replace_probability(r, B, min_replace_ratio)
    batches, capped = expected_gen_batches(pi, 1, 1, K)
    return ReplaceCost(r, pi, B, K, batches, capped, G * B * batches)
