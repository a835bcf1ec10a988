"""One distinct weight: ``Q / w ~ chi2_K``, the closed form of ``WeightedChiSquare``.

``closed`` holds ``K/2, 2w, lgamma(K/2), log(2w), mean``; private to :mod:`._distribution`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._small_x import log1mexp

#: Closed forms below this probability are recomputed by inversion (scipy underflows near 1e-308).
_CLOSED_FLOOR = -690.0

@numba.njit(cache=True, error_model="numpy")
def closed_log_cdf_sf(x, lower_p, upper_p, closed):
    """(log cdf, log sf, ok) from scipy's regularised incomplete gammas at ``x / 2w`` (n,).

    The tail on the near side of the mean is the one taken from scipy; ``ok`` is False where it
    underflows (below exp(_CLOSED_FLOOR)) and the caller inverts numerically instead.
    """
    log_cdf = np.empty(x.size)  # (n,)
    log_sf = np.empty(x.size)
    ok = np.empty(x.size, np.bool_)
    for j in range(x.size):
        if x[j] <= closed[4]:
            log_cdf[j] = math.log(lower_p[j])
            log_sf[j] = log1mexp(log_cdf[j])
            ok[j] = log_cdf[j] > _CLOSED_FLOOR
        else:
            log_sf[j] = math.log(upper_p[j])
            log_cdf[j] = log1mexp(log_sf[j])
            ok[j] = log_sf[j] > _CLOSED_FLOOR
    return log_cdf, log_sf, ok


@numba.njit(cache=True, error_model="numpy")
def closed_log_pdf(x, closed):
    """log of the scaled chi2_K density at ``x`` >= 0 (n,): +inf, finite or -inf at 0 for K = 1,
    2, >= 3."""
    half, scale, log_gamma, log_scale = closed[0], closed[1], closed[2], closed[3]
    out = np.empty(x.size)  # (n,)
    for j in range(x.size):
        z = x[j] / scale
        if z == np.inf:
            out[j] = -np.inf
        else:
            # x / 2w is subnormal or zero for the tiniest x: take its logarithm in two parts
            log_z = math.log(z) if z > 1e-300 else math.log(x[j]) - log_scale
            power = 0.0 if half == 1.0 else (half - 1.0) * log_z
            out[j] = power - z - log_gamma - log_scale
    return out
