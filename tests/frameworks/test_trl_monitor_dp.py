"""The TRL monitor under data parallelism: TRL's GRPOTrainer itself in two CPU processes
(``torchrun``, gloo), each generating and scoring its own half of every generation batch.

Both processes must hold the same records, estimated from the whole batch (the budget is both
halves), and the window files must hold process 0's score rows followed by process 1's: the
gather is in process order, as TRL's own gather of the rewards is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")

from ustat_rl.pilot import load_rollouts  # noqa: E402

pytestmark = pytest.mark.integration  # TRL run: GRPOTrainer in two torchrun processes

SCRIPT = Path(__file__).resolve().parents[1] / "dp_monitor_run.py"


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", "2", str(SCRIPT), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_both_processes_estimate_the_whole_batch(two_processes):
    runs = [json.loads((two_processes / f"records.{r}.json").read_text()) for r in (0, 1)]
    assert [run["world"] for run in runs] == [2, 2]
    assert runs[0]["records"] == runs[1]["records"]
    records = runs[0]["records"]
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert all(r["budget"] == 2 * 4 * 8 and r["group_size"] == 4 for r in records)
    assert records[-1]["n_samples"] == 2 * 2 * 4 * 8  # two pooled batches of both halves


def test_window_rows_are_gathered_in_process_order(two_processes):
    local = [np.load(two_processes / f"local_scores.{r}.npy") for r in (0, 1)]
    weights = [np.load(two_processes / f"weights.{r}.npy") for r in (0, 1)]
    np.testing.assert_array_equal(weights[0], weights[1])  # both weigh the whole batch alike
    for step in (0, 1):
        rollouts = load_rollouts(two_processes / "windows" / f"window_{step:06d}.npz")
        newest = rollouts.score[-64:]  # the window's newest batch, in the trainer's units
        w = weights[0][step]  # (64, 1): dapo's n / sum of the gathered batch's tokens
        np.testing.assert_array_equal(newest, np.concatenate([local[0][step],
                                                              local[1][step]]) * w)
        # negative control: the other order is not what was written
        assert not np.array_equal(newest, np.concatenate([local[1][step], local[0][step]]) * w)
