"""A trainer's per-step logs: TRL's ``trainer_state.json`` (docs/theory.md, "Training logs alone").

TRL's ``GRPOTrainer`` (checked against TRL 1.16.0, ``grpo_trainer.py``) appends, for every
generation batch, the batch's mean reward ``reward``, ``reward_std`` (the standard deviation of
all the batch's rewards pooled across groups, with Bessel's correction: *not* a within-group
spread), ``frac_reward_zero_std`` (the share of completions, hence of groups, whose group's
rewards have zero standard deviation, with ``scale_rewards`` "group" (the default) or "none")
and ``rewards/<name>/mean`` and ``/std`` per reward function; every ``logging_steps`` optimizer
steps it writes their averages into ``state.log_history``, which ``trainer_state.json`` holds at
each checkpoint. The run's group size ``num_generations`` is not in that file.

verl's ``compute_data_metrics`` logs the batch's ``critic/score/mean``, ``max`` and ``min``
but, as far as we could check, no share of all-equal groups, so nothing here reads verl's metric
lines: ``ustat-rl rewards`` reads its rollout dumps instead.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["LogHistory", "read_trainer_state", "check_binary", "batch_counts",
           "group_size_problem", "consistent_group_sizes", "check_group_size", "REQUIRED_KEYS",
           "BINARY_RTOL"]

#: Keys every training entry must carry.
REQUIRED_KEYS = ("step", "reward", "frac_reward_zero_std")

#: Relative tolerance of the 0/1 check on ``reward_std`` (TRL computes it in float32).
BINARY_RTOL = 1e-3

_FUNCTION_MEAN = re.compile(r"^rewards/(.+)/mean$")


@dataclass(frozen=True)
class LogHistory:
    """The training entries of a log history, in step order.

    Attributes
    ----------
    source : str
    step : ndarray of int (T,)
    reward, reward_std, all_equal, grad_norm : ndarray (T,)
        ``reward``, ``reward_std`` and ``frac_reward_zero_std`` as logged; ``grad_norm`` NaN
        where absent, ``reward_std`` too.
    reward_functions : tuple of str
        The names of the ``rewards/<name>/mean`` keys.
    logging_steps : int or None
        The trainer state's ``logging_steps`` (generation batches averaged per entry: at least 1).
    """

    source: str
    step: np.ndarray
    reward: np.ndarray
    reward_std: np.ndarray
    all_equal: np.ndarray
    grad_norm: np.ndarray
    reward_functions: tuple
    logging_steps: int | None

    @property
    def n_steps(self) -> int:
        return int(self.step.size)


def _state_file(path: Path) -> Path:
    """``path`` itself, its ``trainer_state.json`` or that of its latest ``checkpoint-N``."""
    if not path.exists():
        raise FileNotFoundError(f"`PATH` {str(path)!r} does not exist")
    if path.is_file():
        return path
    if (path / "trainer_state.json").is_file():
        return path / "trainer_state.json"
    found = [(int(m.group(1)), c) for c in path.glob("checkpoint-*/trainer_state.json")
             if (m := re.fullmatch(r"checkpoint-(\d+)", c.parent.name))]
    if not found:
        raise FileNotFoundError(f"`PATH` {str(path)!r} holds no trainer_state.json, directly or "
                                "in a checkpoint-N folder")
    return max(found)[1]


def _number(entry: dict, key: str, step, name: str) -> float:
    value = entry.get(key)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: step {step}: {key!r} must be a finite number, got {value!r}")
    return float(value)


def read_trainer_state(path) -> LogHistory:
    """The training entries of TRL's ``trainer_state.json`` (the file, an output or checkpoint
    folder).

    Entries without ``frac_reward_zero_std`` (evaluation, the final summary) are skipped; every
    kept entry needs :data:`REQUIRED_KEYS`. One-line errors name the file, the step and the key.
    """
    file = _state_file(Path(path))
    name = str(file)
    try:
        state = json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{name}: not a JSON file ({str(exc).splitlines()[0]})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{name}: no 'log_history' list (is it a trainer_state.json?)")
    entries = [e for e in history if isinstance(e, dict) and "frac_reward_zero_std" in e]
    if not entries:
        raise ValueError(f"{name}: no log entry has 'frac_reward_zero_std' (TRL's GRPOTrainer "
                         f"logs it with 'reward' at every logging step; {len(history)} entries)")
    rows, functions = [], set()
    for e in entries:
        step = e.get("step", "?")
        missing = [k for k in REQUIRED_KEYS if e.get(k) is None]
        if missing:
            raise ValueError(f"{name}: step {step}: the entry has no "
                             f"{', '.join(map(repr, missing))}")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{name}: 'step' must be an integer >= 0, got {step!r}")
        rows.append((step, *(_number(e, k, step, name) for k in
                             ("reward", "reward_std", "frac_reward_zero_std", "grad_norm"))))
        functions.update(m.group(1) for k in e if (m := _FUNCTION_MEAN.match(k)))
        if not 0.0 <= rows[-1][3] <= 1.0:
            raise ValueError(f"{name}: step {step}: 'frac_reward_zero_std' must lie in [0, 1], "
                             f"got {rows[-1][3]}")
    rows.sort(key=lambda r: r[0])
    steps = [r[0] for r in rows]
    if len(set(steps)) != len(steps):
        twice = sorted({s for s in steps if steps.count(s) > 1})
        raise ValueError(f"{name}: step {twice[0]} is logged twice (a resumed run? keep one "
                         "history)")
    columns = np.array([r[1:] for r in rows], dtype=np.float64).T
    logging = state.get("logging_steps")
    return LogHistory(name, np.array(steps, dtype=np.int64), columns[0], columns[1], columns[2],
                      columns[3], tuple(sorted(functions)),
                      logging if isinstance(logging, int) and not isinstance(logging, bool)
                      else None)


def check_binary(history: LogHistory, group_size: int | None) -> None:
    """``ValueError`` unless the logs are consistent with one 0/1 reward.

    A reward in ``[0, 1]`` with batch mean ``r`` has pooled variance at most ``r(1 - r)`` per
    sample, with equality exactly when every reward is 0 or 1; TRL's ``reward_std`` over ``n``
    rewards with Bessel's correction then satisfies ``s^2 = r(1 - r) n/(n - 1)``, and ``n >= G``
    bounds the factor by ``G/(G - 1)``. So, to :data:`BINARY_RTOL`: every ``reward`` lies in
    ``[0, 1]``, and where ``reward_std`` is logged ``1 <= s^2/(r(1 - r)) <= G/(G - 1)`` (``s = 0``
    at ``r`` in ``{0, 1}``). An entry that averages several generation batches
    (``logging_steps > 1``) can fail the lower side with 0/1 rewards (the mean of the
    standard deviations is below that of the mean); several reward functions are refused
    (their weighted sum is not a 0/1 reward).
    """
    name, tol = history.source, BINARY_RTOL
    if len(history.reward_functions) > 1:
        raise ValueError(f"{name}: the reward sums {len(history.reward_functions)} reward "
                         f"functions ({', '.join(history.reward_functions)}), not one 0/1 "
                         "reward: the all-equal fraction then says nothing about other G")
    r, s = history.reward, history.reward_std
    bad = np.flatnonzero((r < -tol) | (r > 1.0 + tol))
    if bad.size:
        i = bad[0]
        raise ValueError(f"{name}: step {history.step[i]}: the mean reward {r[i]:.6g} lies "
                         "outside [0, 1]: the rewards are not 0/1")
    top = (group_size / (group_size - 1.0)) if group_size else 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = s**2 / (r * (1.0 - r))
    inner = (r > 0.0) & (r < 1.0) & np.isfinite(s)  # float32 means of 0/1 are exact at 0 and 1
    edge = ~inner & np.isfinite(s) & (s > tol)
    low = inner & (ratio < 1.0 - tol)
    high = inner & (ratio > top * (1.0 + tol))
    for mask, why in ((edge, "is not 0 at a mean reward of 0 or 1"),
                      (high, f"is above what 0/1 rewards in groups of G give (factor {top:.4g})"),
                      (low, "is below what 0/1 rewards give: some reward lies strictly between "
                            "0 and 1 (or the entry averages several generation batches: then "
                            "pass --assume-binary if the rewards are 0/1)")):
        if np.any(mask):
            i = np.flatnonzero(mask)[0]
            raise ValueError(f"{name}: step {history.step[i]}: reward_std {s[i]:.6g} at mean "
                             f"reward {r[i]:.6g} {why}")


def batch_counts(history: LogHistory) -> tuple[np.ndarray, np.ndarray]:
    """Per entry, the rewards ``n`` of its generation batch and the successes ``k`` among them,
    read back from ``reward`` and ``reward_std`` where they pin them down; ``0`` elsewhere.

    ``k`` successes among ``n`` 0/1 rewards give the mean ``r = k/n`` and the pooled variance
    with Bessel's correction ``s^2 = k(n - k)/(n(n - 1)) = r(1 - r) n/(n - 1)``, so
    ``n = q/(q - 1)`` with ``q = s^2/(r(1 - r))`` whenever ``0 < r < 1``. An entry is read only
    when that ``n`` is a whole number, ``r n`` is one, and the pair gives back the logged
    ``s`` (to :data:`BINARY_RTOL`): an entry that averages several generation batches
    (``logging_steps > 1``), a mean reward of 0 or 1, or a batch too large for TRL's float32
    logs to resolve (a few thousand rewards) is left out (``n = 0``), never guessed.
    """
    r, s = history.reward, history.reward_std
    n = np.zeros(r.size, dtype=np.int64)
    k = np.zeros(r.size, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = s**2 / (r * (1.0 - r))
        n_hat = q / (q - 1.0)
    for i in np.flatnonzero((r > 0.0) & (r < 1.0) & np.isfinite(n_hat) & (n_hat >= 1.5)):
        n_i = int(round(n_hat[i]))
        k_i = int(round(r[i] * n_i))
        if n_i < 2 or abs(n_hat[i] - n_i) > 0.25 or abs(r[i] * n_i - k_i) > 1e-3 * max(1, k_i):
            continue
        s_i = math.sqrt(k_i * (n_i - k_i) / (n_i * (n_i - 1.0)))
        if abs(s_i - s[i]) <= BINARY_RTOL * s_i:
            n[i], k[i] = n_i, k_i
    return n, k


def _entry_problem(n: int, k: int, all_equal: float, G: int) -> str | None:
    """Why ``k`` successes among ``n`` rewards in groups of ``G`` cannot give the all-equal
    fraction ``all_equal``, or ``None``."""
    if n % G:
        return f"its {n} rewards do not split into groups of {G}"
    groups = n // G
    equal = all_equal * groups
    if abs(equal - round(equal)) > 1e-3:
        return (f"its all-equal fraction {all_equal:.6g} is not a whole number of its {groups} "
                f"groups of {G}")
    equal = int(round(equal))
    mixed = groups - equal
    # `ones` all-success groups and `mixed` groups holding between 1 and G - 1 successes each
    if not any(mixed <= k - G * ones <= mixed * (G - 1) for ones in range(equal + 1)):
        return (f"{k} successes cannot fill {mixed} mixed groups of {G} and {equal} all-equal "
                "ones")
    return None


def group_size_problem(history: LogHistory, group_size: int) -> str | None:
    """Why the logs contradict the group size ``group_size``, in one line, or ``None``.

    Each entry read by :func:`batch_counts` holds ``k`` successes among ``n`` rewards; in
    groups of ``G`` that is ``B = n/G`` groups (``G`` must divide ``n``), the logged all-equal
    fraction must be a whole number of them, and the ``B a`` all-equal groups (each all 0 or all
    ``G`` successes) and ``B (1 - a)`` mixed ones (1 to ``G - 1`` successes each) must hold
    the ``k`` successes. The first entry that fails is named.
    """
    n, k = batch_counts(history)
    for i in np.flatnonzero(n):
        why = _entry_problem(int(n[i]), int(k[i]), float(history.all_equal[i]), group_size)
        if why is not None:
            return (f"at step {history.step[i]} (mean reward {history.reward[i]:.6g}, "
                    f"reward_std {history.reward_std[i]:.6g}: {k[i]} of {n[i]} rewards 1) {why}")
    return None


def consistent_group_sizes(history: LogHistory) -> list[int]:
    """The group sizes ``G >= 2`` no entry read by :func:`batch_counts` contradicts
    (:func:`group_size_problem`); empty when no entry is read."""
    n, k = batch_counts(history)
    read = np.flatnonzero(n)
    if not read.size:
        return []
    largest = int(n[read].min())
    return [G for G in range(2, largest + 1)
            if all(_entry_problem(int(n[i]), int(k[i]), float(history.all_equal[i]), G) is None
                   for i in read)]


def check_group_size(history: LogHistory, group_size: int, name: str = "group_size") -> int:
    """The number of entries that confirm ``group_size``; ``ValueError`` naming ``name`` and
    the group sizes the logs are consistent with when they contradict it
    (:func:`group_size_problem`)."""
    why = group_size_problem(history, group_size)
    if why is None:
        return int(np.count_nonzero(batch_counts(history)[0]))
    fits = consistent_group_sizes(history)
    fit = (f"the logs are consistent with G = {', '.join(map(str, fits))}" if fits else
           "no group size fits every logged step")
    raise ValueError(f"`{name}` {group_size} contradicts the logs: {why}; {fit}")
