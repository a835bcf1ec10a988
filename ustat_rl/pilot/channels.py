"""Multi-channel moments from rollouts: what the exact multi-reward theory needs (C52).

From ``P`` prompts with ``n_x >= 2`` draws each, every draw with its score ``W`` (sketched or
not) and ``K`` binary channel rewards, the entries of
:class:`~ustat_rl.theory.multichannel.ChannelMoments` are estimated without bias, each a
U-statistic of order at most 2 (docs/theory.md section 7, C52): with ``S_o(x) = sum_i W_i 1{O_i
= o}`` over prompt ``x``'s draws,

* ``q_o(x)``: the share of draws with outcome ``o``; ``t_o(x)``: the mean of ``||W_i||^2 1{O_i
  = o}``;
* ``<nu_o(x), nu_o'(x)>``: ``(<S_o, S_o'> - sum_i ||W_i||^2 1{O_i = o = o'}) / (n (n - 1))``,
  the average over ordered pairs of distinct draws;
* ``<nu_o(x), nu_o'(y)>`` for ``y != x``: ``<S_o(x)/n_x, S_o'(y)/n_y>`` (independent prompts).

The prompts are weighted equally (the pilot's own prompt distribution). The rule's MSE is then a
plug-in of these estimates (consistent, not unbiased: its coefficients depend on ``q``
nonlinearly), as for the single-reward scaled rules.
"""

from __future__ import annotations

import numpy as np

from ..theory.multichannel import ChannelMoments

__all__ = ["estimate_channel_moments"]


def estimate_channel_moments(prompt_id, channels, score) -> ChannelMoments:
    """Unbiased multi-channel moments of draws grouped by ``prompt_id`` (module docstring).

    Parameters
    ----------
    prompt_id : array_like of int, shape (n,)
    channels : array_like, shape (n, K)
        Binary rewards, one column per channel.
    score : array_like, shape (n, d)

    Returns
    -------
    ChannelMoments
        ``kind="estimated"``, prompts in the order of their first draw.
    """
    ids = np.asarray(prompt_id)
    z = np.asarray(channels, dtype=np.float64)
    W = np.asarray(score, dtype=np.float64)
    if ids.ndim != 1 or z.ndim != 2 or W.ndim != 2 or not ids.size == z.shape[0] == W.shape[0]:
        raise ValueError(f"`prompt_id` (n,), `channels` (n, K) and `score` (n, d) must share n; "
                         f"got shapes {ids.shape}, {z.shape}, {W.shape}")
    if not np.all((z == 0.0) | (z == 1.0)):
        raise ValueError("`channels` must be binary (0 or 1): the exact multi-channel theory "
                         "is for binary channels")
    if not np.all(np.isfinite(W)):
        raise ValueError("`score` must be finite (no NaN or inf)")
    _, first, inverse, counts = np.unique(ids, return_index=True, return_inverse=True,
                                          return_counts=True)
    if counts.min() < 2:
        raise ValueError("every prompt needs at least 2 draws for the pair terms, got a prompt "
                         "with 1")
    order = np.argsort(first)  # prompts in the order they first appear
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    x = rank[inverse.reshape(-1)]
    P, K = order.size, z.shape[1]
    O = 2**K
    outcome = (z @ (2 ** np.arange(K))).astype(np.int64)  # (n,) channel 0 the fastest bit
    onehot = np.eye(O)[outcome]  # (n, O)
    n = counts[order].astype(np.float64)  # (P,)
    sq = np.sum(W**2, axis=1)  # (n,)
    q = np.zeros((P, O))
    t = np.zeros((P, O))
    S = np.zeros((P, O, W.shape[1]))
    np.add.at(q, x, onehot)
    np.add.at(t, x, onehot * sq[:, None])
    np.add.at(S, x, onehot[:, :, None] * W[:, None, :])
    mean = S / n[:, None, None]  # (P, O, d) unbiased nu_o(x)
    gram = np.einsum("xod,ypd->xoyp", mean, mean)  # cross-prompt inner products
    for p in range(P):  # within a prompt: distinct pairs only
        diag = np.diag(t[p])  # sum_i ||W_i||^2 1{O_i = o = o'}
        gram[p, :, p, :] = (S[p] @ S[p].T - diag) / (n[p] * (n[p] - 1.0))
    return ChannelMoments(np.full(P, 1.0 / P), q / n[:, None], t / n[:, None], gram,
                          kind="estimated")
