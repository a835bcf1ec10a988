"""Lemma 11's difference of Algorithm 2 and the std-normalised limit, for binary rewards (C24).

The table of ``g_se - g_std`` as an advantage ``a(z, m)`` (so :mod:`.advantage` gives its exact
moments) and the limit of ``G E||g_se - g_std||^2`` by the delta method.
"""

from __future__ import annotations

import numpy as np

from .advantage import AdvantageTable, advantage_table

__all__ = ["lemma11_difference_table", "lemma11_constant"]


def lemma11_difference_table(value: float, group_size: int) -> AdvantageTable:
    r"""``a(z, m)`` of ``g_se - g_std``: Algorithm 2's advantage minus leave-one-out over ``sigma``.

    .. math::

        a(z, m) = (z - \bar Z_{-g}) \Big(\frac{1}{\mathrm{se}_m} - \frac{1}{\sigma}\Big)

    Algorithm 2 (docs/theory.md section 2): ``(z - Z_bar_{-g})/se_m`` with
    ``se_m = sqrt(m (G - m)/(G (G - 1)))`` and all-equal groups zeroed; the limit of Lemma 11
    divides the same leave-one-out difference by ``sigma = sqrt(V (1 - V))``. For binary rewards
    ``z - Z_bar_{-g}`` is ``(G - m)/(G - 1)`` for a success and ``-m/(G - 1)`` for a failure
    (docs/theory.md section 7). O(G), so usable at ``G = 16384``.
    """
    G = int(group_size)
    m = np.arange(G + 1, dtype=np.float64)
    sigma = np.sqrt(value * (1.0 - value))
    se = np.sqrt(m * (G - m) / (G * (G - 1.0)))
    inv_se = np.where(se > 0, 1.0 / np.where(se > 0, se, 1.0), 0.0)
    loo = advantage_table("grpo", G)
    loo_success, loo_failure = loo.success, loo.failure
    success = loo_success * (inv_se - 1.0 / sigma)
    failure = loo_failure * (inv_se - 1.0 / sigma)
    success[0], failure[G] = 0.0, 0.0
    return AdvantageTable(G, success, failure)


def lemma11_constant(moments) -> float:
    r"""``lim G E||g_se - g_std||^2 = ||g||^2 (1 - 2V)^2 / (4 V^2 (1 - V)^2)`` (derived, C24).

    .. math::

        \lim_{G \to \infty} G\, E\|g_{se} - g_{std}\|^2 = \frac{\|g\|^2 (1 - 2V)^2}{4 V^2 (1 - V)^2}

    Delta method: ``g_se - g_std = g_loo (1/se - 1/sigma)``, ``g_loo -> g`` and
    ``G Var(se^2) -> mu_4 - sigma^4 = V (1 - V) (1 - 2V)^2`` for Bernoulli rewards, with
    ``1/se - 1/sigma ~ -(se^2 - sigma^2)/(2 sigma^3)``.
    """
    V, gsq = float(moments.value[0]), float(moments.grad_sq[0])
    return gsq * (1.0 - 2.0 * V) ** 2 / (4.0 * V**2 * (1.0 - V) ** 2)
