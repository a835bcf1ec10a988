"""Run by tests/scores/test_factored_zero3.py under ``torchrun --nproc_per_node 2`` (gloo, CPU,
``DS_ACCELERATOR=cpu``): the factored sketch of a tiny causal LM in float64 whose parameters
DeepSpeed ZeRO-3 partitions (``deepspeed.initialize``, stage 3, every parameter partitioned:
``stage3_param_persistence_threshold`` 0), each process sketching its own rows of
``engine.module``, next to the same model unsharded. No prefetch and nothing kept live, so each
module gathers its own parameters before its forward and frees them after it.

For each case (a family of :mod:`ustat_rl.scores.families`; ``+gated``: a norm of layer 0
replaced by one with a matrix used non-linearly, which takes the exact fallback; ``+lora``: a
PEFT adapter) each process saves ``<case>.scores.<rank>.npz``: the sharded scores, the unsharded
model's scores of the same rows under the same seed, and two controls (the sharded scores under
another seed, the unsharded scores of a model with one RMSNorm weight entry moved by 1e-2), and
``<case>.meta.<rank>.json`` (what the parameters look like outside DeepSpeed's gather, the
projectors, the DeepSpeed version, DeepSpeed's all-gathers counted during the sketch and,
for comparison, in one training forward and backward). For the cases of ``fsdp_sketch_run.MONITORED``,
``<case>.records.<rank>.json``: the monitor's records as tests/fsdp_sketch_run.py makes them
(``monitored``), on the ZeRO-3 model. ``refusals.<rank>.json``: the message for a model whose
parameters ``deepspeed.zero.Init`` partitioned but no engine gathers.

Usage: ``torchrun --nproc_per_node 2 tests/zero3_sketch_run.py OUT CASE [CASE ...]``, e.g.
``qwen2 llama gemma2 qwen2+gated qwen2+lora``.
"""

import copy
import json
import sys
from pathlib import Path

import deepspeed
import numpy as np
import torch
import torch.distributed as dist

# the same models, rows and counts as under FSDP2 (this script's folder is on the path)
from fsdp_sketch_run import MONITORED, Collectives, build, layers, monitored, rows, training_pass
from torch import nn

from ustat_rl.scores.chunks import sketch_rows
from ustat_rl.scores.coverage import parameter_coverage
from ustat_rl.scores.spec import SketchSpec

SEED = 11
#: DeepSpeed's ZeRO-3 partitions float16, bfloat16 and float32 parameters only (0.19.8 asserts it
#: when deepspeed.initialize converts a float64 model, as deepspeed.zero.Init does), so the
#: models here are float32 and the comparison's tolerance is float32's
DTYPE = torch.float32
CONFIG = dict(train_micro_batch_size_per_gpu=6, gradient_accumulation_steps=1,
              optimizer=dict(type="Adam", params=dict(lr=1e-3, torch_adam=True)),
              zero_optimization=dict(stage=3, stage3_param_persistence_threshold=0,
                                     stage3_prefetch_bucket_size=0, stage3_max_live_parameters=0,
                                     stage3_max_reuse_distance=0))


class DeepSpeedCollectives(Collectives):
    """Counts DeepSpeed's own all-gathers and reduce-scatters (its backend binds torch's
    functions once, so patching ``torch.distributed`` does not see them)."""

    NAMES = ("all_gather_function", "reduce_scatter_function")

    def __init__(self):
        from deepspeed.comm import comm

        self.calls, self.bytes, self.on = {}, {}, False
        for name in self.NAMES:
            setattr(comm.cdb, name, self._counting(name, getattr(comm.cdb, name)))

    def _counting(self, name, own):
        def count(*args, **kwargs):
            if self.on:
                self.calls[name] = self.calls.get(name, 0) + 1
            return own(*args, **kwargs)
        return count


def case(out, name, counter):
    family, _, variant = name.partition("+")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = build(family, variant, DTYPE)
    moved = copy.deepcopy(model)
    with torch.no_grad():  # the control: one RMSNorm weight entry moved by 1e-2
        layers(moved)[0].input_layernorm.weight[0] += 1e-2
    sharded = copy.deepcopy(model)
    engine, *_ = deepspeed.initialize(model=sharded, config=CONFIG, model_parameters=[
        p for p in sharded.parameters() if p.requires_grad])
    spec = SketchSpec(16, seed=SEED, blocks=4)
    tokens, mask = rows(rank)
    reference = sketch_rows(model, tokens, mask, spec, chunk_size=3)
    sketch_rows(engine.module, tokens, mask, spec, chunk_size=3)  # DeepSpeed records its trace
    scores, sketch_comm = counter.during(
        lambda: sketch_rows(engine.module, tokens, mask, spec, chunk_size=3))
    _, train_comm = counter.during(lambda: training_pass(engine.module, tokens[:3], mask[:3]))
    other_seed = sketch_rows(engine.module, tokens, mask,
                             SketchSpec(16, seed=SEED + 1, blocks=4), chunk_size=3)
    control = sketch_rows(moved, tokens, mask, spec, chunk_size=3)
    weight = next(p for n, p in engine.module.named_parameters() if "q_proj" in n and p.ndim)
    np.savez(out / f"{name}.scores.{rank}.npz", scores=scores, reference=reference,
             other_seed=other_seed, moved=control)
    (out / f"{name}.meta.{rank}.json").write_text(json.dumps(dict(
        world=dist.get_world_size(), coverage=sorted(set(parameter_coverage(model).values())),
        q_local=list(weight.shape), q_global=list(weight.ds_shape),
        q_partition=list(weight.ds_tensor.shape), dtype=str(weight.dtype),
        deepspeed=deepspeed.__version__, sketch_comm=sketch_comm, train_comm=train_comm,
        chunks=-(-len(tokens) // 3))))
    if name in MONITORED:
        (out / f"{name}.records.{rank}.json").write_text(json.dumps(
            monitored(engine.module, model), default=str))
    engine.destroy()


def refusals(out):
    """A model partitioned by ``deepspeed.zero.Init`` alone: no hook gathers its parameters."""
    messages = {}
    with deepspeed.zero.Init(config_dict_or_path=CONFIG):
        model = nn.Sequential(nn.Embedding(13, 8), nn.Linear(8, 13))
    tokens, mask = rows(dist.get_rank())
    try:
        sketch_rows(model, tokens, mask, SketchSpec(16, seed=SEED, blocks=4), chunk_size=3)
        messages["zero_init_alone"] = None
    except ValueError as error:
        messages["zero_init_alone"] = str(error)
    (out / f"refusals.{dist.get_rank()}.json").write_text(json.dumps(messages))


def main():
    out, names = Path(sys.argv[1]), sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)  # the documented command names a fresh folder
    deepspeed.init_distributed(dist_backend="gloo")
    counter = DeepSpeedCollectives()
    for name in names:
        case(out, name, counter)
    refusals(out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
