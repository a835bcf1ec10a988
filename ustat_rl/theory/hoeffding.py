"""Hoeffding components of the GRPO kernel in terms of the moments (Lemma 1, docs/theory.md C4).

For the kernel ``h(o, o') = (W - W')(Z - Z')/2`` of the leave-one-out estimator, ``h0 = g(x)``,
``2 (h1 - h0) = W(Z - V) - g`` and the degenerate part is ``-(W1 (Z2 - V) + W2 (Z1 - V))/2``, so

* ``zeta1 = tr Cov h1 = tr Sigma_oracle / 4``;
* ``zeta2 = tr Cov h = E[||W1||^2 (Z1 - Z2)^2]/2 = (tr Sigma_oracle + E||W||^2 Var Z + ||g||^2)/2``

and Lemma 1's variance ``(4 (G - 2) zeta1 + 2 zeta2)/(G (G - 1))`` is Theorem 2's exact MSE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .moments import PromptMoments

__all__ = ["KernelZetas", "kernel_zetas"]


@dataclass(frozen=True)
class KernelZetas:
    """``zeta1 = tr Cov h1(O)`` and ``zeta2 = tr Cov h(O, O')`` per prompt, shape ``(P,)`` (C4)."""

    zeta1: np.ndarray
    zeta2: np.ndarray


def kernel_zetas(moments: PromptMoments) -> KernelZetas:
    r"""The Hoeffding variances of the GRPO kernel at every prompt (Lemma 1, C4).

    .. math::

        \zeta_1 = \operatorname{Var} h_1(X), \qquad \zeta_2 = \operatorname{Var} h(X, X')

    Examples
    --------
    >>> from ustat_rl.policies.softmax import SoftmaxBandit
    >>> z = kernel_zetas(SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]]).moments())
    >>> float(z.zeta1[0]), float(z.zeta2[0])
    (0.0, 0.125)
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    trace = moments.trace_sigma_oracle
    return KernelZetas(trace / 4.0,
                       (trace + moments.score_sq_reward_var + moments.grad_sq) / 2.0)
