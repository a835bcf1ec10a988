r"""The full-mean estimator's budget optimum in closed form (beyond the paper).

The full mean is ``k = (G-1)/G`` times GRPO, so its fixed-budget MSE has the bias term
``||g||^2/G^2`` and its best group size grows with the budget ``N``, like
``(2 ||g||^2 N / c1)^(1/3)``: :func:`fullmean_budget_optimum` gives the real root of the cubic and
its asymptotics. The integer optimum of any rule at a budget, its exponent in ``N`` and the
curves are :mod:`.group_size`'s (:func:`~.group_size.budget_optimal_group_size`,
:func:`~.group_size.budget_exponent`), which this module's answer is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .group_size import check_budget
from .moments import PromptMoments
from .scaling import scaling_constants

__all__ = ["FullMeanOptimum", "fullmean_budget_optimum"]


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
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    m = moments
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

