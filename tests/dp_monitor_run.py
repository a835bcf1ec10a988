"""Run by tests/frameworks/test_trl_monitor_dp.py under ``torchrun --nproc_per_node 2`` (gloo, CPU):
the demo GRPO run with the monitor, each process saving its own records, its local scores and
the trainer-unit weights of the gathered batch."""

import json
import sys
import warnings
from pathlib import Path

import numpy as np

from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
from ustat_rl.frameworks.demo import demo_trainer
from ustat_rl.scores.spec import SketchSpec

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
trainer = demo_trainer(out / "run", group_size=4, groups=8, steps=2, learning_rate=0.0,
                       bf16=False)
monitor = GroupSizeMonitor(trainer, MonitorConfig(
    schedule=Schedule(every=1, pool=2), sketch=SketchSpec(32, blocks=8),
    outputs=Outputs(out / "trajectory.jsonl", out / "windows")))
rank = trainer.accelerator.process_index
local = []
own_scores = monitor.window.scores  # the entry the monitor feeds computes every window


def keep_scores(model, tokens, target):
    scores = own_scores(model, tokens, target)
    local.append(scores)
    return scores


monitor.window.scores = keep_scores
weights = []
own_weights = monitor.window.weights


def keep_weights(lengths, num_items=None):  # the gathered batch's counts: every process's rows
    out = own_weights(lengths, num_items)
    weights.append(out)
    return out


monitor.window.weights = keep_weights
trainer.add_callback(monitor)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    trainer.train()
np.save(out / f"local_scores.{rank}.npy", np.stack(local))
np.save(out / f"weights.{rank}.npy", np.stack(weights))
(out / f"records.{rank}.json").write_text(json.dumps(
    {"world": trainer.accelerator.num_processes, "records": [r.to_dict() for r in monitor.records]},
    default=str))
