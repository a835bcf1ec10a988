"""Projected per-sample scores at language-model scale: dense, factored hooks and jvp routes.

Workload: a GPT-2-style model built locally from a ``transformers.GPT2Config`` (no download;
:data:`MODEL`: vocabulary 50,257, width 512, 4 layers, 8 heads, 38.4M parameters, float32, random
initialisation), a padded batch of :data:`N_ANSWERS` answers of :data:`ANSWER_LEN` tokens after a
:data:`PROMPT_LEN`-token prompt (random token ids: the cost does not depend on them). The quantity
is the projected score matrix ``R W`` of shape ``(n, k)`` (docs/theory.md C31). Routes, in one
run:

* ``plain``: one forward + backward of ``sum_i log pi(answer_i | prompt_i)`` of the whole batch
  (``.backward()`` into ``.grad``), the floor no per-sample method can beat;
* ``factored``: :func:`~ustat_rl.scores.factored.factored_sketch_scores`, ``m = 16`` blocks, at
  every ``k`` in :data:`KS`;
* ``jvp``: :func:`~ustat_rl.scores.forward_sketch.jvp_sketch_scores`, one forward-mode pass per
  direction, measured on :data:`JVP_SUBSET` answers and :data:`JVP_DIRECTIONS` directions (its
  cost is linear in ``k``; larger ``k`` are written "not measured");
* ``dense`` (today's route): :func:`~ustat_rl.scores.sketch.sketch_scores`, per-sample gradients by
  vmap times directions regenerated per chunk, measured on :data:`DENSE_SUBSET` answers (chunk
  size 2) at the ``k`` in :data:`DENSE_KS`; its per-sequence rate is reported as measured there.

Each route runs in a fresh process (same model seed), so its memory figure is its own: the peak
resident set size (RSS, ``/proc/self/statm`` polled every 2 ms) above the RSS just before the
route starts, model and batch already built. Times are wall seconds of one run, after which the
goals (factored within 3x of plain in time per sequence and 2x in memory, and >= 20x the dense
route's sequences/s) are evaluated from the figures.

``--family qwen2`` measures the factored route against the plain pass on the family people
fine-tune with GRPO, built from configs of :mod:`ustat_rl.scores.families` (random weights, no
download): :data:`~ustat_rl.scores.families.QWEN2_100M` (Qwen2 architecture, Qwen2.5's
vocabulary, tied head, 108.2M parameters) with :data:`N_ANSWERS` answers, and the published
Qwen2.5-0.5B configuration (:data:`~ustat_rl.scores.families.QWEN2_5_0_5B`, 494.0M parameters)
with ``--small-batch`` answers (default :data:`SMALL_BATCH`); plus, on the 100M model, the
factored route with every RMSNorm sent through the exact per-sample fallback, the cost the
fallback would add (no parameter of these models uses it). Goals: time and memory within
:data:`FAMILY_LIMIT` x plain (goal :data:`FAMILY_GOAL` x).

``--quick`` runs only the pilot: :func:`~ustat_rl.scores.causal_lm.causal_lm_pilot` on the same
model (4 prompts x 4 answers of 16 tokens, factored, k = 64) written to ``--out`` and read back by
``ustat-rl gstar``; the full run includes it too.

``--fsdp`` measures the sketch under FSDP2 (``fully_shard``): two processes (``torchrun``; nccl
when two GPUs are present, else gloo on the CPU), a Qwen2-architecture model built from a
config (:data:`~ustat_rl.scores.families.QWEN2_100M`) with each decoder layer and the root
sharded, each process holding ``--small-batch`` answers of its own. Per process, the time and
peak memory (RSS above the start on the CPU; allocated GPU memory above the start on a GPU) of
the sketch of its batch (:func:`~ustat_rl.scores.chunks.sketch_rows`, one chunk, ``k`` the
last of :data:`FAMILY_KS`) against one plain forward + backward of the same batch under FSDP2
(the parameter gradients reduce-scattered, as a training step does); each route in a fresh
launch, ``--repeats`` times, interleaved; goal :data:`FSDP_GOAL` x. ``--fsdp --quick`` runs
both routes of a tiny Qwen2 in one launch (the machinery only: its figures are not comparable).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_sketch.py --quick --out /tmp/pilot.npz
    python benchmarks/bench_sketch.py --fsdp --repeats 3 --readme benchmarks/README.md
    OMP_NUM_THREADS=1 python benchmarks/bench_sketch.py --readme benchmarks/README.md
    python benchmarks/bench_sketch.py --family qwen2 --threads 2 --readme benchmarks/README.md
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from ustat_rl.runs.records import replace_markdown_section
from ustat_rl.scores.causal_lm import Sampling, causal_lm_pilot
from ustat_rl.scores.factored import factored_sketch_scores
from ustat_rl.scores.forward_sketch import jvp_sketch_scores
from ustat_rl.scores.sequence import sequence_log_probs, trainable_parameters
from ustat_rl.scores.sketch import (
    sketch_scores,
)
from ustat_rl.scores.spec import SketchSpec

SECTION = "## Projected per-sample scores"
SEED = 20260301
MODEL = dict(vocab_size=50257, n_positions=64, n_embd=512, n_layer=4, n_head=8)
PROMPT_LEN, ANSWER_LEN, N_ANSWERS = 8, 32, 64
KS = (64, 256, 1024)
BLOCKS = 16
JVP_SUBSET, JVP_DIRECTIONS = 8, 4
DENSE_SUBSET, DENSE_CHUNK, DENSE_KS = 2, 2, (64,)
PILOT = dict(prompts=4, group_size=4, max_new_tokens=16, k=64)
TIME_GOAL, MEMORY_GOAL, SPEEDUP_GOAL = 3.0, 2.0, 20.0
FAMILY_SECTION = "## Projected per-sample scores on Qwen2"
FAMILY_KS = (64, 256)
SMALL_BATCH = 16
FAMILY_LIMIT, FAMILY_GOAL = 1.5, 1.2
FSDP_SECTION = "## The sketch under FSDP2"
FSDP_GOAL, FSDP_PROCESSES, FSDP_ROUTES = 1.3, 2, ("plain", "sketch")


def _family_configs():
    from ustat_rl.scores.families import QWEN2_5_0_5B, QWEN2_100M

    return {"qwen2-100m": QWEN2_100M, "qwen2.5-0.5b": QWEN2_5_0_5B}


def build_model(name: str = "gpt2"):
    """The benchmark's model: the GPT-2-style one, or a Qwen2 of :func:`_family_configs`
    (transformers imported here, the optional extra)."""
    import transformers

    with torch.random.fork_rng():
        torch.manual_seed(0)
        if name == "gpt2":
            cfg = transformers.GPT2Config(**MODEL, attn_implementation="eager")
            return transformers.GPT2LMHeadModel(cfg).eval()
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            **_family_configs()[name])).eval()


def _vocab(name: str) -> int:
    return MODEL["vocab_size"] if name == "gpt2" else _family_configs()[name]["vocab_size"]


@contextlib.contextmanager
def _norms_through_the_fallback():
    """Send every elementwise module (the RMSNorms) through the exact per-sample fallback."""
    from ustat_rl.scores.projectors import Elementwise

    covers = Elementwise.covers
    Elementwise.covers = lambda self, module, own: False  # the next rule, "module", takes them
    try:
        yield
    finally:
        Elementwise.covers = covers


def workload(n: int, name: str = "gpt2"):
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, _vocab(name), (n, PROMPT_LEN + ANSWER_LEN), generator=gen)
    mask = torch.zeros(tokens.shape)
    mask[:, PROMPT_LEN:] = 1.0
    return tokens, mask


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Peak RSS above the RSS at entry, polled in a thread (Linux ``/proc``)."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())
        self.delta = self.peak - self.start


def _route_fn(route: str, model, tokens, mask, k: int):
    if route == "fallback":
        from ustat_rl.scores.coverage import uncovered_parameters

        with _norms_through_the_fallback():
            if not uncovered_parameters(model):
                raise RuntimeError("the fallback route sent no parameter through the fallback")

        def run():
            with _norms_through_the_fallback():
                return factored_sketch_scores(model, tokens, mask,
                                              SketchSpec(k, SEED, blocks=BLOCKS))
        return run
    if route == "plain":
        def run():
            model.zero_grad(set_to_none=True)
            sequence_log_probs(model, tokens, mask).sum().backward()
        return run
    if route == "factored":
        return lambda: factored_sketch_scores(model, tokens, mask,
                                              SketchSpec(k, SEED, blocks=BLOCKS))
    if route == "jvp":
        return lambda: jvp_sketch_scores(model, tokens, mask, SketchSpec(k, SEED, blocks=1))
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}

    def log_prob(p, sample):
        return sequence_log_probs(model, sample[0][None], sample[1][None], params=p)[0]

    return lambda: sketch_scores(log_prob, params, (tokens, mask), SketchSpec(k, SEED, blocks=1),
                                 chunk_size=DENSE_CHUNK)


def measure_one(route: str, n: int, k: int, model: str = "gpt2") -> dict:
    """Time and peak RSS of one route in this process."""
    name, model = model, build_model(model)
    tokens, mask = workload(n, name)
    run = _route_fn(route, model, tokens, mask, k)
    gc.collect()
    with PeakRSS() as mem:
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
    return {"route": route, "n": n, "k": k, "seconds": seconds, "seq_per_s": n / seconds,
            "peak_mib": mem.delta / 2**20, "model": name}


def measure(route: str, n: int, k: int, model: str = "gpt2") -> dict:
    """:func:`measure_one` in a fresh process (so the memory figure is the route's own)."""
    spec = json.dumps({"route": route, "n": n, "k": k, "model": model})
    out = subprocess.run([sys.executable, __file__, "--one", spec], capture_output=True,
                         text=True, check=True, env=os.environ.copy())
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {model} {route:9s} n={n:3d} k={k:5d}: {row['seconds']:8.2f} s, {row['seq_per_s']:8.3f} "
          f"seq/s, peak RSS +{row['peak_mib']:,.0f} MiB", flush=True)
    return row


def pilot(out: Path) -> dict:
    """``causal_lm_pilot`` on the benchmark model, its file read back by ``ustat-rl gstar``."""
    from ustat_rl.interface.cli import main as cli_main

    model = build_model()
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, MODEL["vocab_size"], (PROMPT_LEN,), generator=gen)
               for _ in range(PILOT["prompts"])]
    start = time.perf_counter()
    rollouts = causal_lm_pilot(model, prompts, lambda i, answer: float(sum(answer) % 2),
                               Sampling(PILOT["group_size"], PILOT["max_new_tokens"], SEED),
                               SketchSpec(PILOT["k"], SEED),
                               model_name="bench_sketch GPT-2 38M")
    seconds = time.perf_counter() - start
    rollouts.save(out)
    code = cli_main(["gstar", str(out), "--budget", "64"])
    print(f"pilot: {rollouts.n_samples} answers, route {rollouts.sketch_route}, "
          f"{rollouts.sketch_blocks} blocks, k = {rollouts.sketch_dim}: {seconds:.1f} s; "
          f"ustat-rl gstar exit {code}")
    return {"seconds": seconds, "route": rollouts.sketch_route, "gstar_exit": code,
            "n": rollouts.n_samples, "param_dim": rollouts.param_dim}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the pilot and gstar")
    parser.add_argument("--out", type=Path, default=None, help="pilot rollouts file (.npz)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--readme", type=Path, default=None, help="update this README section")
    parser.add_argument("--family", choices=("qwen2",), default=None,
                        help="measure the factored route on Qwen2 models instead (see above)")
    parser.add_argument("--small-batch", type=int, default=SMALL_BATCH,
                        help=f"answers on Qwen2.5-0.5B (default {SMALL_BATCH})")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each route with --family, interleaved (default 3)")
    parser.add_argument("--fsdp", action="store_true",
                        help="the sketch under FSDP2 against a plain pass (see above)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fsdp-rank", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.threads, args.small_batch, args.repeats) < 1:
        parser.error("--threads, --small-batch and --repeats must be >= 1")
    torch.set_num_threads(args.threads)
    if args.one is not None:
        row = measure_one(**json.loads(args.one))
        print(json.dumps(row))
        return row
    if args.fsdp_rank is not None:
        return fsdp_rank(json.loads(args.fsdp_rank))
    if args.fsdp:
        return fsdp_main(args)
    if args.family is not None:
        return family_main(args)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        res = {"pilot": pilot(args.out or Path(tmp) / "pilot.npz")}
    if args.quick:
        return res
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    rows = [measure("plain", N_ANSWERS, 0)]
    rows += [measure("factored", N_ANSWERS, k) for k in KS]
    rows.append(measure("jvp", JVP_SUBSET, JVP_DIRECTIONS))
    rows += [measure("dense", DENSE_SUBSET, k) for k in DENSE_KS]
    res.update(rows=rows, seconds=time.perf_counter() - start,
               d=sum(p.numel() for p in trainable_parameters(build_model()).values()))
    section = render(res)
    print(section)
    if args.readme is not None:
        replace_markdown_section(args.readme, SECTION, section)
    return res


def _goals(rows) -> list[str]:
    plain = next(r for r in rows if r["route"] == "plain")
    out = []
    for r in (r for r in rows if r["route"] == "factored"):
        t = plain["seq_per_s"] / r["seq_per_s"]
        m = r["peak_mib"] / plain["peak_mib"]
        dense = next((d for d in rows if d["route"] == "dense" and d["k"] == r["k"]), None)
        speed = (f"{r['seq_per_s'] / dense['seq_per_s']:,.0f}x the dense route's sequences/s "
                 f"({'met' if r['seq_per_s'] >= SPEEDUP_GOAL * dense['seq_per_s'] else 'NOT met'})"
                 if dense else "dense route not measured at this k")
        out.append(f"- k = {r['k']}: time per sequence {t:.2f}x plain "
                   f"({'met' if t <= TIME_GOAL else 'NOT met'}, goal <= {TIME_GOAL:g}x); peak "
                   f"memory {m:.2f}x plain ({'met' if m <= MEMORY_GOAL else 'NOT met'}, goal <= "
                   f"{MEMORY_GOAL:g}x); {speed}, goal >= {SPEEDUP_GOAL:g}x.")
    return out


def render(res: dict) -> str:
    rows = res["rows"]
    plain = next(r for r in rows if r["route"] == "plain")
    lines = [SECTION, "",
             f"Workload: a GPT-2-style model built from a config (vocabulary 50,257, width 512, "
             f"4 layers, 8 heads; d = {res['d']:,} parameters, float32), answers of {ANSWER_LEN} "
             f"tokens after a {PROMPT_LEN}-token prompt, the projected scores `R W` (docs/theory.md "
             f"C31). Baseline: one plain forward + backward of the summed log-probabilities of "
             f"{N_ANSWERS} answers. Each route ran once, in its own process, with one torch "
             "thread; memory is the peak RSS above the RSS before the route (model and batch "
             "built). The jvp and dense routes are too slow for the full batch: they were "
             "measured on the subsets in the `answers` column, and their sequences/s are as "
             "measured there. The factored route is below 1x because its backward pass stops at "
             "the embedding outputs and computes no weight gradients.", "",
             "| route | answers | k | seconds | sequences/s | time per sequence / plain | "
             "peak RSS above start | memory / plain |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = "-" if r["route"] == "plain" else str(r["k"])
        lines.append(f"| {r['route']} | {r['n']} | {k} | {r['seconds']:.2f} | "
                     f"{r['seq_per_s']:.3g} | {plain['seq_per_s'] / r['seq_per_s']:.2f}x | "
                     f"{r['peak_mib']:,.0f} MiB | {r['peak_mib'] / plain['peak_mib']:.2f}x |")
    jvp = next(r for r in rows if r["route"] == "jvp")
    per_direction = jvp["seconds"] / (jvp["k"] * jvp["n"])
    for k in KS:
        lines.append(f"| jvp | {N_ANSWERS} | {k} | not measured | not measured (linear in k: "
                     f"about {1.0 / (per_direction * k):.2g} from the row above) | | | |")
    for k in (k for k in KS if k not in DENSE_KS):
        lines.append(f"| dense | {N_ANSWERS} | {k} | not measured | not measured (the "
                     "regenerated directions alone are k d normals per chunk) | | | |")
    lines += ["", "Goals for the factored route, evaluated from the figures above:", ""]
    lines += _goals(rows)
    p = res["pilot"]
    lines += ["", f"Pilot (`--quick`): `causal_lm_pilot` on the same model, {p['n']} answers "
              f"({PILOT['prompts']} prompts x {PILOT['group_size']}, {PILOT['max_new_tokens']} "
              f"new tokens, key-value cache), route {p['route']}, k = {PILOT['k']}: "
              f"{p['seconds']:.1f} s; `ustat-rl gstar` on its file exited {p['gstar_exit']}.",
              "", f"Measured on {platform.machine()}, Python {platform.python_version()}, torch "
              f"{torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on a "
              f"shared machine (figures vary from run to run); {res['seconds']:.0f} s in all. "
              "Command:", "", "```",
              "OMP_NUM_THREADS=1 python benchmarks/bench_sketch.py --readme benchmarks/README.md",
              "```", ""]
    return "\n".join(lines)


def family_main(args) -> dict:
    """The Qwen2 measurements (``--family qwen2``), each route in a fresh process."""
    start = time.perf_counter()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    rows = []
    for name, n in (("qwen2-100m", N_ANSWERS), ("qwen2.5-0.5b", args.small_batch)):
        routes = [("plain", 0)] + [("factored", k) for k in FAMILY_KS]
        if name == "qwen2-100m":
            routes.append(("fallback", FAMILY_KS[-1]))
        # interleaved repeats, so a change of load over the run falls on every route alike
        runs = [[measure(route, n, k, name) for route, k in routes] for _ in range(args.repeats)]
        for j in range(len(routes)):
            same = [run[j] for run in runs]
            row = dict(same[0], seconds=statistics.median(r["seconds"] for r in same),
                       peak_mib=statistics.median(r["peak_mib"] for r in same),
                       repeats=len(same), spread=(min(r["seconds"] for r in same),
                                                  max(r["seconds"] for r in same)))
            row["seq_per_s"] = n / row["seconds"]
            rows.append(row)
    res = {"rows": rows, "seconds": time.perf_counter() - start, "threads": args.threads,
           "load": os.getloadavg(), "repeats": args.repeats}
    section = render_family(res)
    print(section)
    if args.readme is not None:
        replace_markdown_section(args.readme, FAMILY_SECTION, section)
    return res


def render_family(res: dict) -> str:
    """The README section of ``--family qwen2`` from its rows."""
    configs = _family_configs()
    lines = [FAMILY_SECTION, "",
             "Workloads: `qwen2-100m` (Qwen2 architecture, Qwen2.5's vocabulary of 151,936, "
             "tied head, width 512, 8 layers of 8 query and 2 key-value heads, 108.2M "
             "parameters) and `qwen2.5-0.5b` (the published Qwen2.5-0.5B `config.json` values: "
             "width 896, 24 layers, 14 query and 2 key-value heads, tied head, 494.0M "
             "parameters), both built from configs with random weights (float32, no download), "
             f"answers of {ANSWER_LEN} tokens after a {PROMPT_LEN}-token prompt, "
             f"`{configs['qwen2-100m']['hidden_act']}` MLPs, RMSNorm, q/k/v biases. Baseline: "
             "one plain forward + backward of the summed log-probabilities of the same batch. "
             f"Each route ran {res['repeats']} times, interleaved with the others, each run in "
             f"its own process with {res['threads']} torch thread(s); the table gives the "
             "median seconds (the range over the runs in brackets) and the median peak RSS "
             "above the RSS before the route (model and batch built). "
             "`fallback` is the factored route with every RMSNorm sent through the exact "
             "per-sample fallback: what the fallback would cost; no parameter of these models "
             "uses it.", "",
             "| model | route | answers | k | seconds, median [range] | time / plain | peak RSS above start | "
             "memory / plain |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for r in res["rows"]:
        plain = next(p for p in res["rows"] if p["model"] == r["model"]
                     and p["route"] == "plain")
        t, m = r["seconds"] / plain["seconds"], r["peak_mib"] / plain["peak_mib"]
        k = "-" if r["route"] == "plain" else str(r["k"])
        lines.append(f"| {r['model']} | {r['route']} | {r['n']} | {k} | {r['seconds']:.1f} "
                     f"[{r['spread'][0]:.1f}, {r['spread'][1]:.1f}] | "
                     f"{t:.2f}x | {r['peak_mib']:,.0f} MiB | {m:.2f}x |")
        if r["route"] == "factored":
            def word(x):
                return ("goal met" if x <= FAMILY_GOAL else "within the limit"
                        if x <= FAMILY_LIMIT else "NOT within the limit")
            verdicts.append(f"- {r['model']}, k = {r['k']}, {r['n']} answers: time {t:.2f}x "
                            f"plain ({word(t)}), memory {m:.2f}x plain ({word(m)}); limit "
                            f"{FAMILY_LIMIT:g}x, goal {FAMILY_GOAL:g}x.")
    load = ", ".join(f"{x:.1f}" for x in res["load"])
    lines += ["", "Against the limits, from the figures above:", "", *verdicts, "",
              f"Measured on {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, torch {torch.__version__}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at the end "
              f"{load}; {res['seconds']:.0f} s in all. GPU: not measured: no GPU. Command:",
              "", "```", f"python benchmarks/bench_sketch.py --family qwen2 --threads "
              f"{res['threads']} --small-batch {next(r['n'] for r in res['rows'] if r['model'] == 'qwen2.5-0.5b')} "
              f"--repeats {res['repeats']} --readme benchmarks/README.md", "```", ""]
    return "\n".join(lines)


def _fsdp_model(name: str):
    """The ``--fsdp`` model: Qwen2-100M, or for ``--quick`` the laptop-size Qwen2."""
    if name == "qwen2-100m":
        return build_model(name)
    from ustat_rl.scores.families import build_family

    return build_family("qwen2", seed=0).eval()


def fsdp_rank(spec: dict) -> list:
    """One process of ``--fsdp`` (under ``torchrun``): its rows of each route in ``spec``."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from ustat_rl.scores.chunks import sketch_rows
    from ustat_rl.scores.spec import SketchSpec

    cuda = torch.cuda.device_count() >= FSDP_PROCESSES
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    model = _fsdp_model(spec["model"]).to(device)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    gen = torch.Generator().manual_seed(100 + rank)  # each process its own answers
    tokens = torch.randint(0, model.config.vocab_size, (spec["n"], PROMPT_LEN + ANSWER_LEN),
                           generator=gen)
    mask = torch.zeros(tokens.shape)
    mask[:, PROMPT_LEN:] = 1.0
    tokens, mask = tokens.to(device), mask.to(device)
    sketch = SketchSpec(spec["k"], seed=SEED, blocks=BLOCKS)

    def plain():
        sequence_log_probs(model, tokens, mask).sum().backward()
        model.zero_grad(set_to_none=True)

    runs = {"plain": plain,
            "sketch": lambda: sketch_rows(model, tokens, mask, sketch, chunk_size=spec["n"])}
    with torch.no_grad():  # FSDP2's lazy set-up, outside the measurements
        model(tokens[:1])
    rows = []
    for route in spec["routes"]:
        gc.collect()
        dist.barrier()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        with PeakRSS() as mem:
            start = time.perf_counter()
            runs[route]()
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() - base if cuda else mem.delta
        rows.append(dict(route=route, rank=rank, seconds=seconds, peak_mib=peak / 2**20,
                         memory="allocated GPU memory" if cuda else "RSS", n=spec["n"],
                         k=spec["k"], model=spec["model"], device=str(device)))
    Path(spec["out"], f"{spec['tag']}.{rank}.json").write_text(json.dumps(rows))
    dist.destroy_process_group()
    return rows


def fsdp_main(args) -> dict:
    """``--fsdp``: each route in a fresh ``torchrun`` launch of :data:`FSDP_PROCESSES`
    processes, ``--repeats`` times, interleaved (``--quick``: both routes in one launch)."""
    start = time.perf_counter()
    name, n = ("qwen2-tiny", 4) if args.quick else ("qwen2-100m", args.small_batch)
    launches = [list(FSDP_ROUTES)] if args.quick else \
        [[route] for _ in range(args.repeats) for route in FSDP_ROUTES]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        for tag, routes in enumerate(launches):
            spec = dict(model=name, n=n, k=FAMILY_KS[-1], routes=routes, out=tmp, tag=tag)
            done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc_per_node", str(FSDP_PROCESSES), __file__,
                                   "--threads", str(args.threads), "--fsdp-rank",
                                   json.dumps(spec)], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"the --fsdp launch {routes} failed:\n{done.stderr[-3000:]}")
        rows = [row for f in sorted(Path(tmp).glob("*.json"))
                for row in json.loads(f.read_text())]
    repeats = 1 if args.quick else args.repeats
    res = {"rows": rows, "summary": _fsdp_summary(rows), "seconds": time.perf_counter() - start,
           "threads": args.threads, "load": os.getloadavg(), "repeats": repeats,
           "quick": args.quick}
    section = render_fsdp(res)
    print(section)
    if args.readme is not None and not args.quick:
        replace_markdown_section(args.readme, FSDP_SECTION, section)
    return res


def _fsdp_summary(rows) -> list[dict]:
    """Per process and route: median seconds and peak memory, the range of the seconds, and
    the ratios to the plain pass of the same process."""
    out = []
    for rank in sorted({r["rank"] for r in rows}):
        med = {}
        for route in FSDP_ROUTES:
            same = [r for r in rows if r["rank"] == rank and r["route"] == route]
            med[route] = dict(same[0], seconds=statistics.median(r["seconds"] for r in same),
                              peak_mib=statistics.median(r["peak_mib"] for r in same),
                              spread=(min(r["seconds"] for r in same),
                                      max(r["seconds"] for r in same)), repeats=len(same))
        for route in FSDP_ROUTES:
            out.append(dict(med[route],
                            time_ratio=med[route]["seconds"] / med["plain"]["seconds"],
                            memory_ratio=med[route]["peak_mib"] / med["plain"]["peak_mib"]))
    return out


def render_fsdp(res: dict) -> str:
    """The README section of ``--fsdp`` from its summary."""
    first = res["summary"][0]
    lines = [FSDP_SECTION, "",
             f"Workload: `{first['model']}` built from a config (random weights, float32), "
             f"each decoder layer and the root sharded by FSDP2 (`fully_shard`) over "
             f"{FSDP_PROCESSES} processes on {first['device'].split(':')[0].upper()}; each "
             f"process {first['n']} answers of its own, of {ANSWER_LEN} tokens after a "
             f"{PROMPT_LEN}-token prompt. `sketch`: `sketch_rows` of the process's batch in one "
             f"chunk, k = {first['k']} in {BLOCKS} blocks; `plain`: one forward + backward of "
             "the summed log-probabilities of the same batch under FSDP2 (gradients "
             f"reduce-scattered). Each route ran {res['repeats']} time(s), each run a fresh "
             f"launch, interleaved; median seconds [range] and median peak {first['memory']} "
             "above the start, per process.", "",
             "| process | route | seconds, median [range] | time / plain | peak memory above "
             "start | memory / plain |", "|---|---|---|---|---|---|"]
    verdicts = []
    for r in res["summary"]:
        lines.append(f"| {r['rank']} | {r['route']} | {r['seconds']:.2f} [{r['spread'][0]:.2f}"
                     f", {r['spread'][1]:.2f}] | {r['time_ratio']:.2f}x | {r['peak_mib']:,.0f} "
                     f"MiB | {r['memory_ratio']:.2f}x |")
        if r["route"] == "sketch":
            verdicts.append(
                f"- process {r['rank']}: time {r['time_ratio']:.2f}x plain, memory "
                f"{r['memory_ratio']:.2f}x plain (goal {FSDP_GOAL:g}x: time "
                f"{'met' if r['time_ratio'] <= FSDP_GOAL else 'NOT met'}, memory "
                f"{'met' if r['memory_ratio'] <= FSDP_GOAL else 'NOT met'}).")
    load = ", ".join(f"{x:.1f}" for x in res["load"])
    lines += ["", "Against the goal, from the figures above:", "", *verdicts, "",
              f"Measured on {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, torch {torch.__version__}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {res['threads']} torch "
              f"thread(s) per process; load average at the end {load}; {res['seconds']:.0f} s "
              f"in all.{' GPU: not measured (no GPU here).' if first['device'] == 'cpu' else ''}"
              " Command:", "", "```",
              f"python benchmarks/bench_sketch.py --fsdp --small-batch {first['n']} --repeats "
              f"{res['repeats']} --threads {res['threads']} --readme benchmarks/README.md",
              "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
