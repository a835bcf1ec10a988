r"""The minibatch MSE at a fixed budget ``N = B G`` over group sizes (Proposition 3, Theorem 7).

At ``N`` samples per step a group size ``G`` leaves ``B = N/G`` prompts, so a fixed budget moves
both; this module owns that curve (docs/theory.md C6, C17) and the group-size grid it is read
on. Each quantity has one validated entry and a core that takes checked inputs and checks
nothing, so callers that have checked them once (the ``ustat-rl gstar`` report, the training
monitor's window, :class:`~.scaling.ScalingConstants`) call the cores directly:

* :func:`fixed_budget_mse`: any rule's exact minibatch MSE from the moments, over a grid of
  ``G`` at ``B = N/G`` (core :func:`fixed_budget_curve`);
* the GRPO law ``(c1 G + c2 + c3'/(G - 1))/N`` from the scaling constants (core :func:`grpo_law`)
  and its best integer ``G`` in ``2..N`` (:func:`best_law_group_size`, which evaluates a handful of
  candidates rather than all ``N - 1`` integers);
* :func:`admissible_group_sizes`: the divisors ``G >= 2`` of ``N`` (core :func:`group_size_grid`).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_int
from ..advantages.registry import get_rule
from .advantage import minibatch_advantage_mse
from .affine import affine_variance
from .moments import PromptMoments

__all__ = ["MAX_BUDGET", "check_budget", "admissible_group_sizes", "fixed_budget_mse",
           "budget_and_grid", "group_size_grid", "grpo_law", "best_law_group_size",
           "fixed_budget_curve"]

#: The largest budget ``N`` the group-size searches accept: :func:`admissible_group_sizes`
#: evaluates every integer in ``2..N`` (128 MiB of float64 at this size), so a larger ``N`` is
#: rejected before any memory is allocated.
MAX_BUDGET = 1 << 24


def check_budget(budget, name: str = "budget") -> int:
    """``budget`` as an int in ``2..MAX_BUDGET``, checked before any array is built."""
    budget = as_int(budget, name, 2, "(a budget needs at least one group of 2)")
    if budget > MAX_BUDGET:
        raise ValueError(f"`{name}` must be <= {MAX_BUDGET} (the group-size search evaluates "
                         f"every G in 2..N in memory), got {budget}")
    return budget


def group_size_grid(budget: int, divisors_only: bool = True) -> np.ndarray:
    """The grid, from a checked ``budget``: the divisors ``>= 2`` of ``N``, or all of ``2..N``."""
    sizes = np.arange(2, budget + 1)
    return sizes[budget % sizes == 0] if divisors_only else sizes


def admissible_group_sizes(budget, divisors_only: bool = True) -> np.ndarray:
    """Group sizes ``G >= 2`` usable at budget ``N``: its divisors, or all of ``2..N``."""
    return group_size_grid(check_budget(budget), divisors_only)


def budget_and_grid(budget, name: str = "budget") -> tuple[int, np.ndarray]:
    """``budget`` checked (:func:`check_budget`) and its divisors ``G >= 2``, the grid built
    once; ``ValueError`` when there are fewer than two, and so no group size to choose."""
    budget = check_budget(budget, name)
    sizes = group_size_grid(budget)
    if sizes.size < 2:
        near = [n for n in (budget - 1, budget + 1) if n >= 4 and group_size_grid(n).size > 1]
        raise ValueError(f"`{name}` {budget} admits one group size only (G = {budget}, B = 1), so "
                         f"there is no group size to choose; use a budget with divisors, e.g. "
                         f"{' or '.join(map(str, near))}")
    return budget, sizes


def grpo_law(c1: float, c2: float, c3: float, budget: int, G):
    """GRPO's fixed-budget MSE ``(c1 G + c2 + c3'/(G - 1))/N`` at checked inputs (C17)."""
    return (c1 * G + c2 + c3 / (G - 1.0)) / budget


def best_law_group_size(c1: float, c2: float, c3: float, budget: int) -> int:
    """The integer ``G`` in ``2..N`` with the smallest :func:`grpo_law` (the first on a tie).

    ``h(G) = c1 G + c3'/(G - 1)`` has ``h'' = 2 c3'/(G - 1)^3``: for ``c3' > 0`` it is convex,
    its integer minimum next to the real one ``1 + sqrt(c3'/c1)`` (or at ``N`` when ``c1 <= 0``,
    where it falls throughout); for ``c3' <= 0`` it is concave (or linear) and its minimum lies
    at an end. So ``2``, ``N`` and the integers around ``1 + sqrt(c3'/c1)`` hold the minimum
    over all of ``2..N``, which is what evaluating every integer found.
    """
    candidates = {2, budget}
    if c1 > 0.0 and c3 > 0.0:
        root = 1.0 + math.sqrt(c3) / math.sqrt(c1)
        if root < budget + 2:
            base = int(math.floor(root))
            candidates.update(g for g in range(base - 1, base + 3) if 2 <= g <= budget)
    sizes = np.array(sorted(candidates), dtype=np.int64)
    return int(sizes[np.argmin(grpo_law(c1, c2, c3, budget, sizes))])


def fixed_budget_curve(m: PromptMoments, estimator, budget: int, sizes: np.ndarray) -> np.ndarray:
    """``E||g_hat_B - g||^2`` of ``estimator`` at each ``G`` of ``sizes`` with ``B = N/G`` (C6).

    Checked inputs: ``sizes`` divide ``budget`` and are admissible for ``estimator``. An affine rule
    has ``k^2 c1/B + E_X tr Cov g_hat(X)/B + (k - 1)^2 ||g||^2`` (mean factor ``k``), a scaled
    rule the exact binary-reward sums of :mod:`.advantage`. Returns ``(n_G,)``.
    """
    out = np.empty(sizes.size)
    if not estimator.is_affine:
        for i, g in enumerate(sizes):
            out[i] = minibatch_advantage_mse(m, estimator, int(g), budget // int(g))
        return out
    ref = m.value  # the rules of a fixed-budget curve centre at the value or at 0
    c1 = float(m.prompt_prob @ m.grad_sq) - float(m.grad_norm_sq)  # mse.prompt_heterogeneity
    for i, g in enumerate(sizes):
        batch = budget // int(g)
        var, k = affine_variance(m, estimator, float(g), ref)
        value = (k * k if k != 1 else 1.0) * c1 * (1.0 / batch) + (m.prompt_prob @ var) / batch
        out[i] = value + (k - 1.0) ** 2 * float(m.grad_norm_sq) if k != 1 else value
    return out


def fixed_budget_mse(moments: PromptMoments, estimator, budget, group_size=None) -> np.ndarray:
    r"""Exact minibatch MSE of ``estimator`` at ``N = B G`` over group sizes (C6, C17).

    .. math::

        \mathrm{MSE}(G; N) = k^2 \frac{c_1}{B} + \frac{E_X \operatorname{tr}\operatorname{Cov}
        \hat g(X)}{B} + (k - 1)^2 \|g\|^2, \qquad B = \frac{N}{G}

    Parameters
    ----------
    moments : PromptMoments
    estimator : str or AdvantageRule
        Any registered rule (:func:`ustat_rl.advantages.get_rule`) that needs no baseline; one
        that scales its advantages needs moments of binary rewards.
    budget : int
        ``N``, in ``2..MAX_BUDGET``.
    group_size : int or 1-D array of int, optional
        Divisors of ``N``, each admissible for the rule; the divisors ``>= 2`` of ``N``
        (:func:`admissible_group_sizes`) by default.

    Returns
    -------
    ndarray (n_G,)
        For GRPO, ``(c1 G + c2 + c3'/(G - 1))/N`` with ``c1`` unclipped
        (:meth:`~.scaling.ScalingConstants.fixed_budget_mse` takes the clipped constants).
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    rule = get_rule(estimator, "estimator")
    if rule.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` {rule.name!r} needs a baseline per prompt; use "
                         "ustat_rl.theory.minibatch_mse with `baseline`")
    budget = check_budget(budget)
    sizes = group_size_grid(budget)
    if group_size is not None:
        raw = np.atleast_1d(np.asarray(group_size))
        if raw.ndim != 1 or raw.size == 0:
            raise ValueError(f"`group_size` must be an integer or a non-empty 1-D array of "
                             f"integers, got shape {np.shape(group_size)}")
        sizes = np.array([as_int(v.item() if hasattr(v, "item") else v, "group_size",
                                 rule.min_group_size, rule.min_group_reason) for v in raw])
        if np.any(budget % sizes):
            raise ValueError(f"`group_size` must divide `budget` N = {budget} (B = N/G whole "
                             f"groups), got {sizes[budget % sizes != 0][0]}")
    elif sizes.min() < rule.min_group_size:
        raise ValueError(f"`estimator` {rule.name!r} needs groups of at least "
                         f"{rule.min_group_size}; pass `group_size` to choose from the "
                         f"divisors of `budget` N = {budget}")
    return fixed_budget_curve(moments, rule, budget, sizes)
