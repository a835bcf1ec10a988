"""Exact cumulants and the Edgeworth expansion of a projected GRPO gradient (docs/theory.md C28).

For one prompt with two reward values ``lo < hi`` and a direction ``u``, write ``w = <W, u>``.
The projection of the leave-one-out U-statistic is
``<U, u> = (hi - lo) ((G - k) A - k B) / (G (G - 1))``, where ``k ~ Binomial(G, p)`` counts
the samples with reward ``hi`` and, given ``k``, ``A`` and ``B`` are sums of ``k`` and ``G - k``
independent ``w`` drawn from its laws given ``hi`` and given ``lo``. Conditional cumulants add
over independent terms, and the law of total cumulance over ``k`` gives the exact finite-G
cumulants, hence the skewness and excess kurtosis of ``sqrt(G)(<U, u> - <g, u>)`` at every G.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import comb

from .._validation import as_int

__all__ = ["projected_grpo_cumulants", "edgeworth_cdf"]


def _cumulants_from_moments(m: np.ndarray) -> np.ndarray:
    """Cumulants ``k_1..k_n`` (index 0 unused) from raw moments ``m_0 = 1, m_1..m_n``."""
    k = np.zeros_like(m)
    for j in range(1, len(m)):
        k[j] = m[j] - sum(comb(j - 1, i - 1) * k[i] * m[j - i] for i in range(1, j))
    return k


def _moments_from_cumulants(k: np.ndarray) -> np.ndarray:
    """Raw moments (rows) from cumulants (rows, index 0 unused); inverse of the above."""
    m = np.zeros_like(k)
    m[..., 0] = 1.0
    for j in range(1, k.shape[-1]):
        m[..., j] = sum(comb(j - 1, i - 1) * k[..., i] * m[..., j - i] for i in range(1, j + 1))
    return m


def projected_grpo_cumulants(policy, reward_prob, projected_score, reward_values,
                             group_size: int) -> np.ndarray:
    """Exact cumulants ``(k1, k2, k3, k4)`` of ``<U, u>`` for the leave-one-out GRPO gradient.

    Parameters
    ----------
    policy, reward_prob, projected_score : array_like, shape (K,)
        Action probabilities, ``P(Z = hi | action)`` and ``<W(action), u>`` at one prompt.
    reward_values : tuple of float
        ``(lo, hi)``.
    group_size : int
        ``G >= 2``.

    Returns
    -------
    numpy.ndarray, shape (4,)
        Mean, variance, third and fourth cumulants of ``<U, u>``.
    """
    g = as_int(group_size, "group_size", 2)
    pi, r, w = (np.asarray(a, dtype=np.float64) for a in (policy, reward_prob, projected_score))
    if not (pi.shape == r.shape == w.shape and pi.ndim == 1):
        raise ValueError("`policy`, `reward_prob` and `projected_score` must have one shape (K,)")
    lo, hi = reward_values
    p = float(pi @ r)
    if not 0.0 < p < 1.0:
        raise ValueError(f"`reward_prob` must give P(Z = hi) in (0, 1), got {p}")
    powers = w[:, None] ** np.arange(5)
    k_hi = _cumulants_from_moments((pi * r) @ powers / p)
    k_lo = _cumulants_from_moments((pi * (1.0 - r)) @ powers / (1.0 - p))
    k = np.arange(g + 1, dtype=np.float64)[:, None]
    j = np.arange(5)
    scale = (hi - lo) / (g * (g - 1.0))
    cond = scale ** j * (k * (g - k) ** j * k_hi + (g - k) * (-k) ** j * k_lo)
    mean = np.sum(stats.binom.pmf(k[:, 0], g, p) * cond[:, 1])
    cond[:, 1] -= mean  # centre before mixing, so the moments do not cancel
    raw = stats.binom.pmf(k[:, 0], g, p) @ _moments_from_cumulants(cond)
    out = _cumulants_from_moments(raw)[1:]
    out[0] = mean
    return out


def edgeworth_cdf(x, skewness: float, excess_kurtosis: float):
    """Two-term Edgeworth cdf of a standardised statistic with the given third and fourth cumulants.

    ``Phi(x) - phi(x) [s He2(x)/6 + k He3(x)/24 + s^2 He5(x)/72]`` with the Hermite polynomials
    ``He2 = x^2 - 1``, ``He3 = x^3 - 3x``, ``He5 = x^5 - 10x^3 + 15x``.
    """
    x = np.asarray(x, dtype=np.float64)
    he2, he3, he5 = x**2 - 1.0, x**3 - 3.0 * x, x**5 - 10.0 * x**3 + 15.0 * x
    corr = skewness * he2 / 6.0 + excess_kurtosis * he3 / 24.0 + skewness**2 * he5 / 72.0
    return stats.norm.cdf(x) - stats.norm.pdf(x) * corr
