r"""Exact expected within-group sample correlation of binary channels (docs/theory.md C52).

The multireward-grpo package (github.com/yiqiao-yin/multireward-grpo, ``proofs.md``, Theorem 3)
states that with scores independent of the rewards the decoupled estimator's MSE is
``(tau^2/m) w' E[C_hat] w`` exactly for ``m >= 2``, ``C_hat`` the within-group sample correlation
of the channels. For binary channels a group can have a channel with no spread, whose
standardised rewards its ``delta`` guard sets to 0: then the per-group average of
``u_l u_k`` is the sample correlation with that channel's row and column set to 0, not 1 on
the diagonal. Both versions are computed here over the compositions of ``G`` (population
moments, ``ddof = 0``, as the package's harness takes them).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int
from .multichannel import ChannelMoments, binary_outcomes, composition_pmf, compositions

__all__ = ["expected_sample_correlation", "population_correlation"]


def expected_sample_correlation(moments: ChannelMoments, group_size, *,
                                unit_diagonal: bool = False) -> np.ndarray:
    r"""``E[C_hat]`` per prompt, ``(P, K, K)``, over groups of ``G`` draws.

    .. math::

        \hat C_{lk} = \frac{\frac1G \sum_j (z_{jl} - \bar z_l)(z_{jk} - \bar z_k)}
                         {\hat\sigma_l \hat\sigma_k}, \qquad
        \hat\sigma_l^2 = \frac1G \sum_j (z_{jl} - \bar z_l)^2,

    with row and column ``l`` set to 0 where ``sigma_hat_l = 0`` (the package's ``delta``
    guard in the limit ``delta -> 0``), or with the diagonal set to 1 (``unit_diagonal``, the
    convention ``C_hat_ll = 1`` of the package's proof).
    """
    if not isinstance(moments, ChannelMoments):
        raise TypeError(f"`moments` must be a ChannelMoments, got {type(moments).__name__}")
    G = as_int(group_size, "group_size", 2)
    counts, members = compositions(G, moments.n_outcomes)
    rows = binary_outcomes(moments.n_channels)[members]  # (C, G, K)
    dev = rows - rows.mean(axis=1, keepdims=True)
    cov = np.einsum("cgl,cgk->clk", dev, dev) / G  # (C, K, K)
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))  # (C, K)
    inv = np.where(sd > 0, 1.0 / np.where(sd > 0, sd, 1.0), 0.0)
    corr = cov * inv[:, :, None] * inv[:, None, :]
    if unit_diagonal:
        corr[:, np.arange(moments.n_channels), np.arange(moments.n_channels)] = 1.0
    pmf = composition_pmf(counts, moments.outcome_prob)  # (P, C)
    return np.einsum("pc,clk->plk", pmf, corr)


def population_correlation(moments: ChannelMoments) -> np.ndarray:
    """The channels' correlation matrix ``C`` per prompt, ``(P, K, K)``."""
    if not isinstance(moments, ChannelMoments):
        raise TypeError(f"`moments` must be a ChannelMoments, got {type(moments).__name__}")
    o = binary_outcomes(moments.n_channels)  # (O, K)
    q = np.asarray(moments.outcome_prob)  # (P, O)
    mean = q @ o  # (P, K)
    cov = np.einsum("po,ol,ok->plk", q, o, o) - mean[:, :, None] * mean[:, None, :]
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    return cov / (sd[:, :, None] * sd[:, None, :])
