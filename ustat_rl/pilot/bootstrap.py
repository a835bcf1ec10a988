"""Studentised (bootstrap-t) intervals over prompts for c1, c2, c3' and G* (docs/theory.md C32).

The alternative to the jackknife-t intervals of :mod:`ustat_rl.pilot.uncertainty` that the
coverage study (``simulations/pilot_coverage.py``) measures. Prompts are resampled with
replacement (multiplicities ``w_a``, ``sum w_a = P``); in each resample the prompt averages are
``w``-weighted, the cross-prompt term ``||g||^2`` averages ``<g_hat_a, g_hat_b>`` over pairs of
*distinct* original prompts (a duplicated prompt paired with itself would add its own noise), and
the standard error is the influence-function one,

    se^2 = sum_a w_a L_a^2 / (P (P - 1)),   L_a = J [x_a - x_bar, 2(<g_hat_a, g_bar> - U)],

with ``J`` the affine map from the summary to ``(c1, c2, c3')``. The interval is
``[t - q_hi se, t - q_lo se]`` with ``q`` the quantiles of ``(t_b - t)/se_b``. For projected
scores the prompt resampling holds the projection fixed; its variance (the jackknife over rows of
:mod:`ustat_rl.pilot.uncertainty`) is added to ``se^2`` of the original pilot, keeping the
bootstrap's quantiles. ``G*`` maps ``c1``'s interval over ``c3'`` at its estimate (its relative
uncertainty is small next to ``c1``'s).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_rng
from ..theory.group_size import gstar_of_ratio
from .estimate import SCORE_MOMENTS
from .replicates import affine_map, checked_statistics, constants_vector, pilot_summary, two_way_cov

__all__ = ["bootstrap_t_intervals"]


def _resampled(per_prompt, gm, w):
    """Summaries ``(B, 9)`` and per-prompt influence rows ``(B, P, 9)`` of resamples ``w``."""
    P = per_prompt.shape[0]
    means = w @ per_prompt / P  # (B, 8)
    total = w @ gm  # (B, k)
    own = np.sum(gm * gm, axis=1)  # (P,)
    pairs = P * P - np.sum(w * w, axis=1)  # (B,) ordered pairs of distinct original prompts
    cross = (np.sum(total * total, axis=1) - (w * w) @ own) / pairs  # (B,)
    centre = total / P  # (B, k)
    h1 = (gm @ centre.T).T  # (B, P)  <g_hat_a, g_bar>
    influence = np.concatenate([per_prompt[None, :, :] - means[:, None, :],
                                (2.0 * (h1 - cross[:, None]))[:, :, None]], axis=2)
    return np.column_stack([means, cross]), influence


def bootstrap_t_intervals(rollouts, level: float = 0.9, n_boot: int = 999, rng=None,
                          include_sketch: bool = True) -> dict:
    """Bootstrap-t intervals over prompts (module docstring; C32).

    Parameters
    ----------
    rollouts : Rollouts or PilotStatistics
        i.i.d. prompts, at least 3.
    level : float
        Two-sided level in (0, 1).
    n_boot : int
        Bootstrap resamples, at least 99.
    rng : numpy.random.Generator or seed
    include_sketch : bool
        Add the projection variance to the standard error (ignored for full scores).

    Returns
    -------
    dict
        ``{"c1", "c2", "c3", "gstar"}`` each ``(low, high)``.
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    n_boot = as_int(n_boot, "n_boot", 99)
    rng = as_rng(rng)
    stats = checked_statistics(rollouts)
    P = stats.n_prompts
    full, _, _ = pilot_summary(stats)
    at_full, jac = affine_map(constants_vector, full)  # (3,), (3, 9)
    per_prompt = np.column_stack([stats.value, stats.reward_var]
                                 + [stats.columns[n].sum(axis=1) for n in SCORE_MOMENTS])
    gm = stats.grad_mean
    w0 = np.ones((1, P))
    w = rng.multinomial(P, np.full(P, 1.0 / P), size=n_boot).astype(np.float64)  # (B, P)

    def estimate_and_se(weights):
        summary, influence = _resampled(per_prompt, gm, weights)
        c = at_full[None, :] + (summary - full[None, :]) @ jac.T  # (B, 3)
        L = influence @ jac.T  # (B, P, 3)
        var = np.einsum("bp,bpq->bq", weights, L * L) / (P * (P - 1.0))
        return c, np.sqrt(np.maximum(var, 0.0))

    c_hat, se_hat = estimate_and_se(w0)
    c_b, se_b = estimate_and_se(w)
    with np.errstate(divide="ignore", invalid="ignore"):
        pivot = (c_b - c_hat) / se_b  # (B, 3)
    pivot = np.where(np.isfinite(pivot), pivot, 0.0)
    alpha = 1.0 - float(level)
    q_lo, q_hi = np.quantile(pivot, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)  # (3,) each
    se = se_hat[0] ** 2
    if include_sketch and stats.sketched:
        _, _, cov_sketch = two_way_cov(
            stats, lambda x: at_full[None, :] + (x - full[None, :]) @ jac.T, True)
        se = se + np.maximum(np.diag(cov_sketch), 0.0)
    se = np.sqrt(se)
    low, high = c_hat[0] - q_hi * se, c_hat[0] - q_lo * se
    c3 = c_hat[0, 2]
    out = {name: (float(lo), float(hi)) for name, lo, hi in zip(("c1", "c2", "c3"), low, high)}
    out["gstar"] = (gstar_of_ratio(high[0] / c3), gstar_of_ratio(low[0] / c3))
    return out
