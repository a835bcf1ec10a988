"""Reward-only allocations of 2026, as named baselines for the exact allocation (C40).

Each baseline decides a prompt's group size from its success rate ``p = V(x)`` alone (no score
norms), as stated in its source; every one is evaluated here by the same exact batch MSE as the
optimal allocation (:func:`ustat_rl.theory.allocation.allocation_mse`):

``uniform``
    ``G_x = N/P`` for every prompt (the paper's setting; the remainder of ``N mod P`` goes to the
    first prompts).
``neyman``
    ``G_x`` proportional to ``f(x) sqrt(p(1-p))``: Neyman's allocation for a variance model
    ``f^2 p(1-p)/G`` (for binary rewards ``p(1-p) = Var(Z|x)``, the ``reward_var`` field). It is
    also the prompt-level reading of Rollout-GDRO's square-root allocation (arXiv 2601.19280), which
    moves rollouts between pass@k difficulty bins in proportion to the square root of a
    variance proxy; the bins and the proxy are not specified beyond that, so no separate
    GDRO allocation is implemented.
``vip``
    VIP (arXiv 2602.01601): the gradient variance of RLOO/Dr.GRPO modelled as proportional to
    ``p(1-p)`` per rollout, and the budget split by a convex solve. Here the solve is exact over
    the integers: the minimiser of ``sum_x f^2 p(1-p)/G_x`` subject to ``sum G_x = N`` and the
    advantage rule's smallest group (greedy, exact because each term is convex and decreasing). Its
    continuous relaxation is ``neyman``. VIP's Gaussian-process prediction of ``p`` and its
    trade-off constant are not reproduced: ``p`` is taken as known (or estimated by a pilot).
``sgpo``
    sGPO (arXiv 2606.08854): the group size set to the inverse of the success rate,
    ``G_x ~ 1/p``, scaled here to the budget; prompts with ``p = 0`` (which sGPO filters) get the
    weight of ``p = 1/N``.

CERO (arXiv 2606.05606) allocates through a concave saturating utility of a Beta posterior's
expected Bernoulli variance, optimised by online Fenchel-dual updates across epochs; the
utility's form is not stated in the abstract and method summary available to this project, so
CERO is not implemented.

Continuous targets become integers by :func:`round_to_budget`: the smallest group is enforced by
water-filling, then the largest remainders receive the leftover rollouts, so ``sum G_x = N``.
"""

from __future__ import annotations

import numpy as np

from .allocation import (
    Allocation,
    allocation_mse,
    optimal_allocation,
    prepare_terms,
)

__all__ = ["BASELINE_ALLOCATIONS", "round_to_budget", "baseline_allocation", "baseline_group_sizes",
           "compare_allocations"]

#: The reward-only allocations, in the order reports list them.
BASELINE_ALLOCATIONS = ("uniform", "neyman", "vip", "sgpo")


def round_to_budget(weights, budget: int, min_group: int) -> np.ndarray:
    """Integers ``G_x >= min_group`` with ``sum G_x = budget``, proportional to ``weights``.

    The continuous target ``t_x = max(min_group, lambda w_x)`` with ``lambda`` set so that
    ``sum t_x = budget`` (water-filling: prompts below the floor are fixed there and the rest
    is shared again); then ``floor(t)`` plus one rollout for each of the largest remainders
    (ties to the lower index). All-zero weights give the uniform split.

    Examples
    --------
    >>> round_to_budget([1.0, 1.0, 2.0], 10, 2).tolist()
    [3, 2, 5]
    >>> round_to_budget([0.0, 1.0, 9.0], 12, 2).tolist()
    [2, 2, 8]
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("`weights` must be a non-empty 1-D array of finite values >= 0")
    P = w.size
    if budget < P * min_group:
        raise ValueError(f"`budget` must be >= P * min_group = {P * min_group}, got {budget}")
    if w.sum() <= 0:
        w = np.ones(P)
    fixed = np.zeros(P, dtype=bool)
    target = np.full(P, float(min_group))
    while True:
        free = ~fixed & (w > 0)
        share = budget - min_group * np.count_nonzero(~free)
        if not free.any():
            target = np.full(P, budget / P)
            break
        target = np.where(free, share * w / w[free].sum(), float(min_group))
        low = free & (target < min_group)
        if not low.any():
            break
        fixed |= low
    sizes = np.floor(target + 1e-12).astype(np.int64)
    sizes = np.maximum(sizes, min_group)
    left = budget - int(sizes.sum())
    order = np.lexsort((np.arange(P), -(target - sizes)))  # largest remainder first
    sizes[order[:left]] += 1
    return sizes


def _weights(moments, allocation: str, budget: int) -> np.ndarray:
    f = moments.prompt_prob
    var = np.clip(moments.reward_var, 0.0, None)
    if allocation == "uniform":
        return np.ones(moments.n_prompts)
    if allocation == "neyman":
        return f * np.sqrt(var)
    if allocation == "sgpo":
        p = np.clip(moments.value, 1.0 / budget, 1.0)
        return 1.0 / p
    raise ValueError(f"`allocation` must be one of {BASELINE_ALLOCATIONS}, got {allocation!r}")


def _vip(moments, low: int, budget: int) -> np.ndarray:
    """Integer minimiser of ``sum f^2 p(1-p)/G`` by the greedy of :mod:`ustat_rl.theory.allocation`.

    When every ``p(1-p)`` is 0 (all rewards equal within every prompt) every allocation is a
    minimiser; the uniform split is returned, as :func:`round_to_budget` does for all-zero
    weights, rather than the greedy's tie-break (all of the spare budget on one prompt).
    """
    from .allocation import greedy_sizes
    from .group_size import MAX_BUDGET

    var = np.clip(moments.reward_var, 0.0, None) * moments.prompt_prob**2
    if not np.any(var > 0.0):
        return round_to_budget(np.zeros(moments.n_prompts), budget, low)
    spare = budget - moments.n_prompts * low
    P = moments.n_prompts
    if P * (spare + 1) > MAX_BUDGET:  # refused before the (P, K) table is built
        raise ValueError(f"`budget` {budget} over {P} prompts: the VIP split evaluates each "
                         f"prompt's term at {spare + 1} group sizes, {P * (spare + 1)} values "
                         f"(at most {MAX_BUDGET} are held in memory): give a budget of at most "
                         f"{P * low + MAX_BUDGET // P - 1}")
    sizes = np.arange(low, low + spare + 1, dtype=np.float64)
    h = var[:, None] / sizes[None, :]  # (P, K) convex, decreasing
    return low + greedy_sizes(h, spare)


def baseline_allocation(moments, allocation: str, estimator: str, budget) -> Allocation:
    """One reward-only allocation's group sizes, scored by the exact batch MSE of ``estimator``.

    Examples
    --------
    >>> from ustat_rl.policies.examples import heterogeneous_score_bandit
    >>> bandit, theta = heterogeneous_score_bandit()
    >>> m = bandit.moments(theta, matrices=False)
    >>> baseline_allocation(m, "sgpo", "grpo", 36).group_sizes.tolist()
    [12, 4, 2, 12, 4, 2]
    """
    if allocation not in BASELINE_ALLOCATIONS:
        raise ValueError(f"`allocation` must be one of {BASELINE_ALLOCATIONS}, got {allocation!r}")
    m, low, _, budget = prepare_terms(moments, estimator, budget, None)
    sizes, method = baseline_group_sizes(m, allocation, budget, low)
    return Allocation(allocation, estimator, sizes, allocation_mse(m, estimator, sizes), method)


def baseline_group_sizes(moments, allocation: str, budget: int, min_group: int):
    """``(sizes, method)``: one reward-only allocation's integer group sizes ``(P,)`` and its rounding.

    Reads only ``prompt_prob``, ``value``, ``reward_var`` and ``n_prompts`` of ``moments``, so
    any object with those fields will do (rewards alone fix these allocations' sizes; scoring them
    needs the full moments, :func:`baseline_allocation`). ``budget >= P * min_group``.
    """
    if allocation not in BASELINE_ALLOCATIONS:
        raise ValueError(f"`allocation` must be one of {BASELINE_ALLOCATIONS}, got {allocation!r}")
    if allocation == "vip":
        return _vip(moments, min_group, budget), "greedy on p(1-p)/G"
    return (round_to_budget(_weights(moments, allocation, budget), budget, min_group),
            "largest remainder")


def compare_allocations(moments, estimator: str, budget, allocations=BASELINE_ALLOCATIONS,
                        method: str = "auto") -> dict[str, Allocation]:
    """The optimal allocation and each reward-only allocation at the same budget, by name."""
    out = {"optimal": optimal_allocation(moments, estimator, budget, method=method)}
    for name in allocations:
        out[name] = baseline_allocation(moments, name, estimator, budget)
    return out

