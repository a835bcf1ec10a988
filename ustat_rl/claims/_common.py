"""Helpers shared by the bandit checks: Monte Carlo runs, enumeration and slope comparisons."""

from __future__ import annotations

import numpy as np

from ..montecarlo import MonteCarloEstimate, bandit_statistics, run_monte_carlo
from ..policies.softmax import SoftmaxBandit
from ..stats.rates import loglog_slope
from .registry import Check, VerifyContext, check_interval

SLOPE_LEVEL = 0.9999  # interval level for slopes: two-sided false-failure rate 1e-4


def mc_errors(ctx: VerifyContext, claim_id: str, bandit: SoftmaxBandit, sizes, n_reps: int,
              *, estimators=("vanilla", "grpo", "oracle"), batch_size=1, prompt=None,
              stream: int = 0) -> MonteCarloEstimate:
    """Squared errors of each (estimator, G), labelled ``(est, G)``, plus ``("degenerate", G)``.

    The degenerate column ``||g_grpo - g_oracle||^2`` estimates ``MSE_grpo - MSE_oracle``
    directly. Groups are nested across ``sizes`` (common random numbers).
    """
    names = tuple(dict.fromkeys(tuple(estimators) + ("grpo", "oracle")))
    statistic, labels = bandit_statistics(bandit, names, sizes, batch_size, prompt,
                                          degenerate=True)
    labels = tuple(lab[1:] if lab[0] == "sq" else lab for lab in labels)
    est = run_monte_carlo(statistic, n_reps, ctx.seed_for(claim_id, stream), n_jobs=ctx.n_jobs,
                          labels=labels)
    keep = [lab for lab in labels if lab[0] in estimators or lab[0] == "degenerate"]
    return est.subset(keep)


def exact_curve(bandit: SoftmaxBandit, estimator: str, sizes, per_prompt_avg: bool,
                prompt=None, batch_size: int = 1) -> np.ndarray:
    """Exact MSE over ``sizes`` (per prompt, prompt-averaged, or minibatch)."""
    out = []
    for g in sizes:
        if estimator == "degenerate":
            value = (bandit.exact_mse_per_prompt("grpo", g) - bandit.exact_mse_per_prompt("oracle", g))
            value = value / batch_size
        else:
            value = bandit.exact_mse_per_prompt(estimator, g)
        if prompt is not None:
            out.append(float(value[prompt]))
        elif per_prompt_avg:
            out.append(float(bandit.prompt_prob @ value))
        else:
            out.append(bandit.exact_mse(estimator, g, batch_size))
    return np.asarray(out)


def slope_check(name: str, sizes, est: MonteCarloEstimate, labels, exact_values,
                asymptotic: float, note: str = "") -> Check:
    """Log-log slope of Monte Carlo values against the slope of the exact curve.

    The prediction is the slope of the exact finite-G curve fitted with the same weights
    (equal to ``asymptotic`` up to finite-G curvature, reported in the note); the check passes
    when it lies in the Monte Carlo slope's 99.99% interval.
    """
    sub = est.subset(labels)
    sizes = np.asarray(sizes, dtype=np.float64)
    fit = loglog_slope(sizes, sub.mean, cov=sub.cov, level=SLOPE_LEVEL)
    exact_fit = loglog_slope(sizes, np.asarray(exact_values), cov=sub.cov * (
        np.outer(exact_values, exact_values) / np.outer(sub.mean, sub.mean)), level=SLOPE_LEVEL)
    text = (f"99.99% GLS interval (two-sided false-failure rate 1e-4); exact-curve slope "
            f"{exact_fit.slope:.4f} vs asymptotic {asymptotic:g}. {note}")
    return check_interval(name, exact_fit.slope, fit.slope, fit.ci_low, fit.ci_high,
                          note=text.strip())
