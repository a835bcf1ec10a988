r"""Exact moments of an affine advantage rule, for any rewards (docs/theory.md C2, C5, C8).

An affine rule's estimate decomposes (:meth:`ustat_rl.advantages.Centring.moment_coefficients`)
into the oracle estimate, the leave-one-out GRPO estimate and the plain score mean,

.. math::

    \hat g(x) = a\,\hat g_O + b\,\hat g_L + D\,\bar W, \qquad
    \bar W = \frac{1}{G}\sum_g W_g, \qquad D = a V(x) - w\,r(x).

With :math:`\hat g_L - g = (\hat g_O - g) + H_2` (the Hoeffding decomposition, C4) the
cross moments are :math:`E\langle \hat g_O - g, \hat g_L - g\rangle = \operatorname{tr}\Sigma/G`
and :math:`E\langle \hat g_O, \bar W\rangle = E\langle \hat g_L, \bar W\rangle = \kappa/G` with
:math:`\kappa = \operatorname{Cov}(\|W\|^2, Z \mid x)`, so

.. math::

    E\hat g(x) = (a + b)\,g(x), \qquad
    \operatorname{tr}\operatorname{Cov}\hat g(x) = (a^2 + 2ab)\frac{\operatorname{tr}\Sigma}{G}
    + b^2\,\mathrm{MSE}_L + \frac{D^2 E\|W\|^2 + 2 (a + b) D \kappa}{G},

with :math:`\mathrm{MSE}_L = \operatorname{tr}\Sigma/G + (E\|W\|^2 \operatorname{Var} Z
+ \|g(x)\|^2)/(G(G-1))` (Theorem 2). The matrix form replaces each trace by its matrix.
The paper's rules are evaluated through the shortest of these forms (a prompt-only baseline,
the oracle, a multiple of GRPO), so their values are those of the paper's formulas.
"""

from __future__ import annotations

import numpy as np

from .moments import PromptMoments

__all__ = ["affine_coefficients", "affine_variance", "affine_covariance"]


def affine_coefficients(estimator, G: float, reference: np.ndarray, value: np.ndarray):
    r"""``(a, b, c, D, k)`` at group size ``G``: ``c = w r(x)`` and ``D = a V - c`` per prompt
    ``(P,)``, mean factor ``k = a + b``.

    .. math::

        a = 1 - w_m - w_l, \qquad b = w_m\frac{G - 1}{G} + w_l, \qquad D = aV - w r
    """
    a, b, w = estimator.centring.moment_coefficients(float(G))
    c = w * reference if w else np.zeros_like(value)
    return a, b, c, a * value - c, a + b


def _grpo_trace(m: PromptMoments, G: float) -> np.ndarray:
    return m.trace_sigma_oracle / G + (m.score_sq_reward_var + m.grad_sq) / (G * (G - 1.0))


def affine_variance(m: PromptMoments, estimator, G: float, reference: np.ndarray) -> tuple:
    r"""``(tr Cov g_hat(x) (P,), k)`` of an affine rule at one group size ``G``.

    .. math::

        \operatorname{tr}\operatorname{Cov}\hat g(x) = (a^2 + 2ab)\frac{\operatorname{tr}\Sigma}{G}
        + b^2\,\mathrm{MSE}_L + \frac{D^2 E\|W\|^2 + 2 (a + b) D \kappa}{G}
    """
    a, b, c, D, k = affine_coefficients(estimator, G, reference, m.value)
    if b == 0 and a == 1:  # z - c(x): a prompt-only baseline (vanilla c = 0, oracle c = V)
        # the oracle's form when the rule centres at the value, a fact of the rule: a vanilla
        # pilot whose estimated value is exactly 0 keeps vanilla's form (estimated moments do
        # not satisfy the identity that makes the two forms equal)
        if estimator.centring.reference_source == "value" and np.all(c == m.value):
            return m.trace_sigma_oracle / G, k
        second = m.score_sq_reward_sq - 2.0 * c * m.score_sq_reward + c**2 * m.score_sq
        return (second - m.grad_sq) / G, k
    if a == 0 and np.all(D == 0):  # a multiple of GRPO (the full mean: b = (G - 1)/G)
        return (b**2 * _grpo_trace(m, G) if b else np.zeros_like(m.grad_sq)), k
    kappa = m.score_sq_reward - m.value * m.score_sq
    var = (a * a + 2.0 * a * b) * m.trace_sigma_oracle / G
    if b:
        var = var + b**2 * _grpo_trace(m, G)
    return var + (D**2 * m.score_sq + 2.0 * k * D * kappa) / G, k


def affine_covariance(m: PromptMoments, estimator, G: float, reference: np.ndarray) -> tuple:
    r"""``(Cov(g_hat(x) | x) (P, d, d), k)``: the matrix form of :func:`affine_variance`.

    .. math::

        \operatorname{Cov}\hat g(x) = (a^2 + 2ab)\frac{\Sigma}{G} + b^2 C_L
        + \frac{D^2 E[W W^\top] + 2 (a + b) D\,E[W W^\top (Z - V)]}{G}
    """
    a, b, c, D, k = affine_coefficients(estimator, G, reference, m.value)
    gg = np.einsum("pk,pl->pkl", m.grad_per_prompt, m.grad_per_prompt)  # (P, d, d)

    def centred(c):  # E[W W^T (Z - c)^2 | x] for c of shape (P,)
        c = c[:, None, None]
        return m.score_outer_reward_sq - 2.0 * c * m.score_outer_reward + c**2 * m.score_outer

    if b == 0 and a == 1:
        return (centred(c) - gg) / G, k
    sigma = centred(m.value) - gg
    grpo = None
    if b:
        grpo = sigma / G + (m.score_outer * m.reward_var[:, None, None] + gg) / (G * (G - 1.0))
    if a == 0 and np.all(D == 0):
        return (b**2 * grpo if b else np.zeros_like(gg)), k
    cross = m.score_outer_reward - m.value[:, None, None] * m.score_outer
    Dm = D[:, None, None]
    cov = (a * a + 2.0 * a * b) * sigma / G + (Dm**2 * m.score_outer + 2.0 * k * Dm * cross) / G
    return (cov + b**2 * grpo if b else cov), k
