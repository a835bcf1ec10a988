"""The interval routines for scaling constants and ``G*``, in one place (docs/theory.md C17-C19).

* :func:`percentile_interval`: the two-sided percentile interval of bootstrap draws, used by the
  transformer's bootstrap over prompts (:func:`ustat_rl.policies.transformer.bootstrap_constants`)
  and the sweeps' bootstrap over the argmin (:func:`ustat_rl.training.group_size.bootstrap_argmin`);
* the pilot's jackknife with Student-t quantiles is :func:`ustat_rl.pilot.uncertainty.jackknife`
  and :func:`ustat_rl.pilot.uncertainty.student_interval` (the pilot needs its two-way variance
  split, over prompts and projection rows);
* :func:`ratio_verdict`: what an interval for a ratio of two MSEs says against 1, the one rule
  every report of such a ratio words its verdict by (``ustat-rl allocate``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["percentile_interval", "ratio_verdict", "RATIO_VERDICTS"]

#: The words :func:`ratio_verdict` returns, from the strongest claim to none.
RATIO_VERDICTS = ("gain shown", "worse than", "within the noise", "undefined")


def percentile_interval(draws, level: float, axis: int = 0):
    r"""``(low, high)``: the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of ``draws``.

    Quantiles are taken with ``method="inverted_cdf"`` (a draw, never an interpolation), so
    integer draws give integer bounds and infinite draws do not produce ``inf - inf``.

    .. math::

        [\hat F^{-1}((1 - \ell)/2),\ \hat F^{-1}((1 + \ell)/2)]

    Examples
    --------
    >>> percentile_interval(np.arange(1, 101), 0.9)
    (np.int64(5), np.int64(95))
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    draws = np.asarray(draws)
    low = np.quantile(draws, tail, axis=axis, method="inverted_cdf")
    high = np.quantile(draws, 1.0 - tail, axis=axis, method="inverted_cdf")
    return low, high


def ratio_verdict(estimate: float, low: float, high: float, reference: str = "uniform") -> str:
    """The verdict on an interval ``[low, high]`` for ``R = MSE(rule)/MSE(reference)``.

    A ratio of two mean squared errors is positive, and ``R < 1`` is a gain. The verdict claims
    no more than the interval shows:

    * ``"gain shown"``: the interval lies below 1 (``high < 1``);
    * ``"worse than <reference>"``: it lies above 1 (``low > 1``);
    * ``"within the noise"``: it holds 1;
    * ``"undefined"``: the estimate is NaN, infinite or not positive (an MSE estimate at or
      below 0 is noise, and so is a ratio built on one), or an end is NaN, or ``low >= high``
      (a zero-width interval shows no spread to judge the estimate by).

    Examples
    --------
    >>> ratio_verdict(0.6, 0.5, 0.7), ratio_verdict(2.4, 1.3, 3.5), ratio_verdict(0.9, 0.7, 1.1)
    ('gain shown', 'worse than uniform', 'within the noise')
    >>> ratio_verdict(-0.28, 2.79, -3.35), ratio_verdict(float("nan"), 0.1, 0.2)
    ('undefined', 'undefined')
    >>> ratio_verdict(0.027, 0.027, 0.027)
    'undefined'
    """
    estimate, low, high = float(estimate), float(low), float(high)
    if not (math.isfinite(estimate) and estimate > 0.0) or math.isnan(low) or math.isnan(high) \
            or not low < high:
        return "undefined"
    if high < 1.0:
        return "gain shown"
    if low > 1.0:
        return f"worse than {reference}"
    return "within the noise"
