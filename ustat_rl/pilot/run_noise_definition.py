"""The run-noise estimates of :mod:`ustat_rl.pilot.run_noise` written from their definitions.

A second route, loop by loop and pair by pair (``O(P^2 k)``), that shares no code with the
vectorised estimates: the monitor's claims (C48, C53) and the tests compare the two to rounding.
Each group's term ``t_b = (1/G) sum_g A_g S_g``; the step's variance is the mean of
``||t_a - t_b||^2 / 2`` over ordered pairs of distinct groups, divided by ``B``; the squared bias
is the mean of ``<t_a - u_a, t_b - u_b>`` over the same pairs, ``u`` the leave-one-out terms.
"""

from __future__ import annotations

import numpy as np

__all__ = ["terms_by_loop", "pairwise_estimates", "window_noise_by_definition"]


def terms_by_loop(advantage, score, group_size) -> np.ndarray:
    """``t_b = (1/G) sum_g A_g S_g`` group by group, a row at a time: ``(P, k)``."""
    rows = []
    for start in range(0, len(advantage), group_size):
        t = np.zeros(score.shape[1])
        for i in range(start, start + group_size):
            t += advantage[i] * score[i]
        rows.append(t / group_size)
    return np.array(rows)


def pairwise_estimates(t, u, batch_size) -> tuple[float, float]:
    """``(variance, bias_sq)`` by their definitions over ordered pairs of distinct groups: the
    mean of ``||t_a - t_b||^2 / 2`` over ``B``, and the mean of ``<t_a - u_a, t_b - u_b>``."""
    P = t.shape[0]
    d = t - u
    spread = cross = 0.0
    for a in range(P):
        for b in range(P):
            if a != b:
                spread += 0.5 * float(np.sum((t[a] - t[b]) ** 2))
                cross += float(d[a] @ d[b])
    pairs = P * (P - 1.0)
    return spread / pairs / batch_size, cross / pairs


def window_noise_by_definition(batches, estimator, weights=None) -> tuple[float, float]:
    """``(var_run, mse_run)`` of a window by definition, ``O(P^2 k)``: each batch's advantages
    from the rule's own evaluation (a registry or multi-reward rule, the paper's GRPO rule for
    ``None``), the leave-one-out terms of the combined reward as the target. ``batches`` are the
    monitor's generation batches (:class:`ustat_rl.frameworks.window.Batch` or any object with
    its ``n_groups``, ``group_size``, ``reward``, ``channels`` and ``score``)."""
    from ..advantages import get_rule
    from ..advantages.multichannel import MULTI_CHANNEL_RULES, get_multichannel_rule

    def advantages(batch, name):
        ids = np.repeat(np.arange(batch.n_groups), batch.group_size)
        if name in MULTI_CHANNEL_RULES:
            return get_multichannel_rule(name).advantages(batch.channels, ids, weights)
        return get_rule(name or "grpo").advantages(batch.reward, ids)

    t = np.concatenate([terms_by_loop(advantages(b, estimator), b.score, b.group_size)
                        for b in batches])
    u = np.concatenate([terms_by_loop(advantages(b, "grpo"), b.score, b.group_size)
                        for b in batches])
    var, bias_sq = pairwise_estimates(t, u, batches[-1].n_groups)
    return var, var + bias_sq
