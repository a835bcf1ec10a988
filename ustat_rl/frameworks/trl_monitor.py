"""G*, the noise budget and degenerate groups from inside a live TRL GRPO run (C17, C18, C32).

One line attaches it::

    trainer.add_callback(GroupSizeMonitor(trainer))

(or ``GroupSizeMonitor(trainer, MonitorConfig(schedule=Schedule(every=50),
sketch=SketchSpec(256)))``, :mod:`ustat_rl.frameworks.config`).

Every ``every`` training steps the monitor takes the generation batch the trainer has just
produced (TRL ``GRPOTrainer``, the releases of
:data:`~ustat_rl.frameworks.trl_support.TRL_VERSIONS`: prompts, completions and the rewards as
the trainer combined its reward functions), computes the factored sketch of each completion's
score at the parameters that sampled it (:func:`ustat_rl.scores.factored.factored_sketch_scores`,
dropout off), pools the last ``pool`` such batches and estimates ``c1``, ``c2``, ``c3'``, ``G*`` with
intervals, the predicted gradient MSE at the run's ``G`` and at ``G*``, whether GRPO beats
vanilla at the run's ``G``, and the predicted against the observed fraction of all-equal groups
(:mod:`ustat_rl.frameworks.window`). The run's advantage rule is read from the trainer's config
(``scale_rewards``, ``multi_objective_aggregation``) and looked up in the registry
(``trl_group``, ``trl_batch``, ``trl_none``; with several reward functions the multi-reward
rules ``trl_sum_then_normalize*`` and ``trl_normalize_then_sum``, whose advantages need each
function's reward). The MSE and variance at the run's ``G`` are the run rule's, estimated without
a moment model and so unbiased for every rule, TRL's default ``scale_rewards="group"`` included
(:func:`ustat_rl.frameworks.window.window_noise`, docs/theory.md section 8). The advice is the
run rule's too, under the target the trainer's optimiser pays for (:func:`_optimizer_target`:
scale-free under AdamW, TRL's default), with the paper's GRPO advice beside it
(:func:`ustat_rl.frameworks.window.window_record`).

Where it hooks in (TRL's public surfaces wherever they carry what a window needs): the
monitor is a ``transformers`` callback, TRL's documented extension point, and the computation
is :class:`ustat_rl.frameworks.entry.WindowMonitor`'s, the entry any loop can call; this class
only extracts its inputs. Each reward function's rewards come through the trainer's public
``reward_funcs`` list: every function is wrapped (an ``nn.Module`` reward model gets a forward
hook) and called through unchanged, so the monitor sees what it returns for this process's
completions, and gathers it over the processes as TRL does. The prompt token ids and the loss's
masks reach no public surface (reward functions get the prompts as text, and the mask that the
loss counts, the tool mask, the importance-sampling ratio and ``num_items_in_batch`` are built
after the rewards), so the monitor wraps one private method of this one trainer instance,
``_generate_and_score_completions`` (this process's prompt and completion tokens and masks),
and refuses, in one line, a trainer without it. The window's figures are also appended to the
trainer's private ``_metrics`` when it has one (TRL's own logging of averaged metrics).
Nothing of the training computation is altered.

Precision: the sketch's projections run in the parameters' precision (float32), but a model
forward that the trainer runs under mixed precision (``bf16=True``, TRL's default) stays in
bf16, so the scores carry bf16's rounding, as the trainer's own gradients do (about 1% per
entry on the test model, far below the estimates' sampling error).

Tokens: each completion is sketched over exactly the tokens TRL's loss counts
(``GRPOTrainer._compute_loss``), which are also the token counts its ``loss_type`` divides by:
``completion_mask`` (0 after the end token, and on a whole completion cut at
``max_completion_length`` when ``mask_truncated_completions`` is on) times ``tool_mask`` where
the batch has one (0 on the tokens a tool wrote, or a ``rollout_func``'s ``env_mask``); under
vLLM the loss's per-token importance-sampling ratio (``importance_sampling_ratio``, truncated
or masked) weighs each token's score as it weighs the loss. At the parameters that sampled the
batch the off-policy sequence mask keeps every sequence without vLLM (its KL is 0); the
high-entropy token mask (``top_entropy_quantile < 1``), drawn in the loss from each
micro-batch's entropies, and the off-policy mask under vLLM are refused when the monitor is
made.

Units: the estimates are of the gradient the trainer computes. TRL aggregates each completion's
per-token loss by ``loss_type`` (``dapo`` by default: divided by the batch's tokens), so the
monitor weighs each completion's sketched score as the trainer's gradient does
(:mod:`ustat_rl.frameworks.trainer_units`) before estimating; the record's ``units`` says which
aggregation and how exactly the finite-G formulas apply to it, and ``var_run`` is the variance
of the run's gradient over fresh batches, what the trainer's gradient noise is, with an interval.

Results go to the trainer's own metrics (``ustat/...``, averaged over the logging interval and
written by every logger TRL supports) and, one record per window, to a trajectory file
(:mod:`ustat_rl.frameworks.trajectory`; ``ustat-rl gstar --trajectory FILE`` reads it). A window
that cannot be estimated (groups not contiguous, a NaN reward, no reward variation, a module
the sketch cannot follow) is recorded as skipped with the reason; training goes on.

Models: every trainable parameter is sketched exactly, whatever the family
(:mod:`ustat_rl.scores.coverage`): full fine-tuning of Qwen2/Qwen3, Llama, Mistral, Gemma2,
Phi3 and GPT-2, a PEFT adapter (``peft_config``: the scores are with respect to the adapter's
parameters, the ones the trainer updates), gradient checkpointing (the sketch runs in eval mode,
where Hugging Face layers do not checkpoint, so a window's memory is that of one plain
forward and backward of ``chunk_size`` completions), and data parallelism. FSDP, which shards
the parameters, is refused when the monitor is made.
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from .config import LossWeighting, MonitorConfig, trainer_read
from .entry import WindowMonitor
from .generation import Generation
from .trainer_units import LOSS_WEIGHTS, units_note
from .trajectory import RecordInterval, WindowRecord
from .trl_support import TRL_VERSIONS, check_loss_masks, check_trl_version

__all__ = ["GroupSizeMonitor", "run_rule", "LOGGED"]

#: Record fields written to the trainer's metrics, as ``ustat/<field>``.
LOGGED = ("gstar", "c1", "c2", "c3", "mse_run", "var_run", "mse_gstar", "grpo_beats_vanilla",
          "ds_keep_prob", "ds_gen_batches", "ds_filtered_mse", "all_equal_predicted",
          "all_equal_observed", "recommended_group_size", "critical_rollouts_run",
          "critical_inter_run", "critical_intra_run", "critical_rollouts_gstar",
          "advised_group_size", "run_rule_advice_mse", "run_rule_advice_scale_free",
          "flat_expected_run", "flat_expected_advised")

_SCALE_RULES = {"group": "trl_group", True: "trl_group", "batch": "trl_batch",
                "none": "trl_none", False: "trl_none"}
#: The default order with several reward functions: the weighted sum through the same rule.
_SUM_RULES = {"trl_group": "trl_sum_then_normalize", "trl_batch": "trl_sum_then_normalize_batch",
              "trl_none": "trl_sum_then_normalize_none"}


def run_rule(args, n_functions: int = 1) -> tuple[str | None, str]:
    """The registry name of a TRL ``GRPOConfig``'s advantage rule, and where it was read.

    With several reward functions the rule is a multi-reward rule
    (:mod:`ustat_rl.advantages.multichannel`): ``trl_normalize_then_sum`` for
    ``multi_objective_aggregation="normalize_then_sum"`` (which does not read
    ``scale_rewards``), ``trl_sum_then_normalize`` (``_batch``, ``_none``) for the default
    order. ``None`` when the configuration names neither.
    """
    aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")
    scale = getattr(args, "scale_rewards", "group")
    source = f"GRPOConfig(scale_rewards={scale!r}, multi_objective_aggregation={aggregation!r})"
    several = f", {n_functions} reward functions"
    if aggregation == "normalize_then_sum":
        return "trl_normalize_then_sum", source + several + " (scale_rewards is not read)"
    if aggregation != "sum_then_normalize" or scale not in _SCALE_RULES:
        return None, source + ": not a rule of the registry; MSEs are the paper's GRPO rule's"
    if n_functions >= 2:
        return _SUM_RULES[_SCALE_RULES[scale]], source + several
    return _SCALE_RULES[scale], source


def _optimizer_target(args) -> str:
    """The advice target a ``GRPOConfig``'s optimiser (``optim``) pays for (docs/theory.md,
    "What a step's progress depends on"): ``"mse"`` for a step of fixed size (an ``sgd``
    optimiser, ``lomo``), ``"scale_free"`` for one that removes the gradient's scale (AdamW,
    TRL's default, and the other adaptive optimisers)."""
    optim = getattr(args, "optim", "adamw_torch")
    name = str(getattr(optim, "value", optim)).lower()
    return "mse" if "sgd" in name or name == "lomo" else "scale_free"


def _is_async(func) -> bool:
    """Whether calling ``func`` returns a coroutine (a function, a partial, a callable object)."""
    while isinstance(func, functools.partial):
        func = func.func
    call = None if inspect.isroutine(func) else type(func).__call__
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)


class GroupSizeMonitor(TrainerCallback):
    """A TRL callback that estimates ``G*`` and the noise budget along a GRPO run.

    Parameters
    ----------
    trainer : trl.GRPOTrainer
        The trainer to monitor (a TRL of
        :data:`~ustat_rl.frameworks.trl_support.TRL_VERSIONS`).
    config : MonitorConfig, optional
        The monitor's own settings (:mod:`ustat_rl.frameworks.config`): the schedule, the
        sketch (``SketchSpec(256)`` by default), the level, a group filter (``verl``, ``slime``,
        ``openrlhf``, ``roll``; beyond the paper) and the outputs (the trajectory defaults to
        ``<output_dir>/ustat_trajectory.jsonl``). What the trainer says is read from the trainer
        and refused in ``config``: the group size (``num_generations``), the advantage rule
        (:func:`run_rule`), the loss's weighting (``loss_type``, the reward weights,
        ``max_completion_length``, ``epsilon_high``), the sampling temperature and the padding
        token.
    """

    def __init__(self, trainer, config=None):
        import trl

        check_trl_version(getattr(trl, "__version__", "unknown"))
        for name in ("_generate_and_score_completions", "reward_funcs", "reward_weights",
                     "num_generations", "accelerator", "args", "state"):
            if not hasattr(trainer, name):
                raise TypeError(f"`trainer` must be a trl GRPOTrainer (trl{TRL_VERSIONS}); it "
                                f"has no `{name}`")
        config = MonitorConfig() if config is None else config
        if not isinstance(config, MonitorConfig):
            raise TypeError(f"`config` must be a MonitorConfig or None, got "
                            f"{type(config).__name__}")
        trainer_read(config, "the trainer's GRPOConfig")
        self.trainer = trainer
        args = trainer.args
        rule, source = run_rule(args, len(trainer.reward_funcs))
        # the trainer's gradient weighs each completion's score by its loss aggregation
        self.loss_type = str(getattr(args, "loss_type", "dapo"))
        high = getattr(args, "epsilon_high", None)
        if getattr(trainer, "is_fsdp_enabled", False):
            raise ValueError("`trainer`: FSDP shards the parameters; GroupSizeMonitor supports "
                             "data parallelism, not TRL's FSDP (untested: accelerate runs no FSDP "
                             "on the CPU); WindowMonitor supports FSDP2's fully_shard")
        check_loss_masks(args)
        known = self.loss_type in LOSS_WEIGHTS
        outputs = config.outputs
        trajectory = Path(args.output_dir) / "ustat_trajectory.jsonl" \
            if outputs.trajectory is None else outputs.trajectory
        config = replace(
            config, group_size=int(trainer.num_generations),
            sketch=replace(config.sketch,
                           temperature=float(getattr(args, "temperature", 1.0) or 1.0)),
            estimator=replace(config.estimator, name=rule, source=source,
                              advice_target=config.estimator.advice_target
                              or _optimizer_target(args)),
            loss=LossWeighting(
                loss_type=self.loss_type if known else None,
                max_completion_length=getattr(args, "max_completion_length", None),
                epsilon_high=getattr(args, "epsilon", 0.2) if high is None else high,
                reward_weights=trainer.reward_weights.to("cpu", torch.float64).numpy(),
                units=units_note(self.loss_type)),
            outputs=replace(outputs, trajectory=trajectory, name="GroupSizeMonitor"),
            pad_token_id=int(getattr(trainer, "pad_token_id", None) or 0))
        #: The framework-agnostic monitor this callback feeds.
        self.window = WindowMonitor(self._model(), config)
        self._rewards: list = [None] * len(trainer.reward_funcs)
        self._wrap_rewards(trainer)
        self._wrap_generation(trainer)

    @property
    def estimator(self) -> str | None:
        """The run's advantage rule, a registry name (:func:`run_rule`)."""
        return self.window.config.estimator.name

    @property
    def estimator_source(self) -> str:
        """Where :attr:`estimator` was read, in words."""
        return self.window.config.estimator.source

    # ------------------------------------------------------------------ the entry's state
    @property
    def spec(self):
        """The projection (:class:`~ustat_rl.scores.spec.SketchSpec`), fixed for the run."""
        return self.window.spec

    @property
    def records(self) -> list[WindowRecord]:
        """Every window's record, oldest first."""
        return self.window.records

    @property
    def trajectory(self):
        """The trajectory file the windows are appended to."""
        return self.window.trajectory

    @property
    def units(self) -> str:
        """The records' ``units``: which gradient the estimates are of."""
        return self.window.units

    def _meta(self) -> dict:
        return self.window._meta(self._model())

    @property
    def _batches(self):
        return self.window._batches

    # ------------------------------------------------------------------ hooks
    def _model(self):
        return self.trainer.accelerator.unwrap_model(self.trainer.model)

    def _keep(self, index: int, values) -> None:
        """This process's rewards from reward function ``index``, ``None`` read as NaN, in the
        trainer's float32."""
        try:
            values = [math.nan if v is None else float(v) for v in values]
            self._rewards[index] = torch.tensor(values, dtype=torch.float32).double().numpy()
        except Exception:  # the window is then skipped; the trainer reports its own error
            self._rewards[index] = None

    def _wrap_rewards(self, trainer) -> None:
        """Wrap each of the trainer's public ``reward_funcs`` to keep what it returns (a new
        list: the caller's own list of functions is left as it is)."""
        funcs = list(trainer.reward_funcs)
        for i, func in enumerate(funcs):
            if isinstance(func, torch.nn.Module):  # a reward model: its first logit per row
                func.register_forward_hook(
                    lambda module, args, out, i=i: self._keep(i, out.logits[:, 0].tolist()))
                continue
            if _is_async(func):
                async def wrapped(*args, _func=func, _i=i, **kwargs):
                    out = await _func(*args, **kwargs)
                    self._keep(_i, out)
                    return out
            else:
                def wrapped(*args, _func=func, _i=i, **kwargs):
                    out = _func(*args, **kwargs)
                    self._keep(_i, out)
                    return out
            functools.update_wrapper(wrapped, func)
            funcs[i] = wrapped
        trainer.reward_funcs = funcs

    def _wrap_generation(self, trainer) -> None:
        generate = trainer._generate_and_score_completions

        def generate_and_score(*args, **kwargs):
            self._rewards = [None] * len(self._rewards)
            out = generate(*args, **kwargs)
            if self._model().training:
                self._window(out)
            return out

        trainer._generate_and_score_completions = generate_and_score

    def _loss_mask(self, out) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mask, weight)``, both ``(n, T)`` over the completion tokens: ``mask`` the tokens
        TRL's loss counts, ``completion_mask`` times ``tool_mask`` when the batch has one (its
        row sums are the token counts the loss divides by); ``weight`` the mask times the
        importance-sampling ratio when the loss applies one (vLLM; module docstring)."""
        mask = out["completion_mask"]
        if out.get("tool_mask") is not None:
            mask = mask * out["tool_mask"]
        mask = mask.to(torch.float32)
        ratio = out.get("importance_sampling_ratio")
        if ratio is None or self.loss_type == "vespo":  # vespo folds the ratio into its weights
            return mask, mask
        return mask, mask * ratio.to(torch.float32)  # (n, T) or (n, 1) ratio

    @staticmethod
    def _generation(out, mask, weight) -> Generation:
        """A TRL generation batch as the entry takes it, the loss's mask and token weights
        (:meth:`_loss_mask`) in place of ``completion_mask``."""
        return Generation(out["prompt_ids"], out["prompt_mask"], out["completion_ids"], mask,
                          token_weights=weight.expand_as(mask))

    def _tokens(self, out):
        """The entry's rows of a generation batch: ``(tokens, target, counts, keys)``."""
        mask, weight = self._loss_mask(out)
        return self.window.rows(self._generation(out, mask, weight))

    def _scores(self, tokens, target) -> np.ndarray:
        return self.window.scores(self._model(), tokens, target)

    def _weights(self, lengths, out) -> np.ndarray:
        """``(n, 1)``: each completion's weight in the trainer's gradient (trainer units); a
        loss that divides by ``num_items_in_batch`` gets TRL's own count."""
        total = out.get("num_items_in_batch")
        return self.window.weights(lengths, None if total is None else float(total))

    # ------------------------------------------------------------------ windows
    def _window(self, out) -> None:
        step = int(self.trainer.state.global_step)
        if not self.window.due(step):
            return
        if any(r is None for r in self._rewards):
            record = self.window.skip("no rewards were captured", step)
        else:
            mask, weight = self._loss_mask(out)
            total = out.get("num_items_in_batch")
            record = self.window.step(
                self._model(), self._generation(out, mask, weight),
                np.stack(self._rewards, axis=1), step=step,
                num_items=None if total is None else float(total))
        self._log(record)

    def _log(self, record: WindowRecord) -> None:
        metrics = getattr(self.trainer, "_metrics", None)
        if metrics is None:
            return
        train = metrics["train"]
        train["ustat/window_skipped"].append(float(not record.ok))
        for name in LOGGED:
            value = getattr(record, name)
            if isinstance(value, RecordInterval):
                value = value.estimate
            if value is not None and math.isfinite(float(value)):
                train[f"ustat/{name}"].append(float(value))
        if record.flat_share is not None:
            train["ustat/flat_share"].append(float(sum(record.flat_share.values())))
        if record.gstar is not None:  # an unbounded end is left out (loggers want finite)
            for end in ("low", "high"):
                if math.isfinite(getattr(record.gstar, end)):
                    train[f"ustat/gstar_{end}"].append(float(getattr(record.gstar, end)))
