"""Rows gathered across two CPU processes (gloo) before a window is estimated.

TRL itself runs in two processes in tests/frameworks/test_trl_monitor_dp.py; here the monitor's gather
function is checked on its own, with the window estimate it feeds: each process holds its own
slice of one generation batch, as under data parallelism, and after gathering both compute the
record that one process computes from the whole batch.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig  # noqa: E402
from ustat_rl.frameworks.gather import gather_rows, world  # noqa: E402
from ustat_rl.frameworks.window import Batch, batch_problem, window_record  # noqa: E402

pytestmark = pytest.mark.fast

G, B, K = 4, 12, 8
META = dict(sketch_kind="gaussian", sketch_seed=0, sketch_blocks=None, sketch_route="dense",
            model_name="test", param_dim=100)


def batch_data():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.2, 0.8, B)
    reward = (rng.random((B, G)) < p[:, None]).astype(float).ravel()
    score = rng.normal(size=(B * G, K)) + reward[:, None] * rng.normal(size=(B, 1, K)).repeat(
        G, axis=1).reshape(-1, K)
    keys = np.repeat(np.arange(B) * 7919, G)
    return keys, reward, score


def record_of(keys, reward, score):
    assert batch_problem(keys, reward, G) is None
    record, _ = window_record([Batch(0, G, reward, score, 0)], META, G * B,
                              MonitorConfig(estimator=EstimatorConfig("trl_group", "test")))
    return record


def _worker(rank, size, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=size)
    keys, reward, score = batch_data()
    cut = [0, 20, B * G]  # unequal slices: 20 and 28 rows
    mine = slice(cut[rank], cut[rank + 1])
    got_keys, got_score = gather_rows(keys[mine]), gather_rows(score[mine])
    record = record_of(got_keys, reward, got_score)
    with open(f"{out}.{rank}", "wb") as handle:
        pickle.dump((world(), got_keys, got_score, record), handle)
    dist.destroy_process_group()


def test_two_processes_gather_in_rank_order_and_agree(tmp_path):
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_worker, args=(2, init, str(tmp_path / "result")), nprocs=2, join=True)
    keys, reward, score = batch_data()
    alone = record_of(keys, reward, score)
    for rank in (0, 1):
        with open(tmp_path / f"result.{rank}", "rb") as handle:
            seen, got_keys, got_score, record = pickle.load(handle)
        assert seen == (rank, 2)
        np.testing.assert_array_equal(got_keys, keys)
        np.testing.assert_array_equal(got_score, score)
        assert json.dumps(record, default=str) == json.dumps(alone, default=str)


def test_one_process_returns_the_rows():
    rows = np.arange(6.0).reshape(3, 2)
    assert world() == (0, 1)
    np.testing.assert_array_equal(gather_rows(rows), rows)
    with pytest.raises(ValueError, match="rows"):
        gather_rows(np.float64(1.0))


def test_a_gather_in_the_wrong_order_is_caught():
    """Negative control: swapping the two slices (a gather out of rank order) mixes groups,
    which the contiguity check names."""
    keys, reward, _ = batch_data()
    swapped = np.concatenate([keys[22:], keys[:22]])
    assert "not contiguous" in batch_problem(swapped, reward, G)
