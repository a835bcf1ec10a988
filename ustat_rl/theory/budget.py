r"""How the budget-optimal group size moves with the budget, exactly (beyond the paper).

Theorem 7 (docs/theory.md C17) says that at a fixed budget ``N = B G`` the best group size of
leave-one-out GRPO does not depend on ``N``. That holds because GRPO is unbiased: its minibatch
MSE is ``V(G)/B``, so at ``B = N/G`` every ``G`` is scaled by the same ``1/N``. Any estimator's
minibatch MSE against a target ``t`` has the form (Proposition 3, C6)

.. math::

    \mathrm{MSE}(G, B) = \frac{V(G)}{B} + D(G), \qquad
    \mathrm{MSE}(G; N) = \frac{G\,V(G)}{N} + D(G),

with ``V(G)`` the variance of one prompt's estimate (prompt spread included) and ``D(G)`` the
squared bias ``||E g_hat - t||^2``. A bias that depends on ``G`` makes the optimum move with ``N``:

* leave-one-out GRPO: ``D = 0``, the optimum is ``N``-free (``min(N, G*)`` over all integers);
* the full mean: ``D = ||g||^2/G^2``, the optimum solves the depressed cubic of
  :func:`fullmean_budget_optimum` and grows like ``(2 ||g||^2 N / c1)^(1/3)``;
* std-normalised rules against ``g``: ``D(G)`` tends to a positive limit, so as ``N`` grows the
  optimum settles at the ``G`` of smallest bias; against their own arcsin target the bias
  vanishes as ``G`` grows and the optimum grows again.

``V`` and ``D`` come from the exact minibatch MSE of :func:`~.mse.minibatch_mse` (or
:func:`~.advantage.minibatch_advantage_mse` for the arcsin target) at ``B = 1`` and ``B = 2``;
the relaxation to real ``B = N/G`` is exact wherever ``G`` divides ``N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._validation import as_int
from ..advantages.registry import get_rule
from .advantage import TARGETS, minibatch_advantage_mse
from .moments import PromptMoments
from .mse import minibatch_mse
from .scaling import check_budget, scaling_constants

if TYPE_CHECKING:  # the fit imports statsmodels, which costs seconds: loaded where it is used
    from ..stats.rates import SlopeFit

__all__ = ["BudgetOptimum", "BudgetExponent", "FullMeanOptimum", "SCALED_MAX_GROUP_SIZE",
           "budget_mse", "budget_optimal_group_size", "budget_exponent",
           "fullmean_budget_optimum"]

#: Default largest ``G`` searched for a rule that scales its advantages: each ``G`` builds a
#: ``(G + 1, G)`` table of representative groups (``O(G^2)``), about 5 ms at ``G = 1024``. An
#: optimum found at this cap (below ``N``) raises instead of being reported.
SCALED_MAX_GROUP_SIZE = 1024


@dataclass(frozen=True)
class BudgetOptimum:
    """The group size with the smallest exact MSE at a fixed budget ``N = B G``.

    Attributes
    ----------
    estimator : str
        The registered rule's name.
    budget : int
        ``N``.
    group_size : int
        The minimising ``G``.
    batch_size : float
        ``N / G`` (an integer when ``divisors_only``).
    mse : float
        ``G V(G)/N + D(G)`` at the optimum.
    divisors_only : bool
        Whether only divisors of ``N`` were searched.
    largest_searched : int
        The largest ``G`` compared.
    target : str
        ``"grad"`` (``g``) or ``"arcsin"`` (the gradient of ``E[2 arcsin sqrt V]``, C26).
    """

    estimator: str
    budget: int
    group_size: int
    batch_size: float
    mse: float
    divisors_only: bool
    largest_searched: int
    target: str


@dataclass(frozen=True)
class BudgetExponent:
    """The budget-optimal group size over a range of budgets and its log-log slope.

    Attributes
    ----------
    estimator : str
    budgets : ndarray (K,) of int
    group_sizes : ndarray (K,) of int
        The optimum at each budget (:func:`budget_optimal_group_size`).
    fit : SlopeFit
        Slope of ``log G_opt`` on ``log N`` (:func:`ustat_rl.stats.rates.loglog_slope`, unweighted).
    saturation_budget : int or None
        The smallest budget from which ``G_opt`` is the same at every larger budget given;
        ``None`` when the last two differ (no saturation seen on this grid).
    target : str
    """

    estimator: str
    budgets: np.ndarray
    group_sizes: np.ndarray
    fit: SlopeFit
    saturation_budget: int | None
    target: str


@dataclass(frozen=True)
class FullMeanOptimum:
    r"""The real minimiser of the full-mean estimator's fixed-budget MSE and its asymptotics.

    Attributes
    ----------
    group_size : float
        The root ``G > 0`` of ``c1 G^3 - beta G - 2 gamma = 0`` (``inf`` when ``c1 = 0``).
    local_exponent : float
        ``d log G / d log N = 2 ||g||^2 N / (G (3 c1 G^2 - beta))`` at the root, exactly.
    leading_order : float
        ``(2 ||g||^2 N / c1)^(1/3)``.
    two_term : float
        ``A^(1/3) + p / (3 A^(1/3))`` with ``A = 2 gamma / c1`` and ``p = beta / c1``.
    next_term : float
        ``-2 p / (9 A^(2/3))``: the next term of ``local_exponent - 1/3`` (the ``O(1/N)``
        remainder aside).
    """

    group_size: float
    local_exponent: float
    leading_order: float
    two_term: float
    next_term: float


def _check_moments(moments) -> PromptMoments:
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    return moments


def _check_target(target) -> str:
    if target not in TARGETS:
        raise ValueError(f"`target` must be one of {TARGETS}, got {target!r}")
    return target


def _parts(m: PromptMoments, rule, sizes: np.ndarray, target: str, baseline):
    """``(V(G), D(G))`` for each ``G`` of ``sizes``: the ``1/B`` coefficient and the bias term.

    Both are read off the exact MSE at ``B = 1`` and ``B = 2`` (``V + D`` and ``V/2 + D``); the
    absolute rounding error of ``D`` is a few ulps of ``V``, negligible beside ``G V / N``.
    """
    if target == "grad":
        one = np.atleast_1d(minibatch_mse(m, rule.name, sizes, 1, baseline))
        two = np.atleast_1d(minibatch_mse(m, rule.name, sizes, 2, baseline))
    else:
        if baseline is not None:
            raise ValueError("`baseline` is not supported with `target='arcsin'`")
        one = np.array([minibatch_advantage_mse(m, rule, int(g), 1, target) for g in sizes])
        two = np.array([minibatch_advantage_mse(m, rule, int(g), 2, target) for g in sizes])
    return 2.0 * (one - two), 2.0 * two - one


def budget_mse(moments: PromptMoments, estimator, group_size, budget, target: str = "grad",
               baseline=None):
    r"""Exact MSE at budget ``N`` with ``B = N/G`` prompts: ``G V(G)/N + D(G)`` (C6, C17).

    .. math::

        \mathrm{MSE}(G; N) = \frac{G\,V(G)}{N} + D(G)

    Equal to :func:`~.mse.minibatch_mse` at ``batch_size = N/G`` wherever ``G`` divides ``N``;
    elsewhere the relaxation to real ``B``. For GRPO it is ``(c1 G + c2 + c3'/(G-1))/N``
    (:meth:`~.scaling.ScalingConstants.fixed_budget_mse`).

    Returns a float for a scalar ``group_size``, an ``(n_G,)`` array otherwise.

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> round(budget_mse(m, "grpo", 4, budget=64) / minibatch_mse(m, "grpo", 4, 16), 12)
    1.0
    """
    m = _check_moments(moments)
    rule = get_rule(estimator, "estimator")
    budget = check_budget(budget)
    target = _check_target(target)
    raw = np.asarray(group_size)
    if raw.ndim > 1:
        raise ValueError(f"`group_size` must be an integer or a 1-D array, got shape {raw.shape}")
    sizes = np.array([as_int(v.item() if hasattr(v, "item") else v, "group_size",
                             rule.min_group_size, rule.min_group_reason)
                      for v in np.atleast_1d(raw)], dtype=np.int64)
    if np.any(sizes > budget):
        raise ValueError(f"`group_size` must be <= `budget` ({budget}) for at least one prompt")
    var, bias = _parts(m, rule, sizes, target, baseline)
    out = sizes * var / budget + bias
    return float(out[0]) if raw.ndim == 0 else out


def _candidates(rule, budget: int, divisors_only: bool, min_group_size, max_group_size):
    low = rule.min_group_size if min_group_size is None else as_int(
        min_group_size, "min_group_size", rule.min_group_size, rule.min_group_reason)
    if max_group_size is None:
        high = budget if rule.is_affine else min(budget, SCALED_MAX_GROUP_SIZE)
    else:
        high = min(budget, as_int(max_group_size, "max_group_size", low))
    sizes = np.arange(low, high + 1)
    if divisors_only:
        sizes = sizes[budget % sizes == 0]
    if sizes.size == 0:
        raise ValueError(f"no group size in {low}..{high}{' divides' if divisors_only else ''} "
                         f"the budget {budget}")
    return sizes, high


def _argmin(sizes, var, bias, budget, high, rule_name):
    values = sizes * var / budget + bias
    i = int(np.argmin(values))
    if sizes[i] == high and high < budget:
        raise ValueError(f"the optimum for {rule_name!r} at budget {budget} lies at "
                         f"`max_group_size` = {high}: raise it to search further")
    return i, float(values[i])


def budget_optimal_group_size(moments: PromptMoments, estimator, budget,
                              divisors_only: bool = True, target: str = "grad",
                              min_group_size=None, max_group_size=None,
                              baseline=None) -> BudgetOptimum:
    r"""The integer ``G`` minimising the exact MSE at a fixed budget ``N = B G`` (beyond C17).

    .. math::

        G_{\mathrm{opt}}(N) = \operatorname*{arg\,min}_{G} \Bigl(\frac{G\,V(G)}{N} + D(G)\Bigr)

    Parameters
    ----------
    moments : PromptMoments
    estimator : str or AdvantageRule
        Any registered rule (``"grpo"``, ``"fullmean"``, ``"trl_group"``, ...).
    budget : int
        ``N``, at most :data:`~.scaling.MAX_BUDGET`.
    divisors_only : bool
        ``True``: whole batches (``G`` divides ``N``); ``False``: every integer with real
        ``B = N/G``.
    target : {"grad", "arcsin"}
        What the MSE is measured against; ``"arcsin"`` needs binary rewards (C26).
    min_group_size, max_group_size : int, optional
        The range searched: by default the rule's minimum up to ``N``, capped at
        :data:`SCALED_MAX_GROUP_SIZE` for rules that scale their advantages. An optimum on a
        cap below ``N`` raises ``ValueError``.
    baseline : float or ndarray (P,), optional
        For ``estimator="baseline"``.

    Returns
    -------
    BudgetOptimum

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> [budget_optimal_group_size(m, "grpo", n).group_size for n in (64, 1024, 16384)]
    [4, 4, 4]
    """
    m = _check_moments(moments)
    rule = get_rule(estimator, "estimator")
    budget = check_budget(budget)
    target = _check_target(target)
    sizes, high = _candidates(rule, budget, bool(divisors_only), min_group_size, max_group_size)
    var, bias = _parts(m, rule, sizes, target, baseline)
    i, value = _argmin(sizes, var, bias, budget, high, rule.name)
    return BudgetOptimum(rule.name, budget, int(sizes[i]), budget / int(sizes[i]), value,
                         bool(divisors_only), int(sizes[-1]), target)


def budget_exponent(moments: PromptMoments, estimator, budgets, divisors_only: bool = False,
                    target: str = "grad", min_group_size=None, max_group_size=None,
                    baseline=None) -> BudgetExponent:
    r"""``G_opt(N)`` over ``budgets`` and the slope of ``log G_opt`` on ``log N`` (beyond C17).

    .. math::

        G_{\mathrm{opt}}(N) \propto N^{a}: \quad a = 0 \text{ (GRPO)}, \quad
        a \to 1/3 \text{ (full mean)}

    ``V(G)`` and ``D(G)`` are computed once over the union of the ranges and reused at every
    budget, so a grid of budgets costs one search. ``budgets`` must be increasing integers
    (at least 3, for the fit's interval); the other parameters are those of
    :func:`budget_optimal_group_size`.

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> out = budget_exponent(m, "grpo", [2**k for k in range(4, 12)])
    >>> out.group_sizes.tolist(), out.saturation_budget, round(out.fit.slope, 12)
    ([3, 3, 3, 3, 3, 3, 3, 3], 16, 0.0)
    """
    m = _check_moments(moments)
    rule = get_rule(estimator, "estimator")
    target = _check_target(target)
    raw = np.atleast_1d(np.asarray(budgets))
    if raw.ndim != 1 or raw.size < 3:
        raise ValueError("`budgets` must be a 1-D sequence of at least 3 integers")
    grid = np.array([check_budget(b.item() if hasattr(b, "item") else b, "budgets")
                     for b in raw], dtype=np.int64)
    if np.any(np.diff(grid) <= 0):
        raise ValueError("`budgets` must be strictly increasing")
    sizes, _ = _candidates(rule, int(grid[-1]), False, min_group_size, max_group_size)
    var, bias = _parts(m, rule, sizes, target, baseline)
    best = []
    for n in grid:
        n = int(n)
        keep, high = _candidates(rule, n, bool(divisors_only), min_group_size, max_group_size)
        pick = np.isin(sizes, keep)
        i, _ = _argmin(sizes[pick], var[pick], bias[pick], n, high, rule.name)
        best.append(int(sizes[pick][i]))
    best = np.array(best, dtype=np.int64)
    from ..stats.rates import loglog_slope

    fit = loglog_slope(grid.astype(np.float64), best.astype(np.float64))
    same = np.flatnonzero(best != best[-1])
    start = 0 if same.size == 0 else int(same[-1]) + 1
    saturation = None if start == grid.size - 1 else int(grid[start])
    return BudgetExponent(rule.name, grid, best, fit, saturation, target)


def fullmean_budget_optimum(moments: PromptMoments, budget) -> FullMeanOptimum:
    r"""Real minimiser of the full-mean estimator's MSE at budget ``N`` and its asymptotics.

    .. math::

        N\,\mathrm{MSE}(G; N) = c_1 G + (c_2 - 2 c_1) + \frac{\beta}{G} + \frac{\gamma}{G^2},
        \qquad c_1 G^3 - \beta G - 2\gamma = 0,

    with ``beta = c1 - 2 c2 + c3'``, ``gamma = N ||g||^2 + c2 - c3'`` and the constants of
    :func:`~.scaling.scaling_constants`.

    Notes
    -----
    The full mean is ``k = (G-1)/G`` times GRPO, so at ``B = N/G``
    ``MSE = k^2 (c1 G + c2 + c3'/(G-1))/N + ||g||^2/G^2``; expanding ``k^2`` gives the form
    above (``G = 1`` gives ``||g||^2``: the estimator is zero). Its derivative times ``G^3`` is
    the depressed cubic ``h(G) = c1 G^3 - beta G - 2 gamma``. For ``gamma > 0`` (every
    ``N > (c3' - c2)/||g||^2``) ``h(0) < 0`` and ``h`` has one positive root, the global
    minimiser over ``G > 0``. With ``A = 2 gamma / c1`` and ``p = beta / c1``,
    ``G = A^(1/3) + p/(3 A^(1/3)) + O(A^(-1))``, hence ``G ~ (2 ||g||^2 N / c1)^(1/3)``, and
    differentiating ``h(G(N)) = 0`` gives the exact local exponent
    ``d log G / d log N = 2 ||g||^2 N / (G (3 c1 G^2 - beta))
    = 1/3 - 2p/(9 A^(2/3)) + O(1/N)``.

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> out = fullmean_budget_optimum(m, 2**20)
    >>> round(out.group_size / out.leading_order, 2), round(out.local_exponent, 3)
    (1.0, 0.333)
    """
    m = _check_moments(moments)
    budget = check_budget(budget)
    c = scaling_constants(m)
    s = float(m.grad_norm_sq)
    if not c.c1 > 0.0 or not s > 0.0:
        raise ValueError("`moments` need c1 > 0 and ||g||^2 > 0 for a finite full-mean optimum "
                         f"(got c1 = {c.c1:g}, ||g||^2 = {s:g})")
    beta = c.c1 - 2.0 * c.c2 + c.c3
    gamma = budget * s + c.c2 - c.c3
    if not gamma > 0.0:
        raise ValueError(f"`budget` must exceed (c3' - c2)/||g||^2 = {(c.c3 - c.c2) / s:g} for the "
                         "cubic to have a single positive root")
    roots = np.roots([c.c1, 0.0, -beta, -2.0 * gamma])
    real = roots[(np.abs(roots.imag) <= 1e-9 * np.abs(roots)) & (roots.real > 0)].real
    G = float(real.max())
    for _ in range(3):  # Newton polish of the root of h(G) = c1 G^3 - beta G - 2 gamma
        G -= (c.c1 * G**3 - beta * G - 2.0 * gamma) / (3.0 * c.c1 * G**2 - beta)
    A, p = 2.0 * gamma / c.c1, beta / c.c1
    root3 = A ** (1.0 / 3.0)
    return FullMeanOptimum(G, 2.0 * s * budget / (G * (3.0 * c.c1 * G**2 - beta)),
                           (2.0 * s * budget / c.c1) ** (1.0 / 3.0), root3 + p / (3.0 * root3),
                           -2.0 * p / (9.0 * A ** (2.0 / 3.0)))

