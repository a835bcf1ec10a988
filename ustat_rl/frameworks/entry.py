"""One entry for any training loop: G*, the noise budget and degenerate groups along a run.

:class:`WindowMonitor` is what :class:`~ustat_rl.frameworks.trl_monitor.GroupSizeMonitor` does
for TRL, without TRL: a loop calls :meth:`WindowMonitor.step` once per generation batch with
the tokens, masks and rewards it already holds, and every ``every`` steps (its
:class:`~ustat_rl.frameworks.config.MonitorConfig`) the monitor sketches
each completion's score at the current parameters (:func:`ustat_rl.scores.chunks.sketch_rows`),
pools the last ``pool`` such batches and returns the window's record
(:func:`ustat_rl.frameworks.window.window_record`), which it also appends to the trajectory
file (:mod:`ustat_rl.frameworks.trajectory`) and summarises in one line on the logger
``ustat_rl.monitor`` (the ``G`` to follow for the run's rule and target, the paper's advice
beside it, the flat groups). A window that cannot be estimated (groups not
contiguous, a NaN reward, no reward variation, a module the sketch cannot follow) is recorded
as skipped with the reason, and training goes on; bad input is refused before any work.

Under data parallelism, or FSDP2 (``fully_shard``), each process passes its own rows and
sketches them; the monitor gathers rows and scores over the process group in rank order
(:mod:`ustat_rl.frameworks.gather`): every process computes the record, rank 0 writes it.
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from collections import deque
from dataclasses import replace

import numpy as np
import torch

from .._validation import as_float, as_int
from ..scores.chunks import sketch_rows
from ..scores.coverage import uncovered_parameters
from ..scores.sequence import trainable_parameters
from ..scores.spec import SketchSpec
from .config import MonitorConfig
from .gather import gather_rows, unequal_passes, world
from .generation import Generation, checked_token_ids
from .trainer_units import NUM_ITEMS_LOSSES, completion_weights
from .trajectory import WindowRecord, append_record
from .window import (
    Batch,
    advice_line,
    batch_problem,
    observed_all_equal,
    skipped_record,
    window_record,
)

__all__ = ["WindowMonitor", "combined_rewards"]

#: Where each window's summary line goes (:func:`~ustat_rl.frameworks.window.advice_line`), at
#: level INFO, on rank 0.
LOGGER = logging.getLogger("ustat_rl.monitor")


def combined_rewards(per_function, weights) -> np.ndarray:
    """``(n,)``: the reward functions' weighted ``nansum``, NaN where every function gave NaN
    (``None``), as TRL's ``GRPOTrainer`` combines them.

    >>> combined_rewards([[1.0, float("nan")], [float("nan")] * 2], [1.0, 0.5]).tolist()
    [1.0, nan]
    """
    per_function = np.asarray(per_function, dtype=np.float64)
    out = np.nansum(per_function * np.asarray(weights, dtype=np.float64)[None, :], axis=1)
    out[np.isnan(per_function).all(axis=1)] = math.nan
    return out


def _prompt_key(ids: torch.Tensor) -> int:
    return zlib.crc32(ids.to("cpu", torch.int64).numpy().tobytes())


def _column(value, name: str, rows: int) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu", torch.float64).numpy()
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (rows,) or not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` must be {rows} finite numbers, one per completion, got "
                         f"shape {array.shape}")
    return array


class WindowMonitor:
    """Estimates ``G*`` and the noise budget along any GRPO-style training loop.

    Parameters
    ----------
    model : torch.nn.Module, optional
        The policy: announces at construction the parameters the sketch follows by its slow
        fallback (otherwise announced at the first window). :meth:`step` takes the model at
        each batch (a loop may hand it wrapped differently along the run).
    config : MonitorConfig
        The settings, checked when made (:mod:`ustat_rl.frameworks.config`): the run's
        ``group_size``, the schedule, the sketch, the advantage rule and a group filter, the loss's
        weighting, the outputs, the intervals' level and the padding token.
    process_group : torch.distributed.ProcessGroup, optional
        The data-parallel group whose rows form one batch (default: the world when
        ``torch.distributed`` is initialised, else this process alone).

    Examples
    --------
    A hand-written loop (``policy`` a causal LM; ``prompt_ids``, ``completion_ids`` ``(B G, t)``
    with their masks, ``rewards`` ``(B G,)``)::

        config = MonitorConfig(G, schedule=Schedule(every=50), sketch=SketchSpec(256),
                               estimator=EstimatorConfig("grpo"), loss=LossWeighting("dapo"),
                               outputs=Outputs("ustat_trajectory.jsonl"))
        monitor = WindowMonitor(policy, config)
        for step in range(steps):
            ...  # sample G completions per prompt, score them
            generation = Generation(prompt_ids, prompt_mask, completion_ids, completion_mask)
            record = monitor.step(policy, generation, rewards, step=step)
            if record is not None and record.ok:
                print(step, record.gstar.estimate, record.var_run.estimate)
            ...  # the loop's own advantages, loss and optimizer step

    Call :meth:`step` before the optimizer step, at the parameters that sampled the batch.
    """

    def __init__(self, model, config, process_group=None):
        if not isinstance(config, MonitorConfig):
            raise TypeError(f"`config` must be a MonitorConfig, got {type(config).__name__}")
        if config.group_size is None:
            raise ValueError("`config.group_size` must be given: G, completions per prompt")
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"`model` must be a torch.nn.Module or None, got "
                            f"{type(model).__name__}")
        #: The settings, fixed for the run.
        self.config = config
        self.process_group = process_group
        if config.outputs.save_rollouts is not None:
            config.outputs.save_rollouts.mkdir(parents=True, exist_ok=True)
        #: Every window's record, oldest first.
        self.records: list[WindowRecord] = []
        self._batches: deque = deque(maxlen=config.schedule.pool)
        self._next_step, self._next_id, self._calls, self._announced = 0, 0, 0, False
        if model is not None:
            self._announce(model, stacklevel=3)

    @property
    def group_size(self) -> int:
        """``G``."""
        return self.config.group_size

    @property
    def spec(self) -> SketchSpec:
        """The projection, fixed for the whole run."""
        return self.config.sketch

    @property
    def units(self) -> str | None:
        """The records' ``units`` note."""
        return self.config.loss.units

    @property
    def trajectory(self):
        """The trajectory file (``None``: records are kept in :attr:`records` only)."""
        return self.config.outputs.trajectory

    # ------------------------------------------------------------------ public
    def due(self, step=None) -> bool:
        """Whether :meth:`step` at ``step`` (default: the next call's count) estimates a window:
        a loop may skip preparing the inputs otherwise (and then call :meth:`step` only when due)."""
        step = self._calls if step is None else as_int(step, "step", 0)
        return step >= self._next_step

    def step(self, model, generation: Generation, rewards, *, step=None, loss_weights=None,
             num_items=None) -> WindowRecord | None:
        """Take one generation batch; the window's record when the step is due, else ``None``.

        Parameters
        ----------
        model : torch.nn.Module
            The policy, at the parameters that sampled the batch; every trainable parameter is
            sketched.
        generation : Generation
            This process's prompts and completions with their masks (and, optionally, token
            weights and group ids).
        rewards : array_like (n,) or (n, K)
            Each completion's reward, or each reward function's (NaN for none), combined with
            ``reward_weights`` as :func:`combined_rewards`.
        step : int, optional
            The loop's step (default: how many times :meth:`step` was called before).
        loss_weights : array_like (n,), optional
            Each completion's weight in the loop's gradient, when no ``loss_type`` was given.
        num_items : float, optional
            The tokens a ``dapo``-like loss divides the whole batch by (default the batch's).
        """
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"`model` must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(generation, Generation):
            raise TypeError(f"`generation` must be a Generation, got {type(generation).__name__}")
        n = generation.rows
        checked_token_ids(generation, model)
        rewards = self._checked_rewards(rewards, n)
        if loss_weights is not None:
            if self.config.loss.loss_type is not None:
                raise ValueError("`loss_weights` given with `loss_type`: pass one of them")
            loss_weights = _column(loss_weights, "loss_weights", n)
        if num_items is not None:
            num_items = as_float(num_items, "num_items", low=0.0)
        step = self._calls if step is None else as_int(step, "step", 0)
        self._calls += 1
        if not self.due(step):
            return None
        self._next_step = (step // self.config.schedule.every + 1) * self.config.schedule.every
        tokens, target, counts, keys = self.rows(generation)
        if generation.group_ids is not None:
            keys = np.asarray(generation.group_ids)
        return self._window(model, step, tokens, target, counts, keys, rewards, loss_weights,
                            num_items)

    def skip(self, reason: str, step=None) -> WindowRecord:
        """Record the window due at ``step`` as skipped, saying why (e.g. its rewards were lost)."""
        step = self._calls if step is None else as_int(step, "step", 0)
        self._calls += 1
        self._next_step = (step // self.config.schedule.every + 1) * self.config.schedule.every
        return self._skipped(step, str(reason), np.array([]))

    # ------------------------------------------------------------------ rows
    def _checked_rewards(self, rewards, n: int) -> np.ndarray:
        if isinstance(rewards, torch.Tensor):
            rewards = rewards.detach().to("cpu", torch.float64).numpy()
        rewards = np.asarray(rewards, dtype=np.float64)
        rewards = rewards[:, None] if rewards.ndim == 1 else rewards
        weights = self.config.loss.reward_weights
        K = None if weights is None else len(weights)
        if rewards.ndim != 2 or rewards.shape[0] != n or (K is not None and rewards.shape[1] != K):
            raise ValueError(f"`rewards` must be ({n},) or ({n}, {K or 'K'}) (one column per "
                             f"reward function), got shape {rewards.shape}")
        return rewards

    def rows(self, generation: Generation):
        """Unpadded prompt + completion rows, right-padded: ``(tokens, target, counts, keys)``,
        ``target`` each token's weight in the sketch, ``counts`` ``(n,)`` the loss's tokens,
        ``keys`` a hash of each row's prompt tokens."""
        completion_mask = generation.completion_mask
        token_weights = (completion_mask if generation.token_weights is None
                         else generation.token_weights)
        rows, targets, keys = [], [], []
        for p, pm, c, w in zip(generation.prompt_ids, generation.prompt_mask.bool(),
                               generation.completion_ids, token_weights.to(torch.float32)):
            prompt = p[pm]
            keys.append(_prompt_key(prompt))
            rows.append(torch.cat([prompt, c]))
            targets.append(torch.cat([torch.zeros_like(prompt, dtype=w.dtype), w]))
        width = max(r.numel() for r in rows)
        tokens = torch.full((len(rows), width), self.config.pad_token_id, dtype=rows[0].dtype,
                            device=rows[0].device)
        target = torch.zeros((len(rows), width), dtype=torch.float32, device=rows[0].device)
        for i, (r, t) in enumerate(zip(rows, targets)):
            tokens[i, :r.numel()], target[i, :t.numel()] = r, t
        counts = completion_mask.to(torch.float32).sum(dim=1).to("cpu", torch.float64).numpy()
        return tokens, target, counts, np.array(keys, dtype=np.int64)

    def scores(self, model, tokens, target) -> np.ndarray:
        """Sketched scores of this process's rows, in the parameters' own precision: a mixed
        precision context of the training step (``bf16``) is switched off for the sketch."""
        with torch.autocast(tokens.device.type, enabled=False):
            return sketch_rows(model, tokens, target, self.spec,
                               self.config.schedule.chunk_size)

    def weights(self, lengths, num_items=None) -> np.ndarray:
        """``(n, 1)``: each completion's weight in the loop's gradient from ``loss_type``
        (:mod:`ustat_rl.frameworks.trainer_units`, ``lengths`` the whole batch's loss tokens), 1
        without one. ``num_items`` is used by the losses of
        :data:`~ustat_rl.frameworks.trainer_units.NUM_ITEMS_LOSSES`."""
        loss = self.config.loss
        if loss.loss_type is None:
            return np.ones((np.size(lengths), 1))
        total = num_items if loss.loss_type in NUM_ITEMS_LOSSES else None
        return loss.ratio_factor * completion_weights(
            loss.loss_type, lengths, loss.max_completion_length, total)[:, None]

    # ------------------------------------------------------------------ windows
    def _window(self, model, step, tokens, target, counts, keys, rewards, loss_weights,
                num_items) -> WindowRecord:
        keys = gather_rows(keys, self.process_group)  # every process takes part in every gather
        lengths = gather_rows(counts, self.process_group)
        channels = gather_rows(rewards, self.process_group)
        if loss_weights is not None:
            loss_weights = gather_rows(loss_weights, self.process_group)[:, None]
        weights = self.config.loss.weights
        weights = np.ones(channels.shape[1]) if weights is None else weights
        reward = combined_rewards(channels, weights)
        reason = batch_problem(keys, reward, self.group_size) or unequal_passes(
            model, tokens.shape[0], self.config.schedule.chunk_size, self.process_group)
        if reason is not None:
            return self._skipped(step, reason, reward)
        self._announce(model, stacklevel=4)
        try:
            scale = self.weights(lengths, num_items) if loss_weights is None else loss_weights
            score = gather_rows(self.scores(model, tokens, target), self.process_group) * scale
            batch = Batch(step, self.group_size, reward, score, self._next_id, channels)
            batches = (list(self._batches) + [batch])[-self.config.schedule.pool:]
            config = self.config
            if loss_weights is not None and self.units is None:
                config = replace(config, loss=replace(
                    config.loss, units="trainer (per-completion loss weights given by the loop)"))
            record, rollouts = window_record(batches, self._meta(model), reward.size, config)
        except Exception as exc:  # a window that fails must not stop the run
            return self._skipped(step, f"{type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0] if str(exc) else ''}", reward)
        self._batches.append(batch)
        self._next_id += batch.n_groups
        return self._emit(record, rollouts)

    def _skipped(self, step, reason: str, reward) -> WindowRecord:
        G, budget = self.group_size, reward.size
        seen = observed_all_equal(reward, G) if budget and budget % G == 0 else math.nan
        record = skipped_record(step, reason, self.config, max(budget, 2), observed=seen)
        warnings.warn(f"{self.config.outputs.name} skipped the window at step {step}: {reason}", stacklevel=4)
        return self._emit(record, None)

    def _announce(self, model, stacklevel: int) -> None:
        if self._announced:
            return
        self._announced = True
        fallback = uncovered_parameters(model)
        if fallback:
            warnings.warn(f"{self.config.outputs.name}: parameters {fallback[:3]} ({len(fallback)} in all) "
                          f"are sketched by the exact per-sample fallback, one extra forward and "
                          f"backward of their module per completion", stacklevel=stacklevel)

    def _meta(self, model) -> dict:
        name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        return dict(self.spec.to_meta("factored"), model_name=str(name),
                    param_dim=int(sum(p.numel() for p in trainable_parameters(model).values())))

    def _emit(self, record: WindowRecord, rollouts) -> WindowRecord:
        self.records.append(record)
        if world(self.process_group)[0] == 0:
            LOGGER.info("%s: %s", self.config.outputs.name, advice_line(record))
            if self.trajectory is not None:
                append_record(self.trajectory, record)
            folder = self.config.outputs.save_rollouts
            if rollouts is not None and folder is not None:
                rollouts.save(folder / f"window_{record.step:06d}.npz")
        return record
