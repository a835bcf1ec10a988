"""The interval routines for scaling constants and ``G*``, in one place (docs/theory.md C17-C19).

* :func:`percentile_interval`: the two-sided percentile interval of bootstrap draws, used by the
  transformer's bootstrap over prompts (:func:`ustat_rl.policies.transformer.bootstrap_constants`)
  and the sweeps' bootstrap over the argmin (:func:`ustat_rl.training.group_size.bootstrap_argmin`);
* the pilot's jackknife with Student-t quantiles is :func:`ustat_rl.pilot.uncertainty.jackknife`
  and :func:`ustat_rl.pilot.uncertainty.student_interval` (the pilot needs its two-way variance
  split, over prompts and projection rows).
"""

from __future__ import annotations

import numpy as np

__all__ = ["percentile_interval"]


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
