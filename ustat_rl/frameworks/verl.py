"""A verl batch as grouped rewards or rollouts, read by field name (verl is not imported).

verl's PPO trainer (``verl/trainer/ppo/ray_trainer.py``, ``verl-project/verl`` at commit
``1dda039b9c6311889a9c9a26040677e1254814f9``) keeps a step's rollouts in a ``DataProto`` whose
``non_tensor_batch["uid"]`` is one ``uuid4`` string per prompt, given before the batch is
repeated ``rollout.n`` times (``repeat(..., interleave=True)``), so rows with one ``uid`` are the
group of one prompt. ``batch["token_level_rewards"]`` ``(b, t)`` holds the reward of each
response token (the sequence reward on the last one, any KL penalty spread over the tokens) and
``batch["response_mask"]`` ``(b, t)`` marks the response tokens. The GRPO advantage
(``compute_grpo_outcome_advantage`` in ``verl/trainer/ppo/core_algos.py``) and the logged
``critic/rewards`` (``compute_data_metrics`` in ``verl/trainer/ppo/metric_utils.py``) both take
the sequence reward as ``token_level_rewards.sum(-1)``; :func:`verl_rewards` does the same, and
rejects a reward on a token outside the response mask, where that sum would not be the
response's reward.
"""

from __future__ import annotations

import numpy as np

from .grouped import GroupedRewards

__all__ = ["verl_rewards", "verl_rollouts", "VERL_FIELDS"]

#: The fields read, as verl names them.
VERL_FIELDS = ("uid", "token_level_rewards", "response_mask")


def _numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu().float().numpy() if value.is_floating_point() else \
            value.detach().cpu().numpy()
    return np.asarray(value)


def _field(batch, name: str):
    """``batch[name]``: a plain mapping, or a DataProto-like object (``.batch`` holds tensors,
    ``.non_tensor_batch`` the ``uid`` strings)."""
    if isinstance(batch, dict) or (hasattr(batch, "keys") and not hasattr(batch, "non_tensor_batch")):
        if name not in batch:
            raise ValueError(f"`batch` has no field {name!r}; a verl batch needs "
                             f"{', '.join(VERL_FIELDS)}")
        return batch[name]
    place = "non_tensor_batch" if name == "uid" else "batch"
    holder = getattr(batch, place, None)
    if holder is None or not hasattr(batch, "batch" if name == "uid" else "non_tensor_batch"):
        raise TypeError(f"`batch` must be a dict of {VERL_FIELDS} or have .batch and "
                        f".non_tensor_batch like verl's DataProto, got {type(batch).__name__}")
    try:
        return holder[name]
    except KeyError:
        raise ValueError(f"`batch.{place}` has no field {name!r}") from None


def verl_rewards(batch, step: int | None = None) -> GroupedRewards:
    """The grouped sequence rewards of one verl batch (module docstring).

    Parameters
    ----------
    batch : dict or DataProto-like
        ``{"uid": (b,), "token_level_rewards": (b, t), "response_mask": (b, t)}`` as numpy
        arrays or torch tensors, or an object with ``.batch`` and ``.non_tensor_batch``.
    step : int, optional
        The training step, recorded in the group ids (``"{step}:{uid}"``) and in ``step``.

    Returns
    -------
    GroupedRewards

    Examples
    --------
    >>> import numpy as np
    >>> tlr = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 1.0]])
    >>> mask = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    >>> out = verl_rewards({"uid": np.array(["a", "a", "b", "b"], dtype=object),
    ...                     "token_level_rewards": tlr, "response_mask": mask})
    >>> out.reward.tolist(), out.group_sizes().tolist()
    ([1.0, 0.0, 0.5, 1.0], [2, 2])
    """
    uid = _numpy(_field(batch, "uid"))
    rewards = _numpy(_field(batch, "token_level_rewards"))
    mask = _numpy(_field(batch, "response_mask"))
    if rewards.ndim != 2:
        raise ValueError(f"`token_level_rewards` must be (b, t), got shape {rewards.shape}")
    if mask.shape != rewards.shape:
        raise ValueError(f"`response_mask` must have the shape of `token_level_rewards` "
                         f"{rewards.shape}, got {mask.shape}")
    if uid.shape != (rewards.shape[0],):
        raise ValueError(f"`uid` must have one entry per row ({rewards.shape[0]},), got "
                         f"{uid.shape}")
    rewards = rewards.astype(np.float64)
    outside = (mask == 0) & (rewards != 0)
    if np.any(outside):
        row = int(np.flatnonzero(outside.any(axis=1))[0])
        raise ValueError(f"`token_level_rewards` row {row} has a reward outside `response_mask`, "
                         "so its sum over tokens is not the response's reward")
    reward = rewards.sum(axis=-1)  # (b,) verl's token_level_rewards.sum(-1)
    uid = uid.astype(str)
    steps = None
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"`step` must be an integer, got {step!r}")
        uid = np.char.add(f"{int(step)}:", uid)
        steps = np.full(uid.size, int(step), dtype=np.int64)
    return GroupedRewards(uid, reward, steps, source="verl batch")


def verl_rollouts(batch, score, step: int | None = None, **metadata):
    """A verl batch with per-row scores ``(b, k)`` as :class:`~ustat_rl.pilot.Rollouts`
    (``metadata``: Rollouts' other fields, e.g. ``sketch_kind``)."""
    return verl_rewards(batch, step).to_rollouts(score, **metadata)
