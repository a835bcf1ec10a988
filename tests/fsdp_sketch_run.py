"""Run by tests/scores/test_factored_fsdp.py under ``torchrun --nproc_per_node 2`` (gloo, CPU):
the factored sketch of a tiny causal LM in float64 whose decoder layers and root are sharded by
FSDP2 (``fully_shard``), each process sketching its own rows, next to the same model unsharded;
and the monitor (:class:`ustat_rl.frameworks.WindowMonitor`) on the sharded model next to one
process holding every row.

For each case (a family of :mod:`ustat_rl.scores.families`; ``+lora``: a PEFT adapter;
``+gated``: only the fallback module trainable; ``+units``: every norm and an untied embedding
sharded as units of their own) each process saves ``<case>.scores.<rank>.npz``: the sharded scores, the unsharded model's scores of the
same rows under the same seed, and two controls (the sharded scores under another seed, the
unsharded scores of a model with one RMSNorm weight moved), with the all-gathers counted during
the sharded sketch (and, for comparison, in one training forward and backward) and the wall
time of a window, sharded and not (with ``--timing`` only).

For the cases of :data:`MONITORED` each process also saves ``<case>.records.<rank>.json``: the
records of two windows of :class:`~ustat_rl.frameworks.WindowMonitor` fed this process's rows
and the sharded model (the rows of both processes gathered), the records of a monitor on a
process group of this process alone fed every process's rows and the unsharded model, and a
control: the sharded run with two of process 1's completions (of two groups) swapped and their
rewards left in place; and one window where process 1 holds twice the rows of process 0.

Usage: ``torchrun --nproc_per_node 2 tests/fsdp_sketch_run.py OUT [--timing] CASE [CASE ...]``,
e.g. ``qwen2 llama gemma2 qwen2+lora llama+lora qwen2+gated qwen2+units``.
"""

import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from ustat_rl.scores.chunks import sketch_rows
from ustat_rl.scores.coverage import parameter_coverage
from ustat_rl.scores.families import build_family
from ustat_rl.scores.spec import SketchSpec

ROWS, LENGTH, PROMPT, SEED = 6, 10, 4, 11
#: Cases whose monitor windows are compared; G completions per prompt, GROUPS prompts a process.
MONITORED, G, GROUPS = ("qwen2", "llama+lora"), 4, 2


class GatedNorm(nn.Module):
    """A norm with a matrix used non-linearly: no fast projector covers it (the fallback)."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(width))
        self.gate = nn.Parameter(0.3 * torch.randn(width, width))

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x * self.weight + 0.1 * torch.tanh(x @ self.gate)


def build(family, variant, dtype=torch.float64):
    model = build_family(family, seed=3, dtype=dtype)
    with torch.random.fork_rng():
        torch.manual_seed(4)
        # inside a decoder layer: a unit FSDP2 reshards after its forward
        model.model.layers[0].post_attention_layernorm = GatedNorm(
            model.config.hidden_size).to(dtype)
    if variant == "gated":  # the fallback alone trainable: the first hooked module, whose
        for name, p in model.named_parameters():  # callback runs after the backward pass
            p.requires_grad_("post_attention_layernorm" in name and ".0." in name)
    if variant == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"])).to(dtype)
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(5)
            for name, p in model.named_parameters():
                if "lora_B" in name:  # zero at initialisation: give the scores some
                    p.normal_(0.0, 0.2)
    return model


def rows(rank):
    gen = torch.Generator().manual_seed(100 + rank)  # each process its own completions
    tokens = torch.randint(3, 13, (ROWS, LENGTH), generator=gen)
    mask = torch.zeros(ROWS, LENGTH)
    mask[:, PROMPT:] = 1.0
    mask[0, LENGTH - 2:] = 0.0  # a shorter completion
    return tokens, mask


def layers(model):
    return (model.base_model.model if hasattr(model, "peft_config") else model).model.layers


class Collectives:
    """Counts the collectives (calls and bytes received, by name) issued while on."""

    NAMES = ("all_gather_single", "all_gather_into_tensor", "all_gather", "reduce_scatter_single",
             "reduce_scatter_tensor", "all_reduce")

    def __init__(self):
        self.calls, self.bytes, self.on = {}, {}, False
        for name in self.NAMES:
            setattr(dist, name, self._counting(name, getattr(dist, name)))

    def _counting(self, name, own):
        def count(output, *args, **kwargs):
            if self.on:
                self.calls[name] = self.calls.get(name, 0) + 1
                tensors = output if isinstance(output, (list, tuple)) else [output]
                self.bytes[name] = self.bytes.get(name, 0) + sum(
                    t.numel() * t.element_size() for t in tensors)
            return own(output, *args, **kwargs)
        return count

    def during(self, run):
        self.calls, self.bytes, self.on = {}, {}, True
        try:
            out = run()
        finally:
            self.on = False
        return out, dict(calls=self.calls, bytes=self.bytes)


def training_pass(model, tokens, mask):
    """One forward and backward of a log-likelihood, as a training step takes (for comparison)."""
    from ustat_rl.scores.sequence import sequence_log_probs

    sequence_log_probs(model, tokens, mask, 1.0).sum().backward()
    model.zero_grad(set_to_none=True)


def timed(model, tokens, mask, spec, repeats=3):
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        scores = sketch_rows(model, tokens, mask, spec, chunk_size=3)
        walls.append(time.perf_counter() - start)
    return scores, min(walls)


def monitor_rows(rank):
    """Process ``rank``'s generation batch: GROUPS prompts of 3 tokens, G completions each."""
    gen = torch.Generator().manual_seed(200 + rank)
    prompts = torch.randint(3, 13, (GROUPS, 3), generator=gen).repeat_interleave(G, dim=0)
    completions = torch.randint(3, 13, (GROUPS * G, 6), generator=gen)
    mask = torch.ones(completions.shape)
    mask[1, 4:] = 0.0  # a shorter completion
    rewards = torch.rand(GROUPS * G, generator=gen, dtype=torch.float64)
    return [prompts, torch.ones(prompts.shape), completions, mask, rewards]


def monitored(sharded, model):
    """Two windows (pool 2) of the monitor on this process's rows and the sharded model; of a
    monitor on this process alone with every process's rows and the unsharded model; and of the
    sharded run with process 1's rows 0 and G (two groups) swapped, rewards in place."""
    from ustat_rl.frameworks import (
        EstimatorConfig,
        Generation,
        LossWeighting,
        MonitorConfig,
        Schedule,
        WindowMonitor,
    )
    from ustat_rl.scores.spec import SketchSpec

    rank, size = dist.get_rank(), dist.get_world_size()
    alone = [dist.new_group([r]) for r in range(size)][rank]  # every process makes every group
    config = MonitorConfig(G, schedule=Schedule(every=1, pool=2, chunk_size=3),
                           sketch=SketchSpec(16, SEED, blocks=4), estimator=EstimatorConfig("grpo"),
                           loss=LossWeighting("dapo"))
    runs = dict(sharded=WindowMonitor(None, config), single=WindowMonitor(None, config, alone),
                swapped=WindowMonitor(None, config))
    for step in range(2):
        parts = [monitor_rows(size * step + r) for r in range(size)]
        mine = parts[rank]
        swapped = [x.clone() for x in mine]
        if rank == 1:
            for x in swapped[2:4]:
                x[[0, G]] = x[[G, 0]]
        every = [torch.cat([p[i] for p in parts]) for i in range(5)]
        runs["sharded"].step(sharded, Generation(*mine[:4]), mine[4], step=step)
        runs["single"].step(model, Generation(*every[:4]), every[4], step=step)
        runs["swapped"].step(sharded, Generation(*swapped[:4]), swapped[4], step=step)
    # process 1 with twice the rows: 6 chunks against 3, a window skipped rather than a hang
    runs["uneven"] = WindowMonitor(None, config)
    rows = [monitor_rows(rank)] + [monitor_rows(size + rank)] * rank
    uneven = [torch.cat([r[i] for r in rows]) for i in range(5)]
    runs["uneven"].step(sharded, Generation(*uneven[:4]), uneven[4])
    return {name: [r.to_dict() for r in run.records] for name, run in runs.items()}


def case(out, name, counter, timing):
    family, _, variant = name.partition("+")
    rank = dist.get_rank()
    torch.manual_seed(0)  # fully_shard keeps each process's own shard: the same model on all
    model = build(family, variant)
    moved = copy.deepcopy(model)
    with torch.no_grad():  # the control: one RMSNorm weight entry moved by 1e-2
        layers(moved)[0].input_layernorm.weight[0] += 1e-2
    sharded = copy.deepcopy(model)
    if variant == "units":  # the norms and the embedding units of their own, resharded
        for module in sharded.modules():  # after their forward, before the hooks read them
            table = isinstance(module, nn.Embedding) and not model.config.tie_word_embeddings
            if type(module).__name__.endswith("RMSNorm") or table:
                fully_shard(module)
    for layer in layers(sharded):
        fully_shard(layer)
    fully_shard(sharded)
    spec = SketchSpec(16, seed=SEED, blocks=4)
    tokens, mask = rows(rank)
    if timing:
        reference, wall_whole = timed(model, tokens, mask, spec)
    else:
        reference, wall_whole = sketch_rows(model, tokens, mask, spec, chunk_size=3), None
    sketch_rows(sharded, tokens, mask, spec, chunk_size=3)  # warm-up (FSDP's lazy set-up)
    scores, sketch_comm = counter.during(
        lambda: sketch_rows(sharded, tokens, mask, spec, chunk_size=3))
    _, train_comm = counter.during(lambda: training_pass(sharded, tokens[:3], mask[:3]))
    wall_sharded = timed(sharded, tokens, mask, spec)[1] if timing else None
    other_seed = sketch_rows(sharded, tokens, mask, SketchSpec(16, seed=SEED + 1, blocks=4),
                             chunk_size=3)
    control = sketch_rows(moved, tokens, mask, spec, chunk_size=3)
    weight = next(p for n, p in sharded.named_parameters() if "q_proj" in n and p.ndim == 2)
    np.savez(out / f"{name}.scores.{rank}.npz", scores=scores, reference=reference,
             other_seed=other_seed, moved=control)
    (out / f"{name}.meta.{rank}.json").write_text(json.dumps(dict(
        world=dist.get_world_size(), coverage=sorted(set(parameter_coverage(model).values())),
        q_kind=type(weight).__name__, q_global=list(weight.shape),
        q_local=list(weight.to_local().shape), sketch_comm=sketch_comm,
        train_comm=train_comm, parameters=sum(p.numel() for p in model.parameters()),
        chunks=-(-ROWS // 3), wall_whole=wall_whole, wall_sharded=wall_sharded,
        dtype=str(weight.dtype))))
    if name in MONITORED:
        (out / f"{name}.records.{rank}.json").write_text(json.dumps(
            monitored(sharded, model), default=str))


def refusals(out):
    """The message of what the sketch refuses: a DTensor parameter outside any fully_shard unit
    (tensor parallelism)."""
    from torch.distributed.tensor import Replicate, distribute_tensor, init_device_mesh

    messages = {}
    spec = SketchSpec(16, seed=SEED, blocks=4)
    tokens, mask = rows(dist.get_rank())
    model = build("qwen2", "")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    head = model.lm_head
    head.weight = nn.Parameter(distribute_tensor(head.weight.detach(), mesh, [Replicate()]))
    try:
        sketch_rows(model, tokens, mask, spec, chunk_size=3)
        messages["tensor_parallel"] = None
    except ValueError as error:
        messages["tensor_parallel"] = str(error)
    (out / f"refusals.{dist.get_rank()}.json").write_text(json.dumps(messages))


def main():
    out, names = Path(sys.argv[1]), sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)  # the documented command names a fresh folder
    timing = "--timing" in names
    dist.init_process_group("gloo")
    counter = Collectives()
    for name in (n for n in names if n != "--timing"):
        case(out, name, counter, timing)
    refusals(out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
