"""Per-sample score throughput of the transformer policy: vmap against a loop of backward calls.

Workload: the committed ``strong`` policy (d = 103,508 parameters, float32), prompts from the
arithmetic test split, answers sampled from the policy; the quantity is the score matrix
``W = grad log pi(Y_i | x_i)``, shape ``(n, d)`` (docs/theory.md section 1). Routes, timed in the
same run on the same sequences:

* ``loop`` (the baseline): :meth:`TransformerPolicy.scores_by_loop`, one ``autograd.grad`` call
  per sequence;
* ``vmap chunk=k``: :meth:`TransformerPolicy.scores`, ``torch.func.vmap`` over ``grad`` of a
  ``functional_call``, ``k`` sequences per chunk;
* on CUDA when available, ``vmap`` again on the GPU.

Throughput is sequences per second of wall time, best and median of ``--repeats`` timed runs after
one untimed warm-up. Memory per sequence: on CPU, the growth of the process's peak resident set
while a route computes the ``n`` scores in a fresh process (high-water mark reset first),
divided by ``n``; it
includes the ``(n, d)`` float32 result (0.39 MiB a sequence). On CUDA,
``torch.cuda.max_memory_allocated`` during the route divided by ``n``. Results of the routes agree to
float32 rounding (largest absolute difference printed).

Usage::

    python benchmarks/bench_transformer.py --quick                 # a few seconds
    python benchmarks/bench_transformer.py --readme benchmarks/README.md
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from ustat_rl.policies.transformer import (
    ArithmeticTask,
    load_study_policy,
    make_splits,
    resolve_device,
)
from ustat_rl.runs.records import replace_markdown_section

SECTION = "## Transformer per-sample gradients"
TARGET_RATIO = 4.0


def workload(n: int, device):
    policy, _ = load_study_policy("strong", device=device)
    test = make_splits(ArithmeticTask(), seed=0).test
    prompts = policy.encode_prompts([test[i % len(test)] for i in range(n)])
    answers = policy.sample(prompts, torch.Generator(device=policy.device).manual_seed(0))
    return policy, prompts, answers


def run_route(policy, prompts, answers, route: str):
    if route == "loop":
        return policy.scores_by_loop(prompts, answers)
    chunk = int(route.split("=")[1])
    return policy.scores(prompts, answers, chunk_size=chunk)


def time_route(policy, prompts, answers, route: str, repeats: int) -> list[float]:
    run_route(policy, prompts[:8], answers[:8], route)  # warm-up
    rates = []
    for _ in range(repeats):
        if policy.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run_route(policy, prompts, answers, route)
        if policy.device.type == "cuda":
            torch.cuda.synchronize()
        rates.append(prompts.shape[0] / (time.perf_counter() - start))
    return rates


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_rss_growth_mib(fn) -> float:
    """Growth of the resident set's high-water mark while ``fn()`` runs (Linux), in MiB.

    The high-water mark is reset first (``/proc/self/clear_refs`` = 5), so earlier peaks of the
    process do not hide this one.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
    except (OSError, KeyError):
        return float("nan")
    fn()
    return (_status_kib("VmHWM") - before) / 1024.0


def fresh_process_memory(route: str, n: int) -> float:
    """MiB per sequence of peak-RSS growth for one route, in a fresh process (no reused pool)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--mem-route", route, "--n", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few sequences, one repeat")
    parser.add_argument("--n", type=int, default=None, help="sequences per timed run")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--readme", type=Path, default=None, help="rewrite this README's section")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--no-rss", action="store_true", help="skip the subprocess memory runs")
    parser.add_argument("--mem-route", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.n or (64 if args.quick else 512)
    if args.mem_route:  # child process of fresh_process_memory
        policy, prompts, answers = workload(n, "cpu")
        growth = peak_rss_growth_mib(lambda: run_route(policy, prompts, answers, args.mem_route))
        print(growth / n)
        return {}
    repeats = args.repeats or (1 if args.quick else 3)
    policy, prompts, answers = workload(n, "cpu")
    rows = []
    for route in ("loop", "vmap chunk=32", "vmap chunk=64", "vmap chunk=128"):
        rates = time_route(policy, prompts, answers, route, repeats)
        mem = float("nan") if args.no_rss else fresh_process_memory(route, n)
        rows.append({"route": route, "device": "cpu", "best": max(rates),
                     "median": statistics.median(rates), "mib_per_seq": mem})
    check = run_route(policy, prompts[:16], answers[:16], "chunk=64")
    diff = float((check - run_route(policy, prompts[:16], answers[:16], "loop")).abs().max())
    if torch.cuda.is_available():
        cuda_policy, cp, ca = workload(n, resolve_device("cuda"))
        for route in ("loop", "vmap chunk=256"):
            torch.cuda.reset_peak_memory_stats()
            rates = time_route(cuda_policy, cp, ca, route, repeats)
            mem = torch.cuda.max_memory_allocated() / 2**20 / n
            rows.append({"route": route, "device": "cuda", "best": max(rates),
                         "median": statistics.median(rates), "mib_per_seq": mem})
    base = {r["device"]: r["best"] for r in rows if r["route"] == "loop"}
    for r in rows:
        r["ratio"] = r["best"] / base[r["device"]]
    best_cpu = max(r["ratio"] for r in rows if r["device"] == "cpu")
    result = {"n": n, "repeats": repeats, "d": policy.dim, "max_abs_diff": diff, "rows": rows,
              "target_ratio": TARGET_RATIO, "best_cpu_ratio": best_cpu,
              "machine": f"{platform.machine()}, Python {platform.python_version()}, "
                         f"torch {torch.__version__}",
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = render(result)
    print(text)
    if args.readme:
        update_readme(args.readme, text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


def render(res: dict) -> str:
    lines = [SECTION, "",
             f"Workload: the committed `strong` transformer policy (d = {res['d']:,} parameters, "
             f"float32), {res['n']} sampled (prompt, answer) sequences of 12 tokens; the full score "
             "matrix W = grad log pi(Y|x), shape (n, d). Baseline: `scores_by_loop` (one "
             "`autograd.grad` per sequence) in the same run. Best (median) of "
             f"{res['repeats']} timed runs.", "",
             "| route | device | sequences/s best | sequences/s median | ratio to loop | peak memory MiB per sequence |",
             "|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['route']} | {r['device']} | {r['best']:,.0f} | {r['median']:,.0f} | "
                     f"{r['ratio']:.2f}x | {r['mib_per_seq']:.2f} |")
    met = "met" if res["best_cpu_ratio"] >= res["target_ratio"] else "NOT met"
    lines += ["", f"Target: vmap >= {res['target_ratio']:g}x the loop on CPU: {met} "
                  f"({res['best_cpu_ratio']:.2f}x). Largest |vmap - loop| = {res['max_abs_diff']:.1e}.",
              "", f"Measured on {res['machine']}, {res['when']}, on the shared 2-core development "
              "machine while other jobs ran (figures vary from run to run). Memory: growth of the "
              "peak resident set during the route divided by n, the (n, d) float32 result "
              "(0.39 MiB a sequence) included. Command:", "",
              "```", "OMP_NUM_THREADS=1 python benchmarks/bench_transformer.py --readme benchmarks/README.md",
              "```", ""]
    return "\n".join(lines)


def update_readme(path: Path, section: str) -> None:
    """Rewrite this benchmark's section of the README, leaving the rest untouched."""
    replace_markdown_section(path, SECTION, section)


if __name__ == "__main__":
    main()
