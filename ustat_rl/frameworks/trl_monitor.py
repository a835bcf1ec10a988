"""G*, the noise budget and degenerate groups from inside a live TRL GRPO run (C17, C18, C32).

One line attaches it::

    trainer.add_callback(GroupSizeMonitor(trainer, every=50, sketch_dim=256))

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
(:func:`ustat_rl.frameworks.window.window_noise`, docs/theory.md section 8).

Where it hooks in: TRL's documented extension point is the ``transformers`` callback, which does
not see the generated batch, so the monitor also wraps two methods of this one trainer instance,
``_calculate_rewards`` (the rewards of all processes, gathered by TRL) and
``_generate_and_score_completions`` (this process's prompt and completion tokens). Both are
called through unchanged; nothing of the training computation is altered.

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

import math
import warnings
import zlib
from collections import deque
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from .._paths import check_output
from .._validation import as_float, as_int
from ..scores.chunks import sketch_rows
from ..scores.coverage import uncovered_parameters
from ..scores.sequence import trainable_parameters
from ..scores.spec import SketchSpec
from .gather import gather_rows, world
from .trainer_units import (
    LOSS_WEIGHTS,
    NUM_ITEMS_LOSSES,
    completion_weights,
    ratio_one_factor,
    units_note,
)
from .trajectory import append_record
from .trl_support import TRL_VERSIONS, check_loss_masks, check_trl_version
from .window import Batch, batch_problem, observed_all_equal, skipped_record, window_record

__all__ = ["GroupSizeMonitor", "run_rule", "LOGGED"]

#: Record fields written to the trainer's metrics, as ``ustat/<field>``.
LOGGED = ("gstar", "c1", "c2", "c3", "mse_run", "var_run", "mse_gstar", "grpo_beats_vanilla",
          "ds_keep_prob", "ds_gen_batches", "all_equal_predicted", "all_equal_observed",
          "recommended_group_size")

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


def _prompt_key(ids: torch.Tensor) -> int:
    return zlib.crc32(ids.to("cpu", torch.int64).numpy().tobytes())


class GroupSizeMonitor(TrainerCallback):
    """A TRL callback that estimates ``G*`` and the noise budget along a GRPO run.

    Parameters
    ----------
    trainer : trl.GRPOTrainer
        The trainer to monitor (a TRL of
        :data:`~ustat_rl.frameworks.trl_support.TRL_VERSIONS`); its ``num_generations`` is the
        run's ``G``.
    every : int
        Estimate at the first generation batch at or after every ``every``-th step.
    sketch_dim : int
        ``k``, columns of the factored sketch (a multiple of ``sketch_blocks``).
    sketch_blocks : int, optional
        Independent blocks of the sketch (default 16, or ``sketch_dim`` if smaller).
    pool : int
        Generation batches pooled into one window (the newest last).
    level : float
        Two-sided interval level.
    seed : int
        Seed of the projection, fixed for the whole run.
    trajectory : path-like, optional
        The trajectory file (default ``<output_dir>/ustat_trajectory.jsonl``); appended to.
    save_rollouts : path-like, optional
        A folder for each window's pooled rollouts (``window_<step>.npz``), which
        ``ustat-rl gstar`` reads.
    chunk_size : int
        Completions per sketched backward pass.
    kind : {"gaussian", "rademacher"}
    dtype : torch.dtype, optional
        Precision of the projection (default: the model's).
    """

    def __init__(self, trainer, every: int = 50, sketch_dim: int = 256, sketch_blocks=None,
                 pool: int = 4, level: float = 0.9, seed: int = 0, trajectory=None,
                 save_rollouts=None, chunk_size: int = 16, kind: str = "gaussian", dtype=None):
        import trl

        check_trl_version(getattr(trl, "__version__", "unknown"))
        for name in ("_generate_and_score_completions", "_calculate_rewards", "num_generations",
                     "accelerator", "args", "state"):
            if not hasattr(trainer, name):
                raise TypeError(f"`trainer` must be a trl GRPOTrainer (trl{TRL_VERSIONS}); it "
                                f"has no `{name}`")
        self.every = as_int(every, "every", 1)
        self.pool = as_int(pool, "pool", 1)
        self.level = as_float(level, "level", low=0.5)
        if not self.level < 1.0:
            raise ValueError(f"`level` must be in [0.5, 1), got {level!r}")
        self.chunk_size = as_int(chunk_size, "chunk_size", 1)
        self.trainer = trainer
        self.group_size = int(trainer.num_generations)
        self.trajectory = Path(trajectory) if trajectory is not None else \
            Path(trainer.args.output_dir) / "ustat_trajectory.jsonl"
        check_output(self.trajectory, "trajectory")
        self.save_rollouts = None if save_rollouts is None else Path(save_rollouts)
        if self.save_rollouts is not None:
            check_output(self.save_rollouts, "save_rollouts", kind="folder")
            self.save_rollouts.mkdir(parents=True, exist_ok=True)
        n_functions = len(getattr(trainer, "reward_funcs", None) or [None])
        self.rule, self.rule_source = run_rule(trainer.args, n_functions)
        # the trainer's gradient weighs each completion's score by its loss aggregation
        self.loss_type = str(getattr(trainer.args, "loss_type", "dapo"))
        self.max_completion_length = getattr(trainer.args, "max_completion_length", None)
        self.units = units_note(self.loss_type)
        #: The projection, fixed for the whole run (the policy's sampling temperature with it).
        self.spec = SketchSpec.named(
            {"dimension": "sketch_dim", "blocks": "sketch_blocks"}, dimension=sketch_dim,
            seed=seed, blocks=sketch_blocks, kind=kind, dtype=dtype,
            temperature=float(getattr(trainer.args, "temperature", 1.0) or 1.0))
        self.records: list[dict] = []
        self._batches: deque = deque(maxlen=self.pool)
        self._next_step, self._next_id, self._rewards = 0, 0, None
        if getattr(trainer, "is_fsdp_enabled", False):
            raise ValueError("`trainer`: FSDP shards the parameters; GroupSizeMonitor supports "
                             "data parallelism, not FSDP yet (the sketch and the pilot support "
                             "FSDP2's fully_shard: ustat_rl.scores.factored)")
        check_loss_masks(trainer.args)
        fallback = uncovered_parameters(self._model())
        if fallback:
            warnings.warn(f"GroupSizeMonitor: parameters {fallback[:3]} ({len(fallback)} in all) "
                          f"are sketched by the exact per-sample fallback, one extra forward and "
                          f"backward of their module per completion", stacklevel=2)
        self._wrap(trainer)

    # ------------------------------------------------------------------ hooks
    def _model(self):
        return self.trainer.accelerator.unwrap_model(self.trainer.model)

    def _wrap(self, trainer):
        calculate, generate = trainer._calculate_rewards, trainer._generate_and_score_completions

        def calculate_rewards(*args, **kwargs):
            out = calculate(*args, **kwargs)
            self._rewards = out.detach()
            return out

        def generate_and_score(*args, **kwargs):
            out = generate(*args, **kwargs)
            if self._model().training and trainer.state.global_step >= self._next_step:
                self._next_step = (trainer.state.global_step // self.every + 1) * self.every
                self._window(out)
            return out

        trainer._calculate_rewards = calculate_rewards
        trainer._generate_and_score_completions = generate_and_score

    def _combined_rewards(self) -> np.ndarray:
        """The trainer's combination of its reward functions: weighted ``nansum``, NaN where
        every function returned ``None`` (``GRPOTrainer._generate_and_score_completions``)."""
        per_func = self._rewards.to("cpu", torch.float64)
        weights = self.trainer.reward_weights.to("cpu", torch.float64)
        combined = (per_func * weights[None, :]).nansum(dim=1)
        combined[torch.isnan(per_func).all(dim=1)] = math.nan
        return combined.numpy()

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

    def _tokens(self, out):
        """Unpadded prompt + completion rows, right-padded: ``(tokens, target, counts, keys)``,
        ``target`` each token's weight in the sketch, ``counts`` ``(n,)`` the loss's tokens."""
        prompt_ids, prompt_mask = out["prompt_ids"], out["prompt_mask"].bool()
        completion_ids = out["completion_ids"]
        completion_mask, weight = self._loss_mask(out)
        rows, targets, keys = [], [], []
        for p, pm, c, cm in zip(prompt_ids, prompt_mask, completion_ids, weight):
            prompt = p[pm]
            keys.append(_prompt_key(prompt))
            rows.append(torch.cat([prompt, c]))
            targets.append(torch.cat([torch.zeros_like(prompt, dtype=cm.dtype), cm]))
        width = max(r.numel() for r in rows)
        pad = int(getattr(self.trainer, "pad_token_id", None) or 0)
        tokens = torch.full((len(rows), width), pad, dtype=rows[0].dtype, device=rows[0].device)
        target = torch.zeros((len(rows), width), dtype=torch.float32, device=rows[0].device)
        for i, (r, t) in enumerate(zip(rows, targets)):
            tokens[i, :r.numel()], target[i, :t.numel()] = r, t
        counts = completion_mask.sum(dim=1).to("cpu", torch.float64).numpy()
        return tokens, target, counts, np.array(keys, dtype=np.int64)

    def _scores(self, tokens, target) -> np.ndarray:
        """Sketched scores of this process's rows, in the parameters' own precision: a mixed
        precision context of the training step (``bf16``) is switched off for the sketch."""
        with torch.autocast(tokens.device.type, enabled=False):
            return sketch_rows(self._model(), tokens, target, self.spec, self.chunk_size)

    # ------------------------------------------------------------------ windows
    def _window(self, out) -> None:
        step = int(self.trainer.state.global_step)
        reward = self._combined_rewards() if self._rewards is not None else np.array([])
        channels = None if self._rewards is None else self._rewards.to("cpu", torch.float64).numpy()
        self._rewards = None
        budget = reward.size
        tokens, target, counts, keys = self._tokens(out)
        keys = gather_rows(keys)  # every process takes part in every gather
        lengths = gather_rows(counts)
        G = self.group_size
        common = (G, max(budget, 2), self.level, self.spec.dimension, self.rule,
                  self.rule_source)
        reason = batch_problem(keys, reward, G) if budget else "no rewards were captured"
        if reason is None:
            try:
                score = gather_rows(self._scores(tokens, target)) * self._weights(lengths, out)
                batch = Batch(step, G, reward, score, self._next_id, channels)
                batches = (list(self._batches) + [batch])[-self.pool:]
                weights = self.trainer.reward_weights.to("cpu", torch.float64).numpy()
                record, rollouts = window_record(batches, self._meta(), budget, self.level,
                                                 self.rule, self.rule_source, self.units,
                                                 weights)
            except Exception as exc:  # a window that fails must not stop the run
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            else:
                self._batches.append(batch)
                self._next_id += batch.n_groups
        if reason is not None:
            seen = observed_all_equal(reward, G) if budget and budget % G == 0 else math.nan
            record, rollouts = skipped_record(step, reason, *common, observed=seen), None
            warnings.warn(f"GroupSizeMonitor skipped the window at step {step}: {reason}",
                          stacklevel=2)
        self._emit(record, rollouts)

    def _weights(self, lengths, out) -> np.ndarray:
        """``(n, 1)``: each completion's weight in the trainer's gradient (trainer units,
        :mod:`ustat_rl.frameworks.trainer_units`); 1 for a ``loss_type`` it does not know. A
        loss that divides by the batch's ``num_items_in_batch`` gets TRL's own count (gathered
        over the processes); ``cispo`` its clamped ratio at 1, ``min(1, epsilon_high)``."""
        if self.loss_type not in LOSS_WEIGHTS:
            return np.ones((lengths.size, 1))
        total = out.get("num_items_in_batch") if self.loss_type in NUM_ITEMS_LOSSES else None
        total = None if total is None else float(total)
        args = self.trainer.args
        high = getattr(args, "epsilon_high", None)
        high = getattr(args, "epsilon", 0.2) if high is None else high
        return (ratio_one_factor(self.loss_type, high)
                * completion_weights(self.loss_type, lengths, self.max_completion_length,
                                     total)[:, None])

    def _meta(self) -> dict:
        model = self._model()
        name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        return dict(self.spec.to_meta("factored"), model_name=str(name),
                    param_dim=int(sum(p.numel() for p in trainable_parameters(model).values())))

    def _emit(self, record: dict, rollouts) -> None:
        self.records.append(record)
        rank, _ = world()
        if rank == 0:
            append_record(self.trajectory, record)
            if rollouts is not None and self.save_rollouts is not None:
                rollouts.save(self.save_rollouts / f"window_{record['step']:06d}.npz")
        metrics = getattr(self.trainer, "_metrics", None)
        if metrics is None:
            return
        train = metrics["train"]
        train["ustat/window_skipped"].append(float(record["status"] != "ok"))
        for name in LOGGED:
            value = record[name]
            if isinstance(value, dict):
                value = value["estimate"]
            if value is not None and math.isfinite(float(value)):
                train[f"ustat/{name}"].append(float(value))
        if record["gstar"] is not None:  # an unbounded end is left out (loggers want finite)
            for end in ("low", "high"):
                if math.isfinite(record["gstar"][end]):
                    train[f"ustat/gstar_{end}"].append(float(record["gstar"][end]))
