"""The monitor's predicted gradient noise against the gradient TRL's GRPOTrainer really computes.

For each *cell* (``scale_rewards`` in group / batch / none, ``loss_type`` in grpo / dapo /
dr_grpo, ``num_generations`` G at a fixed per-step budget of N completions, so B = N/G prompts) a
real ``trl.GRPOTrainer`` runs ``M`` steps at learning rate 0 (fixed parameters: every step draws
a fresh generation batch at the same policy), on a Qwen2 model built from a config
(:func:`ustat_rl.frameworks.demo.tiny_family`, the demo's parity reward, binary), gradient
clipping off, dropout off. After each backward pass the gradient of TRL's own loss is read from
the parameters (the whole d-dimensional vector; nothing is projected).

* *Measured*: the variance of the trainer's gradient over the M batches,
  ``(1/(M-1)) sum_m ||g_m - g_bar||^2`` (an unbiased estimate of the trace of its covariance:
  the reference gradient g_bar's own error is accounted for by the 1/(M-1)).
* *Predicted*: the monitor's ``var_run`` (:class:`ustat_rl.frameworks.GroupSizeMonitor` attached
  to the same run, every step, pooling all M batches: Proposition 3 for the run's rule in the
  trainer's units, docs/theory.md "Against a real trainer").
* *z*: (measured - predicted) / se, the se combining a jackknife over the M batches of the
  difference (both are recomputed without each batch) and a jackknife over the sketch's
  independent blocks of the prediction (the projection is one draw for the whole cell, so its
  error is common to every batch), so the prediction's own noise is counted.
* *Negative control*: the prediction in the paper's units (each score unweighted, what the monitor
  reported before it read ``loss_type``): ``var_run`` times the squared weight, for the losses whose
  weight is one number per batch (dapo: the batch's mean length; dr_grpo: L).

Each finished cell is written at once to ``<out>/trl_gradient_mse.csv`` (atomically); a rerun
skips the cells already there. Needs the ``trl`` extra.

Usage::

    python simulations/trl_gradient_mse.py --quick     # 2 cells, M = 16: about a minute on a CPU
    python simulations/trl_gradient_mse.py             # 27 cells, M = 60
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.frameworks.trainer_units import LOSS_WEIGHTS
from ustat_rl.frameworks.window import window_record
from ustat_rl.pilot.replicates import jackknife_cov
from ustat_rl.runs.sweeps import (
    LocalExecutor,
    default_output,
    run_cells,
    write_csv_atomic,
)
from ustat_rl.tolerances import Z_CHECK

NAME = "trl_gradient_mse"
BUDGET, SKETCH_DIM, BLOCKS, MAX_LENGTH = 64, 256, 16, 3
SCALES, LOSSES, GROUP_SIZES = ("group", "batch", "none"), ("grpo", "dapo", "dr_grpo"), (4, 8, 16)
QUICK_CELLS = (("group", "dapo", 8), ("batch", "dr_grpo", 4))
FULL_STEPS, QUICK_STEPS = 60, 16
COLUMNS = ("scale_rewards", "loss_type", "G", "B", "M", "se_batches", "se_blocks",
           "mean_length", "measured_var", "predicted_var", "z", "paper_units_var", "z_paper_units", "predicted_mse",
           "units", "estimator", "verdict")


def _model():
    from ustat_rl.frameworks.demo import tiny_family

    return tiny_family("qwen2", 0, tie_word_embeddings=True)


def run_cell(scale: str, loss_type: str, G: int, steps: int, seed: int = 0) -> dict:
    """One cell: M = ``steps`` batches at fixed parameters, measured and predicted."""
    import torch
    from transformers import TrainerCallback

    from ustat_rl.frameworks import GroupSizeMonitor
    from ustat_rl.frameworks.demo import demo_trainer

    grads, lengths = [], []

    class Keep(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            model = kwargs["model"]
            grads.append(torch.cat([p.grad.reshape(-1).double() for p in model.parameters()
                                    if p.requires_grad]).numpy().copy())

    with tempfile.TemporaryDirectory() as tmp:
        trainer = demo_trainer(Path(tmp) / "out", G, BUDGET // G, steps, 0.0, model=_model(),
                               scale_rewards=scale, loss_type=loss_type, max_grad_norm=0.0,
                               bf16=False, disable_dropout=True, seed=seed,
                               max_completion_length=MAX_LENGTH)
        inner = trainer._generate_and_score_completions

        def generate(*args, **kwargs):
            out = inner(*args, **kwargs)
            lengths.append(float(out["completion_mask"].sum()) / out["completion_mask"].shape[0])
            return out

        trainer._generate_and_score_completions = generate
        monitor = GroupSizeMonitor(trainer, every=1, sketch_dim=SKETCH_DIM, sketch_blocks=BLOCKS,
                                   pool=steps, seed=seed, trajectory=Path(tmp) / "t.jsonl")
        trainer.add_callback(monitor)
        trainer.add_callback(Keep())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        batches, meta = list(monitor._batches), monitor._meta()
        last = monitor.records[-1]
    grads = np.array(grads)  # (M, d)
    M = grads.shape[0]
    if len(batches) != M or last["status"] != "ok":
        raise RuntimeError(f"cell {scale}/{loss_type}/G={G}: {len(batches)} of {M} batches "
                           f"estimated ({last['reason']})")

    def measured(rows):
        return float(np.sum((rows - rows.mean(axis=0)) ** 2) / (rows.shape[0] - 1))

    def predicted(part):
        record, _ = window_record(part, meta, BUDGET, 0.9, monitor.rule, monitor.rule_source,
                                  monitor.units)
        return float(record["var_run"])

    full = measured(grads) - predicted(batches)
    drops = np.array([measured(np.delete(grads, m, axis=0))
                      - predicted(batches[:m] + batches[m + 1:]) for m in range(M)])
    se_batches = math.sqrt(jackknife_cov(drops[:, None])[0, 0])
    # the projection R is one draw for the whole cell, so its error is common to every batch
    # and the jackknife over batches cannot see it: a jackknife over the sketch's blocks does
    width = SKETCH_DIM // BLOCKS
    block_meta = dict(meta, sketch_blocks=BLOCKS - 1)
    rescale = math.sqrt(BLOCKS / (BLOCKS - 1))  # keeps E[R^T R] = I with one block left out

    def without_block(j):
        keep = np.r_[0:j * width, (j + 1) * width:SKETCH_DIM]
        part = [replace(b, score=b.score[:, keep] * rescale) for b in batches]
        record, _ = window_record(part, block_meta, BUDGET, 0.9, monitor.rule,
                                  monitor.rule_source, monitor.units)
        return float(record["var_run"])

    blocks = np.array([without_block(j) for j in range(BLOCKS)])
    se_blocks = math.sqrt(jackknife_cov(blocks[:, None])[0, 0])
    se = math.hypot(se_batches, se_blocks)
    pred = float(last["var_run"])
    weight = {"batch_tokens": 1.0 / np.mean(lengths), "max_length": 1.0 / MAX_LENGTH}.get(
        LOSS_WEIGHTS[loss_type])
    paper = math.nan if weight is None else pred / weight ** 2
    z_paper = math.nan if weight is None else (measured(grads) - paper) / se
    z = full / se
    verdict = "agrees" if abs(z) <= Z_CHECK else "differs"
    return dict(scale_rewards=scale, loss_type=loss_type, G=G, B=BUDGET // G, M=M,
                se_batches=se_batches, se_blocks=se_blocks,
                mean_length=float(np.mean(lengths)), measured_var=measured(grads),
                predicted_var=pred, z=z, paper_units_var=paper, z_paper_units=z_paper,
                predicted_mse=(last["mse_run"] or {}).get("estimate", math.nan),
                units=last["units"], estimator=last["estimator"], verdict=verdict)


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{len(QUICK_CELLS)} cells of {QUICK_STEPS} steps")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"batches per cell (default {FULL_STEPS}, {QUICK_STEPS} quick)")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the trainer's sampling and of the sketch (default 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    steps = args.steps or (QUICK_STEPS if args.quick else FULL_STEPS)
    if steps < 4:
        parser.error("--steps must be >= 4 (a jackknife over batches)")
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(COLUMNS))
    done = {(r.scale_rewards, r.loss_type, int(r.G)) for r in table.itertuples()}
    wanted = QUICK_CELLS if args.quick else [(s, loss, G) for s in SCALES for loss in LOSSES
                                            for G in GROUP_SIZES]
    cells = {key: (*key, steps, args.seed) for key in wanted if key not in done}
    rows = [r for r in table.to_dict("records")]

    def on_result(key, row):
        rows.append(row)
        write_csv_atomic(pd.DataFrame(rows, columns=list(COLUMNS)), path)

    run_cells(cells, run_cell, on_result, LocalExecutor(1), progress=not args.no_progress,
              n_skipped=len(wanted) - len(cells), desc="TRL cells")
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[["scale_rewards", "loss_type", "G", "mean_length", "measured_var",
                     "predicted_var", "z", "paper_units_var", "z_paper_units", "verdict"]]
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\n{path}: {len(table)} cells; |z| <= {Z_CHECK:g} is 'agrees'")
    return table


if __name__ == "__main__":
    main()
