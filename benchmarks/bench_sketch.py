"""Throughput and memory of projected per-sample scores: regenerated directions against a dense R.

Workload: the committed ``strong`` transformer policy's network (d = 103,508 parameters,
float32), one prompt from the arithmetic test split and ``n`` answers sampled from the policy;
the quantity is the projected score matrix ``R W`` of shape ``(n, k)`` (docs/theory.md section 7).
Routes, timed in the same run on the same sequences:

* ``dense R`` (the baseline): full per-sample scores by ``vmap`` (:func:`full_scores`), then one
  product with the materialised ``(k, d)`` matrix (:func:`torch_projection_matrix`), which must
  fit in memory;
* ``regenerated``: :func:`sketch_scores`, directions regenerated per parameter tensor and column
  chunk from the seed, never holding more than ``k x column_chunk`` of them.

Both routes give the same matrix (largest absolute difference printed). Throughput is samples
per second of wall time, best and median over ``--repeats`` interleaved rounds after an untimed
warm-up; the ratio is the median of the per-round ratios. Memory of the random directions is
counted exactly: ``k d`` floats for the dense route, ``k column_chunk`` for the regenerated one.

Usage::

    python benchmarks/bench_sketch.py --quick
    python benchmarks/bench_sketch.py --readme benchmarks/README.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ustat_rl.pilot.causal_lm import causal_lm_log_prob
from ustat_rl.pilot.sketch import (
    COLUMN_CHUNK,
    full_scores,
    sketch_scores,
    torch_projection_matrix,
)
from ustat_rl.policies.transformer import ArithmeticTask, load_study_policy, make_splits
from ustat_rl.runs.records import replace_markdown_section

SECTION = "## Projected per-sample scores"
SEED = 20260301


def workload(n: int):
    policy, _ = load_study_policy("strong", device="cpu")
    question = make_splits(ArithmeticTask(), seed=0).test[0]
    prompts = policy.encode_prompts([question] * n)  # (n, width)
    answers = policy.sample(prompts, torch.Generator().manual_seed(0))  # (n, A)
    mask = torch.ones(answers.shape, dtype=torch.float32)
    log_prob = causal_lm_log_prob(policy.model, prompts[0])
    params = {name: p.detach() for name, p in policy.model.named_parameters()}
    return log_prob, params, (answers, mask)


def dense(log_prob, params, samples, k: int) -> np.ndarray:
    full = full_scores(log_prob, params, samples)  # (n, d)
    R = torch_projection_matrix(params, k, SEED)  # (k, d)
    return full @ R.T


def regenerated(log_prob, params, samples, k: int) -> np.ndarray:
    return sketch_scores(log_prob, params, samples, k, SEED)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128, help="samples (default 128)")
    parser.add_argument("--k", type=int, default=256, help="projection rows (default 256)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="n = 16, k = 32, 1 repeat")
    parser.add_argument("--readme", type=Path, default=None, help="update this README section")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.k, args.repeats = 16, 32, 1
    log_prob, params, samples = workload(args.n)
    d = sum(p.numel() for p in params.values())
    check = np.max(np.abs(dense(log_prob, params, samples, args.k)
                          - regenerated(log_prob, params, samples, args.k)))
    times = {"dense R": [], "regenerated": []}
    for _ in range(args.repeats):
        for name, fn in (("dense R", dense), ("regenerated", regenerated)):
            start = time.perf_counter()
            fn(log_prob, params, samples, args.k)
            times[name].append(time.perf_counter() - start)
    ratios = [b / a for a, b in zip(times["regenerated"], times["dense R"])]
    res = {"n": args.n, "k": args.k, "d": d, "max_abs_diff": float(check), "times": times,
           "ratio": statistics.median(ratios),
           "floats": {"dense R": args.k * d, "regenerated": args.k * min(COLUMN_CHUNK, d)}}
    section = render(res)
    print(section)
    if args.readme is not None:
        update_readme(args.readme, section)
    return res


def render(res: dict) -> str:
    lines = [SECTION, "",
             f"Workload: `n = {res['n']}` sampled answers to one prompt of the committed `strong` "
             f"transformer policy (d = {res['d']:,}), projected to k = {res['k']} rows. Baseline: "
             "full per-sample scores by vmap, then a product with the materialised (k, d) "
             "matrix; `sketch_scores` regenerates the directions per parameter tensor and column "
             "chunk. The two agree to "
             f"{res['max_abs_diff']:.1e} (largest absolute difference).", "",
             "| route | samples/s best | samples/s median | random directions held | "
             "ratio to baseline (median) |", "|---|---|---|---|---|"]
    for name in ("dense R", "regenerated"):
        t = res["times"][name]
        ratio = 1.0 if name == "dense R" else res["ratio"]
        lines.append(f"| {name} | {res['n'] / min(t):,.0f} | {res['n'] / statistics.median(t):,.0f}"
                     f" | {res['floats'][name] * 8 / 2**20:,.1f} MiB | {ratio:.2f}x |")
    lines += ["", f"Measured on {platform.machine()}, Python {platform.python_version()}, torch "
              f"{torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on a "
              "shared machine (figures vary from run to run). Command:", "", "```",
              "OMP_NUM_THREADS=1 python benchmarks/bench_sketch.py --readme benchmarks/README.md",
              "```", ""]
    return "\n".join(lines)


def update_readme(path: Path, section: str) -> None:
    """Rewrite this benchmark's section of the README, leaving the rest untouched."""
    replace_markdown_section(path, SECTION, section)


if __name__ == "__main__":
    main()
