"""The monitor's settings, in one frozen object checked when it is made (as a trainer's config).

A :class:`MonitorConfig` says everything a :class:`~ustat_rl.frameworks.entry.WindowMonitor`
needs besides the model and the process group, grouped by concern:

* :class:`Schedule`: when a window is estimated (``every``), how many generation batches it
  pools (``pool``) and how many completions go through one sketched backward pass
  (``chunk_size``);
* a :class:`~ustat_rl.scores.spec.SketchSpec`: the projection, fixed for the run;
* :class:`EstimatorConfig`: the run's advantage rule (a registry name), where it was read,
  and a dynamic-sampling group filter;
* :class:`LossWeighting`: how the run's gradient weighs each completion's score (the loss
  aggregation, the reward functions' weights) and the records' ``units`` note;
* :class:`Outputs`: the trajectory file, the rollouts folder and the name warnings carry;
* the run's ``group_size``, the intervals' ``level`` and the rows' ``pad_token_id``.

Each object checks its own fields when made and refuses, in one line naming the field, what the
monitor could not use; the TRL and verl adapters build one from the trainer's own settings
(:class:`~ustat_rl.frameworks.trl_monitor.GroupSizeMonitor`,
:class:`~ustat_rl.frameworks.verl_monitor.VerlWindowMonitor`).

Examples
--------
>>> config = MonitorConfig(8, schedule=Schedule(every=50), sketch=SketchSpec(256),
...                        estimator=EstimatorConfig("grpo"), loss=LossWeighting("dapo"))
>>> config.schedule.every, config.sketch.blocks, config.estimator.source
(50, 16, 'given by the caller')
>>> MonitorConfig(8, level=1.0)
Traceback (most recent call last):
...
ValueError: `level` must be in [0.5, 1), got 1.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._paths import check_output
from .._validation import as_float, as_instance, as_int
from ..scores.spec import SketchSpec
from .trainer_units import LOSS_WEIGHTS, ratio_one_factor, units_note

__all__ = ["MonitorConfig", "Schedule", "EstimatorConfig", "LossWeighting", "Outputs", "trainer_read"]

#: The sketch a monitor takes unless told otherwise: ``k = 256`` columns in 16 blocks.
DEFAULT_SKETCH = SketchSpec(256)


def _set(obj, **values) -> None:
    for name, value in values.items():
        object.__setattr__(obj, name, value)




@dataclass(frozen=True)
class Schedule:
    """When windows are estimated and how they are computed.

    Parameters
    ----------
    every : int
        Estimate at the first step at or after every ``every``-th (the first step included).
    pool : int
        Generation batches pooled into one window (the newest last).
    chunk_size : int
        Completions per sketched backward pass.
    """

    every: int = 50
    pool: int = 4
    chunk_size: int = 16

    def __post_init__(self):
        _set(self, every=as_int(self.every, "every", 1), pool=as_int(self.pool, "pool", 1),
             chunk_size=as_int(self.chunk_size, "chunk_size", 1))


@dataclass(frozen=True)
class EstimatorConfig:
    """The run's advantage rule (its estimator) and a dynamic-sampling group filter.

    Parameters
    ----------
    name : str, optional
        The loop's advantage rule, a registry name (single- or multi-reward); ``None`` when it is
        none of them (the paper's GRPO rule stands in for the run's MSE).
    source : str, optional
        Where ``name`` was read, in words, for the record's ``estimator_source`` (default
        ``"given by the caller"``).
    group_filter : str or GroupFilter, optional
        A dynamic-sampling group filter (``verl``, ``slime``, ``openrlhf``, ``roll``; beyond the
        paper): the records' ``ds_*`` figures under it
        (:func:`~ustat_rl.frameworks.window.window_record`); stored as the checked filter.
    advice_target : {"scale_free", "mse"}, optional
        The advice the records say to follow (:data:`~ustat_rl.theory.group_size.ADVICE_TARGETS`;
        docs/theory.md, "What a step's progress depends on"): ``"scale_free"`` for an optimiser
        that removes the gradient's scale (Adam), ``"mse"`` for a step of fixed size (SGD).
        ``None``: read from the trainer by an adapter that can (TRL's ``optim``), else
        ``"scale_free"``, an Adam-type optimiser.
    """

    name: str | None = None
    source: str | None = None
    group_filter: object = None
    advice_target: str | None = None

    def __post_init__(self):
        from ..advantages import get_rule
        from ..advantages.multichannel import MULTI_CHANNEL_RULES
        from ..theory.group_size import check_advice_target
        from .window import optional_group_filter

        if self.name is not None and self.name not in MULTI_CHANNEL_RULES:
            get_rule(self.name, "estimator")
        if self.advice_target is not None:
            check_advice_target(self.advice_target, "advice_target")
        _set(self, source="given by the caller" if self.source is None else str(self.source),
             group_filter=optional_group_filter(self.group_filter))


@dataclass(frozen=True)
class LossWeighting:
    """How the run's gradient weighs each completion's score.

    Parameters
    ----------
    loss_type : str, optional
        The loss aggregation, a key of :data:`~ustat_rl.frameworks.trainer_units.LOSS_WEIGHTS`
        (TRL's ``loss_type`` names): each completion's score is weighted as that loss's gradient
        weights it. ``None``: pass ``loss_weights`` to
        :meth:`~ustat_rl.frameworks.entry.WindowMonitor.step`, or the paper's units.
    max_completion_length : int, optional
        The length ``loss_type="dr_grpo"`` needs.
    epsilon_high : float
        The upper clip (``cispo``'s factor at ratio 1).
    reward_weights : array_like (K,), optional
        Weights of the ``K`` reward functions (default all 1); stored as a tuple.
    units : str, optional
        The record's ``units`` note (default: from ``loss_type``).
    """

    loss_type: str | None = None
    max_completion_length: int | None = None
    epsilon_high: float = 0.2
    reward_weights: tuple | None = None
    units: str | None = None

    def __post_init__(self):
        if self.loss_type is not None and self.loss_type not in LOSS_WEIGHTS:
            raise ValueError(f"`loss_type` must be one of {sorted(LOSS_WEIGHTS)} or None, got "
                             f"{self.loss_type!r}")
        if LOSS_WEIGHTS.get(self.loss_type) == "max_length":
            as_int(self.max_completion_length, "max_completion_length", 1)
        weights = self.reward_weights
        if weights is not None:
            array = np.asarray(weights, dtype=np.float64)
            if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
                raise ValueError("`reward_weights` must be a 1-D array of finite numbers, one "
                                 "per reward function")
            weights = tuple(float(w) for w in array)
        units = self.units
        if units is None and self.loss_type is not None:
            units = units_note(self.loss_type)
        _set(self, reward_weights=weights, units=units,
             epsilon_high=as_float(self.epsilon_high, "epsilon_high"))

    @property
    def ratio_factor(self) -> float:
        """The loss's factor at importance ratio 1 (1 without a ``loss_type``)."""
        return 1.0 if self.loss_type is None else ratio_one_factor(self.loss_type,
                                                                   self.epsilon_high)

    @property
    def weights(self) -> np.ndarray | None:
        """``reward_weights`` as an array ``(K,)``, ``None`` when not given."""
        return None if self.reward_weights is None else np.array(self.reward_weights)


@dataclass(frozen=True)
class Outputs:
    """Where the records go.

    Parameters
    ----------
    trajectory : path-like, optional
        The trajectory file, appended to by rank 0; ``None``: records are kept in the monitor's
        ``records`` only.
    save_rollouts : path-like, optional
        A folder for each window's pooled rollouts (``window_<step>.npz``, ``ustat-rl gstar``).
    name : str
        The monitor's name in its warnings.
    """

    trajectory: Path | None = None
    save_rollouts: Path | None = None
    name: str = "WindowMonitor"

    def __post_init__(self):
        trajectory = None if self.trajectory is None else Path(self.trajectory)
        check_output(trajectory, "trajectory")
        rollouts = None if self.save_rollouts is None else Path(self.save_rollouts)
        check_output(rollouts, "save_rollouts", kind="folder")
        _set(self, trajectory=trajectory, save_rollouts=rollouts, name=str(self.name))


@dataclass(frozen=True)
class MonitorConfig:
    """Everything a :class:`~ustat_rl.frameworks.entry.WindowMonitor` is set up with.

    Parameters
    ----------
    group_size : int, optional
        ``G``, completions per prompt (``num_generations``); each group's rows are contiguous.
        ``None`` only in a config handed to an adapter, which reads it from the trainer.
    schedule : Schedule
    sketch : SketchSpec
        The projection, fixed for the run (default ``SketchSpec(256)``); its ``temperature`` is
        the policy's sampling temperature.
    estimator : EstimatorConfig
    loss : LossWeighting
    outputs : Outputs
    level : float
        Two-sided interval level, in ``[0.5, 1)``.
    pad_token_id : int
        The token padding the prompt and completion rows.
    """

    group_size: int | None = None
    schedule: Schedule = field(default_factory=Schedule)
    sketch: SketchSpec = DEFAULT_SKETCH
    estimator: EstimatorConfig = field(default_factory=EstimatorConfig)
    loss: LossWeighting = field(default_factory=LossWeighting)
    outputs: Outputs = field(default_factory=Outputs)
    level: float = 0.9
    pad_token_id: int = 0

    def __post_init__(self):
        if self.group_size is not None:
            _set(self, group_size=as_int(self.group_size, "group_size", 1))
        level = as_float(self.level, "level", low=0.5)
        if not level < 1.0:
            raise ValueError(f"`level` must be in [0.5, 1), got {self.level!r}")
        for name, cls in (("schedule", Schedule), ("sketch", SketchSpec), ("estimator", EstimatorConfig),
                          ("loss", LossWeighting), ("outputs", Outputs)):
            as_instance(getattr(self, name), cls, name)
        _set(self, level=level, pad_token_id=as_int(self.pad_token_id, "pad_token_id", 0))


#: What an adapter may read from a trainer instead of the config, and how a config leaves it.
_TRAINER_FIELDS = {
    "group_size": lambda c: c.group_size is None,
    "estimator": lambda c: c.estimator.name is None
    and c.estimator.source == EstimatorConfig().source,
    "loss": lambda c: c.loss == LossWeighting(),
    "sketch.temperature": lambda c: c.sketch.temperature == 1.0,
    "pad_token_id": lambda c: c.pad_token_id == 0,
}


def trainer_read(config: MonitorConfig, source: str, fields=tuple(_TRAINER_FIELDS)) -> None:
    """Refuse a ``config`` that sets what an adapter reads from the trainer (``fields``, keys of
    the table above), in one line naming the field and ``source``: what the trainer says stays
    read from the trainer."""
    for name in fields:
        if not _TRAINER_FIELDS[name](config):
            raise ValueError(f"`config.{name}` is read from {source}; leave it at its default")
