"""The scaling law and the optimal group size at a fixed budget (Theorem 7, docs/theory.md C17).

The minibatch GRPO MSE at ``B`` prompts of ``G`` samples is exactly
``c1/B + c2/(BG) + c3'/(BG(G-1))``; at a fixed budget ``N = BG`` it is
``(c1 G + c2 + c3'/(G-1))/N``, minimised over real ``G > 1`` at ``G* = 1 + sqrt(c3'/c1)``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._validation import as_finite_array
from .group_size import (
    best_law_group_size,
    best_on_grid,
    check_budget,
    group_size_grid,
    grpo_law,
    optimal_group_size,
)
from .moments import PromptMoments
from .mse import check_prompt_prob, prompt_heterogeneity

__all__ = ["C1_NOISE_RTOL", "C1_RTOL", "ScalingConstants", "scaling_constants"]

#: ``c1 = E||g(X)||^2 - ||g||^2`` is a difference of two nearly equal sums when prompts barely
#: differ; below this fraction of ``E||g(X)||^2`` it is indistinguishable from rounding error, so
#: it is set to zero and ``G* = inf`` (the fixed-budget MSE then falls in ``G`` without end).
C1_RTOL = 1e-10

#: When the gradients themselves are rounding noise (``||g(x)|| <= 1e-12`` of the score-reward
#: scale ``sqrt(E||WZ||^2)``), ``c1`` is at most this fraction of ``E_X E||WZ||^2`` and is also
#: set to zero.
C1_NOISE_RTOL = 1e-24

@dataclass(frozen=True)
class ScalingConstants:
    """Constants of the scaling law ``c1/B + c2/(BG) + c3/(BG(G-1))`` (Theorem 7, C17).

    Attributes
    ----------
    c1 : float
        Prompt heterogeneity ``E||g(X) - g||^2``.
    c2 : float
        ``E tr Sigma_oracle(X)``.
    c3 : float
        The exact third constant ``c3' = E_X[E||W||^2 Var(Z|X) + ||g(X)||^2]``, which multiplies
        ``1/(BG(G-1))`` exactly and ``1/(BG^2)`` to leading order.
    estimated : bool
        Whether the constants are unbiased estimates (:func:`scaling_constants` of estimated
        moments, a pilot): those may fall below 0, and :meth:`fixed_budget_mse` then returns
        the unbiased estimate of the MSE, which may be negative too. A policy's own constants
        (``False``, the default) are at least 0, and a negative one makes the MSE undefined.

    Examples
    --------
    >>> c = ScalingConstants(c1=1.0, c2=2.0, c3=16.0)
    >>> c.optimal_group_size()
    5.0
    >>> round(c.fixed_budget_mse(5, budget=40), 6), round(c.fixed_budget_minimum(40), 6)
    (0.275, 0.275)
    """

    c1: float
    c2: float
    c3: float
    estimated: bool = False

    def __post_init__(self):
        for name in ("c1", "c2", "c3"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise TypeError(f"`{name}` must be a real number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"`{name}` must be finite (no NaN or inf), got {value}")

    def fixed_budget_mse(self, group_size, budget):
        r"""Minibatch GRPO MSE at ``N = B G``: ``(c1 G + c2 + c3'/(G-1))/N`` (Proposition 3, C17).

        .. math::

            \mathrm{MSE}(G; N) = \frac{1}{N}\Bigl(c_1 G + c_2 + \frac{c_3'}{G - 1}\Bigr)

        ``group_size`` is a scalar or an array of real ``G`` in ``(1, N]``. At an integer ``G``
        that divides ``N`` the value is the MSE of ``B = N/G`` whole groups; elsewhere it is the
        continuous relaxation in ``B = N/G`` that Theorem 7's ``G*`` minimises (no batch of
        whole groups has that MSE; :meth:`best_group_size` searches the divisors by default).
        It is the owner's law :func:`~.group_size.grpo_law` read from these three constants;
        from a policy's moments, for any rule, the one entry is
        :func:`~.group_size.fixed_budget_mse`.

        Raises ``ValueError`` where the MSE is undefined: ``G > N`` (less than one group per
        step), ``G <= 1``, or a constant below 0 unless :attr:`estimated` (a policy's constants
        are at least 0; an estimate's value is the unbiased estimate, which may be negative).
        """
        budget = check_budget(budget)
        G = as_finite_array(group_size, "group_size", ndim=(0, 1))
        if G.size == 0:
            raise ValueError("`group_size` must hold at least one group size, got an empty "
                             "array")
        if np.any(G <= 1.0):
            raise ValueError(f"`group_size` must be > 1 (the leave-one-out baseline needs two "
                             f"samples), got {G.min():g}")
        if np.any(G > budget):
            raise ValueError(f"`group_size` must be at most `budget` N = {budget} (B = N/G is "
                             f"then less than one group per step), got {G.max():g}")
        self._check_policy_constants()
        out = grpo_law(self.c1, self.c2, self.c3, budget, G)
        return float(out) if out.ndim == 0 else out

    def fixed_budget_minimum(self, budget) -> float:
        r"""``(c1 + c2 + 2 sqrt(c1 c3'))/N``: the minimum over real ``G > 1`` (C17).

        .. math::

            \min_{G > 1} \mathrm{MSE}(G; N) = \frac{c_1 + c_2 + 2\sqrt{c_1 c_3'}}{N}
        """
        budget = check_budget(budget)
        c1 = max(self.c1, 0.0)
        return (c1 + self.c2 + 2.0 * math.sqrt(c1 * max(self.c3, 0.0))) / budget

    def optimal_group_size(self, exact: bool = True) -> float:
        r"""``G* = 1 + sqrt(c3'/c1)`` (``exact=True``), or the paper's ``sqrt(c3/c1)`` (C17).

        .. math::

            G^* = 1 + \sqrt{c_3' / c_1}

        The constants' reading of :func:`~.group_size.optimal_group_size`, the one home of the
        formula: ``inf`` when ``c1 <= 0 < c3'`` (one prompt, prompts with equal gradients, or an
        estimate of ``c1`` at or below zero), where the fixed-budget MSE decreases in ``G``
        without end; :func:`scaling_constants` sets ``c1`` to zero when it is below
        :data:`C1_RTOL` of ``E||g(X)||^2``. Raises ``ValueError`` when ``c1 <= 0`` and
        ``c3' = 0`` (every success probability 0 or 1, say): the MSE ``c2/N`` (or less) then
        does not fall with ``G``, and ``G*`` is undefined, not infinite.
        """
        return optimal_group_size(self.c1, self.c3, exact)

    def best_group_size(self, budget, divisors_only: bool = True) -> int:
        """The admissible integer ``G`` with the smallest fixed-budget MSE at ``N = budget``.

        ``divisors_only=True`` searches the divisors ``G >= 2`` of ``N`` (whole batches);
        otherwise every integer in ``2..N`` (found from a few candidates around ``G*`` and the
        ends, where the minimum of the law must lie, not by evaluating all ``N - 1``).
        """
        budget = check_budget(budget)
        self._check_policy_constants()
        if not divisors_only:
            return best_law_group_size(self.c1, self.c2, self.c3, budget)
        sizes = group_size_grid(budget)
        return int(best_on_grid(sizes, grpo_law(self.c1, self.c2, self.c3, budget, sizes)))

    def _check_policy_constants(self) -> None:
        if not self.estimated:
            for name in ("c1", "c2", "c3"):
                if getattr(self, name) < 0.0:
                    raise ValueError(
                        f"`{name}` is {getattr(self, name):g} < 0, but a policy's scaling "
                        "constants are at least 0, so its fixed-budget MSE is undefined; "
                        "estimated constants (which may fall below 0) take estimated=True")


def scaling_constants(moments: PromptMoments, prompt_prob=None) -> ScalingConstants:
    r"""``c1 = E||g(X) - g||^2``, ``c2 = E tr Sigma_oracle``, ``c3' = E[S Var + ||g(X)||^2]`` (C17).

    .. math::

        c_1 = E_X\|g(X) - g\|^2, \qquad c_2 = E_X \operatorname{tr}\Sigma_{\text{oracle}}(X),
        \qquad c_3' = E_X\bigl[E\|W\|^2 \operatorname{Var}(Z \mid X) + \|g(X)\|^2\bigr]

    ``c1`` is set to zero when it is within :data:`C1_RTOL` of ``E||g(X)||^2`` (cancellation) or
    :data:`C1_NOISE_RTOL` of ``E_X E||WZ||^2`` (gradients at rounding level), so ``G*`` is
    ``inf`` for a single prompt or a zero gradient, not a huge finite number.

    ``prompt_prob`` (``(P,)``, optional) evaluates the constants under other prompt weights:
    equal to ``scaling_constants(moments.reweight(prompt_prob))`` but without constructing and
    re-validating new moments (an eigen-decomposition of the ``(P, P)`` Gram matrix each time),
    which dominates a bootstrap over hundreds of prompts.
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    c1 = prompt_heterogeneity(moments, prompt_prob)
    f = moments.prompt_prob if prompt_prob is None else check_prompt_prob(prompt_prob,
                                                                          moments.n_prompts)
    scale = float(f @ moments.grad_sq)
    noise = float(f @ np.abs(moments.score_sq_reward_sq))
    if abs(c1) <= C1_RTOL * abs(scale) or abs(c1) <= C1_NOISE_RTOL * noise:
        c1 = 0.0
    c2 = float(f @ moments.trace_sigma_oracle)
    c3 = float(f @ (moments.score_sq_reward_var + moments.grad_sq))
    return ScalingConstants(c1, c2, c3, estimated=moments.kind == "estimated")
