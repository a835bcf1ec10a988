"""Whether a measured coverage lies in a band: the verdict of a coverage study (docs/theory.md C32).

A study counts ``hits`` of ``n`` independent intervals that cover their truth. A first-order
accurate interval (a jackknife-t interval at a finite pilot) covers near, not at, its nominal
level, so the target is a band around it, :data:`COVERAGE_BAND` for nominal 90% intervals. The
measured rate passes when it is not below the band's lower end by more than ``z`` binomial
standard errors taken at that end, nor above its upper end by more than ``z`` taken there. When
the true coverage lies in the band each side fails with probability at most ``1 - Phi(z)``
(normal approximation to the binomial), and only one side can be close, so the false-failure
rate of a verdict is at most that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..tolerances import Z_ONE_SIDED

__all__ = ["COVERAGE_BAND", "CoverageVerdict", "coverage_in_band"]

#: The band of nominal 90% intervals: the target of the coverage studies and the docs
#: (docs/theory.md section 7).
COVERAGE_BAND = (0.85, 0.95)


@dataclass(frozen=True)
class CoverageVerdict:
    """A measured coverage ``rate = hits / n`` against the band's limits widened by ``z``
    binomial standard errors: ``passed`` iff ``lower_limit <= rate <= upper_limit``."""

    hits: int
    n: int
    rate: float
    lower_limit: float
    upper_limit: float

    @property
    def passed(self) -> bool:
        return self.lower_limit <= self.rate <= self.upper_limit


def coverage_in_band(hits: int, n: int, band: tuple[float, float] = COVERAGE_BAND,
                     z: float = Z_ONE_SIDED) -> CoverageVerdict:
    """The verdict on ``hits`` covering intervals of ``n``: within ``band`` up to ``z`` binomial
    standard errors on either side (each taken at its end of the band).

    Parameters
    ----------
    hits : int
        Intervals that covered, ``0 <= hits <= n``.
    n : int
        Intervals in the study, at least 1.
    band : (float, float)
        The target coverage band, ``0 < low < high < 1``.
    z : float
        Binomial standard errors allowed beyond the band, positive; the default's one-sided
        false-failure rate is ``tolerances.FALSE_FAILURE_ONE_SIDED``.
    """
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"`n` must be a whole number >= 1, got {n!r}")
    if isinstance(hits, bool) or int(hits) != hits or not 0 <= hits <= n:
        raise ValueError(f"`hits` must be a whole number in [0, n = {n}], got {hits!r}")
    low, high = (float(b) for b in band)
    if not 0.0 < low < high < 1.0:
        raise ValueError(f"`band` must be (low, high) with 0 < low < high < 1, got {band!r}")
    if not (math.isfinite(z) and z > 0.0):
        raise ValueError(f"`z` must be finite and positive, got {z!r}")
    se_low, se_high = (math.sqrt(p * (1.0 - p) / n) for p in (low, high))
    return CoverageVerdict(int(hits), int(n), hits / n, low - z * se_low, high + z * se_high)
