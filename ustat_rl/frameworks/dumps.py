"""Rollout logs written by verl and TRL, read into :class:`~ustat_rl.frameworks.GroupedRewards`.

verl's rollout dump
    ``RayPPOTrainer._log_rollout_data`` and ``_write_generations``
    (``verl/trainer/ppo/ray_trainer.py``, ``verl-project/verl`` at commit
    ``1dda039b9c6311889a9c9a26040677e1254814f9``) write, when ``trainer.rollout_data_dir`` is
    set, one file ``{global_steps}.jsonl`` per step with one JSON object per response: ``input``
    (the decoded prompt), ``output``, ``gts``, ``score`` (``token_level_scores.sum(-1)``: the
    reward function's score, before any KL penalty applied in the reward), ``step``, and every
    ``reward_extra_info`` list of the right length. The group ``uid`` is not written (unless a
    reward function returns it as extra info), and the rows are in the order of the batch after
    ``_balance_batch``, which reorders responses across the batch; so groups are rebuilt from
    the prompt text within a step, not from contiguity.
TRL's completion log
    ``GRPOTrainer.log`` (``trl/trainer/grpo_trainer.py``, trl 1.16.0) writes, when
    ``log_completions`` is on, ``completions/completions_{global_step:05d}.parquet`` with columns
    ``step``, ``prompt`` (a string, or a conversation of messages), ``completion``, one column per
    reward function (its name; the function's output before weighting, NaN where it returned
    ``None``), the columns of ``log_extra``, and ``advantage``. The rows are the last generation
    batch in generation order, each prompt's ``num_generations`` completions contiguous (the
    trainer reshapes rewards to ``(-1, num_generations)``). The trainer's reward is
    ``nansum_k w_k r_k`` over the reward functions with ``reward_weights`` ``w`` (default all 1),
    NaN when every function returned ``None``; :func:`read_trl_completions` combines the columns
    the same way. The log is not cleared between calls, so when a generation batch serves several
    optimiser steps (``num_iterations > 1``, or ``steps_per_generation`` above the gradient
    accumulation steps) consecutive files repeat it under new step numbers; a file whose rows
    equal the previous file's in every column but ``step`` is skipped, and the table's
    ``source`` says how many were.

A prompt drawn twice in one step has twice the rows under one text. Given ``group_size`` (verl's
``rollout.n``, TRL's ``num_generations``), such a run of ``k G`` rows is split into ``k`` groups in
file order: the draws of one prompt under one policy are exchangeable, so every reward-only
statistic has the distribution it would have under the trainer's own split. Without
``group_size`` it stays one group of ``k G``. The same prompt at two steps is always two groups.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .grouped import GroupedRewards

__all__ = ["read_verl_dump", "read_trl_completions", "read_rewards", "rebuild_groups",
           "FORMATS", "TRL_FIXED_COLUMNS"]

#: Formats :func:`read_rewards` accepts.
FORMATS = ("auto", "verl-jsonl", "trl-parquet", "npz", "rollouts-parquet")

#: Columns of TRL's completion log that are not reward functions.
TRL_FIXED_COLUMNS = ("step", "prompt", "completion", "advantage")


def rebuild_groups(step: np.ndarray, key: np.ndarray, group_size: int | None,
                   contiguous: bool) -> np.ndarray:
    """Group ids ``(n,)`` ``"{step}:{j}"`` from each row's step and prompt key (module docstring).

    ``contiguous``: a group is a run of equal keys within a step (TRL), else all rows with one
    key in a step (verl). With ``group_size`` ``G``, a group of ``k G`` rows becomes ``k`` groups
    in row order; any other size is a ``ValueError`` naming ``group_size``.
    """
    n = key.size
    if contiguous:
        new = np.ones(n, dtype=bool)
        new[1:] = (key[1:] != key[:-1]) | (step[1:] != step[:-1])
        run = np.cumsum(new) - 1  # (n,) run index
    else:
        _, run = np.unique(np.char.add(np.char.add(step.astype(str), "\x00"), key),
                           return_inverse=True)
        run = run.reshape(-1)
    rank = np.zeros(n, dtype=np.int64)  # position of each row within its run, in row order
    seen: dict[int, int] = {}
    for i, r in enumerate(run.tolist()):
        rank[i] = seen.get(r, 0)
        seen[r] = rank[i] + 1
    sizes = np.bincount(run)
    block = np.zeros(n, dtype=np.int64)
    if group_size is not None:
        bad = np.flatnonzero(sizes % group_size)
        if bad.size:
            row = int(np.flatnonzero(run == bad[0])[0])
            raise ValueError(f"`group_size` {group_size}: the prompt of row {row} (step "
                             f"{step[row]}) has {sizes[bad[0]]} completions, not a multiple of "
                             f"{group_size}")
        block = rank // group_size
    labels = np.char.add(np.char.add(run.astype(str), "/"), block.astype(str))
    _, first = np.unique(labels, return_index=True)
    order = np.empty(first.size, dtype=np.int64)  # groups numbered by first row, per step
    order[np.argsort(first)] = np.arange(first.size)
    _, which = np.unique(labels, return_inverse=True)
    return np.char.add(np.char.add(step.astype(str), ":"), order[which.reshape(-1)].astype(str))


def _check_group_size(group_size):
    if group_size is None:
        return None
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) \
            or group_size < 2:
        raise ValueError(f"`group_size` must be an integer >= 2, got {group_size!r}")
    return int(group_size)


def _files(path, pattern: str, name: str) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob(pattern))
        if not files:
            raise FileNotFoundError(f"`{name}`: folder {str(path)!r} has no {pattern} files")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"`{name}` {str(path)!r} does not exist")
    return [path]


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError("Parquet logs need pyarrow: pip install 'ustat-rl[parquet]'") from None


def _as_text(value) -> str:
    """A prompt as a hashable string: text as is, a conversation as canonical JSON."""
    if isinstance(value, str):
        return value

    def plain(v):
        if isinstance(v, np.ndarray):
            return [plain(x) for x in v.tolist()]
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return v

    return json.dumps(plain(value), sort_keys=True, default=str)


def read_verl_dump(path, reward_key: str = "score", group_size: int | None = None,
                   name: str = "path") -> GroupedRewards:
    """verl rollout dumps (a ``{step}.jsonl`` file or a folder of them) as grouped rewards.

    Parameters
    ----------
    path : path-like
        One dump file, or ``trainer.rollout_data_dir`` (every ``*.jsonl`` in it).
    reward_key : str
        The field holding the reward (verl's ``score``, or a ``reward_extra_info`` key).
    group_size : int, optional
        verl's ``rollout.n``; splits a prompt drawn twice in a step (module docstring).
    name : str
        The parameter named in errors.

    Returns
    -------
    GroupedRewards
        Groups keyed by the ``uid`` field where the dump has one, else by ``input``.
    """
    group_size = _check_group_size(group_size)
    steps, keys, rewards, prompts = [], [], [], []
    for file in _files(path, "*.jsonl", name):
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"`{name}` {file.name}, line {number}: not JSON ({exc.msg})") \
                    from None
            where = f"`{name}` {file.name}, line {number}"
            if not isinstance(record, dict) or "input" not in record:
                raise ValueError(f"{where}: not a verl dump record (no 'input' field)")
            if reward_key not in record:
                raise ValueError(f"{where}: no reward field {reward_key!r} (`reward_key`); "
                                 f"fields {sorted(record)}")
            step = record.get("step", file.stem)
            try:
                steps.append(int(step))
            except (TypeError, ValueError):
                raise ValueError(f"{where}: step {step!r} is not an integer") from None
            value = record[reward_key]
            rewards.append(np.nan if value is None else value)
            prompts.append(_as_text(record["input"]))
            keys.append(_as_text(record["uid"]) if "uid" in record else prompts[-1])
    if not rewards:
        raise ValueError(f"`{name}` {str(path)!r} holds no records")
    try:
        reward = np.asarray(rewards, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}`: field {reward_key!r} (`reward_key`) must be a number in "
                         "every record") from None
    step = np.asarray(steps, dtype=np.int64)
    ids = rebuild_groups(step, np.asarray(keys), group_size, contiguous=False)
    return GroupedRewards(ids, reward, step, np.asarray(prompts), source="verl rollout dump")


def read_trl_completions(path, reward_columns=None, reward_weights=None,
                         group_size: int | None = None, name: str = "path") -> GroupedRewards:
    """TRL ``completions_{step}.parquet`` logs (a file or the ``completions`` folder).

    Parameters
    ----------
    path : path-like
    reward_columns : sequence of str, optional
        The reward functions' columns; by default every numeric column other than
        :data:`TRL_FIXED_COLUMNS` (name them when ``log_extra`` added numeric columns).
    reward_weights : sequence of float, optional
        TRL's ``reward_weights``, one per column (default all 1).
    group_size : int, optional
        TRL's ``num_generations``; splits a prompt drawn twice in a row (module docstring).
    name : str
        The parameter named in errors.
    """
    import pandas as pd

    _require_pyarrow()
    group_size = _check_group_size(group_size)
    frames, repeats = [], 0
    for file in _files(path, "completions_*.parquet", name):
        frame = pd.read_parquet(file)
        missing = [c for c in ("step", "prompt") if c not in frame.columns]
        if missing:
            raise ValueError(f"`{name}` {file.name} has no column {missing[0]!r}; TRL's "
                             f"completion log has {', '.join(TRL_FIXED_COLUMNS)} and one column "
                             "per reward function")
        if frames and _same_rows(frames[-1], frame):
            repeats += 1  # the trainer logged one generation batch again (module docstring)
            continue
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    if reward_columns is None:
        reward_columns = [c for c in frame.columns if c not in TRL_FIXED_COLUMNS
                          and pd.api.types.is_numeric_dtype(frame[c])]
        if not reward_columns:
            raise ValueError(f"`{name}`: no numeric reward column besides "
                             f"{TRL_FIXED_COLUMNS}; name them with `reward_columns`")
    reward_columns = list(reward_columns)
    absent = [c for c in reward_columns if c not in frame.columns]
    if absent:
        raise ValueError(f"`reward_columns`: {absent[0]!r} is not a column of {str(path)!r} "
                         f"(columns {list(frame.columns)})")
    weights = np.ones(len(reward_columns)) if reward_weights is None else \
        np.asarray(reward_weights, dtype=np.float64)
    if weights.shape != (len(reward_columns),) or not np.all(np.isfinite(weights)):
        raise ValueError(f"`reward_weights` must be {len(reward_columns)} finite numbers, one per "
                         f"reward column {reward_columns}, got {reward_weights!r}")
    per_func = frame[reward_columns].to_numpy(dtype=np.float64)  # (n, K), NaN for None
    unscorable = np.all(np.isnan(per_func), axis=1)
    if np.any(unscorable):
        row = int(np.flatnonzero(unscorable)[0])
        raise ValueError(f"`reward_columns`: row {row} (step {frame['step'].iloc[row]}) has no "
                         f"reward from any of {reward_columns} (TRL's unscorable completion, "
                         f"{int(unscorable.sum())} such rows); drop those rows first")
    reward = np.nansum(per_func * weights[None, :], axis=1)  # TRL's weighted nansum
    step = frame["step"].to_numpy().astype(np.int64)
    prompts = np.asarray([_as_text(p) for p in frame["prompt"]])
    ids = rebuild_groups(step, prompts, group_size, contiguous=True)
    logged = frame["advantage"].to_numpy(dtype=np.float64) if "advantage" in frame else None
    source = "TRL completion log" + (f" ({repeats} repeated file(s) skipped)" if repeats else "")
    return GroupedRewards(ids, reward, step, prompts, source=source, advantage=logged)


def _same_rows(before, after) -> bool:
    """Whether two logs hold the same completions (all columns but ``step``)."""
    if before.shape != after.shape or list(before.columns) != list(after.columns):
        return False
    rest = [c for c in before.columns if c != "step"]
    return all(before[c].astype(str).tolist() == after[c].astype(str).tolist() for c in rest)


def _read_arrays(path, name: str) -> GroupedRewards:
    """A rewards table of the rollouts schema's names (``prompt_id``, ``reward``, optional
    ``score``, ``step``, and the trainer's marks ``truncated`` and ``errored``) from ``.npz`` or
    ``.parquet``."""
    path = Path(path)
    if path.suffix == ".npz":
        from ..pilot.rollouts import read_npz

        arrays = read_npz(path, name)
    else:
        _require_pyarrow()
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        arrays = {}
        for column in table.column_names:
            values = table.column(column).combine_chunks()
            if column == "score":
                k = getattr(values.type, "list_size", None)
                flat = values.flatten().to_numpy(zero_copy_only=False)
                arrays[column] = flat.reshape(-1, k) if k else None
            else:
                arrays[column] = values.to_numpy(zero_copy_only=False)
    for field in ("prompt_id", "reward"):
        if field not in arrays:
            raise ValueError(f"`{name}` {str(path)!r} has no field {field!r}; a rewards file "
                             "needs prompt_id and reward")
    return GroupedRewards(arrays["prompt_id"], arrays["reward"], arrays.get("step"),
                          score=arrays.get("score"), source=f"rewards file {path.suffix}",
                          truncated=arrays.get("truncated"), errored=arrays.get("errored"))


def detect_format(path) -> str:
    """The format of ``path`` from its suffix or a folder's contents (one of :data:`FORMATS`)."""
    path = Path(path)
    if path.is_dir():
        if any(path.glob("completions_*.parquet")):
            return "trl-parquet"
        if any(path.glob("*.jsonl")):
            return "verl-jsonl"
        raise ValueError(f"`FILE`: folder {str(path)!r} has neither verl dumps (*.jsonl) nor "
                         "TRL logs (completions_*.parquet)")
    if path.suffix == ".jsonl":
        return "verl-jsonl"
    if path.suffix == ".npz":
        return "npz"
    if path.suffix == ".parquet":
        _require_pyarrow()
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        return "rollouts-parquet" if "prompt_id" in names else "trl-parquet"
    raise ValueError(f"`FILE` {str(path)!r}: unknown format; give --format (one of "
                     f"{', '.join(FORMATS[1:])})")


def read_rewards(path, format: str = "auto", group_size: int | None = None,
                 reward_key: str = "score", reward_columns=None, reward_weights=None,
                 name: str = "FILE") -> GroupedRewards:
    """Any supported log as :class:`GroupedRewards` (``format`` one of :data:`FORMATS`)."""
    if format not in FORMATS:
        raise ValueError(f"`format` must be one of {FORMATS}, got {format!r}")
    if not Path(path).exists():
        raise FileNotFoundError(f"`{name}` {str(path)!r} does not exist")
    if format == "auto":
        format = detect_format(path)
    if format == "verl-jsonl":
        return read_verl_dump(path, reward_key, group_size, name)
    if format == "trl-parquet":
        return read_trl_completions(path, reward_columns, reward_weights, group_size, name)
    return _read_arrays(path, name)
