"""The reward-variance filter at a budget, from a pilot: the kept batch's bias, MSE and keep rate.

``ustat-rl gstar PILOT --budget N --group-filter reward_variance_top_p --group-filter-param 0.9``. At each
``G`` of the budget's grid (``B = N/G`` groups a step, before filtering), the pilot's moments
(:func:`~ustat_rl.pilot.estimate.estimate_moments`, made binary by
:func:`~ustat_rl.theory.advantage.binary_projection`) go into the exact kept-batch moments of
:func:`~ustat_rl.theory.variance_filter.variance_filtered_moments`: point estimates with no
interval, biased as every plug-in of ``p^G`` is. A ``G`` whose batch has more level-count vectors
than :data:`MAX_REPORTED` is left out, and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..formatting import json_ready
from ..theory.advantage import binary_projection
from ..theory.group_size import budget_grid
from ..theory.variance_filter import get_variance_filter, variance_filtered_moments
from .estimate import estimate_moments, pilot_statistics
from .report import check_degenerate
from .rollouts import Rollouts

__all__ = ["MAX_REPORTED", "VarianceFilterReport", "pilot_variance_filter"]

#: Level-count vectors enumerated per ``G`` at most (about a second each).
MAX_REPORTED = 100_000


@dataclass(frozen=True)
class VarianceFilterReport:
    """The filter at each ``G`` of a budget (lists aligned with ``group_sizes``; ``None`` where
    the ``G`` was left out).

    Attributes
    ----------
    budget : int
    filter : dict
        The :class:`~ustat_rl.theory.variance_filter.VarianceFilter`'s fields.
    estimator : str
    group_sizes, batch_sizes : list of int
    keep_rate, mean_factor, bias_sq, mse, unfiltered_mse : list
        ``E[kept]/B``, ``<E g_F, g>/||g||^2``, ``||E g_F - g||^2``, the MSE against ``g`` and
        the same rule's MSE on all ``B`` groups (point estimates: the last three may fall
        below 0 on a small pilot).
    grad_norm_sq : float
        ``||g||^2`` at the pilot's moments.
    left_out : list of int
        The ``G`` not enumerated (too many level-count vectors).
    """

    budget: int
    filter: dict
    estimator: str
    group_sizes: list
    batch_sizes: list
    keep_rate: list
    mean_factor: list
    bias_sq: list
    mse: list
    unfiltered_mse: list
    left_out: list
    grad_norm_sq: float

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


def pilot_variance_filter(rollouts: Rollouts, budget, group_filter, param=None,
                          estimator: str = "grpo") -> VarianceFilterReport:
    """The reward-variance filter's kept batch at each ``G`` of ``budget``, from a pilot with
    scores and binary rewards (module docstring)."""
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a Rollouts, got {type(rollouts).__name__}")
    spec = get_variance_filter(group_filter, param)
    grid = budget_grid(budget)
    reward = np.asarray(rollouts.reward, dtype=np.float64)
    binary = (reward == 0.0) | (reward == 1.0)
    if not np.all(binary):
        raise ValueError("the reward-variance filter's exact kept batch needs binary rewards "
                         f"(0 or 1) in the pilot; got the reward {reward[~binary][0]:g}")
    check_degenerate(rollouts)
    moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
    g_sq = float(moments.grad_norm_sq)
    cols = {key: [] for key in ("keep_rate", "mean_factor", "bias_sq", "mse", "unfiltered_mse")}
    left_out = []
    for G in grid.group_sizes.tolist():
        B = grid.budget // G
        if math.comb(B + G // 2, G // 2) > MAX_REPORTED:
            left_out.append(G)
            for col in cols.values():
                col.append(None)
            continue
        row = variance_filtered_moments(moments, estimator, G, B, spec)
        cols["keep_rate"].append(row.keep_rate)
        cols["mean_factor"].append(row.mean_factor)
        cols["bias_sq"].append(row.bias_sq)
        cols["mse"].append(row.mse)
        cols["unfiltered_mse"].append(row.unfiltered_mse)
    return VarianceFilterReport(grid.budget, {k: v for k, v in asdict(spec).items()}, estimator,
                                grid.group_sizes.tolist(),
                                (grid.budget // grid.group_sizes).tolist(), **cols,
                                left_out=left_out, grad_norm_sq=g_sq)
