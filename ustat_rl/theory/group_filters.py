r"""Which groups a framework's dynamic sampling keeps, for binary rewards (beyond the paper).

docs/theory.md section 7, "Dynamic sampling (beyond the paper)", table of group filters. With binary
rewards a group of ``G`` answers is summed up by its success count ``k``, so every framework's
group filter is a function ``keep(k, G)`` for ``k = 0..G`` (a :class:`GroupFilter`). The exact
moments of the kept batch, its keep probability and its generation cost take the filter
(:mod:`ustat_rl.theory.dynamic_sampling`); the Monte Carlo of the refill loop applies the same
filter to each sampled group (:mod:`ustat_rl.montecarlo.dynamic_sampling`).

Each filter below evaluates the framework's own statistic (a standard deviation with the
framework's ``ddof`` and threshold, or the group's mean reward against a range with the
framework's strictness) on the group ``[1]*k + [0]*(G - k)``; none is written as "not all equal"
by hand, so that two frameworks agreeing is a finding, checked by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validation import as_float, as_int

__all__ = ["GroupFilter", "GROUP_FILTERS", "DEFAULT_GROUP_FILTER", "get_group_filter", "keep_mask",
           "std_group_filter", "mean_range_group_filter"]


@dataclass(frozen=True)
class GroupFilter:
    """A group filter for binary rewards: ``keep(k, G)`` for success counts ``k`` (section 7).

    Attributes
    ----------
    name : str
        Its name (a key of :data:`GROUP_FILTERS` for the built-in filters).
    keep : callable
        ``(k, G) -> bool array``: ``k`` an int array of success counts in ``0..G``.
    provenance : str
        Where the filter is read from (file and revision of the framework).
    """

    name: str
    keep: Callable[[np.ndarray, int], np.ndarray]
    provenance: str


def _group_std(k: np.ndarray, G: int, ddof: int) -> np.ndarray:
    """Standard deviation of ``[1]*k + [0]*(G - k)`` with ``ddof``: ``sqrt(k (G - k) / (G (G - ddof)))``."""
    return np.sqrt(k * (G - k) / (G * (G - ddof)))


def std_group_filter(name: str, threshold: float = 0.0, ddof: int = 0,
                  provenance: str = "") -> GroupFilter:
    """Keep a group whose reward standard deviation (``ddof``) exceeds ``threshold`` (strictly)."""
    t = as_float(threshold, "threshold", low=0.0)
    d = as_int(ddof, "ddof", 0)
    return GroupFilter(name, lambda k, G: _group_std(k, G, d) > t, provenance)


def mean_range_group_filter(name: str, low: float, high: float, provenance: str = "") -> GroupFilter:
    """Keep a group whose mean reward ``k/G`` lies strictly between ``low`` and ``high``."""
    lo, hi = as_float(low, "low"), as_float(high, "high")
    if not lo < hi:
        raise ValueError(f"`low` must be below `high`, got low={lo:g}, high={hi:g}")
    return GroupFilter(name, lambda k, G: (k / G > lo) & (k / G < hi), provenance)


#: The built-in filters, by name; ``"verl"`` is the default everywhere.
GROUP_FILTERS = {
    "verl": std_group_filter(
        "verl", 0.0, 0,
        "verl recipe/dapo/dapo_ray_trainer.py (RayDAPOTrainer.fit, algorithm.filter_groups): "
        "keeps a prompt's group when np.std of its rewards (ddof 0) is > 0"),
    "slime": std_group_filter(
        "slime", 1e-6, 1,
        "THUDM/slime @c7c9e7d slime/rollout/filter_hub/dynamic_sampling_filters.py "
        "(check_reward_nonzero_std): torch.tensor(rewards, dtype=float64).std() > 1e-6 "
        "(Bessel's ddof 1)"),
    "openrlhf": mean_range_group_filter(
        "openrlhf", 0.0, 1.0,
        "OpenRLHF/OpenRLHF @3c3be62 openrlhf/trainer/ppo_utils/samples_generator.py "
        "(_generate_vllm): keeps when min_r < avg_reward < max_r, default "
        "--algo.dynamic_filtering_range 0 1 (openrlhf/cli/train_ppo_ray.py); a dropped prompt "
        "is replaced by one new prompt"),
    "roll": mean_range_group_filter(
        "roll", 0.1, 0.95,
        "alibaba/ROLL @8eb27cc roll/utils/functionals.py (difficulty_mask): keeps when "
        "low_threshold < mean score < high_threshold, the function's defaults 0.1 and 0.95 "
        "(the config fields difficulty_low/high_threshold default to 0.0 and 1.0 in "
        "roll/pipeline/rlvr/rlvr_config.py)"),
}

#: The filter used when none is given: verl's all-equal filter.
DEFAULT_GROUP_FILTER = "verl"


def get_group_filter(group_filter=None) -> GroupFilter:
    """A :class:`GroupFilter` from a name of :data:`GROUP_FILTERS`, a filter, or ``None`` (verl's)."""
    if group_filter is None:
        return GROUP_FILTERS[DEFAULT_GROUP_FILTER]
    if isinstance(group_filter, GroupFilter):
        return group_filter
    if isinstance(group_filter, str) and group_filter in GROUP_FILTERS:
        return GROUP_FILTERS[group_filter]
    raise ValueError(f"`group_filter` must be one of {tuple(GROUP_FILTERS)} or a GroupFilter, "
                     f"got {group_filter!r}")


def keep_mask(group_filter, group_size) -> np.ndarray:
    """``keep(k, G)`` for ``k = 0..G`` as a bool array of shape ``(G + 1,)``.

    Examples
    --------
    >>> keep_mask("verl", 4).astype(int).tolist(), keep_mask("roll", 20)[[2, 3, 18, 19]].tolist()
    ([0, 1, 1, 1, 0], [False, True, True, False])
    """
    kept = get_group_filter(group_filter)
    G = as_int(group_size, "group_size", 2)
    mask = np.asarray(kept.keep(np.arange(G + 1), G))
    if mask.shape != (G + 1,):
        raise ValueError(f"group filter {kept.name!r} must return shape ({G + 1},) for k = 0..G, "
                         f"got {mask.shape}")
    return mask.astype(bool)
