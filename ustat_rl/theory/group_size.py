r"""The group size: one owner for ``G*``, the best ``G`` at a budget and the fixed-budget curve.

At ``N`` samples per step a group size ``G`` leaves ``B = N/G`` prompts, so a fixed budget moves
both (Proposition 3, Theorem 7; docs/theory.md C6, C17). Every question the package asks about
``G`` is answered here, once:

* the budget's validation (:func:`check_budget`) and the grid of admissible ``G``, the divisors
  ``>= 2`` of ``N`` or all of ``2..N`` (:func:`group_size_grid`, checked entry
  :func:`admissible_group_sizes`; :func:`budget_grid` for a report, which needs a choice);
* ``G* = 1 + sqrt(c3'/c1)`` from the constants (:func:`optimal_group_size`) or from the ratio
  ``rho = c1/c3'`` (:func:`gstar_of_ratio`, which maps Fieller's interval for ``rho``);
* the fixed-budget MSE, one public entry :func:`fixed_budget_mse` for any rule: exact over the
  divisors of ``N`` (core :func:`fixed_budget_curve`), or ``G V(G)/N + D(G)`` with its bias
  term at real ``B = N/G`` (``whole_batches=False``); GRPO's law
  ``(c1 G + c2 + c3'/(G - 1))/N`` is its core :func:`grpo_law`, which
  :meth:`~.scaling.ScalingConstants.fixed_budget_mse` reads from three constants;
* the best ``G``: on a grid (:func:`best_on_grid`, the one argmin every caller uses, dynamic
  sampling's included), by the GRPO law over ``2..N`` (:func:`best_law_group_size`), for any
  rule with its bias (:func:`budget_optimal_group_size`, :func:`budget_exponent`), and the
  minimax-regret size over an interval for ``rho`` (:func:`robust_group_size`);
* the critical rollout count ``B_noise(G) = tr(Sigma_G)/||g||^2`` (McCandlish et al.'s noise
  scale in rollouts), GRPO's law read at ``N = 1`` and split between prompts and within them
  (:func:`critical_rollouts`; at ``G*`` read at :func:`gstar_within_budget`);
* one validated entry, :func:`group_size_answer`, returning one frozen
  :class:`GroupSizeAnswer` that the ``ustat-rl gstar`` report (and through it the training
  monitor's window, which adds the law at ``G*``, :func:`law_at_gstar`) and the pilot's advice
  read; :class:`~.scaling.ScalingConstants`' ``G*`` and best sizes are these functions.

Any rule's minibatch MSE against a target ``t`` is ``V(G)/B + D(G)`` (Proposition 3, C6), so at
``B = N/G`` it is ``G V(G)/N + D(G)``, with ``V`` one prompt's variance (prompt spread included)
and ``D`` the squared bias ``||E g_hat - t||^2``. GRPO is unbiased (``D = 0``): every ``G`` is
scaled by the same ``1/N`` and its optimum does not move with ``N`` (Theorem 7). A bias that
depends on ``G`` moves it: the full mean's grows like ``N^(1/3)``
(:func:`~.budget.fullmean_budget_optimum`); std-normalised rules settle at the ``G`` of smallest
bias against ``g``. ``V`` and ``D`` are read off the exact MSE at ``B = 1`` and ``B = 2``.

Each quantity has one validated entry and a core that takes checked inputs and checks nothing, so
callers that have checked them once (the report, the window) call the cores directly.

One concept: the answer to "which ``G``?" and every curve it is read from. The module is past
the review line; cutting it would give ``G*``, the curves and the argmin separate homes again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._validation import as_int
from ..advantages.registry import get_rule
from .advantage import TARGETS, advantage_moments, minibatch_advantage_mse
from .affine import affine_variance
from .moments import PromptMoments, batch_mean_terms
from .mse import minibatch_mse

if TYPE_CHECKING:  # the fit imports statsmodels, which costs seconds: loaded where it is used
    from ..stats.rates import SlopeFit

__all__ = ["MAX_BUDGET", "SCALED_MAX_GROUP_SIZE", "ADVICE_TARGETS", "BudgetGrid", "BudgetOptimum",
           "BudgetExponent", "GroupSizeAnswer", "check_budget", "group_size_grid",
           "admissible_group_sizes", "budget_grid", "optimal_group_size", "gstar_of_ratio",
           "gstar_or_nan", "gstar_interval", "best_index",
           "grpo_law", "law_at_gstar", "best_on_grid", "best_law_group_size", "fixed_budget_curve",
           "fixed_budget_mse", "scale_free_curve", "scale_free_error", "check_advice_target",
           "advice_curve", "budget_optimal_group_size", "budget_exponent",
           "robust_group_size", "group_size_answer", "CriticalRollouts", "critical_rollouts",
           "gstar_within_budget"]

#: The largest budget ``N`` the group-size searches accept: :func:`admissible_group_sizes`
#: evaluates every integer in ``2..N`` (128 MiB of float64 at this size), so a larger ``N`` is
#: rejected before any memory is allocated.
MAX_BUDGET = 1 << 24

#: Default largest ``G`` searched for a rule that scales its advantages: each ``G`` builds a
#: ``(G + 1, G)`` table of representative groups (``O(G^2)``), about 5 ms at ``G = 1024``. An
#: optimum found at this cap (below ``N``) raises instead of being reported.
SCALED_MAX_GROUP_SIZE = 1024


# ------------------------------------------------------------------ the budget and its grid
def check_budget(budget, name: str = "budget") -> int:
    """``budget`` as an int in ``2..MAX_BUDGET``, checked before any array is built.

    The one validation of a fixed budget ``N = B G``; ``name`` is the parameter the error names
    (``"--budget"`` on the command line). A :class:`BudgetGrid` was checked where it was made
    (:func:`budget_grid`): its ``N`` is returned as it is, so a walk that passes one on checks
    its budget once.
    """
    if isinstance(budget, BudgetGrid):
        return budget.budget
    return _checked_budget(budget, name)


def _checked_budget(budget, name: str) -> int:
    budget = as_int(budget, name, 2, "(a budget needs at least one group of 2)")
    if budget > MAX_BUDGET:
        raise ValueError(f"`{name}` must be <= {MAX_BUDGET} (the group-size search evaluates "
                         f"every G in 2..N in memory), got {budget}")
    return budget


def group_size_grid(budget: int, divisors_only: bool = True, low: int = 2,
                    high: int | None = None) -> np.ndarray:
    """The grid, from a checked ``budget``: the divisors of ``N`` in ``low..high`` (``high``
    defaults to ``N``), or all of ``low..high``. Returns ``(n_G,)`` int."""
    sizes = np.arange(low, (budget if high is None else high) + 1)
    return sizes[budget % sizes == 0] if divisors_only else sizes


def admissible_group_sizes(budget, divisors_only: bool = True) -> np.ndarray:
    """Group sizes ``G >= 2`` usable at budget ``N``: its divisors, or all of ``2..N``."""
    return group_size_grid(check_budget(budget), divisors_only)


@dataclass(frozen=True)
class BudgetGrid:
    """A budget checked once and its grid built once (:func:`budget_grid`).

    Attributes
    ----------
    budget : int
        ``N``, in ``2..MAX_BUDGET``.
    group_sizes : ndarray (n_G,) of int
        The divisors ``G >= 2`` of ``N``, at least two of them.
    """

    budget: int
    group_sizes: np.ndarray


def budget_grid(budget, name: str = "budget") -> BudgetGrid:
    """``budget`` checked (:func:`check_budget`) with its divisors ``G >= 2``, built once.

    A :class:`BudgetGrid` is returned as it is, so a walk that checked the budget at its entry
    passes the grid on and nothing checks or builds it again. ``ValueError`` when ``N`` has fewer
    than two divisors ``>= 2``, and so no group size to choose.
    """
    if isinstance(budget, BudgetGrid):
        return budget
    budget = _checked_budget(budget, name)
    sizes = group_size_grid(budget)
    if sizes.size < 2:
        near = [n for n in (budget - 1, budget + 1) if n >= 4 and group_size_grid(n).size > 1]
        raise ValueError(f"`{name}` {budget} admits one group size only (G = {budget}, B = 1), so "
                         f"there is no group size to choose; use a budget with divisors, e.g. "
                         f"{' or '.join(map(str, near))}")
    return BudgetGrid(budget, sizes)


# ------------------------------------------------------------------------------------ G*
def optimal_group_size(c1: float, c3: float, exact: bool = True) -> float:
    r"""``G* = 1 + sqrt(c3'/c1)`` (``exact=True``), or the paper's ``sqrt(c3/c1)`` (C17).

    .. math::

        G^* = 1 + \sqrt{c_3' / c_1}

    Returns ``inf`` when ``c1 <= 0 < c3'`` (one prompt, prompts with equal gradients, or an
    estimate of ``c1`` at or below zero): the fixed-budget MSE then decreases in ``G`` without
    end. Raises ``ValueError`` when ``c1 <= 0`` and ``c3' <= 0`` (every success probability 0 or
    1, say): the MSE then does not fall with ``G``, and ``G*`` is undefined, not infinite; and
    when ``c3' < 0 < c1``.

    Examples
    --------
    >>> optimal_group_size(1.0, 16.0), optimal_group_size(1.0, 16.0, exact=False)
    (5.0, 4.0)
    """
    if not c1 > 0.0:
        if not c3 > 0.0:
            raise ValueError(f"G* is undefined when `c1` = {c1:g} <= 0 and `c3` = {c3:g} <= 0: "
                             "the fixed-budget MSE does not fall with G")
        return math.inf
    if c3 < 0.0:
        raise ValueError(f"`c3` must be >= 0 for G*, got {c3!r}")
    root = math.sqrt(c3) / math.sqrt(c1)  # c3/c1 may overflow where this is finite
    return 1.0 + root if exact else root


def gstar_of_ratio(rho: float) -> float:
    """``G* = 1 + rho^(-1/2)`` for ``rho = c1/c3' > 0``; ``inf`` for ``rho <= 0`` (Theorem 7).

    :func:`optimal_group_size` at ``c1 = rho``, ``c3' = 1`` (``G*`` depends on the ratio only);
    ``nan`` for a ``nan`` ratio.
    """
    if math.isnan(rho):
        return math.nan
    return optimal_group_size(rho, 1.0)


def gstar_or_nan(c1: float, c3: float) -> float:
    """:func:`optimal_group_size`, ``nan`` where it is undefined (``c3' < 0``, or ``c3' = 0``
    with ``c1 <= 0``): what an estimate's report prints, where no ``G*`` follows."""
    return optimal_group_size(c1, c3) if c3 > 0 or (c3 == 0 and c1 > 0) else math.nan


def gstar_interval(rho_low: float, rho_high: float) -> tuple[float, float]:
    """``G*``'s interval from an interval for ``rho = c1/c3'`` (:func:`gstar_of_ratio` of the ends).

    ``G* = 1 + rho^(-1/2)`` falls in ``rho``, so the low end is the image of ``rho_high`` (``1``
    when the whole set is ``<= 0``) and the high end the image of ``rho_low`` (``inf`` where
    ``rho <= 0`` is allowed).
    """
    return gstar_of_ratio(rho_high) if rho_high > 0.0 else 1.0, gstar_of_ratio(rho_low)


# ----------------------------------------------------------------- the GRPO law and argmin
def grpo_law(c1: float, c2: float, c3: float, budget: int, G):
    """GRPO's fixed-budget MSE ``(c1 G + c2 + c3'/(G - 1))/N`` at checked inputs (C17)."""
    return (c1 * G + c2 + c3 / (G - 1.0)) / budget


def law_at_gstar(c1: float, c2: float, c3: float, budget: int) -> float:
    """:func:`grpo_law` at ``min(G*, N)`` (the least MSE a real ``G`` reaches within ``N``).

    ``nan`` where ``G*`` (:func:`gstar_or_nan`) is undefined, infinite or not above 1, or
    ``c3' < 0``: checked inputs otherwise (``budget`` from :func:`check_budget`).
    """
    g_star = gstar_or_nan(c1, c3)
    if not (math.isfinite(g_star) and g_star > 1.0 and c3 >= 0.0):
        return math.nan
    return float(grpo_law(c1, c2, c3, budget, min(g_star, budget)))


# ------------------------------------------------------------- the critical rollout count
@dataclass(frozen=True)
class CriticalRollouts:
    """The critical rollout count at one group size, split by where the noise comes from.

    ``B_noise = tr(Sigma_G)/||g||^2`` (McCandlish et al. 2018's gradient noise scale): with
    ``N`` rollouts per step at group size ``G`` the GRPO step's MSE is ``tr(Sigma_G)/N``
    (Proposition 3, C6), so ``B_noise`` is the ``N`` at which the noise equals ``||g||^2``
    (docs/theory.md, "The critical rollout count").

    Attributes
    ----------
    group_size : float
        ``G`` the count is evaluated at (real at ``G*``).
    total : float
        ``B_noise = inter + intra``, in rollouts; ``inf`` where ``||g||^2 <= 0`` (see ``note``).
    inter : float
        The inter-prompt part ``G c1/||g||^2``: the prompts' spread, which the ``G`` rollouts
        of a group share.
    intra : float
        The intra-prompt part ``(c2 + c3'/(G - 1))/||g||^2``: the rollouts' own noise and the
        leave-one-out baseline's.
    grad_norm_sq : float
        ``||g||^2`` the parts are divided by.
    noise : float
        ``tr(Sigma_G) = G c1 + c2 + c3'/(G - 1)``, one rollout's share of the step's noise
        (the numerator; ``nan`` only where ``G`` is).
    note : str or None
        Why the count is infinite or undefined, in words; ``None`` when it is finite.
    """

    group_size: float
    total: float
    inter: float
    intra: float
    grad_norm_sq: float
    noise: float
    note: str | None = None


def critical_rollouts(c1: float, c2: float, c3: float, grad_norm_sq: float,
                      group_size: float) -> CriticalRollouts:
    r"""``B_noise(G) = (G c1 + c2 + c3'/(G - 1))/||g||^2`` rollouts, split in two (beyond C17).

    .. math::

        B_{\mathrm{noise}}(G) = \frac{\operatorname{tr}\Sigma_G}{\|g\|^2}
        = \underbrace{\frac{G c_1}{\|g\|^2}}_{\text{inter-prompt}}
        + \underbrace{\frac{c_2 + c_3'/(G - 1)}{\|g\|^2}}_{\text{intra-prompt}}

    ``tr Sigma_G`` is one rollout's share of the step's noise, :func:`grpo_law` at ``N = 1``;
    each part is that law with the other constants at 0, so the formula has one home. Checked
    inputs (``G > 1``); the constants may be unbiased estimates below 0. Where
    ``||g||^2 <= 0`` (an estimate: the true value is ``>= 0``) no finite number of rollouts
    brings the noise under the signal the estimate claims, so every count is ``inf`` and
    ``note`` says why; a ``nan`` ``G`` (``G*`` undefined) gives ``nan`` counts and its note.

    Examples
    --------
    >>> out = critical_rollouts(1.0, 2.0, 16.0, 0.5, 5.0)
    >>> out.total, out.inter, out.intra
    (22.0, 10.0, 12.0)
    """
    G, signal = float(group_size), float(grad_norm_sq)
    if math.isnan(G):
        nan = math.nan
        return CriticalRollouts(G, nan, nan, nan, signal, nan,
                                "G* is undefined (c3' <= 0), so there is no count at G*")
    between, within = float(grpo_law(c1, 0.0, 0.0, 1, G)), float(grpo_law(0.0, c2, c3, 1, G))
    if not signal > 0.0:
        inf = math.inf
        return CriticalRollouts(G, inf, inf, inf, signal, between + within,
                                f"||g||^2 is estimated at {signal:.3g} <= 0: the noise "
                                "exceeds the signal at every number of rollouts")
    inter, intra = between / signal, within / signal
    return CriticalRollouts(G, inter + intra, inter, intra, signal, between + within)


def best_on_grid(sizes, values, allowed=None):
    """The ``G`` of ``sizes`` with the smallest of ``values`` (the first on a tie).

    The one argmin over a grid of group sizes. ``values`` is ``(n_G,)`` or ``(..., n_G)`` (one
    argmin per row); ``allowed`` (same shape, bool) leaves sizes out. Returns an int for one
    curve, an array of sizes otherwise. :func:`best_index` gives the position instead.
    """
    return _pick(np.asarray(sizes), best_index(values, allowed))


def best_index(values, allowed=None):
    """Position of the smallest of ``values`` along the last axis (see :func:`best_on_grid`)."""
    values = np.asarray(values)
    if allowed is not None:
        values = np.where(allowed, values, np.inf)
    index = np.argmin(values, axis=-1)
    return int(index) if np.ndim(index) == 0 else index


def _pick(sizes: np.ndarray, index):
    picked = sizes[index]
    return picked.item() if np.ndim(picked) == 0 else picked


def best_law_group_size(c1: float, c2: float, c3: float, budget: int) -> int:
    """The integer ``G`` in ``2..N`` with the smallest :func:`grpo_law` (the first on a tie).

    ``h(G) = c1 G + c3'/(G - 1)`` has ``h'' = 2 c3'/(G - 1)^3``: for ``c3' > 0`` it is convex,
    its integer minimum next to the real one :func:`optimal_group_size` (or at ``N`` when
    ``c1 <= 0``, where it falls throughout); for ``c3' <= 0`` it is concave (or linear) and its
    minimum lies at an end. So ``2``, ``N`` and the integers around ``G*`` hold the minimum over
    all of ``2..N``, which is what evaluating every integer found.
    """
    candidates = {2, budget}
    if c1 > 0.0 and c3 > 0.0:
        root = optimal_group_size(c1, c3)
        if root < budget + 2:
            base = int(math.floor(root))
            candidates.update(g for g in range(base - 1, base + 3) if 2 <= g <= budget)
    sizes = np.array(sorted(candidates), dtype=np.int64)
    return int(best_on_grid(sizes, grpo_law(c1, c2, c3, budget, sizes)))


# ----------------------------------------------------------- any rule's curve over divisors
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


def fixed_budget_mse(moments: PromptMoments, estimator, budget, group_size=None, *,
                     whole_batches: bool = True, target: str = "grad", baseline=None):
    r"""Any rule's exact MSE at a fixed budget ``N = B G`` over group sizes (C6, C17).

    .. math::

        \mathrm{MSE}(G; N) = \frac{G\,V(G)}{N} + D(G), \qquad B = \frac{N}{G}

    with ``V(G)`` one prompt's variance (prompt spread included) and ``D(G)`` the squared bias.
    The one public fixed-budget MSE of a policy's moments. Two routes, one answer where both
    apply:

    * ``whole_batches=True`` (the default): ``G`` divides ``N``, ``B = N/G`` whole groups, the
      exact minibatch MSE by its closed form (an affine rule with mean factor ``k``:
      ``k^2 c1/B + E_X tr Cov g_hat(X)/B + (k - 1)^2 ||g||^2``; a rule that scales its
      advantages: the exact binary-reward sums of :mod:`.advantage`); against ``g`` only.
    * ``whole_batches=False``: any integer ``G`` in the rule's range up to ``N``, the relaxation
      to real ``B = N/G`` that :func:`budget_optimal_group_size` searches, with ``V`` and ``D``
      read off the exact MSE at ``B = 1`` and ``B = 2``; it takes a ``target`` and a
      ``baseline``. At a divisor it equals the first route (and
      :func:`~.mse.minibatch_mse` at ``batch_size = N/G``) to rounding.

    GRPO's curve is the law ``(c1 G + c2 + c3'/(G - 1))/N`` (:func:`grpo_law`);
    :meth:`~.scaling.ScalingConstants.fixed_budget_mse` is that law read from three constants
    (a pilot's estimates, or a policy's, clipped at 0), at real ``G``, and calls
    :func:`grpo_law`: it answers from ``c1, c2, c3'`` where this function needs the moments.

    Parameters
    ----------
    moments : PromptMoments
    estimator : str or AdvantageRule
        Any registered rule (:func:`ustat_rl.advantages.get_rule`); one that scales its
        advantages needs moments of binary rewards. A rule that needs a baseline per prompt
        (``"baseline"``) takes ``baseline`` and ``whole_batches=False``.
    budget : int
        ``N``, in ``2..MAX_BUDGET``.
    group_size : int or 1-D array of int, optional
        Each admissible for the rule and at most ``N`` (divisors of ``N`` with
        ``whole_batches``); by default the divisors ``>= 2`` of ``N``
        (:func:`admissible_group_sizes`).
    whole_batches : bool
        ``True``: divisors only, the closed form; ``False``: real ``B``, bias term explicit.
    target : {"grad", "arcsin"}
        What the MSE is measured against (``whole_batches=False`` only); ``"arcsin"`` needs
        binary rewards (C26).
    baseline : float or ndarray (P,), optional
        For ``estimator="baseline"`` (``whole_batches=False`` only).

    Returns
    -------
    float or ndarray (n_G,)
        A float for a scalar ``group_size``, an array otherwise. For GRPO ``c1`` is unclipped.

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> from ustat_rl.theory.mse import minibatch_mse
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> relaxed = fixed_budget_mse(m, "grpo", 64, 4, whole_batches=False)
    >>> round(relaxed / minibatch_mse(m, "grpo", 4, 16), 12)
    1.0
    """
    m = _check_moments(moments)
    rule = get_rule(estimator, "estimator")
    budget = check_budget(budget)
    if not isinstance(whole_batches, (bool, np.bool_)):
        raise ValueError(f"`whole_batches` must be True or False, got {whole_batches!r}")
    if whole_batches:
        if target != "grad" or baseline is not None:
            raise ValueError("`target` and `baseline` are taken with `whole_batches=False` "
                             "(the relaxation with its bias term)")
        if rule.centring.reference_source == "baseline":
            raise ValueError(f"`estimator` {rule.name!r} needs a baseline per prompt; pass "
                             "`baseline` with `whole_batches=False`")
    else:
        target = _check_target(target)
    raw = None if group_size is None else np.asarray(group_size)
    if raw is None:
        sizes = group_size_grid(budget)
        if sizes.min() < rule.min_group_size:
            raise ValueError(f"`estimator` {rule.name!r} needs groups of at least "
                             f"{rule.min_group_size}; pass `group_size` to choose from the "
                             f"divisors of `budget` N = {budget}")
    else:
        sizes = _checked_sizes(raw, rule)
        if whole_batches and np.any(budget % sizes):
            raise ValueError(f"`group_size` must divide `budget` N = {budget} (B = N/G whole "
                             f"groups), got {sizes[budget % sizes != 0][0]}; "
                             "`whole_batches=False` gives the relaxation at real B")
        if np.any(sizes > budget):
            raise ValueError(f"`group_size` must be <= `budget` ({budget}) for at least one "
                             "prompt")
    if whole_batches:
        out = fixed_budget_curve(m, rule, budget, sizes)
    else:
        var, bias = _parts(m, rule, sizes, target, baseline)
        out = sizes * var / budget + bias
    return float(out[0]) if raw is not None and raw.ndim == 0 else out


# ------------------------------------------------ what the advice minimises: MSE or scale-free
#: What the advice minimises (docs/theory.md, "What a step's progress depends on"): ``"mse"``,
#: the fixed-budget MSE against ``g`` (C6, C17), the progress of a step whose size is fixed;
#: ``"scale_free"``, the MSE left after the best rescaling of the estimate relative to
#: ``||g||^2``, the progress of a step whose scale the optimiser removes (Adam, a tuned rate).
ADVICE_TARGETS = ("mse", "scale_free")


def check_advice_target(target, name: str = "target") -> str:
    """``target`` if it is one of :data:`ADVICE_TARGETS`, else one ``ValueError`` naming ``name``."""
    if target not in ADVICE_TARGETS:
        raise ValueError(f"`{name}` must be one of {ADVICE_TARGETS}, got {target!r}")
    return target


def scale_free_curve(m: PromptMoments, estimator, budget: int, sizes: np.ndarray) -> np.ndarray:
    r"""The scale-free error of ``estimator`` at each ``G`` of ``sizes`` with ``B = N/G``.

    .. math::

        \epsilon(G; N) = \min_c \frac{E\|c\,\hat g_B - g\|^2}{\|g\|^2}
        = 1 - \frac{\langle g, E\hat g_B\rangle^2}{\|g\|^2\,E\|\hat g_B\|^2}

    Checked inputs, as :func:`fixed_budget_curve`; a rule that scales its advantages needs
    binary-reward moments. An affine rule with mean factor ``k`` has ``E g_B = k g`` and
    ``E||g_B||^2 = MSE + (2k - 1)||g||^2``, so ``epsilon = MSE_k / (MSE_k + ||g||^2)`` with
    ``MSE_k = E||g_B/k - g||^2``: for GRPO (``k = 1``) an increasing function of its MSE, the
    same argmin. A scaled rule's mean and second moment are the exact sums of
    :mod:`.advantage` composed over ``B`` prompts (:func:`~.moments.batch_mean_terms`).
    Returns ``(n_G,)``; ``ValueError`` when ``||g||^2 <= 0`` (no direction to err from) or an
    estimate's second moment is not positive.
    """
    norm = float(m.grad_norm_sq)
    if not norm > 0.0:
        raise ValueError(f"`moments`: the scale-free error needs ||g||^2 > 0 (a direction to "
                         f"compare with), got {norm:.3g}")
    second, projection = np.empty(sizes.size), np.empty(sizes.size)
    if estimator.is_affine:
        mse = fixed_budget_curve(m, estimator, budget, sizes)
        for i, g in enumerate(sizes):
            _, k = affine_variance(m, estimator, float(g), m.value)
            second[i], projection[i] = mse[i] + (2.0 * k - 1.0) * norm, k * norm
    else:
        f = m.prompt_prob
        for i, g in enumerate(sizes):
            parts = advantage_moments(m, estimator, int(g))
            second[i], projection[i], _ = batch_mean_terms(
                f @ parts.second_moment, f * parts.mean_factor, m.grad_gram, f, budget // int(g))
    if not np.all(second > 0.0):
        raise ValueError(f"`moments`: {estimator.name!r}'s estimate has a second moment <= 0 "
                         "at some group size, so its scale-free error is undefined")
    return 1.0 - projection**2 / (norm * second)


def scale_free_error(moments: PromptMoments, estimator, budget, group_size=None):
    r"""Any rule's exact scale-free error at a fixed budget ``N = B G`` (docs/theory.md).

    .. math::

        \epsilon(G; N) = 1 - \frac{\langle g, E\hat g_B\rangle^2}{\|g\|^2\,E\|\hat g_B\|^2},
        \qquad B = \frac{N}{G}

    The MSE of ``c g_hat_B`` against ``g`` at the best constant ``c``, relative to ``||g||^2``:
    what an optimiser that removes the estimate's scale (Adam, a learning rate tuned per
    ``G``) is left with. ``1/(1 + SNR)`` for an unbiased rule, ``SNR = ||g||^2 / tr Cov``.

    Parameters
    ----------
    moments : PromptMoments
    estimator : str or AdvantageRule
        Any registered rule; one that scales its advantages needs moments of binary rewards.
    budget : int
        ``N``, in ``2..MAX_BUDGET``.
    group_size : int or 1-D array of int, optional
        Divisors of ``N``, each admissible for the rule; by default every divisor ``>= 2``.

    Returns
    -------
    float or ndarray (n_G,)
        A float for a scalar ``group_size``.

    Examples
    --------
    The full mean is ``(G - 1)/G`` times GRPO, a rescaling: the same scale-free error.

    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> m = SoftmaxBandit([[0.0, 0.0], [0.5, 0.0]], [[1.0, 0.0], [0.2, 0.6]]).moments()
    >>> a = scale_free_error(m, "grpo", 16, [2, 4, 8])
    >>> b = scale_free_error(m, "fullmean", 16, [2, 4, 8])
    >>> bool(abs(a - b).max() < 1e-12), bool(a[0] > a[1])
    (True, True)
    """
    m = _check_moments(moments)
    rule = get_rule(estimator, "estimator")
    budget = check_budget(budget)
    raw = None if group_size is None else np.asarray(group_size)
    if raw is None:
        sizes = group_size_grid(budget, low=max(2, rule.min_group_size))
    else:
        sizes = _checked_sizes(raw, rule)
        if np.any(budget % sizes):
            raise ValueError(f"`group_size` must divide `budget` N = {budget}, got "
                             f"{sizes[budget % sizes != 0][0]}")
    out = scale_free_curve(m, rule, budget, sizes)
    return float(out[0]) if raw is not None and raw.ndim == 0 else out


def _checked_sizes(raw: np.ndarray, rule) -> np.ndarray:
    """``group_size`` (an integer or a non-empty 1-D array) as checked integers, each at least
    ``rule``'s smallest group."""
    if raw.ndim > 1 or raw.size == 0:
        raise ValueError(f"`group_size` must be an integer or a non-empty 1-D array of "
                         f"integers, got shape {raw.shape}")
    return np.array([as_int(v.item() if hasattr(v, "item") else v, "group_size",
                            rule.min_group_size, rule.min_group_reason)
                     for v in np.atleast_1d(raw)], dtype=np.int64)


def advice_curve(m: PromptMoments, estimator, budget: int, sizes: np.ndarray,
                 target: str) -> np.ndarray:
    """The curve the advice minimises over ``sizes``: the fixed-budget MSE
    (:func:`fixed_budget_curve`) or the scale-free error (:func:`scale_free_curve`). Checked
    inputs; ``target`` one of :data:`ADVICE_TARGETS`."""
    if target == "mse":
        return fixed_budget_curve(m, estimator, budget, sizes)
    return scale_free_curve(m, estimator, budget, sizes)


# ------------------------------------------- any rule's MSE at real B = N/G, bias included
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


def _candidates(rule, budget: int, divisors_only: bool, min_group_size, max_group_size):
    low = rule.min_group_size if min_group_size is None else as_int(
        min_group_size, "min_group_size", rule.min_group_size, rule.min_group_reason)
    if max_group_size is None:
        high = budget if rule.is_affine else min(budget, SCALED_MAX_GROUP_SIZE)
    else:
        high = min(budget, as_int(max_group_size, "max_group_size", low))
    sizes = group_size_grid(budget, divisors_only, low, high)
    if sizes.size == 0:
        raise ValueError(f"no group size in {low}..{high}{' divides' if divisors_only else ''} "
                         f"the budget {budget}")
    return sizes, high


def _argmin(sizes, var, bias, budget, high, rule_name):
    values = sizes * var / budget + bias
    i = best_index(values)
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
        ``N``, at most :data:`MAX_BUDGET`.
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




# ------------------------------------------------------ the recommendation over an interval
#: ``rho`` points of the regret grid (log-spaced, plus the ends and 0).
_GRID = 256

#: Upper end of the grid when the interval has none: ``1/((G_1 - 1)(G_2 - 1)) <= 1/2`` is the
#: largest ``rho`` at which the best admissible size changes, and beyond the grid the limit
#: ``G/G_min`` stands for ``rho = inf``.
_RHO_TOP = 1.0


def robust_group_size(sizes, rho_low: float, rho_high: float, kappa: float):
    r"""Minimax-regret group size over ``rho = c1/c3'`` in ``[rho_low, rho_high]`` (C17, C50).

    .. math::

        G_{\mathrm{rec}} = \arg\min_G \max_{\rho \in [\rho_{lo}, \rho_{hi}]}
        \frac{f(G, \rho)}{\min_{G'} f(G', \rho)}, \qquad
        f(G, \rho) = \rho G + \kappa + \frac{1}{G - 1}

    ``f`` is the GRPO law relative to ``c3'/N`` (:func:`grpo_law`), ``kappa = c2/c3'``.
    ``rho_low`` is clipped at 0 (``c1 >= 0``); ``rho_high`` is not capped: the smallest size is
    best for every ``rho >= 1/2``, but the excess of each larger ``G`` keeps growing with
    ``rho`` towards ``G/G_min``, so an unbounded interval is judged at that limit. For each
    ``G`` the ratio is linear in ``rho`` over a concave piecewise-linear lower envelope, so it
    is quasi-convex in ``rho`` and its maximum over the interval lies at an end; the grid holds
    both ends, and ``verify`` checks the result against a dense brute force (C50).

    Parameters
    ----------
    sizes : array_like of int
        Admissible group sizes (at least one, each ``>= 2``).
    rho_low, rho_high : float
        The interval for ``c1/c3'`` (ends may be infinite).
    kappa : float
        ``c2/c3'``, at least 0.

    Returns
    -------
    group_size : int
    worst_excess : float
        ``max_rho f(G, rho)/min_G' f(G', rho) - 1`` at the recommended size.

    Examples
    --------
    >>> robust_group_size([2, 4, 8, 16, 32], 0.02, 0.02, 1.0)[0]  # G* = 1 + 0.02^(-1/2) = 8.07
    8
    """
    G = np.asarray(sizes, dtype=np.float64)  # (n_G,)
    lo = max(rho_low, 0.0) if not math.isnan(rho_low) else 0.0
    hi = max(rho_high, lo) if not math.isnan(rho_high) else math.inf
    if math.isinf(lo):  # every rho is infinite: the smallest size is best
        return int(G.min()), 0.0
    grid = _rho_grid(lo, hi if math.isfinite(hi) else max(lo, _RHO_TOP))  # (n_rho,)
    f = grid[:, None] * G[None, :] + kappa + 1.0 / (G[None, :] - 1.0)  # (n_rho, n_G)
    ratio = f / f.min(axis=1, keepdims=True)  # (n_rho, n_G)
    if math.isinf(hi):  # the ratio's limit as rho -> inf
        ratio = np.vstack([ratio, G / G.min()])
    regret = ratio.max(axis=0)  # (n_G,)
    best = best_index(regret)
    return int(G[best]), float(regret[best] - 1.0)


def _rho_grid(low: float, high: float) -> np.ndarray:
    """Both ends of ``[low, high]`` (finite) and ``_GRID`` log-spaced points between."""
    grid = np.unique(np.r_[low, high, np.geomspace(max(low, 1e-8), max(high, 1e-8), _GRID)])
    return grid[(grid >= low) & (grid <= high)]


# ---------------------------------------------------------------------- the one answer
@dataclass(frozen=True)
class GroupSizeAnswer:
    """Which group size, at a budget: everything the package reports about ``G`` (C17, C32).

    Attributes
    ----------
    budget : int
        ``N = B G``, samples per step.
    estimator : str
        The registered rule whose curve and best size these are.
    group_sizes : ndarray (n_G,) of int
        The grid: the divisors ``G >= 2`` of ``N``.
    mse : ndarray (n_G,)
        The fixed-budget MSE of ``estimator`` over ``group_sizes`` (for GRPO by default the law
        ``(c1 G + c2 + c3'/(G - 1))/N``; a report passes its estimated curve).
    best_group_size : int
        The divisor with the smallest ``mse`` (:func:`best_on_grid`).
    best_group_size_any : int or None
        For GRPO, the best integer ``G`` in ``2..N`` by the law (:func:`best_law_group_size`;
        the batch ``N/G`` then need not be whole); ``None`` for other rules.
    gstar : float
        ``1 + sqrt(c3'/c1)`` (:func:`optimal_group_size`): ``inf`` when ``c1 <= 0 < c3'``,
        ``nan`` where it is undefined.
    gstar_interval : tuple of float or None
        ``(low, high)`` for ``G*`` when the caller has one (a pilot's Fieller interval).
    recommended_group_size : int
        The minimax-regret divisor over the interval for ``rho = c1/c3'``
        (:func:`robust_group_size`) when one is given, else ``best_group_size``.
    worst_excess : float
        The recommendation's largest relative excess MSE over the best divisor that the
        interval allows; ``nan`` without an interval.
    critical_rollouts : tuple of CriticalRollouts or None
        ``(at the recommended G, at min(G*, N))``: GRPO's critical rollout count
        (:func:`critical_rollouts`), when the caller gave ``||g||^2``; ``None`` otherwise.
    target : str
        What ``mse`` holds and the best divisor minimises (:data:`ADVICE_TARGETS`): ``"mse"``,
        or ``"scale_free"`` (then ``mse`` holds the scale-free error, :func:`scale_free_curve`;
        for GRPO an increasing function of its MSE, so the same best divisor and advice).
    """

    budget: int
    estimator: str
    group_sizes: np.ndarray
    mse: np.ndarray
    best_group_size: int
    best_group_size_any: int | None
    gstar: float
    gstar_interval: tuple | None
    recommended_group_size: int
    worst_excess: float
    critical_rollouts: tuple | None = None
    target: str = "mse"


def gstar_within_budget(c1: float, c3: float, budget: int) -> float:
    """``min(G*, N)``: the group size the count "at G*" is read at (``nan`` where ``G*`` is
    undefined, :func:`gstar_or_nan`), as :func:`law_at_gstar` reads the law."""
    return min(gstar_or_nan(c1, c3), float(budget))


def _check_constants(constants) -> tuple[float, float, float]:
    try:
        values = tuple(float(getattr(constants, name)) for name in ("c1", "c2", "c3"))
    except (AttributeError, TypeError, ValueError):
        raise TypeError("`constants` must carry real `c1`, `c2`, `c3` (a ScalingConstants), got "
                        f"{type(constants).__name__}") from None
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"`constants` must be finite, got c1, c2, c3 = {values}")
    return values


def _check_pair(value, name: str) -> tuple[float, float] | None:
    if value is None:
        return None
    pair = tuple(float(v) for v in np.ravel(np.asarray(value, dtype=np.float64)))
    if len(pair) != 2 or pair[0] > pair[1]:  # NaN ends pass: the regret reads them as open
        raise ValueError(f"`{name}` must be a pair (low, high) with low <= high, got {value!r}")
    return pair


def group_size_answer(budget, constants, curve=None, estimator="grpo", ratio=None,
                      gstar_interval=None, grad_norm_sq=None,
                      target: str = "mse") -> GroupSizeAnswer:
    r"""The group size at budget ``N``: ``G*``, the curve, the best divisor, the advice (C17, C32).

    .. math::

        G^* = 1 + \sqrt{c_3'/c_1}, \qquad
        G_{\mathrm{best}} = \arg\min_{G \mid N,\ G \ge 2} \mathrm{MSE}(G; N)

    Parameters
    ----------
    budget : int or BudgetGrid
        ``N``; a :class:`BudgetGrid` (:func:`budget_grid`) is taken as checked, so a walk that
        checked the budget at its entry checks it once.
    constants : ScalingConstants
        ``c1``, ``c2``, ``c3'`` (a policy's or a pilot's point estimates).
    curve : array_like (n_G,), optional
        ``estimator``'s fixed-budget MSE over the divisors ``>= 2`` of ``N`` (a report's
        estimate, :func:`fixed_budget_mse`); by default GRPO's law from ``constants``.
    estimator : str or AdvantageRule
        The rule ``curve`` belongs to; ``curve`` is required for any rule but GRPO.
    ratio : (float, float), optional
        An interval for ``rho = c1/c3'`` over which to recommend the minimax-regret size
        (:func:`robust_group_size`; GRPO only, and ``c3' > 0``).
    gstar_interval : (float, float), optional
        An interval for ``G*`` to carry with the answer.
    grad_norm_sq : float, optional
        ``||g||^2`` (a policy's, or a pilot's unbiased estimate): the answer then carries the
        critical rollout count at the recommended ``G`` and at ``min(G*, N)``.
    target : {"mse", "scale_free"}
        What ``curve`` is (:data:`ADVICE_TARGETS`); ``"scale_free"`` needs ``curve``. GRPO's
        scale-free error is an increasing function of its MSE, so the minimax-regret advice
        over ``ratio`` (read from the MSE law) is the same for both targets.

    Returns
    -------
    GroupSizeAnswer

    Examples
    --------
    >>> from ustat_rl.theory import ScalingConstants
    >>> out = group_size_answer(48, ScalingConstants(c1=1.0, c2=2.0, c3=16.0))
    >>> out.gstar, out.best_group_size, out.best_group_size_any, out.group_sizes.tolist()
    (5.0, 6, 5, [2, 3, 4, 6, 8, 12, 16, 24, 48])
    """
    grid = budget_grid(budget)
    c1, c2, c3 = _check_constants(constants)
    rule = get_rule(estimator, "estimator")
    sizes = grid.group_sizes
    target = check_advice_target(target)
    if curve is None and target != "mse":
        raise ValueError("`curve` is required for `target` 'scale_free': the default curve is "
                         "GRPO's MSE law")
    if curve is None:
        if rule.name != "grpo":
            raise ValueError(f"`curve` is required for `estimator` {rule.name!r}: the default "
                             "curve is GRPO's law")
        values = grpo_law(c1, c2, c3, grid.budget, sizes.astype(np.float64))
    else:
        values = np.asarray(curve, dtype=np.float64)
        if values.shape != sizes.shape:
            raise ValueError(f"`curve` must have one value per divisor >= 2 of `budget` "
                             f"({sizes.size}), got shape {values.shape}")
        if np.any(np.isnan(values)):
            raise ValueError("`curve` must not hold NaN")
    pair = _check_pair(ratio, "ratio")
    best = int(best_on_grid(sizes, values))
    recommended, excess = best, math.nan
    if pair is not None:
        if rule.name != "grpo":
            raise ValueError(f"`ratio` is GRPO's: the regret is over its law, not "
                             f"{rule.name!r}'s")
        if not c3 > 0.0:
            raise ValueError(f"`ratio` needs c3' > 0 (kappa = c2/c3'), got c3' = {c3:g}")
        recommended, excess = robust_group_size(sizes, pair[0], pair[1], c2 / c3)
    counts = None
    if grad_norm_sq is not None:
        signal = float(grad_norm_sq)
        if math.isnan(signal):
            raise ValueError("`grad_norm_sq` must be a number, got NaN")
        counts = (critical_rollouts(c1, c2, c3, signal, recommended),
                  critical_rollouts(c1, c2, c3, signal, gstar_within_budget(c1, c3, grid.budget)))
    return GroupSizeAnswer(
        budget=grid.budget, estimator=rule.name, group_sizes=sizes, mse=values,
        best_group_size=best,
        best_group_size_any=(best_law_group_size(c1, c2, c3, grid.budget)
                             if rule.name == "grpo" else None),
        gstar=gstar_or_nan(c1, c3), gstar_interval=_check_pair(gstar_interval, "gstar_interval"),
        recommended_group_size=int(recommended), worst_excess=float(excess),
        critical_rollouts=counts, target=target)
