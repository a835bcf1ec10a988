"""Grouped rewards without scores: what a training framework's batch or log file holds.

A framework's rollout log has, for each completion, the group it was sampled in and its reward,
but not the score ``W = grad log pi(Y | X)``. :class:`GroupedRewards` is that table. Everything
that depends on rewards alone is computed from it (:mod:`ustat_rl.frameworks.rewards_only`);
:meth:`GroupedRewards.to_rollouts` turns it into the pilot schema
(:class:`ustat_rl.pilot.Rollouts`) once per-sample scores are supplied, and says otherwise which
quantities need them (:data:`NEEDS_SCORES`).

A group is one prompt drawn once at one training step: the same prompt drawn again at another
step is another group (the policy moved in between), so :attr:`GroupedRewards.group_id` carries
the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GroupedRewards", "NEEDS_SCORES", "MIN_REWARD_GROUP", "all_equal_by_group"]

#: The smallest group with reward-only information: the Bessel variance and the all-equal event
#: need two samples.
MIN_REWARD_GROUP = 2

#: What rewards alone cannot give, with the command that gives it from scores.
NEEDS_SCORES = (
    "c1, c2, c3' and G* with intervals (ustat-rl gstar on a rollouts file with scores)",
    "the predicted gradient MSE at each G and whether GRPO beats vanilla (ustat-rl gstar)",
    "the MSE-optimal allocation and each rule's predicted MSE (ustat-rl allocate)",
)


@dataclass(frozen=True)
class GroupedRewards:
    """Per-completion rewards in groups, as read from a framework (no scores required).

    Attributes
    ----------
    group_id : ndarray (n,) of str
        The group of each completion: one prompt drawn once at one step.
    reward : ndarray (n,) of float
        The sequence reward the framework used, finite.
    step : ndarray (n,) of int, optional
        The training step of each completion (``None`` when the source has none).
    prompt : ndarray (n,) of str, optional
        The prompt text of each completion, where the source records it.
    score : ndarray (n, k), optional
        Per-completion scores (or sketched scores), when the source supplies them.
    source : str
        Where the table came from, in words (metadata).
    advantage : ndarray (n,), optional
        The advantage the trainer logged for each completion (TRL's ``advantage`` column).
    truncated, errored : ndarray (n,) of bool, optional
        Where the trainer marks them: the completion hit the length limit, or its reward
        could not be computed (read by :mod:`ustat_rl.frameworks.flat_groups`).
    """

    group_id: np.ndarray
    reward: np.ndarray
    step: np.ndarray | None = None
    prompt: np.ndarray | None = None
    score: np.ndarray | None = None
    source: str = ""
    advantage: np.ndarray | None = None
    truncated: np.ndarray | None = None
    errored: np.ndarray | None = None

    def __post_init__(self):
        ids = np.asarray(self.group_id)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"`group_id` must be a non-empty 1-D array, got shape {ids.shape}")
        ids = ids.astype(str)
        n = ids.size
        try:
            reward = np.asarray(self.reward, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError("`reward` must hold real numbers") from None
        if reward.shape != (n,):
            raise ValueError(f"`reward` must have shape ({n},) like `group_id`, got {reward.shape}")
        bad = np.flatnonzero(~np.isfinite(reward))
        if bad.size:
            row = int(bad[0])
            raise ValueError(f"`reward` must be finite; row {row} (group {str(ids[row])!r}) is "
                             f"{float(reward[row])} ({bad.size} such rows)")
        _, index, counts = np.unique(ids, return_inverse=True, return_counts=True)
        small = np.flatnonzero(counts < MIN_REWARD_GROUP)
        if small.size:
            name = str(np.unique(ids)[small[0]])
            raise ValueError(f"`group_id`: group {name!r} has {counts[small[0]]} sample; every "
                             f"group needs >= {MIN_REWARD_GROUP} (a variance, an all-equal "
                             "event), so check how the groups were rebuilt")
        step = None if self.step is None else _int_column(self.step, "step", n)
        prompt = None if self.prompt is None else _str_column(self.prompt, "prompt", n)
        score = None
        if self.score is not None:
            score = np.asarray(self.score, dtype=np.float64)
            if score.ndim != 2 or score.shape[0] != n:
                raise ValueError(f"`score` must have shape ({n}, k), got {score.shape}")
        advantage = None
        if self.advantage is not None:
            advantage = np.asarray(self.advantage, dtype=np.float64)
            if advantage.shape != (n,) or not np.all(np.isfinite(advantage)):
                raise ValueError(f"`advantage` must be {n} finite numbers, got shape "
                                 f"{advantage.shape}")
        marks = {}
        for name in ("truncated", "errored"):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value)
                if value.shape != (n,) or not (value.dtype == bool or np.all(np.isin(value, (0, 1)))):
                    raise ValueError(f"`{name}` must be {n} booleans (0 or 1), got shape "
                                     f"{value.shape}")
                value = value.astype(bool)
            marks[name] = value
        for name, value in (("group_id", ids), ("reward", reward), ("step", step),
                            ("prompt", prompt), ("score", score), ("advantage", advantage),
                            *marks.items()):
            if value is not None:
                value = value.copy() if value is getattr(self, name) else value
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        if not isinstance(self.source, str):
            raise TypeError(f"`source` must be a string, got {self.source!r}")

    @property
    def n_samples(self) -> int:
        """``n``, completions."""
        return int(self.reward.size)

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, index)``: the sorted group ids ``(P,)`` and each row's group ``(n,)``."""
        ids, index = np.unique(self.group_id, return_inverse=True)
        return ids, index.reshape(-1)

    @property
    def n_groups(self) -> int:
        """``P``, groups."""
        return int(np.unique(self.group_id).size)

    def group_sizes(self) -> np.ndarray:
        """``n_a`` per group ``(P,)``, in the order of :meth:`groups`."""
        _, index = self.groups()
        return np.bincount(index, minlength=self.n_groups)

    def group_steps(self) -> np.ndarray | None:
        """The step of each group ``(P,)`` (``None`` without steps)."""
        if self.step is None:
            return None
        _, index = self.groups()
        out = np.zeros(self.n_groups, dtype=np.int64)
        out[index] = self.step
        return out

    @property
    def binary(self) -> bool:
        """Whether every reward is 0 or 1."""
        return bool(np.all((self.reward == 0.0) | (self.reward == 1.0)))

    def select_step(self, step: int) -> "GroupedRewards":
        """The rows of one training step."""
        if self.step is None:
            raise ValueError("`step`: this table has no training steps")
        keep = self.step == int(step)
        if not np.any(keep):
            raise ValueError(f"`step` {step} is not in the table; it has steps "
                             f"{np.unique(self.step).tolist()[:10]}")
        def rows(a):
            return None if a is None else a[keep]

        return GroupedRewards(self.group_id[keep], self.reward[keep], self.step[keep],
                              rows(self.prompt), rows(self.score), self.source,
                              rows(self.advantage), rows(self.truncated), rows(self.errored))

    def to_rollouts(self, score=None, **metadata):
        """The pilot schema :class:`~ustat_rl.pilot.Rollouts` with ``score (n, k)`` rows in the
        table's order (or the table's own scores); ``metadata`` are Rollouts' other fields.

        Raises ``ValueError`` naming ``score`` and what needs it when there are none.
        """
        from ..pilot.rollouts import Rollouts

        score = self.score if score is None else score
        if score is None:
            raise ValueError("`score` is needed to build Rollouts: rewards alone cannot give "
                             + "; ".join(NEEDS_SCORES))
        return Rollouts(self.group_id, self.reward, score, **metadata)


def all_equal_by_group(index, reward, n_groups: int) -> np.ndarray:
    """Whether the rewards of each group are all equal ``(n_groups,)``: ``index`` ``(n,)`` gives
    each row's group in ``0..n_groups-1`` (a group without rows counts as all equal).

    The one test of "all-equal" for the frameworks layer: whole groups of a grouped-rewards
    table, disjoint blocks of ``G`` rows within them, and a monitor's contiguous groups.
    """
    index, reward = np.asarray(index), np.asarray(reward, dtype=np.float64)
    low = np.full(n_groups, np.inf)
    high = np.full(n_groups, -np.inf)
    np.minimum.at(low, index, reward)
    np.maximum.at(high, index, reward)
    return (low == high) | (low == np.inf)


def _int_column(value, name: str, n: int) -> np.ndarray:
    array = np.asarray(value)
    if array.shape != (n,) or array.dtype.kind not in "iu":
        raise ValueError(f"`{name}` must be {n} integers, got shape {array.shape} dtype "
                         f"{array.dtype}")
    return array.astype(np.int64)


def _str_column(value, name: str, n: int) -> np.ndarray:
    array = np.asarray(value).astype(str)
    if array.shape != (n,):
        raise ValueError(f"`{name}` must have shape ({n},), got {array.shape}")
    return array
