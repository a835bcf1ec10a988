"""Lower-tail expansion of ``Q = sum_k w_k Z_k^2`` as x -> 0, where both engines lose their footing.

With ``S = sum_k 1 / w_k`` (over all K weights, repeats included), the Laplace transform is
``E exp(-tQ) = prod_k (1 + 2 w_k t)^(-1/2) = (2t)^(-K/2) prod_k w_k^(-1/2) (1 - S / (4t) + ...)``;
inverting term by term (``t^(-a)`` <-> ``x^(a-1) / Gamma(a)``) gives::

    F(x) = (x/2)^(K/2) / (Gamma(K/2 + 1) prod_k sqrt(w_k)) * (1 - S x / (2 (K + 2)) + R_F)
    f(x) = (x/2)^(K/2 - 1) / (2 Gamma(K/2) prod_k sqrt(w_k)) * (1 - S x / (2 K) + R_f)

The coefficient of ``t^(-K/2-n)`` is at most ``(S/2)^n`` in size, so ``|R| <= (S x)^2 / 3`` for
``S x <= 1``; below ``S x = SMALL_X = 1e-9`` that is under 4e-19 and the two terms are exact to
double precision. At ``x = 0`` the density is ``+inf`` (K = 1), ``1 / (2 sqrt(w_1 w_2))``
(K = 2) or 0 (K >= 3), which the formula gives in the limit.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.special import gammaln

#: The expansion replaces the engines where S x <= SMALL_X (remainder below 4e-19 relative).
SMALL_X = 1e-9


def small_x_params(weights: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """``(x_limit, K/2, log F-constant, F slope, log f-constant, f slope)`` for the kernels below."""
    half = 0.5 * float(mult.sum())
    s = float(np.sum(mult / weights))
    log_root = 0.5 * float(np.sum(mult * np.log(weights)))  # log prod_k sqrt(w_k)
    return np.array([SMALL_X / s, half,
                     -half * math.log(2.0) - float(gammaln(half + 1.0)) - log_root,
                     s / (4.0 * (half + 1.0)),
                     -half * math.log(2.0) - float(gammaln(half)) - log_root,
                     s / (4.0 * half)])


@numba.njit(cache=True, error_model="numpy")
def small_log_cdf(x, small):
    """log F(x) for 0 <= x <= small[0] (-inf at 0)."""
    return small[1] * math.log(x) + small[2] + math.log1p(-small[3] * x)


@numba.njit(cache=True, error_model="numpy")
def small_log_pdf(x, small):
    """log f(x) for 0 <= x <= small[0]; the power is dropped when K = 2 (finite limit at 0)."""
    power = 0.0 if small[1] == 1.0 else (small[1] - 1.0) * math.log(x)
    return power + small[4] + math.log1p(-small[5] * x)


@numba.njit(cache=True, error_model="numpy")
def log1mexp(a):
    """log(1 - exp(a)) for a <= 0, accurate on both sides of log 2."""
    if a > -0.6931471805599453:
        return math.log(-math.expm1(a))
    return math.log1p(-math.exp(a))
