"""Order-2 U-statistics and their Hoeffding decomposition (docs/theory.md section 3, C4, C28).

For a symmetric kernel ``h`` and an i.i.d. sample ``X_1..X_n``,
``U = (n(n-1))^{-1} sum_{i != j} h(X_i, X_j)`` decomposes as
``U = h0 + (2/n) sum_i (h1(X_i) - h0) + (n(n-1))^{-1} sum_{i != j} h2(X_i, X_j)`` with
``h0 = E h``, ``h1(x) = E h(x, X)``, ``h2(x, y) = h(x, y) - h1(x) - h1(y) + h0``; the three parts
are uncorrelated and ``Var U = (4(n-2) zeta1 + 2 zeta2) / (n(n-1))``.
Vector kernels are handled with traces (squared norms) throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validation import as_float, as_int

__all__ = [
    "pairwise_kernel_matrix",
    "u_statistic",
    "ustat_variance",
    "HoeffdingParts",
    "hoeffding_parts",
    "ZetaEstimate",
    "estimate_zetas",
    "squared_mean_norm",
]

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def pairwise_kernel_matrix(kernel: Kernel, sample) -> np.ndarray:
    """All kernel values ``(n, n, d)`` with a zero diagonal.

    ``kernel(x, y)`` must broadcast over leading axes of its arguments and return ``(..., d)``
    (a scalar kernel may return ``(...,)``; a trailing axis of length 1 is added).
    """
    sample = np.asarray(sample, dtype=np.float64)
    if sample.ndim == 0 or sample.shape[0] < 2:
        raise ValueError(f"`sample` needs at least 2 observations, got shape {sample.shape}")
    n = sample.shape[0]
    values = np.asarray(kernel(sample[:, None], sample[None, :]), dtype=np.float64)
    if values.shape[:2] != (n, n):
        raise ValueError(f"`kernel` must broadcast to ({n}, {n}, ...), got {values.shape}")
    if values.ndim == 2:
        values = values[..., None]
    if not np.all(np.isfinite(values)):
        raise ValueError("`kernel` returned non-finite values")
    values = values.copy()
    values[np.arange(n), np.arange(n)] = 0.0
    return values


def u_statistic(kernel: Kernel, sample) -> np.ndarray:
    """Order-2 U-statistic ``C(n,2)^{-1} sum_{i<j} h(X_i, X_j)`` (docs/theory.md section 3).

    Examples
    --------
    >>> sample = np.array([[1.0], [2.0], [4.0]])
    >>> float(u_statistic(lambda x, y: 0.5 * (x - y) ** 2, sample)[0])  # unbiased variance
    2.3333333333333335
    """
    values = pairwise_kernel_matrix(kernel, sample)
    n = values.shape[0]
    return values.sum(axis=(0, 1)) / (n * (n - 1))


def ustat_variance(zeta1, zeta2, n) -> float:
    """Exact variance ``(4(n-2) zeta1 + 2 zeta2) / (n(n-1))`` of an order-2 U-statistic.

    ``zeta1 = tr Cov h1(X)`` and ``zeta2 = tr Cov h(X, Y)`` (Hoeffding 1948; docs/theory.md section 3).
    """
    zeta1 = as_float(zeta1, "zeta1", low=0.0)
    zeta2 = as_float(zeta2, "zeta2", low=0.0)
    n = as_int(n, "n", 2)
    return (4.0 * (n - 2) * zeta1 + 2.0 * zeta2) / (n * (n - 1.0))


@dataclass(frozen=True)
class HoeffdingParts:
    """The three parts of ``U``: ``u == h0 + linear + degenerate`` exactly (C4).

    Attributes
    ----------
    u : ndarray (d,)
    h0 : ndarray (d,)
    linear : ndarray (d,)
        First-order (Hajek) part ``(2/n) sum_i (h1(X_i) - h0)``.
    degenerate : ndarray (d,)
        ``(n(n-1))^{-1} sum_{i != j} h2(X_i, X_j)``.
    """

    u: np.ndarray
    h0: np.ndarray
    linear: np.ndarray
    degenerate: np.ndarray


def hoeffding_parts(kernel: Kernel, sample, h0, h1: Callable[[np.ndarray], np.ndarray]
                    ) -> HoeffdingParts:
    """Split ``U`` of one sample into ``h0``, its linear part and its degenerate part.

    ``h1(sample) -> (n, d)`` gives the first projection at each observation. The degenerate part
    is computed from ``h2`` directly, not as a remainder, so ``u == h0 + linear + degenerate`` is
    a real identity to test.
    """
    values = pairwise_kernel_matrix(kernel, sample)  # (n, n, d)
    n = values.shape[0]
    h0 = np.atleast_1d(np.asarray(h0, dtype=np.float64))
    first = np.asarray(h1(np.asarray(sample, dtype=np.float64)), dtype=np.float64).reshape(n, -1)
    h2 = values - first[:, None, :] - first[None, :, :] + h0  # (n, n, d)
    h2[np.arange(n), np.arange(n)] = 0.0
    u = values.sum(axis=(0, 1)) / (n * (n - 1))
    linear = 2.0 / n * np.sum(first - h0, axis=0)
    degenerate = h2.sum(axis=(0, 1)) / (n * (n - 1))
    return HoeffdingParts(u, h0, linear, degenerate)


@dataclass(frozen=True)
class ZetaEstimate:
    """Unbiased estimates from one sample: ``zeta1``, ``zeta2`` and ``||h0||^2``."""

    zeta1: float
    zeta2: float
    h0_sq: float
    n: int


def estimate_zetas(kernel: Kernel, sample) -> ZetaEstimate:
    """Unbiased estimates of ``zeta1`` and ``zeta2`` from one sample of size ``n >= 4``.

    Notes
    -----
    With ``h_ij`` the kernel on distinct indices: ``E||h_12||^2`` is estimated by the mean over
    ordered pairs, ``E<h_12, h_13>`` by the mean over ordered triples and ``||h0||^2 = E<h_12,
    h_34>`` by the mean over ordered quadruples of distinct indices, all from sums of the kernel
    matrix. Then ``zeta1 = E<h_12, h_13> - ||h0||^2`` and ``zeta2 = E||h_12||^2 - ||h0||^2``.
    """
    values = pairwise_kernel_matrix(kernel, sample)  # (n, n, d), zero diagonal
    n = values.shape[0]
    if n < 4:
        raise ValueError(f"`sample` needs at least 4 observations for unbiased zetas, got {n}")
    pair_sq = float(np.sum(values**2))  # sum over i != j of ||h_ij||^2
    row = values.sum(axis=1)  # (n, d)
    triple = float(np.sum(row**2)) - pair_sq  # ordered distinct (i, j, k): <h_ij, h_ik>
    total = values.sum(axis=(0, 1))
    quad = float(total @ total) - 2.0 * pair_sq - 4.0 * triple
    h0_sq = quad / (n * (n - 1.0) * (n - 2.0) * (n - 3.0))
    shared = triple / (n * (n - 1.0) * (n - 2.0))
    second = pair_sq / (n * (n - 1.0))
    return ZetaEstimate(shared - h0_sq, second - h0_sq, h0_sq, n)


def squared_mean_norm(errors) -> tuple[float, float]:
    """``||E e||^2`` from i.i.d. rows ``e_i`` without bias, and its standard error.

    Parameters
    ----------
    errors : array_like (n, d)
        ``n >= 2`` independent draws of a vector ``e``.

    Returns
    -------
    (float, float)
        The estimate and its standard error.

    Notes
    -----
    The estimate is the order-2 U-statistic of the kernel ``h(e, e') = <e, e'>``,
    ``(||sum_i e_i||^2 - sum_i ||e_i||^2) / (n (n - 1))``, whose mean is ``||mu||^2``,
    ``mu = E e``. Its variance is :func:`ustat_rl.stats.ustatistics.ustat_variance` at
    ``zeta1 = Var <e, mu>`` and ``zeta2 = Var <e, e'> = tr(S^2) - ||mu||^4``, ``S = E[e e^T]``,
    both estimated by plugging in the sample mean and second moment. The plug-in ``zeta1``
    is ``mu_hat' Sigma mu_hat``, biased up by ``O(1/n)``: harmless where ``||mu||^2`` is many
    standard errors from 0, as in C51 (its squared biases are hundreds of se from 0), and
    conservative at ``mu = 0``, where the ``zeta2`` term is what is left.

    Examples
    --------
    >>> e = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 2.0], [2.0, -2.0]])
    >>> estimate, se = squared_mean_norm(e)
    >>> round(estimate, 6), se > 0
    (3.166667, True)
    """
    e = np.asarray(errors, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] < 2 or not np.all(np.isfinite(e)):
        raise ValueError(f"`errors` must be a finite (n, d) array with n >= 2, got shape "
                         f"{e.shape}")
    n = e.shape[0]
    total = e.sum(axis=0)  # (d,)
    estimate = float(total @ total - np.sum(e * e)) / (n * (n - 1))
    mean = total / n
    second = e.T @ e / n  # (d, d) plug-in E[e e^T]
    zeta1 = float(np.var(e @ mean, ddof=1))
    zeta2 = max(float(np.sum(second * second)) - float(mean @ mean) ** 2, 0.0)
    return estimate, math.sqrt(ustat_variance(zeta1, zeta2, n))
