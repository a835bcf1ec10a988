"""The factored sketch under FSDP2 (``fully_shard``): two CPU processes (``torchrun``, gloo),
each sketching its own rows of a tiny causal LM in float64 whose decoder layers and root are
sharded, must give the unsharded model's scores of the same rows under the same seed; and the
monitor (:class:`ustat_rl.frameworks.WindowMonitor`) fed each process's rows and the sharded
model must give the record of one process fed every row and the unsharded model.

Tolerance: ``max |sharded - unsharded| <= 1e-10 max |unsharded|`` on every process and case
(float64 scores; measured: bitwise equal). Negative controls that the same comparison must
reject: the sharded scores under another seed, and the unsharded scores of a model with one
RMSNorm weight entry moved by 1e-2 (what reading a wrong parameter value would give; measured
6e-4 to 7e-3 of the scale). Records: every numeric field within ``1e-10 max(1, |single|)`` of
the single process's (measured: equal), every other field equal; control: process 1 with two
completions of two groups swapped, rewards in place, which moves some field by more than 1e-3
(measured 0.07 to 0.55).
The run script is tests/fsdp_sketch_run.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.integration  # distributed runs: the sketch in two torchrun processes

SCRIPT = Path(__file__).resolve().parents[1] / "fsdp_sketch_run.py"
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-10


def _cases():
    """linear, embedding, elementwise and fallback projectors (qwen2, llama, gemma2 with a tied
    head), the fallback alone (its callback runs after the backward pass, when FSDP2 has freed
    the gathered tensors), norms and the embedding sharded as units of their own (resharded
    before the hook reads them), and LoRA adapters when peft is installed."""
    cases = ["qwen2", "llama", "gemma2", "qwen2+gated", "qwen2+units"]
    return cases + ["qwen2+lora", "llama+lora"] * (importlib.util.find_spec("peft") is not None)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    pytest.importorskip("transformers")
    if not hasattr(pytest.importorskip("torch.distributed.fsdp"), "fully_shard"):
        pytest.skip("this torch has no FSDP2 (fully_shard)")
    out = tmp_path_factory.mktemp("fsdp")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", "2", str(SCRIPT), str(out), *_cases()], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _gap(value, reference) -> float:
    return float(np.max(np.abs(value - reference)) / np.max(np.abs(reference)))


@pytest.mark.parametrize("case", _cases())
def test_sharded_scores_equal_the_unsharded_models(two_processes, case):
    for rank in (0, 1):
        meta = json.loads((two_processes / f"{case}.meta.{rank}.json").read_text())
        assert meta["world"] == 2 and meta["q_kind"] == "DTensor"
        assert meta["dtype"] == "torch.float64"
        assert meta["q_local"][0] * 2 == meta["q_global"][0]  # really sharded
        z = np.load(two_processes / f"{case}.scores.{rank}.npz")
        assert z["scores"].shape == z["reference"].shape == (6, 16)
        assert _gap(z["scores"], z["reference"]) <= TOLERANCE
        # negative controls: another seed, a parameter value read wrong
        assert _gap(z["other_seed"], z["reference"]) > 0.1
        assert _gap(z["moved"], z["reference"]) > 20 * TOLERANCE
    scores = [np.load(two_processes / f"{case}.scores.{r}.npz")["scores"] for r in (0, 1)]
    assert not np.allclose(scores[0], scores[1])  # each process sketched its own rows


def test_every_rule_runs_sharded(two_processes):
    for case in ("qwen2", "llama"):
        meta = json.loads((two_processes / f"{case}.meta.0.json").read_text())
        assert meta["coverage"] == ["elementwise", "embedding", "linear", "module"]
    assert json.loads((two_processes / "gemma2.meta.0.json").read_text())["coverage"] == [
        "elementwise", "embedding+linear", "linear", "module"]


def test_the_sketch_gathers_as_a_training_pass_does_and_reduces_nothing(two_processes):
    """Per chunk, the sharded sketch issues the all-gathers of one forward and backward and no
    reduce-scatter (it takes no parameter gradient)."""
    meta = json.loads((two_processes / "qwen2.meta.0.json").read_text())
    sketch, train = meta["sketch_comm"]["calls"], meta["train_comm"]["calls"]
    assert set(sketch) == {"all_gather_single"} and train.get("reduce_scatter_single", 0) > 0
    assert sketch["all_gather_single"] == meta["chunks"] * train["all_gather_single"]


def test_tensor_parallel_parameters_are_refused_in_one_line(two_processes):
    message = json.loads((two_processes / "refusals.0.json").read_text())["tensor_parallel"]
    assert message is not None and "outside any fully_shard unit" in message


def _flat(record: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in record.items():
        out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict)
                   else {prefix + key: value})
    return out


#: How a record file writes non-finite numbers (:func:`ustat_rl.formatting.json_ready`).
_NON_FINITE = ("inf", "-inf", "nan", None)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _record_gap(record: dict, single: dict) -> float:
    """The largest ``|x - y| / max(1, |y|)`` over the numeric fields (NaN and infinities must
    match; counts are numeric fields too; a number against an encoded infinity is an infinite
    gap); any other field that differs (a note, a status) makes the gap infinite too: the records
    then say different things."""
    a, b = _flat(record), _flat(single)
    assert a.keys() == b.keys()
    gap = 0.0
    for key, y in b.items():
        x = a[key]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
            if not math.isfinite(y) or not math.isfinite(x):
                assert str(x) == str(y), key
            else:
                gap = max(gap, abs(x - y) / max(1.0, abs(y)))
        elif _number(x) != _number(y) and all(_number(v) or v in _NON_FINITE for v in (x, y)):
            gap = math.inf  # a number on one side, an encoded infinity or NaN on the other
        elif x != y:
            gap = math.inf
    return gap


def _monitored():
    return [case for case in ("qwen2", "llama+lora") if case in _cases()]


@pytest.mark.parametrize("case", _monitored())
def test_the_monitor_on_the_sharded_model_gives_the_single_process_record(two_processes, case):
    """Both processes' records, windows of one and of two pooled batches (each process two
    groups of 4), equal the record of one process holding all 16 rows of a batch."""
    runs = [json.loads((two_processes / f"{case}.records.{r}.json").read_text()) for r in (0, 1)]
    for run in runs:
        assert [r["status"] for r in run["sharded"]] == ["ok", "ok"]
        assert [r["budget"] for r in run["single"]] == [16, 16]
        assert [r["n_samples"] for r in run["single"]] == [16, 32]
        for record, single in zip(run["sharded"], run["single"]):
            assert _record_gap(record, single) <= TOLERANCE
        # negative control: two of process 1's completions swapped across groups
        for record, single in zip(run["swapped"], run["single"]):
            assert _record_gap(record, single) > 1e-3


@pytest.mark.parametrize("case", _monitored())
def test_unequal_rows_under_fully_shard_skip_the_window(two_processes, case):
    """Process 1 with twice the rows would run more all-gathers than process 0: both record the
    window as skipped, saying why, instead of waiting on each other."""
    for rank in (0, 1):
        (record,) = json.loads((two_processes / f"{case}.records.{rank}.json").read_text())[
            "uneven"]
        assert record["status"] == "skipped" and "[3, 6] chunks" in record["reason"]
