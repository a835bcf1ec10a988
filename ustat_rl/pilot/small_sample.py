"""Intervals for c1, c2 and c3' from pilots of few prompts (docs/theory.md C32, "Small pilots").

The jackknife-t intervals of :mod:`ustat_rl.pilot.uncertainty` rest on a standard error that is
itself estimated from the pilot's ``P`` prompts. Below :data:`SMALL_PILOT_PROMPTS` prompts that
estimate is too noisy to trust, and the intervals under-cover, worst for ``c1``: a small
``c1_hat`` comes with a small standard error, so the true ``c1`` lies above the interval (at
3 x 3 its 90% interval covered ``c1`` in 21% to 83% of the pilots of four policies with known
constants, ``simulations/small_pilot_coverage.py``). Below that size each end of an interval is the more cautious of the
jackknife's and of a chi-square model's that does not lean on the estimated standard error:

* ``c1`` is a between-prompt variance (``E||g(X) - g||^2``). With ``g_hat_a`` prompt ``a``'s
  gradient estimate, ``c1_hat = S_B - W_bar``: ``S_B`` is the sample variance (trace) of the
  ``g_hat_a`` over prompts and ``W_a = ||g_hat_a||^2 - ||g(x_a)||^2_hat`` the unbiased
  within-prompt noise of ``g_hat_a`` (docs/theory.md section 7). If the ``g_hat_a`` are
  Gaussian, ``tr S_B`` is a weighted sum of chi-squares with ``P - 1`` degrees of freedom each,
  at its most variable (``E tr S_B chi2_{P-1}/(P - 1)``) when their covariance has rank one.
  The upper end is the modified large-sample one (Graybill and Wang 1980) for
  ``c1 = E S_B - E W``: ``c1_hat + sqrt((H S_B)^2 + (t se_W)^2 + (t_s se_s)^2)``, with
  ``H = (P - 1)/chi2_{alpha/2, P - 1} - 1``, ``se_W`` the standard error of ``W_bar``, and
  ``se_s`` the projection's part (sketched scores). The lower end stays the jackknife's: the
  misses below it are rare (C32), and so ``G*``'s interval stays unbounded above exactly when
  ``c1``'s reaches 0.
* ``c2`` and ``c3'`` are prompt averages of per-prompt values ``y_a``; the model is
  ``mean(y) ~ E y chi2_P/P`` (each ``y_a`` as variable as a one-degree chi-square), giving
  ``[P y_bar/chi2_{1 - alpha/2, P}, P y_bar/chi2_{alpha/2, P}]``; the interval is the union with
  the jackknife's.

These models are conservative for the policies measured (coverage 91.6% to 100% at 3 x 3,
3 x 8, 8 x 8, 16 x 8 and 31 x 8 over 400 pilots each, the script above), not a guarantee for
every policy: no interval for a mean has guaranteed coverage from a handful of draws of an
unknown law. ``G*`` and ``rho = c1/c3'`` take the image of the constants' box beside Fieller's
set.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

__all__ = ["SMALL_PILOT_PROMPTS", "is_small_pilot", "c1_upper_end", "prompt_mean_interval",
           "per_prompt_values"]

#: Pilots with fewer i.i.d. prompts than this get the cautious intervals of this module, and the
#: verdicts that need a jackknife interval alone (GRPO against vanilla) read "cannot tell".
#: Chosen from the coverage studies: at 32 x 8 and above the jackknife-t intervals of C32's
#: bandit cover within the band 85-95%; below, their c1 interval covered 79-88% at 16 x 8 and
#: 69-86% at 8 x 8 (simulations/small_pilot_coverage.py, four policies, 400 pilots each).
SMALL_PILOT_PROMPTS = 32


def is_small_pilot(n_prompts: int) -> bool:
    """Whether a pilot of ``n_prompts`` i.i.d. prompts gets this module's intervals."""
    return int(n_prompts) < SMALL_PILOT_PROMPTS


def per_prompt_values(stats) -> dict:
    """Per-prompt unbiased ``c2`` and ``c3'`` summands and ``W_a`` (each ``(P,)``), and ``S_B``.

    ``c2(x) = E||W(Z - V)||^2 - ||g(x)||^2``, ``c3'(x) = E||W||^2 Var(Z|x) + ||g(x)||^2``
    (:meth:`ustat_rl.theory.PromptMoments.trace_sigma_oracle`, C17).
    """
    P = stats.n_prompts
    gm = stats.grad_mean  # (P, k) g_hat_a
    grad_sq = stats.columns["grad_sq"].sum(axis=1)  # (P,) unbiased ||g(x_a)||^2
    dev = gm - gm.mean(axis=0)
    return {"c2": stats.columns["score_sq_centred"].sum(axis=1) - grad_sq,
            "c3": stats.columns["score_sq_reward_var"].sum(axis=1) + grad_sq,
            "noise": np.sum(gm * gm, axis=1) - grad_sq,
            "between": float(np.sum(dev * dev) / (P - 1.0))}


def c1_upper_end(stats, level: float, c1_estimate: float, sketch_se: float,
                 sketch_units: int | None) -> float:
    """The chi-square (modified large-sample) upper end for ``c1`` (module docstring)."""
    values = per_prompt_values(stats)
    P = stats.n_prompts
    alpha = 1.0 - level
    df = P - 1.0
    H = df / sps.chi2.ppf(alpha / 2.0, df) - 1.0
    t = sps.t.ppf(1.0 - alpha / 2.0, df)
    se_w = float(np.std(values["noise"], ddof=1) / math.sqrt(P))
    t_s = (sps.t.ppf(1.0 - alpha / 2.0, sketch_units - 1.0)
           if sketch_units is not None and sketch_units >= 2 else t)
    return float(c1_estimate + math.sqrt((H * values["between"]) ** 2 + (t * se_w) ** 2
                                         + (t_s * sketch_se) ** 2))


def prompt_mean_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """``[P y_bar/chi2_{1 - alpha/2, P}, P y_bar/chi2_{alpha/2, P}]`` for a prompt average of
    non-negative summands (module docstring); ``(0, 0)`` when the average is not positive."""
    P = values.size
    mean = float(np.mean(values))
    if not mean > 0.0:
        return 0.0, 0.0
    alpha = 1.0 - level
    return (P * mean / sps.chi2.ppf(1.0 - alpha / 2.0, P),
            P * mean / sps.chi2.ppf(alpha / 2.0, P))
