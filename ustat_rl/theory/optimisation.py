"""Lemma 6's convergence bounds for Algorithm 1 under PL (docs/theory.md C14-C16).

``M = sup_theta E||g_hat - g||^2`` is the noise bound, ``L`` the smoothness and ``mu`` the PL
constant. The bounds are functions of these constants alone, so they apply to any objective
whose constants are known (the checks use noisy PL quadratics, where all three are exact).
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_float

__all__ = ["contraction_factor", "lemma6_constant_bound", "lemma14_start", "lemma6_inverse_bound"]


def contraction_factor(smoothness, pl_constant, learning_rate) -> float:
    r"""``rho = 1 - 2 mu beta + L mu beta^2``, in ``[0, 1)`` for ``beta < 1/(2L)`` (Lemma 6, C14).

    .. math::

        \rho = 1 - 2\mu\beta + L\mu\beta^2
    """
    L = as_float(smoothness, "smoothness", low=0.0)
    mu = as_float(pl_constant, "pl_constant", low=0.0)
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    return 1.0 - 2.0 * mu * beta + L * mu * beta**2


def lemma6_constant_bound(smoothness, pl_constant, noise_bound, learning_rate, initial_gap,
                          n_iter) -> np.ndarray:
    r"""``E Delta_n <= rho^n E Delta_0 + L beta^2 M / (4 mu beta - 2 L mu beta^2)`` (C14).

    .. math::

        E\Delta_n \le \rho^n E\Delta_0 + \frac{L\beta^2 M}{4\mu\beta - 2L\mu\beta^2}

    Parameters
    ----------
    smoothness, pl_constant : float
        ``L`` and ``mu``.
    noise_bound : float
        ``M``.
    learning_rate : float
        The constant ``beta``, with ``0 < beta < 1/(2L)``.
    initial_gap : float
        ``E Delta_0``.
    n_iter : int or array_like of int
        ``n``.
    """
    L = as_float(smoothness, "smoothness", low=0.0)
    mu = as_float(pl_constant, "pl_constant", low=0.0)
    M = as_float(noise_bound, "noise_bound", low=0.0)
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    if not 0.0 < beta < 1.0 / (2.0 * L):
        raise ValueError(f"`learning_rate` must lie in (0, 1/(2L)) = (0, {1 / (2 * L):g}), "
                         f"got {beta:g}")
    rho = contraction_factor(L, mu, beta)
    n = np.asarray(n_iter, dtype=np.float64)
    return rho**n * float(initial_gap) + L * beta**2 * M / (4 * mu * beta - 2 * L * mu * beta**2)


def lemma14_start(A, B, eps: float = 1.0) -> int:
    r"""``n0 = ceil(B (1 + eps) / (eps (A - 1))) + 1`` of Lemma 14 as printed (C16).

    .. math::

        n_0 = \Big\lceil \frac{B (1 + \epsilon)}{\epsilon (A - 1)} \Big\rceil + 1
    """
    A = as_float(A, "A")
    if A <= 1.0:
        raise ValueError(f"Lemma 14 needs `A` > 1, got {A:g}")
    return math.ceil(float(B) * (1 + eps) / (eps * (A - 1))) + 1


def lemma6_inverse_bound(smoothness, pl_constant, noise_bound, learning_rate, sup_gap, n_iter,
                         eps: float = 1.0) -> np.ndarray:
    r"""``E Delta_n <= max{(1+eps) L beta^2 M / ((4 mu beta - 2) n), a n0 / n}`` (C15).

    .. math::

        E\Delta_n \le \max\Big\{\frac{(1 + \epsilon) L \beta^2 M}{(4\mu\beta - 2) n},\ \frac{a n_0}{n}\Big\}

    The 1/i schedule ``eta_i = beta / i`` with ``beta > 1/(2 mu)``; from Lemma 14 with
    ``A = 2 mu beta``, ``B = L mu beta^2``, ``C = L beta^2 M / 2`` and ``a = sup_n E Delta_n``.
    """
    L = as_float(smoothness, "smoothness", low=0.0)
    mu = as_float(pl_constant, "pl_constant", low=0.0)
    M = as_float(noise_bound, "noise_bound", low=0.0)
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    if not beta * mu > 0.5:
        raise ValueError(f"`learning_rate` must exceed 1/(2 mu) = {1 / (2 * mu):g}, got {beta:g}")
    n0 = lemma14_start(2 * mu * beta, L * mu * beta**2, eps)
    n = np.asarray(n_iter, dtype=np.float64)
    return np.maximum((1 + eps) * L * beta**2 * M / ((4 * mu * beta - 2) * n),
                      float(sup_gap) * n0 / n)
