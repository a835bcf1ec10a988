"""Per-prompt group sizes that minimise the exact batch gradient MSE (docs/theory.md C40).

The paper gives every prompt the same ``G``. With a budget of ``N`` rollouts per batch and the
exact finite-G MSE of each prompt's group estimator (Theorem 2 and docs/theory.md section 7),
the sizes ``G_x`` with ``sum_x G_x = N`` can be chosen to minimise the batch MSE itself.

The batch estimator
-------------------
The batch holds the ``P`` prompts of a :class:`~ustat_rl.theory.PromptMoments`, each once, with
weights ``f(x)`` (its ``prompt_prob``; ``f = 1/B`` for a batch of ``B`` prompts). Prompt ``x``
gets its own group of ``G_x`` draws and its own group estimator ``g_hat_x`` (the group mean
``(1/G_x) sum_g A_g W_g``), groups are independent, and

    g_hat = sum_x f(x) g_hat_x,        target  g_f = sum_x f(x) g(x).

With ``E g_hat_x = c_x(G_x) g(x)`` (``c = 1`` for an unbiased rule) and
``v_x(G) = E||g_hat_x - c_x g(x)||^2``,

    MSE(G_1..G_P) = sum_x f(x)^2 v_x(G_x) + b^T Gamma b,   b_x = f(x) (c_x(G_x) - 1),

with ``Gamma`` the Gram matrix of the ``g(x)``. For an unbiased rule the second term vanishes
and the objective is the separable ``sum_x f(x)^2 MSE_x(G_x)``. When the batch's prompts are
themselves drawn i.i.d. from a population, the MSE against the population gradient adds
``E||g_f - g||^2`` (C6's ``c1/B``), which does not depend on the allocation for unbiased rules;
an allocation computed from information independent of the current groups (exact moments, a
pilot, earlier iterations) leaves each ``g_hat_x`` unbiased, so ``g_hat`` stays unbiased (C41).

Methods
-------
* ``"greedy"``: start at the rule's smallest group and give each further rollout to the prompt
  whose term falls most. Exact when every term is convex and decreasing in ``G``
  (proofs_check: :func:`proofs_check.allocation.grpo_convex_decreasing` and the exchange
  argument), which holds for the unbiased rules with exact moments.
* ``"dp"``: dynamic programming over prompts and budget, exact for any separable objective
  (biased rules whose prompts have orthogonal gradients, or estimated moments that break
  convexity), ``O(P R K)`` for ``R`` spare rollouts and ``K`` candidate sizes.
* ``"enumerate"``: every composition of the budget, exact for the coupled objective of a biased
  rule with a non-diagonal Gram matrix; only for small problems.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from dataclasses import dataclass

import numpy as np

from .._validation import as_int
from .group_size import MAX_BUDGET
from .moments import PromptMoments

__all__ = ["Allocation", "ALLOCATION_METHODS", "MAX_COMPOSITIONS", "rule_terms",
           "rule_min_group_size", "rule_is_unbiased", "allocation_mse", "per_prompt_terms",
           "optimal_allocation", "brute_force_allocation", "check_allocation_budget"]

ALLOCATION_METHODS = ("auto", "greedy", "dp", "enumerate")

#: Largest number of compositions ``"enumerate"`` (and the brute force) will visit.
MAX_COMPOSITIONS = 200_000

#: Convexity slack for the greedy test on estimated moments (relative to the largest step).
_CONVEX_RTOL = 1e-12


@dataclass(frozen=True)
class Allocation:
    """Integer group sizes for the prompts of one batch and their exact batch MSE.

    Attributes
    ----------
    name : str
        Which allocation produced the sizes (``"optimal"``, ``"uniform"``, ...).
    estimator : str
        The advantage rule whose MSE was evaluated.
    group_sizes : ndarray of int (P,)
        ``G_x``, summing to the budget.
    mse : float
        The exact batch MSE of the module docstring at these sizes.
    method : str
        How the sizes were found (``"greedy"``, ``"dp"``, ``"enumerate"``, or a baseline's
        rounding).
    """

    name: str
    estimator: str
    group_sizes: np.ndarray
    mse: float
    method: str

    @property
    def budget(self) -> int:
        """``N = sum_x G_x``."""
        return int(self.group_sizes.sum())


# ------------------------------------------------------------------ the rule lookup
def rule_terms(moments: PromptMoments, estimator: str, group_sizes):
    """``(v, c)``: each prompt's variance and mean factor at each size, both ``(P, n_G)``.

    The one place that maps an advantage rule's name to its exact finite-G moments:
    ``v_x(G) = E||g_hat_x - c_x g(x)||^2`` and ``E g_hat_x = c_x(G) g(x)``. Names of
    :data:`ustat_rl.theory.ESTIMATOR_NAMES` (except ``"baseline"``) use the closed forms of
    :mod:`ustat_rl.theory.mse` (any rewards); the per-group conventions of
    :mod:`ustat_rl.advantages.conventions` use the binary-reward moments of
    :func:`ustat_rl.theory.advantage_moments`.
    """
    from . import advantage_moments, per_prompt_mse, shrink_factor

    sizes = np.atleast_1d(np.asarray(group_sizes, dtype=np.int64))
    P = moments.n_prompts
    if estimator in ("grpo", "oracle", "vanilla"):
        return per_prompt_mse(moments, estimator, sizes), np.ones((P, sizes.size))
    if estimator == "fullmean":
        c = np.broadcast_to(shrink_factor(sizes.astype(float)), (P, sizes.size))
        return c**2 * per_prompt_mse(moments, "grpo", sizes), c.copy()
    _convention(estimator)
    v, c = np.empty((P, sizes.size)), np.empty((P, sizes.size))
    for j, G in enumerate(sizes):
        out = advantage_moments(moments, estimator, int(G))
        c[:, j] = out.mean_factor
        v[:, j] = out.second_moment - out.mean_factor**2 * moments.grad_sq
    return v, c


def _convention(estimator):
    from ..advantages.conventions import CONVENTIONS
    from ..advantages.registry import rule_names, unknown_name
    from . import ESTIMATOR_NAMES

    spec = CONVENTIONS.get(estimator) if isinstance(estimator, str) else None
    if spec is None and estimator not in ESTIMATOR_NAMES + rule_names():  # not a rule: a typo?
        raise ValueError(unknown_name("estimator", estimator, rule_names()))
    if spec is None or spec.statistics != "group":
        names = tuple(n for n in ESTIMATOR_NAMES if n != "baseline") + tuple(
            n for n, s in CONVENTIONS.items() if s.statistics == "group")
        raise ValueError(f"`estimator` must be a rule with an exact per-group MSE, one of "
                         f"{sorted(set(names))}; got {estimator!r}")
    return spec


def rule_min_group_size(estimator: str) -> int:
    """The smallest group the rule is defined for (2 for leave-one-out rules)."""
    if estimator in ("grpo", "fullmean"):
        return 2
    if estimator in ("oracle", "vanilla"):
        return 1
    return max(1, _convention(estimator).min_group_size)


def rule_is_unbiased(estimator: str) -> bool:
    """Whether ``E g_hat_x = g(x)`` for every ``G >= 2`` (Lemma 1, C3): leave-one-out, oracle,
    vanilla, and the conventions that equal leave-one-out (whose singleton rules may differ at
    ``G = 1``; :func:`optimal_allocation` reads the mean factors themselves)."""
    if estimator in ("grpo", "oracle", "vanilla"):
        return True
    if estimator == "fullmean":
        return False
    return _convention(estimator).project_name == "grpo"


# ------------------------------------------------------------------ validation
def _check_moments(moments) -> PromptMoments:
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    return moments


def check_allocation_budget(budget, n_prompts: int, min_group: int, estimator: str) -> int:
    """``budget`` as an int that gives each of ``P`` prompts ``min_group`` samples (``>= P *
    min_group``), or a one-line ``ValueError``: a per-prompt allocation's budget, not a fixed
    batch's (:func:`~.group_size.check_budget`)."""
    budget = as_int(budget, "budget", 1)
    if budget < n_prompts * min_group:
        raise ValueError(f"`budget` must be >= P * min_group = {n_prompts} * {min_group} = "
                         f"{n_prompts * min_group} for {estimator!r}, got {budget}")
    return budget


def prepare_terms(moments, estimator, budget, max_group_size):
    m = _check_moments(moments)
    if not isinstance(estimator, str):
        raise TypeError(f"`estimator` must be a rule name (str), got {type(estimator).__name__}")
    low = rule_min_group_size(estimator)
    budget = check_allocation_budget(budget, m.n_prompts, low, estimator)
    spare = budget - m.n_prompts * low
    high = low + spare if max_group_size is None else as_int(max_group_size, "max_group_size", low)
    if high * m.n_prompts < budget:
        raise ValueError(f"`max_group_size` {high} cannot spend the budget {budget} over "
                         f"{m.n_prompts} prompts")
    high, P = min(high, low + spare), m.n_prompts
    if P * (high - low + 1) > MAX_BUDGET:  # the (P, K) table of per-prompt MSE terms
        raise ValueError(f"`budget` {budget} over {P} prompts needs each prompt's MSE at "
                         f"{high - low + 1} group sizes, {P * (high - low + 1)} values (at most "
                         f"{MAX_BUDGET}): give a budget of at most {P * low + MAX_BUDGET // P - 1}")
    return m, low, high, budget


def per_prompt_terms(moments, estimator, low, high):
    """``(sizes, h, c)``: sizes ``low..high`` and, per prompt, ``h_x(G) = f^2 v_x + [diag]``.

    ``h`` carries each prompt's own bias ``f^2 (c - 1)^2 ||g(x)||^2``, so it is the separable
    objective exactly when the rule is unbiased or ``Gamma`` is diagonal.
    """
    sizes = np.arange(low, high + 1)
    v, c = rule_terms(moments, estimator, sizes)
    f = moments.prompt_prob[:, None]
    h = f**2 * (v + (c - 1.0) ** 2 * moments.grad_sq[:, None])
    if not np.all(np.isfinite(h)):
        raise ValueError("`moments` give a non-finite MSE term (check them for NaN or inf)")
    return sizes, h, c


def _is_diagonal(gram: np.ndarray) -> bool:
    off = gram - np.diag(np.diag(gram))
    return bool(np.all(np.abs(off) <= 1e-14 * max(1.0, float(np.max(np.abs(gram))))))


def allocation_mse(moments: PromptMoments, estimator: str, group_sizes) -> float:
    """Exact batch MSE ``sum f^2 v_x(G_x) + b^T Gamma b`` of one allocation (module docstring).

    Examples
    --------
    For an unbiased rule it is ``sum_x f(x)^2 MSE_x(G_x)``:

    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> from ustat_rl.theory import per_prompt_mse
    >>> m = SoftmaxBandit([[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.5, 0.0]]).moments()
    >>> each = [per_prompt_mse(m, "grpo", 2)[0], per_prompt_mse(m, "grpo", 6)[1]]
    >>> bool(abs(allocation_mse(m, "grpo", [2, 6]) - 0.25 * sum(each)) < 1e-15)
    True
    """
    m = _check_moments(moments)
    sizes = np.asarray(group_sizes)
    if sizes.shape != (m.n_prompts,):
        raise ValueError(f"`group_sizes` must have shape ({m.n_prompts},), got {sizes.shape}")
    low = rule_min_group_size(estimator)
    sizes = np.array([as_int(s.item(), "group_sizes", low) for s in sizes], dtype=np.int64)
    unique, inverse = np.unique(sizes, return_inverse=True)
    v, c = rule_terms(m, estimator, unique)
    rows = np.arange(m.n_prompts)
    v, c = v[rows, inverse], c[rows, inverse]
    f = m.prompt_prob
    b = f * (c - 1.0)
    mse = float(f**2 @ v + b @ m.grad_gram @ b)
    if not math.isfinite(mse):
        raise ValueError("`moments` give a non-finite MSE (check them for NaN or inf)")
    return mse


# ------------------------------------------------------------------ exact methods
def greedy_sizes(h: np.ndarray, spare: int) -> np.ndarray:
    """Give ``spare`` rollouts one at a time to the largest decrease ``h[x, k] - h[x, k+1]``."""
    P, K = h.shape
    extra = np.zeros(P, dtype=np.int64)
    heap = [(-(h[x, 0] - h[x, 1]), x) for x in range(P) if K > 1]
    heapq.heapify(heap)
    for _ in range(spare):
        _, x = heapq.heappop(heap)
        extra[x] += 1
        k = extra[x]
        if k + 1 < K:
            heapq.heappush(heap, (-(h[x, k] - h[x, k + 1]), x))
    return extra


def _dp(h: np.ndarray, spare: int) -> np.ndarray:
    """Min-plus dynamic programme: ``best_p[r] = min_k best_{p-1}[r - k] + h[p, k]``."""
    P, K = h.shape
    best = np.full(spare + 1, np.inf)
    best[: min(K, spare + 1)] = h[0, : min(K, spare + 1)]
    choice = np.zeros((P, spare + 1), dtype=np.int64)
    choice[0] = np.arange(spare + 1)
    r = np.arange(spare + 1)[:, None]  # (R+1, 1)
    k = np.arange(K)[None, :]  # (1, K)
    valid = r - k >= 0
    for p in range(1, P):
        prev = np.where(valid, best[np.clip(r - k, 0, None)], np.inf)  # (R+1, K)
        total = prev + h[p][None, :]
        choice[p] = np.argmin(total, axis=1)
        best = total[np.arange(spare + 1), choice[p]]
    extra = np.zeros(P, dtype=np.int64)
    left = spare
    for p in range(P - 1, -1, -1):
        extra[p] = choice[p, left]
        left -= extra[p]
    return extra


def _compositions(P: int, spare: int, K: int):
    """Every ``(k_1..k_P)`` with ``sum = spare`` and ``0 <= k_x < K`` (stars and bars)."""
    for bars in itertools.combinations(range(spare + P - 1), P - 1):
        parts = np.diff(np.concatenate(([-1], bars, [spare + P - 1]))) - 1
        if parts.max() < K:
            yield parts


def _count_compositions(P: int, spare: int) -> int:
    return math.comb(spare + P - 1, P - 1)


def _enumerate(m, estimator, low, K, spare, objective=None):
    P = m.n_prompts
    if (count := _count_compositions(P, spare)) > MAX_COMPOSITIONS:
        fits = bisect.bisect_right(range(spare + 1), MAX_COMPOSITIONS,  # counts grow with spare
                                   key=lambda s: _count_compositions(P, s)) - 1
        raise ValueError(f"`budget` {P * low + spare}: the exact split (a biased rule, prompts "
                         f"not orthogonal) tries all {count if count < 10**7 else f'{count:.3g}'} "
                         f"splits over {P} prompts (at most {MAX_COMPOSITIONS}): give a budget of "
                         f"at most {P * low + fits}")
    sizes, h, c = per_prompt_terms(m, estimator, low, low + K - 1)
    best, best_parts = np.inf, None
    rows = np.arange(P)
    for parts in _compositions(P, spare, K):
        if objective is not None:
            value = objective(low + parts)
        else:
            b = m.prompt_prob * (c[rows, parts] - 1.0)
            # h holds the diagonal bias; the full quadratic form replaces it
            diag = (b**2) * m.grad_sq
            value = float(np.sum(h[rows, parts]) - diag.sum() + b @ m.grad_gram @ b)
        if value < best:
            best, best_parts = value, parts
    return best_parts


def _convex_decreasing(h: np.ndarray) -> bool:
    step = np.diff(h, axis=1)  # (P, K-1), should be <= 0 and non-decreasing
    scale = _CONVEX_RTOL * max(1e-300, float(np.max(np.abs(step)))) if step.size else 0.0
    return bool(np.all(step <= scale) and np.all(np.diff(step, axis=1) >= -scale))


def optimal_allocation(moments: PromptMoments, estimator: str, budget, method: str = "auto",
                       max_group_size=None) -> Allocation:
    """Integer ``G_x`` with ``sum G_x = budget`` minimising the exact batch MSE (C40).

    Parameters
    ----------
    moments : PromptMoments
        Exact or estimated moments of the batch's prompts (weights ``f = prompt_prob``).
    estimator : str
        The advantage rule (see :func:`rule_terms`).
    budget : int
        ``N``, at least ``P`` times the rule's smallest group.
    method : {"auto", "greedy", "dp", "enumerate"}
        ``"auto"``: greedy when the objective is separable and every term convex and
        decreasing, the dynamic programme when it is separable otherwise, enumeration when a
        biased rule couples the prompts through a non-diagonal Gram matrix.
    max_group_size : int, optional
        Largest ``G_x`` considered (default: all of the spare budget on one prompt).

    Returns
    -------
    Allocation

    Examples
    --------
    >>> from ustat_rl.policies.examples import heterogeneous_score_bandit
    >>> bandit, theta = heterogeneous_score_bandit()
    >>> out = optimal_allocation(bandit.moments(theta, matrices=False), "grpo", 64)
    >>> int(out.group_sizes.sum()), out.method
    (64, 'greedy')
    """
    if method not in ALLOCATION_METHODS:
        raise ValueError(f"`method` must be one of {ALLOCATION_METHODS}, got {method!r}")
    m, low, high, budget = prepare_terms(moments, estimator, budget, max_group_size)
    spare = budget - m.n_prompts * low
    _, h, c = per_prompt_terms(m, estimator, low, high)
    # the mean factors themselves decide: a convention's singleton rule may be biased at G = 1
    separable = bool(np.all(np.abs(c - 1.0) <= 1e-12)) or _is_diagonal(m.grad_gram)
    if method == "auto":
        method = ("enumerate" if not separable
                  else "greedy" if _convex_decreasing(h) else "dp")
    if method in ("greedy", "dp") and not separable:
        raise ValueError(f"`method` {method!r} needs a separable objective: {estimator!r} is "
                         f"biased and the prompts' gradients are not orthogonal; use 'enumerate'")
    if method == "dp" and (spare + 1) * (high - low + 1) > MAX_BUDGET:  # its (spare + 1, K) table
        raise ValueError(f"`budget` {budget}: {estimator!r}'s MSE is not convex in G here, so the "
                         f"exact split is a programme over {(spare + 1) * (high - low + 1)} cells "
                         f"(at most {MAX_BUDGET}): give a budget of at most "
                         f"{m.n_prompts * low + math.isqrt(MAX_BUDGET) - 1}")
    if method == "enumerate":
        extra = _enumerate(m, estimator, low, high - low + 1, spare)
    else:
        extra = (greedy_sizes if method == "greedy" else _dp)(h, spare)
    sizes = low + extra
    return Allocation("optimal", estimator, sizes, allocation_mse(m, estimator, sizes), method)


def brute_force_allocation(moments: PromptMoments, estimator: str, budget,
                           max_group_size=None) -> Allocation:
    """The minimiser over every composition, each scored by :func:`allocation_mse` directly
    (an independent route for checking the exact methods on small problems)."""
    m, low, high, budget = prepare_terms(moments, estimator, budget, max_group_size)
    spare = budget - m.n_prompts * low
    extra = _enumerate(m, estimator, low, high - low + 1, spare,
                       objective=lambda s: allocation_mse(m, estimator, s))
    sizes = low + extra
    return Allocation("brute-force", estimator, sizes, allocation_mse(m, estimator, sizes),
                      "enumerate")
