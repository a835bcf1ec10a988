"""The factored sketch under FSDP2 (``fully_shard``): two CPU processes (``torchrun``, gloo),
each sketching its own rows of a tiny causal LM whose decoder layers and root are sharded, must
give the unsharded model's scores of the same rows under the same seed.

Tolerance: ``max |sharded - unsharded| <= 1e-5 max |unsharded|`` on every process and case
(float32 scores; the runs measured here agree bitwise except where a norm is a unit of its own,
about 1e-7). Negative controls that the same comparison must reject: the sharded scores under
another seed, and the unsharded scores of a model with one RMSNorm weight entry moved by 1e-2
(what reading a wrong parameter value would give; measured 6e-4 to 4e-3 of the scale).
The run script is tests/fsdp_sketch_run.py.
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

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[1] / "fsdp_sketch_run.py"
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5


def _cases():
    """linear, embedding, elementwise and fallback rules (qwen2, llama, gemma2 with a tied
    head), the fallback alone (its callback runs after the backward pass, when FSDP2 has freed
    the gathered tensors), norms and the embedding sharded as units of their own (resharded
    before the hook reads them), and a LoRA adapter when peft is installed."""
    cases = ["qwen2", "llama", "gemma2", "qwen2+gated", "qwen2+units"]
    return cases + ["qwen2+lora"] * (importlib.util.find_spec("peft") is not None)


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
