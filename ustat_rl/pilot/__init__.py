"""G* and the noise budget for a practitioner's own policy (docs/theory.md section 7).

A pilot sample of rewards and per-sample scores (:class:`Rollouts`, full or randomly projected)
gives unbiased per-prompt moments (:func:`estimate_moments`), hence the constants of the scaling
law, ``G*`` and every finite-G MSE of :mod:`ustat_rl.theory`, with intervals over prompts and
projection rows (:func:`pilot_intervals`).
"""

from .estimate import (
    SCORE_MOMENTS,
    PilotStatistics,
    estimate_constants,
    estimate_moments,
    group_moments,
    pilot_statistics,
)
from .rollouts import MIN_GROUP_SIZE, SKETCH_KINDS, Rollouts, load_rollouts
from .uncertainty import Interval, PilotIntervals, jackknife, pilot_intervals

__all__ = [
    "MIN_GROUP_SIZE",
    "SCORE_MOMENTS",
    "SKETCH_KINDS",
    "Interval",
    "PilotIntervals",
    "PilotStatistics",
    "Rollouts",
    "estimate_constants",
    "estimate_moments",
    "group_moments",
    "jackknife",
    "load_rollouts",
    "pilot_intervals",
    "pilot_statistics",
]
