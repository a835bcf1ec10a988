"""G*, the noise budget and degenerate groups from verl's own batches (the ``verl`` extra).

:class:`VerlWindowMonitor` turns one verl training step, the step's ``DataProto`` and the actor's
model, into one :meth:`ustat_rl.frameworks.entry.WindowMonitor.step` call; the estimation is the
entry's. What it reads, as verl 0.9.1 names it (:data:`VERL_VERSIONS`; the padded batch of
``RayPPOTrainer.fit`` in ``verl/trainer/ppo/ray_trainer.py``, at the point where
``compute_advantage`` has run and ``update_actor`` has not):

* ``batch["prompts"]`` ``(n, p)``, left-padded, with the first ``p`` columns of
  ``batch["attention_mask"]`` as its mask; ``batch["responses"]`` ``(n, t)``, right-padded, with
  ``batch["response_mask"]``, the tokens the policy loss counts (tool-written tokens of a
  multi-turn rollout are 0 there), as the completion mask;
* ``non_tensor_batch["uid"]``, one id per prompt given before ``repeat(rollout.n,
  interleave=True)``: the groups. verl's ``balance_batch`` (on by default) then reorders the rows
  across the batch, which its advantages ignore (they group by ``uid``); the adapter puts each
  group's rows back into one contiguous block, in the order each ``uid`` first appears;
* ``batch["token_level_rewards"]``: each response's reward is its sum over tokens, read by
  :func:`ustat_rl.frameworks.verl.verl_rewards` (the sum verl's advantage estimators take).

Units: verl's policy loss aggregates per-token terms by ``actor.loss_agg_mode``
(``core_algos.agg_loss``), so each response's score is weighted as that gradient weights it at
importance ratio 1: the weights are :func:`ustat_rl.frameworks.aggregation.aggregation_weights`
of the mode (``seq-mean-token-sum-norm`` divided by ``loss_scale_factor``, default the responses'
width as verl takes it), in the entry's convention ``w_i`` (the gradient is
``-(1/n) sum_i A_i w_i W_i``), as :data:`ustat_rl.frameworks.trainer_units.AGGREGATION_MODES` says
for each mode. They are the weights of one mini-batch holding the whole step's batch (verl's
``ppo_mini_batch_size`` times ``rollout.n`` equal to the batch); verl's ``token-sum`` mode is
refused.

Where it runs: verl keeps the actor's model in Ray worker processes (FSDP or Megatron shards
under the ``ActorRolloutRefWorker``), while the trainer's loop, which holds the padded batch,
runs in the task runner. This module is the step's conversion and the entry's call; it is
tested with verl's own ``DataProto``, verl's own ``compute_grpo_outcome_advantage`` and
``agg_loss`` and a model built from a transformers config, on the CPU
(tests/frameworks/test_verl_monitor.py). Inside verl's worker it is called by
:mod:`ustat_rl.frameworks.verl_worker` from ``update_actor``; a whole verl run (GPUs, Ray
workers, a rollout engine) was not run (docs/at_scale.md, "verl").
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from .._validation import as_float
from .aggregation import AGGREGATIONS, aggregation_weights
from .generation import Generation
from .trainer_units import AGGREGATION_MODES
from .trajectory import WindowRecord
from .verl import verl_rewards

__all__ = ["VerlWindowMonitor", "verl_step_inputs", "monitor_step", "verl_rule", "VERL_VERSIONS",
           "VERL_STEP_FIELDS"]

#: The verl releases this adapter was run against (with verl's own objects, on the CPU).
VERL_VERSIONS = ("0.9.1",)

#: The ``DataProto`` fields read (``uid`` in ``non_tensor_batch``, the others in ``batch``).
VERL_STEP_FIELDS = ("prompts", "responses", "attention_mask", "response_mask",
                    "token_level_rewards", "uid")

#: verl's ``(algorithm.adv_estimator, algorithm.norm_adv_by_std_in_grpo)`` -> the registry's rule.
_RULES = {("grpo", True): "verl_grpo", ("grpo", False): "verl_grpo_nostd",
          ("grpo_vectorized", True): "verl_grpo_vectorized",
          ("rloo", True): "verl_rloo", ("rloo", False): "verl_rloo",
          ("rloo_vectorized", True): "verl_rloo_vectorized",
          ("rloo_vectorized", False): "verl_rloo_vectorized",
          ("gpg", True): "verl_gpg", ("gpg", False): "verl_gpg",
          ("grpo_passk", True): "verl_grpo_passk", ("grpo_passk", False): "verl_grpo_passk_nostd"}

#: verl's ``loss_agg_mode`` -> whether the entry's ``w_i`` is ``n`` times ``c_i``.
_PER_BATCH = {mode: per_batch for mode, per_batch in AGGREGATION_MODES.values()}


def verl_rule(adv_estimator: str, norm_adv_by_std_in_grpo: bool = True) -> tuple[str | None, str]:
    """The registry name of verl's advantage estimator, and where it was read.

    ``None`` for an estimator the registry does not hold (the paper's GRPO rule then stands in
    for the run's MSE, as the entry says).

    >>> verl_rule("grpo", False)[0], verl_rule("gae")[0]
    ('verl_grpo_nostd', None)
    """
    source = (f"verl algorithm.adv_estimator={adv_estimator!r}, "
              f"norm_adv_by_std_in_grpo={bool(norm_adv_by_std_in_grpo)}")
    return _RULES.get((str(adv_estimator), bool(norm_adv_by_std_in_grpo))), source


def _tensor(data, name: str):
    """``data``'s tensor ``name``: verl's ``DataProto`` (in ``.batch``) or a mapping of the fields
    (a ``TensorDict`` or dict, as :mod:`ustat_rl.frameworks.verl_worker` builds one)."""
    holder = getattr(data, "batch", None) if hasattr(data, "non_tensor_batch") else data
    if holder is None or not hasattr(holder, "keys"):
        raise TypeError(f"`batch` must be verl's DataProto (.batch and .non_tensor_batch) or a "
                        f"mapping of {VERL_STEP_FIELDS}, got {type(data).__name__}")
    if name not in holder.keys():
        raise ValueError(f"`batch` has no field {name!r}; the adapter reads "
                         f"{', '.join(VERL_STEP_FIELDS)}")
    return holder[name]


def _contiguous_order(uid: np.ndarray, group_size: int) -> np.ndarray:
    """Row order putting each ``uid``'s rows in one block, groups in order of first appearance
    and rows in their order within a group; refuses a group that is not ``group_size`` rows."""
    first, inverse, counts = np.unique(uid, return_index=True, return_inverse=True,
                                       return_counts=True)[1:]
    bad = np.flatnonzero(counts != group_size)
    if bad.size:
        raise ValueError(f"`batch` uid {uid[first[bad[0]]]!r} has {counts[bad[0]]} rows; every "
                         f"group must have group_size={group_size} (verl's rollout.n)")
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")  # group -> its block
    return np.argsort(rank[inverse], kind="stable")


def verl_step_inputs(batch, group_size: int, loss_agg_mode: str = "token-mean",
                     loss_scale_factor=None) -> dict:
    """The inputs of :meth:`WindowMonitor.step` for one verl ``DataProto``
    (:func:`monitor_step` hands them to the monitor).

    Parameters
    ----------
    batch : verl.DataProto or mapping
        The step's padded batch (module docstring), after ``compute_advantage``; or a mapping
        (``TensorDict``, dict) of the same fields, ``uid`` among them.
    group_size : int
        verl's ``actor_rollout_ref.rollout.n``.
    loss_agg_mode : str
        ``actor_rollout_ref.actor.loss_agg_mode``, one of
        :data:`~ustat_rl.frameworks.aggregation.AGGREGATIONS`.
    loss_scale_factor : float, optional
        ``actor.loss_scale_factor`` of ``seq-mean-token-sum-norm`` (default the responses' width).

    Returns
    -------
    dict
        ``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``completion_mask``, ``rewards``,
        ``group_ids`` and ``loss_weights``, rows with one ``uid`` contiguous.
    """
    if loss_agg_mode not in AGGREGATIONS:
        raise ValueError(f"`loss_agg_mode` must be one of {AGGREGATIONS} (verl's 'token-sum' is "
                         f"not supported), got {loss_agg_mode!r}")
    prompts, responses = _tensor(batch, "prompts"), _tensor(batch, "responses")
    attention, response_mask = _tensor(batch, "attention_mask"), _tensor(batch, "response_mask")
    n, p = prompts.shape
    if attention.ndim != 2 or attention.shape[0] != n or attention.shape[1] < p:
        raise ValueError(f"`attention_mask` must be (n, >= {p}) over prompt and response, got "
                         f"{tuple(attention.shape)}")
    grouped = verl_rewards(batch)  # checks uid, token_level_rewards and response_mask
    if tuple(response_mask.shape) != tuple(responses.shape):
        raise ValueError(f"`response_mask` must have the shape of `responses` "
                         f"{tuple(responses.shape)}, got {tuple(response_mask.shape)}")
    if n != grouped.reward.size:
        raise ValueError(f"`prompts` has {n} rows; `token_level_rewards` has "
                         f"{grouped.reward.size}")
    order = _contiguous_order(grouped.group_id, int(group_size))
    lengths = response_mask.float().sum(dim=1).cpu().numpy()
    if np.any(lengths < 1):
        raise ValueError(f"`response_mask` row {int(np.flatnonzero(lengths < 1)[0])} is all zero: "
                         "verl leaves such a response out of its loss")
    horizon = None
    if loss_agg_mode == "seq-mean-token-sum-norm":
        horizon = responses.shape[1] if loss_scale_factor is None else \
            as_float(loss_scale_factor, "loss_scale_factor", low=1.0)
    c = aggregation_weights(lengths[order], loss_agg_mode, horizon)
    index = torch.as_tensor(order, device=prompts.device)
    return dict(prompt_ids=prompts[index], prompt_mask=attention[index, :p],
                completion_ids=responses[index], completion_mask=response_mask[index],
                rewards=grouped.reward[order], group_ids=grouped.group_id[order],
                loss_weights=c * n if _PER_BATCH[loss_agg_mode] else c)


def monitor_step(monitor, model, inputs: dict, step=None) -> WindowRecord | None:
    """:meth:`WindowMonitor.step` on the rows of :func:`verl_step_inputs` (or a rank's share of
    them): the tokens, masks and group ids as a :class:`Generation`, the rewards and the loss's
    per-completion weights beside it; ``monitor`` is a :class:`WindowMonitor`."""
    generation = Generation(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"],
                            inputs["completion_mask"], group_ids=inputs["group_ids"])
    return monitor.step(model, generation, inputs["rewards"], step=step,
                        loss_weights=inputs["loss_weights"])


class VerlWindowMonitor:
    """The entry (:class:`~ustat_rl.frameworks.entry.WindowMonitor`) fed by verl's batches.

    Parameters
    ----------
    config : MonitorConfig
        The monitor's settings (:mod:`ustat_rl.frameworks.config`), ``group_size`` verl's
        ``actor_rollout_ref.rollout.n`` and the sketch's ``temperature`` verl's
        ``rollout.temperature``; the rule and the loss's weighting are read from verl's settings
        below and refused in ``config``.
    loss_agg_mode : str
        ``actor_rollout_ref.actor.loss_agg_mode`` (verl's default ``token-mean``).
    loss_scale_factor : float, optional
        ``actor.loss_scale_factor`` for ``seq-mean-token-sum-norm``.
    adv_estimator, norm_adv_by_std_in_grpo :
        verl's ``algorithm`` settings, read into the record's rule (:func:`verl_rule`). The
        records advise under the scale-free target unless ``config.estimator.advice_target``
        says otherwise: verl's actor optimiser is AdamW.
    process_group : torch.distributed.ProcessGroup, optional
        The data-parallel group (:class:`~ustat_rl.frameworks.entry.WindowMonitor`'s).

    Examples
    --------
    At the point of verl's step where the advantages are computed, with the actor's model
    unsharded in this process::

        config = MonitorConfig(config.actor_rollout_ref.rollout.n, schedule=Schedule(every=50),
                               outputs=Outputs("ustat_trajectory.jsonl"))
        monitor = VerlWindowMonitor(config)
        record = monitor.step(batch, actor_model, step=global_steps)
    """

    def __init__(self, config, *, loss_agg_mode="token-mean", loss_scale_factor=None,
                 adv_estimator="grpo", norm_adv_by_std_in_grpo=True, process_group=None):
        from .config import MonitorConfig, trainer_read
        from .entry import WindowMonitor

        if not isinstance(config, MonitorConfig):
            raise TypeError(f"`config` must be a MonitorConfig, got {type(config).__name__}")
        trainer_read(config, "verl's settings (adv_estimator, loss_agg_mode)", ("estimator", "loss"))
        if loss_agg_mode not in AGGREGATIONS:
            raise ValueError(f"`loss_agg_mode` must be one of {AGGREGATIONS} (verl's 'token-sum' "
                             f"is not supported), got {loss_agg_mode!r}")
        self.loss_agg_mode, self.loss_scale_factor = loss_agg_mode, loss_scale_factor
        rule, source = verl_rule(adv_estimator, norm_adv_by_std_in_grpo)
        outputs = config.outputs
        if outputs.name == "WindowMonitor":
            outputs = replace(outputs, name="VerlWindowMonitor")
        config = replace(config, estimator=replace(config.estimator, name=rule, source=source),
                         loss=replace(config.loss, units=f"trainer (verl loss_agg_mode "
                                                         f"{loss_agg_mode!r})"),
                         outputs=outputs)
        #: The entry every step goes through.
        self.monitor = WindowMonitor(None, config, process_group)

    @property
    def records(self) -> list[WindowRecord]:
        """Every window's record, oldest first."""
        return self.monitor.records

    def step(self, batch, model, step=None) -> WindowRecord | None:
        """One verl step: the window's record when due (:meth:`WindowMonitor.step`), else None.

        ``batch`` is the step's ``DataProto`` (module docstring), ``model`` the actor's policy at
        the parameters that sampled it.
        """
        inputs = verl_step_inputs(batch, self.monitor.group_size, self.loss_agg_mode,
                                  self.loss_scale_factor)
        return monitor_step(self.monitor, model, inputs, step)

