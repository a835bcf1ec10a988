"""The monitor's gradient noise against the gradient TRL's GRPOTrainer really computes.

For each *cell* (``scale_rewards``, ``loss_type``, ``num_generations`` G at a fixed budget of
N = 64 completions per step, so B = N/G prompts) a real ``trl.GRPOTrainer`` runs ``M`` steps at
learning rate 0 (fixed parameters: every step draws a fresh generation batch at the same policy)
on a tied Qwen2 built from a config (:func:`ustat_rl.frameworks.demo.tiny_family`, the demo's
parity reward, binary), gradient clipping, dropout and bf16 off. Its training set holds one row
per prompt the run draws, each an i.i.d. uniform draw of the demo's 100 prompts, so that the
steps' prompts are i.i.d. as the monitor assumes (TRL samples rows without replacement: on the
100 prompts once each, the prompt part of a step's variance shrinks by the finite-population
factor (100 - B)/99; one cell of TRL's defaults on that set, ``prompt_set="finite"``, measures
it). The gradient of TRL's own loss
is read after each backward pass. The monitor
(:class:`ustat_rl.frameworks.GroupSizeMonitor`) is attached to the same run and keeps every
batch it sketched (``save_rollouts``).

Everything is compared **in the sketch space**: TRL's gradients are projected with the monitor's
own matrix (:func:`ustat_rl.scores.factored.factored_projection_matrix`), so the projection's
error is common to both sides and cancels; what is left is what the monitor estimates.

* *Identity*: for every batch, minus the mean of the monitor's per-group terms
  ``t_b = (1/G) sum_g A_g w_g R W_g`` (the run's rule's advantages, the trainer's completion
  weights) must equal TRL's projected gradient: the largest relative deviation over the M
  batches, float32 rounding when the monitor computes what the trainer computes.
* *Measured*: the variance of TRL's projected gradient over the M batches,
  ``(1/(M-1)) sum_m ||R g_m - mean||^2``.
* *Predicted*: the monitor's ``var_run`` for the M batches pooled
  (:func:`ustat_rl.frameworks.window.window_noise`: the sample covariance of the per-group
  terms over ``B``, unbiased at the run's G for every rule, docs/theory.md C53).
* *z*: (measured - predicted) / se, the se a jackknife over the M batches of the difference
  (both sides recomputed without each batch). *Detectable*: the smallest relative bias
  ``(Z_CHECK + 0.84) se / measured`` the comparison finds with probability 0.8.
* *Negative controls*, rejected by the same comparison: the *plug-in* (the rule's exact
  formulas at the pooled batches' estimated moments, what the monitor reported before; low by
  about (G - 1)/G under group std), for rules of group statistics; and the prediction in the
  *paper's units* (scores not weighted as the loss weighs them), where the weight is one number
  per batch (dapo: 1/mean length; dr_grpo: 1/L).

TRL's defaults (``scale_rewards="group"``, ``loss_type="dapo"``) get the most batches: their
three cells (and the finite-set cell) run ``--main-steps`` batches so that their detectable bias
is under 5%; the other 69 cells (every ``scale_rewards`` and ``loss_type`` of trl 1.16 at each
G) run ``--steps`` and state their own, while the identity holds or fails in every cell
whatever its size. Each finished cell is written at once to ``<out>/trl_gradient_mse.csv``
(atomically); a rerun skips the cells already there. Needs the ``trl`` extra.

Usage::

    python simulations/trl_gradient_mse.py --quick          # 2 cells of 24 batches, about a minute
    python simulations/trl_gradient_mse.py --workers 2      # 73 cells (see docs/theory.md)
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.frameworks.trainer_units import LOSS_WEIGHTS
from ustat_rl.pilot.replicates import jackknife_cov
from ustat_rl.runs.sweeps import (
    add_executor_arguments,
    default_output,
    executor_from_args,
    run_cells,
    write_csv_atomic,
)
from ustat_rl.tolerances import Z_CHECK

NAME = "trl_gradient_mse"
BUDGET, SKETCH_DIM, BLOCKS, MAX_LENGTH = 64, 256, 16, 3
#: Every scale_rewards and loss_type of trl 1.16 at G = 4, 8, 16 (B = 16, 8, 4).
SCALES = ("group", "batch", "none")
LOSSES = ("grpo", "dapo", "dr_grpo", "bnpo", "sapo", "cispo", "luspo", "vespo")
GROUP_SIZES = (4, 8, 16)
#: TRL's default options: the cells a user runs, given the most batches.
MAIN = ("group", "dapo")
#: G of the cell on the demo's finite set of 100 prompts (B = 16: the largest finite-set effect).
FINITE_G = 4
QUICK_CELLS = (("iid", "group", "dapo", 4), ("iid", "batch", "dr_grpo", 8))
FULL_STEPS, MAIN_STEPS, QUICK_STEPS = 60, 1500, 24
#: Batches per chunk of the plug-in control's moment estimates.
PLUG_IN_CHUNK = 64
#: Phi^{-1}(0.8): a bias of (Z_CHECK + POWER_Z) se is found 80% of the time.
POWER_Z = 0.8416
COLUMNS = ("prompt_set", "scale_rewards", "loss_type", "G", "B", "M", "identity_rel_error", "mean_length",
           "measured_var", "predicted_var", "ratio", "se", "z", "detectable_bias",
           "plug_in_var", "z_plug_in", "paper_units_var", "z_paper_units", "predicted_mse",
           "estimator", "units", "verdict")


def _model():
    from ustat_rl.frameworks.demo import tiny_family

    return tiny_family("qwen2", 0, tie_word_embeddings=True)


def _train(scale: str, loss_type: str, G: int, steps: int, seed: int, folder: Path,
           finite: bool = False):
    """Run the trainer with the monitor; TRL's flat gradients ``(M, d)``, the monitor, the
    projection matrix ``(k, d)`` and the mean completion length TRL logged."""
    import torch
    from transformers import TrainerCallback

    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.demo import DemoSetup, demo_trainer
    from ustat_rl.scores.factored import factored_projection_matrix
    from ustat_rl.scores.spec import SketchSpec

    grads = []

    class Keep(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            model = kwargs["model"]
            grads.append(torch.cat([p.grad.reshape(-1).double() for p in model.parameters()
                                    if p.requires_grad]).numpy().copy())

    from ustat_rl.frameworks.demo import arithmetic_prompts

    model = _model()
    # one row per prompt the run draws, each an i.i.d. uniform draw of the demo's 100 prompts:
    # TRL samples rows without replacement, so with the 100 prompts once each the steps' prompts
    # would not be i.i.d. (the finite-set effect "finite" measures)
    prompts = None
    if not finite:
        pool = arithmetic_prompts()
        draws = np.random.default_rng([seed, 7]).integers(len(pool), size=steps * BUDGET // G)
        prompts = [pool[i] for i in draws]
    trainer = demo_trainer(folder / "out", G, BUDGET // G, steps, learning_rate=0.0, model=model,
                           scale_rewards=scale, loss_type=loss_type, max_grad_norm=0.0,
                           bf16=False, disable_dropout=True, seed=seed,
                           max_completion_length=MAX_LENGTH, setup=DemoSetup(prompts=prompts))
    monitor = GroupSizeMonitor(trainer, MonitorConfig(
        schedule=Schedule(every=1, pool=1, chunk_size=BUDGET),
        sketch=SketchSpec(SKETCH_DIM, seed, blocks=BLOCKS),
        outputs=Outputs(folder / "t.jsonl", folder / "rollouts")))
    trainer.add_callback(monitor)
    trainer.add_callback(Keep())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    R = factored_projection_matrix(model, SketchSpec(SKETCH_DIM, seed, blocks=BLOCKS))
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history
               if "completions/mean_length" in h]
    return np.array(grads), monitor, R, float(np.mean(lengths))


def _batches(folder: Path, G: int):
    """The monitor's sketched batches, in step order, from its saved windows (one batch each)."""
    from ustat_rl.frameworks.window import Batch
    from ustat_rl.pilot.rollouts import Rollouts

    out = []
    for i, path in enumerate(sorted((folder / "rollouts").glob("window_*.npz"))):
        r = Rollouts.load(path)
        out.append(Batch(i, G, r.reward, r.score, i * (r.reward.size // G)))
    return out


def _terms(batches, rule):
    """Per batch: the rule's per-group terms and the leave-one-out ones, each ``(B, k)``."""
    from ustat_rl.advantages import get_rule
    from ustat_rl.frameworks.window import run_advantages
    from ustat_rl.pilot.run_noise import group_terms

    loo = get_rule("grpo")
    out = []
    for b in batches:
        advantage, _ = run_advantages(b, rule)
        target = loo.grouped(b.reward.reshape(-1, b.group_size)).reshape(-1)
        out.append((group_terms(advantage, b.score, b.group_size),
                    group_terms(target, b.score, b.group_size)))
    return out


def _predicted(parts, B: int, G: int) -> tuple[float, float]:
    from ustat_rl.pilot.run_noise import run_noise

    out = run_noise(np.concatenate([t for t, _ in parts]), np.concatenate([u for _, u in parts]),
                    B, G)
    return out.variance.estimate, out.mse.estimate


def _measured(rows) -> float:
    return float(np.sum((rows - rows.mean(axis=0)) ** 2) / (rows.shape[0] - 1))


def _plug_in(batches, meta, rule, B, G) -> float:
    """The rule's exact minibatch variance at the batches' estimated moments (the monitor's
    estimate before it used the run's own groups), for rules of group statistics: the mean over
    consecutive chunks of ``PLUG_IN_CHUNK`` batches, each chunk's moments estimated as a window
    of that many batches would (the plug-in's bias is a property of each prompt's group, not of
    how many prompts are pooled; the moment estimates' memory grows with the square of the
    prompts pooled)."""
    from ustat_rl.advantages import get_rule
    from ustat_rl.frameworks.window import window_rollouts
    from ustat_rl.pilot.estimate import rule_moments
    from ustat_rl.theory import minibatch_variance

    if get_rule(rule).statistics != "group":
        return math.nan
    values = [float(minibatch_variance(rule_moments(window_rollouts(batches[i:i + PLUG_IN_CHUNK],
                                                                    meta), rule), rule, G, B))
              for i in range(0, len(batches), PLUG_IN_CHUNK)]
    return float(np.mean(values))


def run_cell(scale: str, loss_type: str, G: int, steps: int, seed: int = 0,
             prompt_set: str = "iid") -> dict:
    """One cell: ``steps`` batches at fixed parameters, measured and predicted in sketch space.

    ``prompt_set`` ``"iid"`` (the study) draws every step's prompts i.i.d.; ``"finite"`` trains
    on the demo's 100 prompts once each, which TRL samples without replacement.
    """
    if prompt_set not in ("iid", "finite"):
        raise ValueError(f"`prompt_set` must be 'iid' or 'finite', got {prompt_set!r}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        grads, monitor, R, mean_length = _train(scale, loss_type, G, steps, seed, folder,
                                                finite=prompt_set == "finite")
        batches = _batches(folder, G)
        meta = monitor._meta()
        last = monitor.records[-1]
    M, B = grads.shape[0], BUDGET // G
    if len(batches) != M or any(not r.ok for r in monitor.records):
        bad = next((r for r in monitor.records if not r.ok), last)
        raise RuntimeError(f"cell {scale}/{loss_type}/G={G}: {len(batches)} of {M} batches "
                           f"estimated ({bad.reason})")
    projected = grads @ R.T  # (M, k): TRL's gradients in the monitor's sketch space
    parts = _terms(batches, monitor.estimator)
    # TRL minimises the loss, whose gradient is minus the estimator's
    step = -np.array([t.mean(axis=0) for t, _ in parts])  # (M, k)
    identity = float(np.max(np.linalg.norm(step - projected, axis=1)
                            / np.linalg.norm(projected, axis=1)))
    measured = _measured(projected)
    predicted, predicted_mse = _predicted(parts, B, G)
    drops = np.array([_measured(np.delete(projected, m, axis=0))
                      - _predicted(parts[:m] + parts[m + 1:], B, G)[0] for m in range(M)])
    se = math.sqrt(jackknife_cov(drops[:, None])[0, 0])
    z = (measured - predicted) / se
    plug = _plug_in(batches, meta, monitor.estimator, B, G)
    # the weight when it is one number per batch (the paper-unit control)
    weight = {"max_length": 1.0 / MAX_LENGTH, "batch_tokens": 1.0 / mean_length}.get(
        LOSS_WEIGHTS.get(loss_type, ""))
    paper = math.nan if weight is None else predicted / weight ** 2
    verdict = "agrees" if abs(z) <= Z_CHECK else "differs"
    return dict(prompt_set=prompt_set, scale_rewards=scale, loss_type=loss_type, G=G, B=B, M=M,
                identity_rel_error=identity, mean_length=mean_length, measured_var=measured,
                predicted_var=predicted, ratio=predicted / measured, se=se, z=z,
                detectable_bias=(Z_CHECK + POWER_Z) * se / measured, plug_in_var=plug,
                z_plug_in=(measured - plug) / se, paper_units_var=paper,
                z_paper_units=(measured - paper) / se, predicted_mse=predicted_mse,
                estimator=last.run_method, units=last.units, verdict=verdict)


def _cells(quick: bool, steps, main_steps) -> dict:
    """Cell key ``(prompt_set, scale, loss, G)`` -> batches: TRL's defaults get
    ``main_steps``, the rest ``steps``; one cell of TRL's defaults on the finite prompt set."""
    if quick:
        return {key: steps or QUICK_STEPS for key in QUICK_CELLS}
    grid = [("iid", s, loss, G) for s in SCALES for loss in LOSSES for G in GROUP_SIZES]
    grid.sort(key=lambda key: key[1:3] != MAIN)  # TRL's defaults first
    grid.insert(len(GROUP_SIZES), ("finite", *MAIN, FINITE_G))
    return {key: (main_steps or MAIN_STEPS) if key[1:3] == MAIN else (steps or FULL_STEPS)
            for key in grid}


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{len(QUICK_CELLS)} cells of {QUICK_STEPS} batches")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"batches per cell (default {FULL_STEPS}, {QUICK_STEPS} quick)")
    parser.add_argument("--main-steps", type=int, default=None,
                        help=f"batches of the cells at TRL's defaults (scale_rewards='group', "
                             f"loss_type='dapo'; default {MAIN_STEPS})")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the trainer's sampling and of the sketch (default 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    for option in ("steps", "main_steps"):
        value = getattr(args, option)
        if value is not None and value < 4:
            parser.error(f"--{option.replace('_', '-')} must be >= 4 (a jackknife over batches)")
    executor = executor_from_args(args, parser)
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(COLUMNS))
    done = {(r.prompt_set, r.scale_rewards, r.loss_type, int(r.G)) for r in table.itertuples()}
    wanted = _cells(args.quick, args.steps, args.main_steps)
    cells = {key: (*key[1:], n, args.seed, key[0]) for key, n in wanted.items()
             if key not in done}
    rows = list(table.to_dict("records"))

    def on_result(key, row):
        rows.append(row)
        write_csv_atomic(pd.DataFrame(rows, columns=list(COLUMNS)), path)

    run_cells(cells, run_cell, on_result, executor, progress=not args.no_progress,
              n_skipped=len(wanted) - len(cells), desc="TRL cells")
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(table[["prompt_set", "scale_rewards", "loss_type", "G", "M", "identity_rel_error",
                     "measured_var", "predicted_var", "ratio", "z", "detectable_bias",
                     "z_plug_in", "z_paper_units", "verdict"]]
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\n{path}: {len(table)} cells; |z| <= {Z_CHECK:g} is 'agrees' (two-sided 6.3e-5 "
          f"per cell); detectable_bias is the relative bias found with probability 0.8")
    return table


if __name__ == "__main__":
    main()
