"""The verl adapter attached inside verl's actor worker (the ``verl`` extra; verl 0.9.1).

Where verl 0.9.1 holds what the estimate needs (``verl/workers/engine_workers.py`` and
``verl/workers/engine/fsdp/transformer_impl.py``): the actor's model lives in the Ray worker
processes of ``ActorRolloutRefWorker``, as ``worker.actor.engine.module`` (``worker.actor`` a
``TrainingWorker``, ``engine`` its ``FSDPEngine``; the module wrapped by FSDP1 under
``actor.strategy=fsdp``, sharded in place by ``fully_shard`` under ``fsdp2``), with the
data-parallel group ``engine.get_data_parallel_group()``. Each step the trainer calls the
worker's ``update_actor(data)``, dispatched over the data-parallel ranks: each rank receives a
contiguous share of the step's rows as a ``TensorDict``. In the legacy trainer
(``trainer.use_v1=false``, ``RayPPOTrainer._update_actor``) that share is the step's
``DataProto.to_tensordict()`` after ``left_right_2_no_padding``: ``input_ids`` becomes a nested
tensor, while ``prompts``, ``responses``, ``attention_mask``, ``response_mask``,
``token_level_rewards`` and ``uid`` stay as the padded batch held them
(:data:`~ustat_rl.frameworks.verl_monitor.VERL_STEP_FIELDS`).

:func:`monitored_worker` makes a subclass of the worker whose ``update_actor`` first estimates
the window, when due, then runs verl's own ``update_actor`` unchanged. On every rank, it gathers
the step's rows from the data-parallel ranks (``balance_batch`` spreads each group over them),
puts each group's rows into one block (:func:`~ustat_rl.frameworks.verl_monitor.verl_step_inputs`,
the weights of the whole step's batch), gives rank ``r`` of ``W`` the groups
``[r m / W, (r + 1) m / W)`` of the ``m`` (:func:`rank_share`), and calls the entry
(:class:`~ustat_rl.frameworks.entry.WindowMonitor`) with the data-parallel group and the
engine's module, so the entry's gather puts the groups back in order. The sketch follows a
``fully_shard`` model (``actor.strategy=fsdp2``), whose ranks must then sketch the same number
of chunks (``m`` a multiple of ``W`` is enough); other strategies are refused in one line.
:func:`verl_task_runner` is the class to pass to verl's ``run_ppo(config, task_runner_class=...)``:
it installs that worker in the trainer's worker mapping (the legacy runner's
``add_actor_rollout_worker``; the v1 runner through a trainer registered with
``register_trainer`` inside the runner's process).

A record's ``step`` counts the worker's ``update_actor`` calls from 0 (verl's ``global_steps``
minus 1 in a run not resumed). The batch the v1 trainer hands the worker (from its
TransferQueue) was not checked to hold the padded fields; a window whose fields are missing or
nested is recorded as skipped, with the reason, and training goes on.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import torch

from .gather import world
from .verl_monitor import VERL_STEP_FIELDS, VerlWindowMonitor, monitor_step, verl_step_inputs

__all__ = ["monitored_worker", "verl_task_runner", "worker_rows", "gathered_rows", "rank_share"]

#: The actor strategy the hook sketches (``actor_rollout_ref.actor.strategy``).
SUPPORTED_STRATEGY = "fsdp2"

#: The worker attributes the hook reads, as verl 0.9.1 names them.
WORKER_ATTRIBUTES = ("config", "actor")
ENGINE_ATTRIBUTES = ("module", "get_data_parallel_group", "train_mode")


def _verl(what: str):
    try:
        if what == "worker":
            from verl.workers.engine_workers import ActorRolloutRefWorker
            return ActorRolloutRefWorker
        import verl.trainer.main_ppo as v1
        import verl.trainer.main_ppo_v0 as v0
        return v0, v1
    except ImportError as exc:
        why = str(exc).splitlines()[0] if str(exc) else f"no module {exc.name!r}"
        raise ImportError(f"the verl hook needs verl (the `verl` extra: pip install "
                          f"'ustat-rl[verl]') and its worker's imports: {why}") from None


def worker_rows(data) -> dict:
    """This rank's rows of ``update_actor``'s ``TensorDict`` as numpy arrays: ``prompts``,
    ``prompt_mask`` (the prompt columns of ``attention_mask``), ``responses``, ``response_mask``,
    ``token_level_rewards`` and ``uid``; a missing or unpadded (nested) field is refused."""
    keys = set(data.keys())
    for name in VERL_STEP_FIELDS:
        if name not in keys:
            raise ValueError(f"update_actor's batch has no field {name!r}; the hook reads "
                             f"{', '.join(VERL_STEP_FIELDS)}")
    out = {"uid": np.asarray(list(data["uid"]), dtype=object)}
    for name in ("prompts", "attention_mask", "responses", "response_mask", "token_level_rewards"):
        value = data[name]
        if getattr(value, "is_nested", False) or value.ndim != 2:
            raise ValueError(f"update_actor's field {name!r} is not a padded (rows, width) tensor")
        out[name] = value.detach().cpu().numpy()
    out["prompt_mask"] = out.pop("attention_mask")[:, :out["prompts"].shape[1]]
    return out


def _pad(part: np.ndarray, width: int, left: bool) -> np.ndarray:
    extra = np.zeros((part.shape[0], width - part.shape[1]), dtype=part.dtype)
    return np.concatenate([extra, part] if left else [part, extra], axis=1)


def gathered_rows(rows: dict, group=None) -> dict:
    """Every data-parallel rank's :func:`worker_rows`, in rank order, as one batch a mapping of
    :data:`VERL_STEP_FIELDS` (prompts left-padded, responses right-padded to common widths)."""
    size = world(group)[1]
    parts = [rows]
    if size > 1:
        parts = [None] * size
        torch.distributed.all_gather_object(parts, rows, group=group)
    p = max(part["prompts"].shape[1] for part in parts)
    t = max(part["responses"].shape[1] for part in parts)
    out = {"uid": np.concatenate([part["uid"] for part in parts])}
    for name, width, left in (("prompts", p, True), ("prompt_mask", p, True),
                              ("responses", t, False), ("response_mask", t, False),
                              ("token_level_rewards", t, False)):
        out[name] = np.concatenate([_pad(part[name], width, left) for part in parts])
    tensors = {name: torch.as_tensor(out[name]) for name in out if name != "uid"}
    tensors["attention_mask"] = torch.cat([tensors.pop("prompt_mask"), tensors["response_mask"]],
                                          dim=1)
    return dict(tensors, uid=out["uid"])


def rank_share(inputs: dict, group_size: int, group=None) -> dict:
    """Rank ``r`` of ``W``'s whole groups of the step's inputs (groups in contiguous blocks, as
    :func:`~ustat_rl.frameworks.verl_monitor.verl_step_inputs` returns them): the groups
    ``[r m / W, (r + 1) m / W)`` of the ``m``, so concatenating the shares in rank order gives
    the inputs back."""
    rank, size = world(group)
    groups = len(inputs["rewards"]) // int(group_size)
    lo, hi = (rank * groups // size) * group_size, ((rank + 1) * groups // size) * group_size
    return {name: value[lo:hi] for name, value in inputs.items()}


def _window(worker, data):
    """The hook: the window's record when due (else None), before verl's update runs."""
    engine = worker.actor.engine
    if getattr(worker, "_ustat_monitor", None) is None:
        strategy = worker.config.actor.strategy
        if strategy != SUPPORTED_STRATEGY:
            raise ValueError(f"the monitored verl worker sketches actor.strategy="
                             f"{SUPPORTED_STRATEGY!r} (fully_shard); got {strategy!r}")
        group = engine.get_data_parallel_group() if torch.distributed.is_initialized() else None
        settings = dict(worker._ustat_settings)
        config = settings.pop("config")
        config = replace(config, group_size=int(worker.config.rollout.n), sketch=replace(
            config.sketch, temperature=float(worker.config.rollout.temperature)))
        worker._ustat_monitor = VerlWindowMonitor(
            config, loss_agg_mode=str(worker.config.actor.loss_agg_mode),
            loss_scale_factor=worker.config.actor.get("loss_scale_factor", None),
            process_group=group, **settings)
        worker._ustat_calls = 0
    verl_monitor, step = worker._ustat_monitor, worker._ustat_calls
    monitor = verl_monitor.monitor
    worker._ustat_calls += 1
    if not monitor.due(step):
        return None
    group = monitor.process_group
    # every share has the same fields and every rank gathers the same rows: one branch for all
    try:
        rows = gathered_rows(worker_rows(data), group)
        inputs = verl_step_inputs(rows, monitor.group_size, verl_monitor.loss_agg_mode,
                                  verl_monitor.loss_scale_factor)
    except ValueError as exc:
        return monitor.skip(str(exc), step=step)
    groups = len(inputs["rewards"]) // monitor.group_size  # the gathers take numbers, not uids
    inputs["group_ids"] = np.repeat(np.arange(groups), monitor.group_size)
    share = rank_share(inputs, monitor.group_size, group)
    with engine.train_mode():
        return monitor_step(monitor, engine.module, share, step)


def monitored_worker(base=None, config=None, *, adv_estimator="grpo",
                     norm_adv_by_std_in_grpo=True) -> type:
    """A subclass of verl's actor worker whose ``update_actor`` estimates the window first.

    Parameters
    ----------
    base : type, optional
        The worker class (default verl's ``ActorRolloutRefWorker``).
    config : MonitorConfig, optional
        The monitor's settings (:mod:`ustat_rl.frameworks.config`; default ``MonitorConfig()``):
        the schedule, the sketch, the level, the outputs. ``group_size`` (``rollout.n``), the
        sketch's ``temperature`` (``rollout.temperature``), the loss's weighting
        (``actor.loss_agg_mode``, ``loss_scale_factor``) and the process group are read from
        the worker, the rule from the two settings below, and refused in ``config``.
    adv_estimator, norm_adv_by_std_in_grpo :
        verl's ``algorithm`` settings (the worker's config holds ``actor_rollout_ref`` only).

    The records are in the worker's ``_ustat_monitor.records`` and, on rank 0, in the config's
    trajectory.
    """
    from .config import MonitorConfig, trainer_read

    base = _verl("worker") if base is None else base
    if not isinstance(base, type) or not callable(getattr(base, "update_actor", None)):
        raise TypeError(f"`base` must be a verl worker class with update_actor, got {base!r}")
    config = MonitorConfig() if config is None else config
    if not isinstance(config, MonitorConfig):
        raise TypeError(f"`config` must be a MonitorConfig or None, got {type(config).__name__}")
    # bad settings are refused here, not in the Ray workers
    trainer_read(config, "the verl worker's config",
                 ("group_size", "estimator", "loss", "sketch.temperature"))
    settings = dict(config=config, adv_estimator=adv_estimator,
                    norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)
    original = base.update_actor

    @functools.wraps(original)  # keeps verl's dispatch attributes, which the worker group reads
    def update_actor(self, data):
        _window(self, data)
        return original(self, data)

    return type(f"Monitored{base.__name__}", (base,),
                {"update_actor": update_actor, "_ustat_settings": settings,
                 "_ustat_monitor": None, "__module__": __name__})


_ACTOR_ROLES = ("Actor", "ActorRollout", "ActorRolloutRef")


def _ray():
    try:
        import ray
    except ImportError:
        raise ModuleNotFoundError("the verl hook needs the optional package 'ray' (installed "
                                  "with verl), which is not installed: pip install "
                                  "'ustat-rl[verl]'", name="ray") from None
    return ray


def _swap_workers(mapping: dict, settings: dict) -> None:
    ray = _ray()

    for role in list(mapping):
        if getattr(role, "name", None) in _ACTOR_ROLES:
            base = getattr(mapping[role], "__ray_actor_class__", mapping[role])
            mapping[role] = ray.remote(monitored_worker(base, **settings))


def verl_task_runner(use_v1: bool = True, config=None, *, adv_estimator="grpo",
                     norm_adv_by_std_in_grpo=True):
    """The task runner to pass to verl's ``run_ppo(config, task_runner_class=...)``, with the
    actor worker replaced by :func:`monitored_worker` ``(base, config, adv_estimator=...,
    norm_adv_by_std_in_grpo=...)``; ``use_v1`` as verl's config's ``trainer.use_v1``."""
    ray = _ray()

    settings = dict(config=config, adv_estimator=adv_estimator,
                    norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)
    monitored_worker(_verl("worker"), **settings)  # refuses bad settings here
    v0, v1 = _verl("runners")
    if not use_v1:
        class LegacyRunner(v0.TaskRunner.__ray_actor_class__):
            def add_actor_rollout_worker(self, config):
                _, group_cls = super().add_actor_rollout_worker(config)
                _swap_workers(self.role_worker_mapping, settings)
                role = next(r for r in self.role_worker_mapping if r.name in _ACTOR_ROLES)
                return self.role_worker_mapping[role].__ray_actor_class__, group_cls
        return ray.remote(LegacyRunner)

    class Runner(v1.TaskRunnerV1.__ray_actor_class__):
        def run(self, config):
            from omegaconf import open_dict
            from verl.trainer.ppo.v1 import get_trainer_cls, register_trainer
            from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

            mode = config.trainer.v1.trainer_mode
            name = f"ustat_monitored_{mode}"
            if name not in TRAINER_REGISTRY:
                class Monitored(get_trainer_cls(mode)):
                    def _init_resource_pool_mgr(self):
                        super()._init_resource_pool_mgr()
                        _swap_workers(self.role_worker_mapping, settings)
                register_trainer(name)(Monitored)
            with open_dict(config):
                config.trainer.v1.trainer_mode = name
            return super().run(config)
    return ray.remote(Runner)
