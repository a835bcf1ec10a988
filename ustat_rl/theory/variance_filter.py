r"""RAGEN-2's reward-variance filter: the groups it keeps and the exact moments of the kept batch.

docs/theory.md section 7, "The reward-variance filter (beyond the paper)". RAGEN-2 (arXiv
2604.06268, "SNR-Aware Filtering") ranks the ``B`` prompt groups of a step by their sample reward
variance ``s_b^2`` and trains on the high-variance ones only:

* ``top_p``: sort the groups by ``s_b^2``, largest first, ties in batch order (a stable sort),
  and keep the smallest prefix whose cumulative variance reaches ``top_p sum_b s_b^2``;
* ``top_k``: keep the first ``k`` groups of the same order.

Unlike a group filter of the success count alone (:mod:`ustat_rl.theory.group_filters`), whether a
group is kept depends on the whole batch: the same group is kept in a batch of flat groups and
dropped in a batch of informative ones. Its options (:class:`VarianceFilter`) are those of the
framework implementations: ``ddof`` of the variance, ``include_zero`` (may a group of equal
rewards be ranked), ``epsilon`` (a variance at or below it counts as zero), the tie order, and
what the kept groups' sum is divided by.

:func:`variance_filter_mask` is the reference a framework's filter is checked against
(``fn(rewards, group_ids) -> keep mask``); :func:`variance_filtered_moments` gives the exact
bias and MSE of the kept batch from a policy's :class:`~ustat_rl.theory.moments.PromptMoments`
(binary rewards) by enumerating the batch's counts of groups at each variance level.

Notes
-----
With binary rewards a group with ``k`` successes of ``G`` has ``s^2 = k (G - k) / (G (G - ddof))``,
the same for ``k`` and ``G - k``: ``G // 2 + 1`` variance levels ``j = min(k, G - k)``. With equal
group sizes ``ddof`` multiplies every variance by the same factor, so neither the order nor the
``top_p`` prefix depends on it; it matters with ragged groups and against an absolute ``epsilon``.

Given the level counts ``L = (L_0, ..., L_J)`` of a batch (multinomial, ``P_j = P(k = j) +
P(k = G - j)`` with ``P(k) = sum_x f(x) Binomial(G, V(x))(k)``), the number ``K_j`` kept at each
level is fixed; which groups of a level are kept is decided by batch position, independent of
their prompts and scores, so the kept groups of level ``j`` are i.i.d. draws of a group
conditioned on its level, with mean ``mu_j`` and second moment ``s_j``:

.. math::

    E\,\hat g_F = \sum_L P(L) \sum_j \frac{K_j}{D} \mu_j, \qquad
    E\|\hat g_F\|^2 = \sum_L \frac{P(L)}{D^2}\Bigl(\sum_j K_j (s_j - \|\mu_j\|^2)
    + \bigl\|\sum_j K_j \mu_j\bigr\|^2\Bigr),

``D = sum_j K_j`` (``divisor="kept"``) or ``B`` (``"batch"``). ``mu_j`` and ``s_j`` come from the
section 7 moments of the rule's advantage table restricted to the counts ``j`` and ``G - j``
(:func:`~ustat_rl.theory.advantage.advantage_moments`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom

from .._validation import as_float, as_int
from . import advantage as section7
from .moments import PromptMoments

__all__ = ["STRATEGIES", "TIE_ORDERS", "DIVISORS", "VARIANCE_FILTERS", "VarianceFilter",
           "VarianceFilteredBatch", "get_variance_filter", "group_variances", "kept_groups",
           "variance_filter_mask", "batch_group_weights", "variance_filtered_moments", "MAX_LEVEL_BATCHES"]

#: How many groups are kept: a share of the variance mass, or a count.
STRATEGIES = ("top_p", "top_k")
#: Among equal variances, the earlier group in the batch first (a stable sort) or the later one.
TIE_ORDERS = ("first", "last")
#: What the kept groups' sum is divided by: their number, or the batch's ``B``.
DIVISORS = ("kept", "batch")
#: Variances equal to this many digits (relative to the batch's largest) rank as ties.
TIE_DIGITS = 12
#: A prefix within this relative distance of ``top_p`` of the mass reaches it.
REACH_RTOL = 1e-12
#: The most level-count vectors :func:`variance_filtered_moments` enumerates.
MAX_LEVEL_BATCHES = 3_000_000


@dataclass(frozen=True)
class VarianceFilter:
    """One reward-variance filter (RAGEN-2's SNR-aware filtering) and its options.

    Attributes
    ----------
    strategy : {"top_p", "top_k"}
        Keep the smallest prefix reaching ``top_p`` of the variance mass, or ``top_k`` groups.
    top_p : float
        In ``(0, 1]`` (``top_p`` strategy).
    top_k : int or None
        ``>= 1`` (``top_k`` strategy; the batch is kept whole when it has at most ``top_k``
        eligible groups).
    ddof : int
        Delta degrees of freedom of each group's variance (1: the sample variance).
    include_zero : bool
        Whether a group of variance ``<= epsilon`` may be ranked; otherwise it is never kept
        unless no group has more (then the batch is kept whole, as VAGEN does).
    epsilon : float
        A variance at or below it counts as zero.
    tie : {"first", "last"}
        Among equal variances, the earlier (stable sort) or the later group in the batch first.
    divisor : {"kept", "batch"}
        The kept groups' sum divided by their number (a loss averaged over the kept samples) or
        by ``B`` (a constant normaliser).
    name : str
        A label.
    """

    strategy: str = "top_p"
    top_p: float = 0.9
    top_k: int | None = None
    ddof: int = 1
    include_zero: bool = False
    epsilon: float = 0.0
    tie: str = "first"
    divisor: str = "kept"
    name: str = "reward_variance"

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {self.strategy!r}")
        p = as_float(self.top_p, "top_p")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"`top_p` must be in (0, 1], got {p:g}")
        if self.strategy == "top_k":
            if self.top_k is None:
                raise ValueError("`top_k` must be an integer >= 1 for the top_k strategy, got None")
            as_int(self.top_k, "top_k", 1)
        as_int(self.ddof, "ddof", 0)
        as_float(self.epsilon, "epsilon", low=0.0)
        if self.tie not in TIE_ORDERS:
            raise ValueError(f"`tie` must be one of {TIE_ORDERS}, got {self.tie!r}")
        if self.divisor not in DIVISORS:
            raise ValueError(f"`divisor` must be one of {DIVISORS}, got {self.divisor!r}")
        if not isinstance(self.include_zero, (bool, np.bool_)):
            raise TypeError(f"`include_zero` must be a bool, got {type(self.include_zero).__name__}")


#: The filters by name: ``top_p`` at RAGEN-2's 0.9, ``top_k`` (its count given as a parameter).
VARIANCE_FILTERS = {
    "reward_variance_top_p": VarianceFilter("top_p", 0.9, name="reward_variance_top_p"),
    "reward_variance_top_k": None,  # needs its k: get_variance_filter(name, k)
}


def get_variance_filter(spec, param=None) -> VarianceFilter:
    """A :class:`VarianceFilter` from itself, or a name of :data:`VARIANCE_FILTERS` with its
    parameter (``top_p`` for ``reward_variance_top_p``, ``top_k`` for ``reward_variance_top_k``).

    Examples
    --------
    >>> get_variance_filter("reward_variance_top_p", 0.5).top_p
    0.5
    >>> get_variance_filter("reward_variance_top_k", 3).top_k
    3
    """
    if isinstance(spec, VarianceFilter):
        if param is not None:
            raise ValueError("`param` must be None when the filter is a VarianceFilter")
        return spec
    if spec == "reward_variance_top_p":
        return VarianceFilter("top_p", 0.9 if param is None else as_float(param, "param"),
                              name=spec)
    if spec == "reward_variance_top_k":
        if param is None:
            raise ValueError("`param` must give k (an integer >= 1) for reward_variance_top_k")
        value = as_float(param, "param")
        if value != int(value):
            raise ValueError(f"`param` must be an integer k for reward_variance_top_k, got {value:g}")
        return VarianceFilter("top_k", top_k=int(value), name=spec)
    raise ValueError(f"`group_filter` must be one of {tuple(VARIANCE_FILTERS)} or a "
                     f"VarianceFilter, got {spec!r}")


def _group_index(group_ids):
    """``(ids in order of first appearance, each sample's group index)``."""
    ids = np.asarray(group_ids)
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return uniq[order], rank[inverse.reshape(-1)]


def group_variances(rewards, group_ids, ddof: int = 1):
    """Each group's reward variance, groups in order of first appearance.

    Returns ``(ids, variances, sizes)``; a group of at most ``ddof`` samples has variance 0.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1 or np.shape(group_ids) != r.shape:
        raise ValueError(f"`rewards` and `group_ids` must be 1-d of one length, got shapes "
                         f"{r.shape} and {np.shape(group_ids)}")
    if not np.all(np.isfinite(r)):
        raise ValueError("`rewards` must be finite")
    d = as_int(ddof, "ddof", 0)
    ids, g = _group_index(group_ids)
    n = np.bincount(g).astype(np.float64)
    mean = np.bincount(g, r) / n
    ss = np.bincount(g, (r - mean[g]) ** 2)
    var = np.where(n > d, ss / np.maximum(n - d, 1.0), 0.0)
    return ids, var, n.astype(int)


def _prefix_length(sorted_mass: np.ndarray, top_p: float) -> np.ndarray:
    """Smallest ``m`` with ``cumsum[m - 1] >= top_p * total`` per row of ``(..., B)``: the
    prefix of RAGEN-2's top_p (0 when the row's mass is 0)."""
    cum = np.cumsum(sorted_mass, axis=-1)
    # a prefix that reaches the target but for rounding reaches it: two groups of variance 1/3
    # (4 and 3 samples) reach half of their 2/3 with the first, whatever the last bits say
    reached = cum >= top_p * cum[..., -1:] * (1.0 - REACH_RTOL)
    return np.where(cum[..., -1] > 0, np.argmax(reached, axis=-1) + 1, 0)


def kept_groups(variances, spec) -> np.ndarray:
    """Which groups of each batch the filter keeps: ``variances (..., B)`` in batch order ->
    bool ``(..., B)``.

    Examples
    --------
    >>> f = VarianceFilter("top_p", 0.5)
    >>> kept_groups([0.0, 0.2, 0.1, 0.1], f).astype(int).tolist()  # 0.2 is half of 0.4
    [0, 1, 0, 0]
    >>> kept_groups([0.0, 0.1, 0.2, 0.1], VarianceFilter("top_p", 0.7)).astype(int).tolist()
    [0, 1, 1, 0]
    """
    spec = get_variance_filter(spec)
    v = np.asarray(variances, dtype=np.float64)
    if v.ndim < 1 or v.shape[-1] < 1:
        raise ValueError(f"`variances` must have a last axis of groups, got shape {v.shape}")
    if np.any(v < 0) or not np.all(np.isfinite(v)):
        raise ValueError("`variances` must be finite and non-negative")
    B = v.shape[-1]
    live = v > spec.epsilon
    eligible = live | spec.include_zero
    mass = np.where(live, v, 0.0)
    top = mass.max(axis=-1, keepdims=True)
    # variances equal to 12 significant digits tie: the same value computed from two reward
    # vectors may differ in its last bits, and the tie order, not rounding, decides
    key = np.where(eligible, np.round(mass / np.where(top > 0, top, 1.0), TIE_DIGITS), -1.0)
    pos = np.broadcast_to(np.arange(B) if spec.tie == "first" else -np.arange(B), v.shape)
    order = np.lexsort((pos, -key), axis=-1)  # (..., B): largest variance first, ties by pos
    n_eligible = eligible.sum(axis=-1)
    if spec.strategy == "top_p":
        n_keep = _prefix_length(np.take_along_axis(mass, order, axis=-1), spec.top_p)
        n_keep = np.where(mass.sum(axis=-1) > 0, n_keep, B)  # no signal: keep the batch whole
    else:
        n_keep = np.minimum(int(spec.top_k), n_eligible)
        n_keep = np.where(n_eligible > 0, n_keep, B)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(B), v.shape), axis=-1)
    return rank < n_keep[..., None]


def variance_filter_mask(rewards, group_ids, spec=None) -> np.ndarray:
    """The reference filter: ``(rewards (N,), group_ids (N,)) -> keep mask (N,)``.

    Groups are ordered by first appearance of their id (the batch order); a sample is kept when
    its group is (:func:`kept_groups`). ``spec`` defaults to RAGEN-2's ``top_p = 0.9``.

    Examples
    --------
    >>> r = [1, 0, 1, 1, 0, 0, 1, 0, 0, 0]
    >>> ids = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    >>> variance_filter_mask(r, ids, VarianceFilter("top_p", 0.5)).astype(int).tolist()
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    """
    spec = get_variance_filter("reward_variance_top_p" if spec is None else spec)
    _, var, _ = group_variances(rewards, group_ids, spec.ddof)
    _, g = _group_index(group_ids)
    return kept_groups(var, spec)[g]


def batch_group_weights(rewards, spec) -> np.ndarray:
    """Each group's weight in the kept batch's estimate, ``rewards (..., B, G) -> (..., B)``:
    ``1/D`` for a kept group (``D`` the kept count or ``B``, :attr:`VarianceFilter.divisor`),
    0 for a dropped one; ``g_F = sum_b w_b g_hat_b``."""
    spec = get_variance_filter(spec)
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim < 2:
        raise ValueError(f"`rewards` must have shape (..., B, G), got {r.shape}")
    G = r.shape[-1]
    var = r.var(axis=-1, ddof=spec.ddof) if G > spec.ddof else np.zeros(r.shape[:-1])
    keep = kept_groups(var, spec)  # (..., B)
    n_kept = keep.sum(axis=-1, keepdims=True)
    D = n_kept if spec.divisor == "kept" else np.full_like(n_kept, r.shape[-2])
    return np.where(keep, 1.0 / np.maximum(D, 1), 0.0)


@dataclass(frozen=True)
class VarianceFilteredBatch:
    """Exact moments of the kept batch ``g_F`` of one step of ``B`` groups of ``G`` (section 7).

    Attributes
    ----------
    group_size, batch_size : int
    keep_rate : float
        ``E[sum_j K_j] / B``, the expected share of groups kept.
    level_keep : ndarray (G // 2 + 1,)
        ``P(kept | level j)``, ``j = min(k, G - k)``: a group's keep probability given its level,
        over the batches it can sit in (nan for a level of probability 0).
    level_prob : ndarray (G // 2 + 1,)
        ``P_j``, the law of a group's level.
    mean_factor : float
        ``<E g_F, g> / ||g||^2``.
    bias_sq, variance, mse : float
        ``||E g_F - g||^2``, ``E||g_F - E g_F||^2`` and ``E||g_F - g||^2``.
    unfiltered_mse : float
        The MSE of the same rule on all ``B`` groups.
    n_level_batches : int
        Level-count vectors enumerated.
    """

    group_size: int
    batch_size: int
    keep_rate: float
    level_keep: np.ndarray
    level_prob: np.ndarray
    mean_factor: float
    bias_sq: float
    variance: float
    mse: float
    unfiltered_mse: float
    n_level_batches: int


def _compositions(total: int, parts: int) -> np.ndarray:
    """Every vector of ``parts`` non-negative integers summing to ``total`` (stars and bars)."""
    bars = np.array(list(itertools.combinations(range(total + parts - 1), parts - 1)),
                    dtype=np.int64).reshape(-1, parts - 1)
    edges = np.concatenate([np.full((len(bars), 1), -1), bars,
                            np.full((len(bars), 1), total + parts - 1)], axis=1)
    return np.diff(edges, axis=1) - 1  # (M, parts)


def _level_kept(counts: np.ndarray, level_var: np.ndarray, spec: VarianceFilter) -> np.ndarray:
    """Groups kept at each level, ``(M, J)``, for level counts ``(M, J)``: the batch sorted by
    variance is the levels in decreasing variance, each a run of equal values, and the rule of
    :func:`kept_groups` read per run (which groups of a run are kept is a matter of position,
    independent of their gradients). The prefix reaches ``top_p`` of the mass inside the run
    where ``ceil((target - mass before) / v)`` groups of it are needed."""
    desc = np.argsort(-level_var, kind="stable")  # levels, largest variance first
    c = counts[:, desc].astype(np.float64)  # (M, J)
    v = level_var[desc]  # (J,)
    live = v > spec.epsilon
    eligible = live | spec.include_zero
    if spec.strategy == "top_p":
        mass = c * np.where(live, v, 0.0)  # (M, J)
        total = mass.sum(axis=1, keepdims=True)
        before = np.cumsum(mass, axis=1) - mass
        target = spec.top_p * total * (1.0 - REACH_RTOL)
        need = np.ceil((target - before) / np.where(live, v, 1.0))
        kept = np.where(live, np.clip(need, 0.0, c), 0.0)
        kept = np.where(total > 0, kept, c)  # no signal: the batch whole
    else:
        ce = c * eligible
        before = np.cumsum(ce, axis=1) - ce
        kept = np.clip(float(spec.top_k) - before, 0.0, ce)
        kept = np.where(ce.sum(axis=1, keepdims=True) > 0, kept, c)
    out = np.empty_like(counts)
    out[:, desc] = kept.astype(counts.dtype)
    return out


def variance_filtered_moments(moments: PromptMoments, estimator, group_size, batch_size,
                              spec=None) -> VarianceFilteredBatch:
    r"""Exact bias and MSE of the batch the reward-variance filter keeps (section 7).

    Parameters
    ----------
    moments : PromptMoments
        A policy with binary rewards (exact or estimated moments).
    estimator : str, AdvantageRule, callable or AdvantageTable
        A group rule of the success count (section 7's table ``a(z, m)``).
    group_size, batch_size : int
        ``G >= 2`` and ``B >= 1`` groups per step, before filtering.
    spec : VarianceFilter or str, optional
        RAGEN-2's ``top_p = 0.9`` by default.

    Returns
    -------
    VarianceFilteredBatch

    Notes
    -----
    The module's formula, summed over the ``C(B + J - 1, J - 1)`` level-count vectors ``L``
    (``J = G // 2 + 1``) with their multinomial probabilities; at most
    :data:`MAX_LEVEL_BATCHES` of them. The variances are those of rewards 0 and 1.

    Examples
    --------
    With ``top_p = 1`` and a rule that gives flat groups no gradient, the filter drops the flat
    groups and averages the rest; at ``B = 1`` it keeps the one group whatever it is:

    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]]).moments()
    >>> one = variance_filtered_moments(m, "grpo", 4, 1)
    >>> bool(abs(one.mse - one.unfiltered_mse) < 1e-15), one.keep_rate
    (True, 1.0)
    """
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 1)
    spec = get_variance_filter("reward_variance_top_p" if spec is None else spec)
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    J = G // 2 + 1
    n_batches = math.comb(B + J - 1, J - 1)
    if n_batches > MAX_LEVEL_BATCHES:
        raise ValueError(f"`batch_size` {B} and `group_size` {G} give {n_batches} level-count "
                         f"vectors, more than the {MAX_LEVEL_BATCHES} enumerated")
    table = section7.as_advantage_table(estimator, G)
    f, gram = moments.prompt_prob, moments.grad_gram
    value = np.clip(moments.value, 0.0, 1.0)
    k = np.arange(G + 1)
    level = np.minimum(k, G - k)  # (G + 1,)
    pk = binom.pmf(k[None, :], G, value[:, None])  # (P, G + 1)
    weight = np.zeros((J, f.size))  # E[g_hat 1{level j}] = sum_x weight[j, x] g(x)
    second = np.zeros(J)  # E[||g_hat||^2 1{level j}]
    for j in range(J):
        on = (level == j).astype(np.float64)
        part = section7.advantage_moments(
            moments, section7.AdvantageTable(G, table.success * on, table.failure * on))
        weight[j] = f * part.mean_factor
        second[j] = float(f @ part.second_moment)
    level_prob = np.array([f @ pk[:, level == j].sum(axis=1) for j in range(J)])  # (J,)
    safe = np.where(level_prob > 0, level_prob, 1.0)
    mu_w = weight / safe[:, None]  # mu_j = sum_x mu_w[j, x] g(x)
    s = second / safe
    mu_gram = np.array([[float(mu_w[i] @ gram @ mu_w[j]) for j in range(J)]
                        for i in range(J)])  # (J, J) <mu_i, mu_j>
    mu_g = np.array([float(mu_w[j] @ gram @ f) for j in range(J)])  # <mu_j, g>

    counts = _compositions(B, J)  # (M, J)
    with np.errstate(divide="ignore"):
        logp = gammaln(B + 1) - gammaln(counts + 1).sum(axis=1) + (
            np.where(counts > 0, counts * np.log(np.where(level_prob > 0, level_prob, 1.0)), 0.0)
            ).sum(axis=1)
    possible = np.all((counts == 0) | (level_prob > 0), axis=1)
    prob = np.where(possible, np.exp(logp), 0.0)  # (M,)
    level_var = np.arange(J) * (G - np.arange(J)) / (G * max(G - spec.ddof, 1))
    if spec.epsilon > 0.0 and spec.epsilon >= level_var[1]:
        raise ValueError(f"`epsilon` must be below the smallest positive variance "
                         f"{level_var[1]:g} at G = {G} for exact moments (levels at or below it "
                         "would tie with the flat ones), got {spec.epsilon:g}")
    kept = _level_kept(counts, level_var, spec)  # (M, J)
    n_kept = kept.sum(axis=1)
    D = n_kept.astype(np.float64) if spec.divisor == "kept" else np.full(len(kept), float(B))
    scale = np.where(D > 0, 1.0 / np.where(D > 0, D, 1.0), 0.0)  # (M,)
    coef = (prob * scale) @ kept  # (J,): E g_F = sum_j coef_j mu_j
    quad = (prob * scale**2) @ np.sum((kept @ mu_gram) * kept, axis=1)
    diag = (prob * scale**2) @ (kept @ (s - np.diag(mu_gram)))
    mean_sq = float(coef @ mu_gram @ coef)
    cross = float(coef @ mu_g)
    g_sq = float(moments.grad_norm_sq)
    second_total = float(quad + diag)
    bias_sq = mean_sq - 2.0 * cross + g_sq
    variance = second_total - mean_sq
    expected_level = B * level_prob
    with np.errstate(invalid="ignore", divide="ignore"):
        level_keep = np.where(level_prob > 0, (prob @ kept) / expected_level, np.nan)
    unfiltered = float(section7.minibatch_advantage_mse(moments, table, None, B))
    return VarianceFilteredBatch(G, B, float(prob @ n_kept) / B, level_keep, level_prob,
                                 cross / g_sq if g_sq > 0 else float("nan"), bias_sq, variance,
                                 second_total - 2.0 * cross + g_sq, unfiltered, int(len(counts)))
