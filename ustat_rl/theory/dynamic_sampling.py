r"""Dynamic sampling (DAPO's ``filter_groups``): the kept batch, its cost, and ``G`` at a budget.

docs/theory.md section 7, "Dynamic sampling (beyond the paper)". verl's DAPO trainer
(``recipe/dapo/dapo_ray_trainer.py``) draws generation batches of ``b`` prompts with ``G`` answers
each, keeps the groups whose rewards are not all equal, and uses the first ``B`` kept; after
``max_num_gen_batches`` batches without ``B`` it raises (``<= 0``: no cap). A group at ``x`` is
all-equal with probability ``q(x) = V^G + (1 - V)^G`` (binary rewards) and has zero gradient
under the advantage rules here, so the kept groups are i.i.d. draws conditioned on ``0 < M < G``
(:func:`filtered_batch_moments`), ``N = min{n : Binomial(n b, r) >= B}`` batches are drawn,
``r = 1 - sum_x f(x) q(x)`` (:func:`generation_cost`), and the best ``G`` at a budget depends on
which rollouts it counts (:func:`optimal_filtered_group_size`). Prompts are i.i.d. from ``f``.

Beyond the paper, every function takes ``group_filter``: another framework's filter as a function of
the success count (ROLL's ``difficulty_mask``, OpenRLHF's mean range, slime's std filter;
:mod:`ustat_rl.theory.group_filters`), verl's all-equal filter by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._validation import as_group_sizes, as_int, as_probabilities
from . import advantage as section7
from .dynamic_sampling_cost import MIN_GROUP_REASON as _MIN_G
from .dynamic_sampling_cost import GenerationCost, cost_at_keep_probability, expected_gen_batches
from .group_filters import get_group_filter, keep_mask
from .group_size import best_index, check_budget, group_size_grid
from .moments import PromptMoments
from .mse import check_prompt_prob

__all__ = ["ACCOUNTINGS", "FILTER_TARGETS", "FilteredBatch", "GenerationCost",
           "FilteredGroupSize", "keep_probability", "filtered_batch_moments", "generation_cost",
           "optimal_filtered_group_size", "cost_at_keep_probability"]

#: What a budget of rollouts per step counts: every generated one, the ``B G`` kept, or no filter.
ACCOUNTINGS = ("generated", "accepted", "unfiltered")

#: The batch against ``g``, or the batch times ``r`` against ``g`` (a learning rate times ``r``).
FILTER_TARGETS = ("grad", "rescaled")

#: Largest group size searched by default in :func:`optimal_filtered_group_size`.
DEFAULT_MAX_GROUP = 128

@dataclass(frozen=True)
class FilteredBatch:
    """Exact moments of the accepted batch ``g_DS = (1/B) sum_{b <= B} g_hat_b`` (section 7).

    Attributes
    ----------
    group_size, batch_size : int
        ``G`` and ``B`` (kept groups).
    keep_prob : float
        ``r = 1 - sum_x f(x) q(x)``, ``q(x) = V^G + (1 - V)^G``.
    prompt_keep, accepted_prompt_prob : ndarray (P,)
        ``1 - q(x)`` and ``f'(x) = f(x)(1 - q(x))/r``, the law of a kept group's prompt.
    conditional_mean_factor, conditional_second_moment : ndarray (P,)
        ``c(x)/(1 - q(x))`` and ``E||g_hat(x)||^2/(1 - q(x))``: ``E[g_hat(x) | kept]`` is the
        first times ``g(x)``, ``E[||g_hat(x)||^2 | kept]`` the second (0 if never kept).
    prompt_weight : ndarray (P,)
        ``w(x) = f(x) c(x)/r``: ``E g_DS = sum_x w(x) g(x)``, the quantity the batch estimates.
    mean_sq, bias_sq : float
        ``||E g_DS||^2 = w' Gamma w`` and ``||E g_DS - g||^2`` (GRPO: ``(Q/r)^2 ||g||^2``).
    variance, mse, mse_rescaled : float
        ``E||g_DS - E g_DS||^2``, ``E||g_DS - g||^2`` and ``E||r g_DS - g||^2``.
    unfiltered_mse : float
        The MSE of ``B`` drawn groups without filtering: a prediction that ignores it.
    """

    group_size: int
    batch_size: int
    keep_prob: float
    prompt_keep: np.ndarray
    accepted_prompt_prob: np.ndarray
    conditional_mean_factor: np.ndarray
    conditional_second_moment: np.ndarray
    prompt_weight: np.ndarray
    mean_sq: float
    bias_sq: float
    variance: float
    mse: float
    mse_rescaled: float
    unfiltered_mse: float


@dataclass(frozen=True)
class FilteredGroupSize:
    """The group size with the smallest MSE at a budget of rollouts per step (section 7).

    Attributes
    ----------
    group_size, batch_size, mse : int, int, float
        The best ``G``, its batch size ``B`` and its MSE.
    accounting, target : str
        One of :data:`ACCOUNTINGS` and :data:`FILTER_TARGETS`.
    group_sizes, batch_sizes, mses, rollouts : ndarray (n,)
        Every ``G`` searched, its largest affordable ``B`` (0: none), the MSE there (``inf``
        if none) and the expected rollouts generated per step.
    """

    group_size: int
    batch_size: int
    mse: float
    accounting: str
    target: str
    group_sizes: np.ndarray
    batch_sizes: np.ndarray
    mses: np.ndarray
    rollouts: np.ndarray


def _prompt_keep(value: np.ndarray, G: int, mask: np.ndarray | None = None) -> np.ndarray:
    """``P(keep(M)) = sum_k Binomial(G, p)(k) mask[k]`` per prompt. verl's filter (``mask`` ``None``
    or ``0 < k < G``) is ``1 - p^G - (1 - p)^G``, taken as ``-expm1(G log1p(-u)) - u^G``,
    ``u = min(p, 1 - p)``: no cancellation. Other filters sum the kept terms (all positive)."""
    if mask is None or np.array_equal(mask, (np.arange(G + 1) > 0) & (np.arange(G + 1) < G)):
        u = np.minimum(value, 1.0 - value)
        return np.maximum(-np.expm1(G * np.log1p(-u)) - u**G, 0.0)
    kept = np.flatnonzero(mask)
    return binom.pmf(kept[None, :], G, np.asarray(value, dtype=np.float64)[..., None]).sum(axis=-1)


def keep_probability(value, group_size, prompt_prob=None, group_filter=None) -> float:
    r"""``r = sum_x f(x) P(keep(M) | x)``, ``M ~ Binomial(G, p(x))``: the chance a group is kept.

    .. math::

        r = \sum_x f(x) \sum_{k:\,\mathrm{keep}(k, G)} \binom{G}{k} p(x)^k (1 - p(x))^{G-k}
        \;=\; 1 - \sum_x f(x)\,\bigl(p(x)^G + (1 - p(x))^G\bigr) \text{ (verl's filter)}

    ``value`` holds the success probabilities ``p(x)`` in ``[0, 1]`` (a float or ``(P,)``),
    ``group_size`` is ``G >= 2``, ``prompt_prob`` ``f(x)`` (uniform by default) and
    ``group_filter`` a name of :data:`~ustat_rl.theory.group_filters.GROUP_FILTERS` or a
    :class:`~ustat_rl.theory.group_filters.GroupFilter` (verl's all-equal filter by default).

    Examples
    --------
    >>> round(keep_probability(0.5, 4), 6), keep_probability([0.0, 1.0], 8)
    (0.875, 0.0)
    >>> round(keep_probability(0.5, 4, group_filter="roll"), 6)  # k = 1, 2, 3 of 4: as verl's
    0.875
    """
    G = as_int(group_size, "group_size", 2, _MIN_G)
    p = np.atleast_1d(as_probabilities(value, "value", ndim=(0, 1)))
    f = np.full(p.size, 1 / p.size) if prompt_prob is None else check_prompt_prob(prompt_prob, p.size)
    return float(min(f @ _prompt_keep(p, G, keep_mask(group_filter, G)), 1.0))


def _zero_on_all_equal(advantage, G: int):
    table = section7.as_advantage_table(advantage, G)
    if table.success[G] != 0.0 or table.failure[0] != 0.0:
        raise ValueError("`advantage` must give all-equal groups a zero gradient, as "
                         "leave-one-out, mean and std-normalised rules do; got a(1, G) = "
                         f"{table.success[G]:g}, a(0, 0) = {table.failure[0]:g}")
    return table


def filtered_batch_moments(moments: PromptMoments, estimator, group_size,
                           batch_size, group_filter=None) -> FilteredBatch:
    r"""Exact mean, bias and MSE of the batch of ``B`` kept groups (section 7).

    .. math::

        E\,g_{DS} = \frac{1}{r}\sum_x f(x)\,c(x)\,g(x), \qquad
        E\|g_{DS} - g\|^2 = \frac{1}{B}\Bigl(\frac{\sum_x f(x) E\|\hat g(x)\|^2}{r}
        - \|E g_{DS}\|^2\Bigr) + \|E g_{DS} - g\|^2

    Parameters
    ----------
    moments : PromptMoments
        Moments of a policy with binary rewards.
    estimator : str, AdvantageRule, callable or AdvantageTable
        A group rule that gives all-equal groups advantage 0: ``"grpo"`` (leave-one-out),
        ``"fullmean"`` (mean baseline), ``"verl_grpo"`` (std-normalised), ...
    group_size, batch_size : int
        ``G >= 2`` and ``B >= 1`` kept groups.
    group_filter : str or GroupFilter, optional
        Which groups are kept (:data:`~ustat_rl.theory.group_filters.GROUP_FILTERS`): verl's
        all-equal filter by default; ``"roll"``, ``"openrlhf"``, ``"slime"`` (beyond the paper).

    Returns
    -------
    FilteredBatch

    Notes
    -----
    ``c(x)`` and ``E||g_hat(x)||^2`` are the section 7 moments of the rule's table times the
    keep indicator, ``a'(z, k) = a(z, k) keep(k)`` (:func:`~ustat_rl.theory.advantage.advantage_moments`):
    ``E[g_hat 1_kept] = c(x) g(x)``, so ``E[g_hat | kept] = c(x) g(x)/P(kept | x)`` and
    ``E[||g_hat||^2 | kept] = E[||g_hat||^2 1_kept]/P(kept | x)``; the kept groups are i.i.d.
    (the stopping time reads only the keep indicators). Under verl's filter ``g_hat = 0`` on the
    dropped (all-equal) groups, so ``c`` is the unfiltered one and the MSE is
    :func:`~ustat_rl.theory.advantage.dynamic_sampling_mse`. ``ValueError`` when ``r = 0``
    (the batch never fills).

    Examples
    --------
    One prompt with ``p = 1/2`` and two answers, one of them right: GRPO's kept batch estimates
    ``g/r`` with ``r = 1 - 2/2^4``.

    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]]).moments()
    >>> out = filtered_batch_moments(m, "grpo", 4, 2)
    >>> out.keep_prob, round(float(out.prompt_weight[0]), 6), round(out.mse, 6)
    (0.875, 1.142857, 0.004252)
    """
    G = as_int(group_size, "group_size", 2, _MIN_G)
    B = as_int(batch_size, "batch_size", 1)
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    table = _zero_on_all_equal(estimator, G)
    kept = get_group_filter(group_filter)
    mask = keep_mask(kept, G)
    kept_table = section7.AdvantageTable(G, table.success * mask, table.failure * mask)
    out = section7.advantage_moments(moments, kept_table)  # checks that rewards are binary
    f, gram = moments.prompt_prob, moments.grad_gram
    keep = _prompt_keep(np.clip(moments.value, 0.0, 1.0), G, mask)  # (P,)
    r = float(min(f @ keep, 1.0))
    if r <= 0.0:
        raise ValueError(f"group filter {kept.name!r} drops every group with probability 1 (for "
                         "verl's, each V(x) is 0 or 1): the accepted batch never fills and the "
                         "expected number of generation batches is inf (see generation_cost)")
    safe = np.where(keep > 0, keep, 1.0)
    weight = f * out.mean_factor / r  # (P,)
    mean_sq, cross = float(weight @ gram @ weight), float(weight @ gram @ f)  # cross: <E g_DS, g>
    g_sq = float(moments.grad_norm_sq)
    variance = (float(f @ out.second_moment) / r - mean_sq) / B
    rescaled = r * r * (variance + mean_sq) - 2.0 * r * cross + g_sq
    bias_sq = mean_sq - 2.0 * cross + g_sq
    return FilteredBatch(
        G, B, r, keep, f * keep / r, np.where(keep > 0, out.mean_factor / safe, 0.0),
        np.where(keep > 0, out.second_moment / safe, 0.0), weight, mean_sq, bias_sq, variance,
        variance + bias_sq, rescaled, section7.minibatch_advantage_mse(moments, table, None, B))


def generation_cost(value, group_size, batch_size, gen_batch_size=None, max_num_gen_batches=0,
                    prompt_prob=None, group_filter=None) -> GenerationCost:
    r"""Expected generation batches and rollouts until ``B`` groups are kept (section 7).

    .. math::

        E \min(N, K) = \sum_{n=0}^{K-1} P\bigl(\mathrm{Bin}(n b, r) < B\bigr), \qquad
        E N = \frac{B/r + E[(-T) \bmod b]}{b}

    Parameters
    ----------
    value, group_size, prompt_prob, group_filter
        As in :func:`keep_probability`.
    batch_size : int
        ``B >= 1`` groups to keep (verl's ``data.train_batch_size``).
    gen_batch_size : int, optional
        ``b >= 1`` prompts per generation batch (``data.gen_batch_size``); ``B`` by default.
    max_num_gen_batches : int
        ``K >= 0``; 0 (verl's default) for no cap.

    Returns
    -------
    GenerationCost

    Notes
    -----
    After ``n`` batches ``S_n ~ Binomial(n b, r)`` groups are kept and ``P(N > n) =
    P(S_n < B)``. Without a cap ``N = ceil(T/b)``, ``T`` the index of the ``B``-th kept group
    (``B`` plus a negative binomial): ``E T = B/r``, and ``T mod b`` follows from ``E s^T =
    (r s/(1 - (1 - r) s))^B`` at the ``b``-th roots of unity, an exact ``O(b log b)`` sum.

    Examples
    --------
    With one kept group needed from batches of one, ``N`` is geometric: ``E N = 1/r``:

    >>> generation_cost(0.5, 2, 1).expected_gen_batches
    2.0
    >>> generation_cost([0.0, 1.0], 4, 8).expected_gen_batches
    inf
    """
    G = as_int(group_size, "group_size", 2, _MIN_G)
    return cost_at_keep_probability(keep_probability(value, G, prompt_prob, group_filter), G, batch_size,
                                    gen_batch_size, max_num_gen_batches)


def _largest_batch(r: float, G: int, budget: int, multiple: int) -> tuple[int, float]:
    """The largest ``B`` whose rollouts ``G b E N`` (``b = multiple B``) fit: ``b E N >= B/r``
    bounds ``B <= budget r/G``, and the scan runs down from there (the cost is not monotone)."""
    for B in range(min(math.floor(budget * r / G * (1.0 + 1e-12)), budget // G), 0, -1):
        cost = G * multiple * B * expected_gen_batches(r, B, multiple * B, 0)[0]
        if cost <= budget * (1.0 + 1e-12):
            return B, cost
    return 0, math.inf


def optimal_filtered_group_size(moments: PromptMoments, budget, estimator="grpo",
                                accounting: str = "generated", group_sizes=None,
                                gen_batch_multiple: int = 1,
                                target: str = "grad", group_filter=None) -> FilteredGroupSize:
    r"""The ``G`` with the smallest exact MSE at ``budget`` rollouts per step (section 7).

    .. math::

        G^\dagger = \arg\min_G \mathrm{MSE}\bigl(G, B(G)\bigr), \qquad
        B(G) = \max\{B : G\,b\,E N(B, b) \le N\} \text{ (generated)}, \quad
        \lfloor N/G \rfloor \text{ (accepted, unfiltered)}

    Parameters
    ----------
    moments, advantage
        As in :func:`filtered_batch_moments`.
    budget : int
        ``N`` rollouts per step, ``2 <= N <= 2^24``.
    accounting : {"generated", "accepted", "unfiltered"}
        ``"generated"``: the expected rollouts generated per step, discarded groups and the
        kept ones beyond ``B`` included, fit ``N``; ``"accepted"``: the ``B G`` kept rollouts
        do; ``"unfiltered"``: no dynamic sampling, ``B = N // G`` drawn groups.
    group_sizes : array_like of int, optional
        Candidates ``G >= 2``; ``2..min(N, 128)`` by default.
    gen_batch_multiple : int
        ``b = gen_batch_multiple * B`` (verl's default ``data.gen_batch_size`` is ``B``; the
        DAPO scripts use 3).
    target : {"grad", "rescaled"}
        Compare the batch with ``g``, or the batch times ``r`` with ``g``
        (:class:`FilteredBatch`); ignored for ``"unfiltered"``.
    group_filter : str or GroupFilter, optional
        As in :func:`filtered_batch_moments`; ignored for ``"unfiltered"``.

    Returns
    -------
    FilteredGroupSize
        ``ValueError`` when no candidate affords a batch (MSE at ``B``: ``variance_1/B + bias^2``).
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    N = check_budget(budget)
    for name, value, allowed in (("accounting", accounting, ACCOUNTINGS),
                                 ("target", target, FILTER_TARGETS)):
        if value not in allowed:
            raise ValueError(f"`{name}` must be one of {allowed}, got {value!r}")
    k = as_int(gen_batch_multiple, "gen_batch_multiple", 1)
    sizes = (group_size_grid(N, False, high=min(N, DEFAULT_MAX_GROUP)) if group_sizes is None
             else as_group_sizes(group_sizes, "group_sizes", 2))
    rows = []  # (B, MSE, expected rollouts) for each G
    for G in map(int, sizes):
        if accounting == "unfiltered":
            B, table = N // G, _zero_on_all_equal(estimator, G)
            mse = section7.minibatch_advantage_mse(moments, table, None, B) if B else math.inf
            rows.append((B, mse, float(B * G)))
            continue
        one = filtered_batch_moments(moments, estimator, G, 1, group_filter)
        r = one.keep_prob
        if accounting == "accepted":
            B = N // G
            cost = G * k * B * expected_gen_batches(r, B, k * B, 0)[0] if B else math.inf
        else:
            B, cost = _largest_batch(r, G, N, k)
        scale = 1.0 if target == "grad" else r * r
        bias_sq = one.bias_sq if target == "grad" else one.mse_rescaled - scale * one.variance
        rows.append((B, scale * one.variance / B + bias_sq if B else math.inf, cost))
    batches, mses, rollouts = (np.array(column) for column in zip(*rows))
    if not np.any(np.isfinite(mses)):
        raise ValueError(f"`budget` {N} affords no batch at any of the group sizes searched")
    best = best_index(mses)  # the owner's argmin: the first on a tie
    return FilteredGroupSize(int(sizes[best]), int(batches[best]), float(mses[best]), accounting,
                             target, sizes, batches.astype(np.int64), mses.astype(np.float64),
                             rollouts.astype(np.float64))
