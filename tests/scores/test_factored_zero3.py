"""The factored sketch under DeepSpeed ZeRO-3: two CPU processes (``torchrun``, gloo,
``DS_ACCELERATOR=cpu``), each sketching its own rows of ``engine.module`` for a tiny causal LM in
float32 (ZeRO-3 partitions float16, bfloat16 and float32 parameters only: DeepSpeed 0.19.8
asserts it when ``deepspeed.initialize`` converts a float64 model) that
``deepspeed.initialize`` set up at stage 3 with every parameter partitioned
(``stage3_param_persistence_threshold`` 0: outside DeepSpeed's gather each parameter is an empty
tensor), must give the unsharded model's scores of the same rows under the same seed; and the
monitor (:class:`ustat_rl.frameworks.WindowMonitor`) fed each process's rows and the partitioned
model must give the record of one process fed every row and the unsharded model.

DeepSpeed is not a dependency (CI does not install it): without it this file is skipped, saying
so. The comparisons are those of tests/scores/test_factored_fsdp.py at float32's tolerance:
``max |sharded - unsharded| <= 1e-5 max |unsharded|`` on every process and case (measured with
DeepSpeed 0.19.8 from PyPI: at most 2.0e-7, float32 rounding of the same arithmetic in another
order); controls the same comparison rejects: the partitioned scores under another seed
(measured gap 1.05 to 1.86 of the scale) and the unsharded scores of a model with one RMSNorm
weight entry moved by 1e-2 (measured 5.7e-4 to 4.2e-3, above 20 times the tolerance). Records
within ``1e-5 max(1, |single|)`` (measured at most 1.2e-7); control: two completions of process
1 swapped across groups (gap 8.4e-4 to 0.55, above 20 times the tolerance). LoRA cases need peft,
which the deepspeed extra installs.
The run script is tests/zero3_sketch_run.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from script_loader import load_module

pytestmark = pytest.mark.integration  # distributed runs: the sketch in two torchrun processes

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "zero3_sketch_run.py"
ROOT = HERE.parents[1]
FSDP = load_module(HERE / "test_factored_fsdp.py", "_factored_fsdp_checks")
#: float32's tolerance (about 80 float32 ulps of the scale; measured gaps at most 2.0e-7)
TOLERANCE = 1e-5


def _cases():
    """linear, embedding, elementwise and fallback projectors (qwen2, llama, gemma2 with a tied
    head; its scaled embedding is read off by running the module again), the fallback alone,
    and LoRA adapters when peft is installed."""
    cases = ["qwen2", "llama", "gemma2", "qwen2+gated"]
    return cases + ["qwen2+lora", "llama+lora"] * (importlib.util.find_spec("peft") is not None)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (an optional extra)")
    out = tmp_path_factory.mktemp("zero3")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", "2", str(SCRIPT), str(out), *_cases()], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("case", _cases())
def test_partitioned_scores_equal_the_unsharded_models(two_processes, case):
    for rank in (0, 1):
        meta = json.loads((two_processes / f"{case}.meta.{rank}.json").read_text())
        assert meta["world"] == 2 and meta["dtype"] == "torch.float32"
        assert meta["q_local"] == [0]  # empty outside DeepSpeed's gather: really partitioned
        assert meta["q_partition"][0] * 2 == meta["q_global"][0] * meta["q_global"][1]
        z = np.load(two_processes / f"{case}.scores.{rank}.npz")
        assert z["scores"].shape == z["reference"].shape == (6, 16)
        assert FSDP._gap(z["scores"], z["reference"]) <= TOLERANCE
        # negative controls: another seed, a parameter value read wrong
        assert FSDP._gap(z["other_seed"], z["reference"]) > 0.1
        assert FSDP._gap(z["moved"], z["reference"]) > 20 * TOLERANCE
    scores = [np.load(two_processes / f"{case}.scores.{r}.npz")["scores"] for r in (0, 1)]
    assert not np.allclose(scores[0], scores[1])  # each process sketched its own rows


def test_every_rule_runs_partitioned(two_processes):
    for case in ("qwen2", "llama"):
        meta = json.loads((two_processes / f"{case}.meta.0.json").read_text())
        assert meta["coverage"] == ["elementwise", "embedding", "linear", "module"]
    assert json.loads((two_processes / "gemma2.meta.0.json").read_text())["coverage"] == [
        "elementwise", "embedding+linear", "linear", "module"]


def test_the_sketch_gathers_as_a_training_pass_does(two_processes):
    """With each module gathering its own parameters just before its forward and freeing them
    after it (no prefetch, nothing kept live), the sketch's hooks read the values while the
    module holds them: per chunk, the all-gathers of one training forward and backward
    (measured 41 per pass for qwen2; with the hooks after DeepSpeed's, DeepSpeed gathered the
    values read a second time on its own, and qwen2 gave 72 against 2 x 37)."""
    for case in ("qwen2", "gemma2"):
        meta = json.loads((two_processes / f"{case}.meta.0.json").read_text())
        sketch, train = meta["sketch_comm"]["calls"], meta["train_comm"]["calls"]
        assert set(sketch) == {"all_gather_function"} and train["all_gather_function"] > 0
        assert sketch["all_gather_function"] == meta["chunks"] * train["all_gather_function"]


def test_parameters_no_hook_gathers_are_refused_in_one_line(two_processes):
    message = json.loads((two_processes / "refusals.0.json").read_text())["zero_init_alone"]
    assert message is not None and "no DeepSpeed hook gathers it" in message


@pytest.mark.parametrize("case", [c for c in ("qwen2", "llama+lora") if c in _cases()])
def test_the_monitor_on_the_partitioned_model_gives_the_single_process_record(two_processes,
                                                                              case):
    runs = [json.loads((two_processes / f"{case}.records.{r}.json").read_text()) for r in (0, 1)]
    for run in runs:
        assert [r["status"] for r in run["sharded"]] == ["ok", "ok"]
        assert [r["n_samples"] for r in run["single"]] == [16, 32]
        for record, single in zip(run["sharded"], run["single"]):
            assert FSDP._record_gap(record, single) <= TOLERANCE
        for record, single in zip(run["swapped"], run["single"]):  # negative control
            assert FSDP._record_gap(record, single) > 20 * TOLERANCE
        # process 1 with twice the rows: skipped with the reason, not a hang
        (record,) = run["uneven"]
        assert record["status"] == "skipped" and "[3, 6] chunks" in record["reason"]
