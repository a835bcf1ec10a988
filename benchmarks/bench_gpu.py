"""Every CUDA path of the package, checked and timed in one short run (under 5 minutes on a GPU).

1. The torch backend of the bandit Monte Carlo on CUDA, for every estimator, batch sizes 1 and 4,
   nested group sizes (2, 8, 64, 1024) (both sampling routes: increments up to 2K sample by
   sample, larger ones by binomial chains), prompts drawn from ``f`` and a fixed prompt, the
   prompt-averaged MSE, and the projection and degenerate columns. Each Monte Carlo mean is
   compared with its exact value (Theorem 2, Proposition 3; docs/theory.md section 4):
   ``|mean - exact| <= 4.5 se`` (6.8e-6 false failures per comparison; the 66 comparisons fail
   spuriously in fewer than 4.5e-4 of runs, union bound). A negative control (rewards drawn with
   success probability r + 0.1) must be rejected.
2. Reproducibility on CUDA: the same seed with other ``block_size`` and ``n_jobs`` gives bitwise
   the same mean and covariance.
3. Throughput: groups/s of the torch backend on CUDA against numba with ``n_jobs`` 2 (the 2-core
   figure of benchmarks/README.md) and with every core, measured in the same run, on the
   benchmark workload (one prompt, K = 10, leave-one-out GRPO) at G in {8, 64, 1024}; target
   >= 50x the 2-core numba figure at G = 64.
4. Transformer per-sample scores ``W = grad log pi(Y|x)`` of the committed ``strong`` policy on
   CUDA by vmap: sequences/s, and the largest difference to the CPU scores.
5. Projected scores of a GPT-2-style model built from a config (the model of
   benchmarks/bench_sketch.py, 38.4M parameters; a tiny one in the dry run) on CUDA: sequences/s
   and peak CUDA memory of one plain forward + backward of 64 answers of 32 tokens, of the
   factored sketch (:mod:`ustat_rl.scores.factored`, 16 blocks) at k in {64, 256, 1024} and of the
   jvp route (4 directions), in one run; the factored scores on CUDA must match the CPU's to
   float32 rounding (the factors are drawn on the CPU, so ``R`` is bitwise the same). Needs the
   optional ``transformers``; without it, or without CUDA, the part prints "not measured".

Without a CUDA device it prints "no CUDA device: nothing measured" and
"5. sketch routes on CUDA: not measured: no GPU", and exits 0. ``--dry-run-cpu``
runs the same code on the CPU with small sizes (to test the script; its figures are CPU figures).
Exit status 1 if a check fails.

Usage::

    python benchmarks/bench_gpu.py                    # on a machine with CUDA
    python benchmarks/bench_gpu.py --json gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ustat_rl import ESTIMATORS, SoftmaxBandit
from ustat_rl.montecarlo import (
    Backend,
    bandit_squared_errors,
    bandit_statistics,
    prompt_averaged_squared_errors,
    run_monte_carlo,
)
from ustat_rl.policies.examples import small_bandit
from ustat_rl.policies.transformer import ArithmeticTask, load_study_policy, make_splits

Z = 4.5
SIZES = (2, 8, 64, 1024)
THROUGHPUT_SIZES = (8, 64, 1024)
TARGET_RATIO = 50.0
NO_CUDA = "no CUDA device: nothing measured"
NO_CUDA_SKETCH = "5. sketch routes on CUDA: not measured: no GPU"
SKETCH_KS = (64, 256, 1024)


class Checks:
    """Collects ``|value - reference| <= Z se`` comparisons and prints each one."""

    def __init__(self):
        self.failed = []
        self.count = 0

    def agree(self, what: str, value: float, reference: float, se: float) -> None:
        self.count += 1
        z = (value - reference) / se if se > 0 else (0.0 if value == reference else np.inf)
        ok = abs(z) <= Z
        if not ok:
            self.failed.append(what)
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {value:.6g} vs {reference:.6g} (z = {z:+.2f})")

    def reject(self, what: str, value: float, reference: float, se: float) -> None:
        z = (value - reference) / se
        ok = abs(z) > Z
        if not ok:
            self.failed.append(what)
        print(f"  {'ok  ' if ok else 'FAIL'} negative control {what}: z = {z:+.2f} (must exceed {Z})")

    def true(self, what: str, condition: bool) -> None:
        if not condition:
            self.failed.append(what)
        print(f"  {'ok  ' if condition else 'FAIL'} {what}")


def benchmark_bandit() -> SoftmaxBandit:
    """The bandit of benchmarks/bench_montecarlo.py (one prompt, K = 10, seed 2603)."""
    rng = np.random.default_rng(2603)
    return SoftmaxBandit(rng.normal(0.0, 0.5, size=(1, 10)), rng.uniform(0.1, 0.9, size=(1, 10)))


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``, the device synchronised on both sides."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def check_monte_carlo(device: str, n_reps: int, checks: Checks) -> dict:
    """Part 1: every estimator and column on ``device`` against the exact theory."""
    bandit = small_bandit()
    rates = {}
    for b in (1, 4):
        stat, labels = bandit_squared_errors(bandit, ESTIMATORS, SIZES, batch_size=b,
                                             backend=Backend("torch", device))
        reps = max(n_reps // b, 2)
        est, seconds = timed(run_monte_carlo, stat, reps, 100 + b, labels=labels)
        rates[f"B={b}, prompts from f"] = reps * b / seconds
        print(f"prompts from f, B = {b}: {reps:,} replicates in {seconds:.2f} s")
        for i, (name, g) in enumerate(labels):
            checks.agree(f"MSE {name} G={g} B={b}", est.mean[i], bandit.exact_mse(name, g, b),
                         est.std_error[i])
    x = 1
    stat, labels = bandit_squared_errors(bandit, ESTIMATORS, SIZES, prompt=x,
                                         backend=Backend("torch", device))
    est, seconds = timed(run_monte_carlo, stat, n_reps, 200, labels=labels)
    rates["fixed prompt"] = n_reps / seconds
    print(f"fixed prompt x = {x}: {n_reps:,} replicates in {seconds:.2f} s")
    for i, (name, g) in enumerate(labels):
        checks.agree(f"MSE(x={x}) {name} G={g}", est.mean[i],
                     bandit.exact_mse_per_prompt(name, g)[x], est.std_error[i])
    print("prompt-averaged MSE (each prompt on its own)")
    est = prompt_averaged_squared_errors(bandit, ESTIMATORS, (4, 64), max(n_reps // 4, 2), seed=300,
                                         backend=Backend("torch", device))
    for i, (name, g) in enumerate(est.labels):
        checks.agree(f"E_X MSE(X) {name} G={g}", est.mean[i], bandit.prompt_averaged_mse(name, g),
                     est.std_error[i])
    print("projection and degenerate columns, B = 4")
    stat, labels = bandit_statistics(bandit, ESTIMATORS, (3, 16), batch_size=4,
                                     direction=bandit.grad, degenerate=True,
                                     backend=Backend("torch", device))
    est = run_monte_carlo(stat, max(n_reps // 4, 2), 400, labels=labels)
    g_sq = float(bandit.grad @ bandit.grad)
    for name in ESTIMATORS:
        for g in (3, 16):
            m, se = est.get(("proj", name, g))
            checks.agree(f"<g_hat, g> {name} G={g}", m,
                         g_sq * ((g - 1) / g if name == "fullmean" else 1.0), se)
    for g in (3, 16):
        m, se = est.get(("degenerate", g))
        checks.agree(f"||g_grpo - g_oracle||^2 G={g}", m,
                     bandit.exact_mse("grpo", g, 4) - bandit.exact_mse("oracle", g, 4), se)
    print("negative control: success probabilities r + 0.1")
    wrong = SoftmaxBandit(bandit.logits, np.clip(bandit.reward_prob + 0.1, 0, 1), bandit.prompt_prob)
    stat, labels = bandit_squared_errors(wrong, ("vanilla",), (2,),
                                         backend=Backend("torch", device))
    est = run_monte_carlo(stat, n_reps, 500, labels=labels)
    checks.reject("vanilla G=2 under the wrong law", est.mean[0],
                  bandit.exact_mse("vanilla", 2, 1), est.std_error[0])
    return rates


def check_reproducible(device: str, n_reps: int, checks: Checks) -> None:
    """Part 2: the same seed, other block sizes and worker counts, bitwise the same result."""
    stat, labels = bandit_squared_errors(small_bandit(), ESTIMATORS, SIZES, batch_size=3,
                                         backend=Backend("torch", device))
    runs = [run_monte_carlo(stat, n_reps, 600, block_size=bs, n_jobs=jobs, labels=labels)
            for bs, jobs in ((4096, 1), (1000, 2), (7, 3))]
    same = all(np.array_equal(runs[0].mean, r.mean) and np.array_equal(runs[0].cov, r.cov)
               for r in runs[1:])
    checks.true(f"bitwise identical for block_size 4096/1000/7 and n_jobs 1/2/3 on {device}", same)


def throughput(device: str, n_device: int, n_numba: int, repeats: int) -> list[dict]:
    """Part 3: groups/s of torch on ``device`` and of numba (2 workers, every core)."""
    bandit = benchmark_bandit()
    cores = os.cpu_count() or 1
    rows = []
    for g in THROUGHPUT_SIZES:
        torch_stat, _ = bandit_squared_errors(bandit, "grpo", (g,), prompt=0,
                                              backend=Backend("torch", device))
        numba_stat, _ = bandit_squared_errors(bandit, "grpo", (g,), prompt=0)
        engines = {f"torch {device}": (torch_stat, 1, n_device),
                   "numba n_jobs=2": (numba_stat, 2, n_numba),
                   f"numba n_jobs={cores}": (numba_stat, cores, n_numba)}
        rates = {name: [] for name in engines}
        for stat, jobs, _ in engines.values():  # warm-up
            run_monte_carlo(stat, 8192, 0, n_jobs=jobs)
        for r in range(repeats):
            for name, (stat, jobs, n) in engines.items():
                _, seconds = timed(run_monte_carlo, stat, n, r, n_jobs=jobs)
                rates[name].append(n / seconds)
        two = np.array(rates["numba n_jobs=2"])
        for name, values in rates.items():
            row = {"engine": name, "group_size": g, "best": float(max(values)),
                   "median": float(np.median(values)),
                   "ratio_to_numba_2": float(np.median(np.array(values) / two))}
            rows.append(row)
            print(f"  G={g:5d} {name:18s} best {row['best']:14,.0f} groups/s, median ratio to "
                  f"numba n_jobs=2 {row['ratio_to_numba_2']:8.2f}x")
    return rows


def transformer_scores(device: str, n: int, checks: Checks) -> dict:
    """Part 4: per-sample scores of the ``strong`` policy on ``device`` against the CPU."""
    policy, _ = load_study_policy("strong", device=device)
    test = make_splits(ArithmeticTask(), seed=0).test
    prompts = policy.encode_prompts([test[i % len(test)] for i in range(n)])
    answers = policy.sample(prompts, torch.Generator(device=policy.device).manual_seed(0))
    policy.scores(prompts[:8], answers[:8], chunk_size=256)  # warm-up
    if policy.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    scores, seconds = timed(policy.scores, prompts, answers, chunk_size=256)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if policy.device.type == "cuda"
            else float("nan"))
    cpu_policy, _ = load_study_policy("strong", device="cpu")
    k = min(n, 16)
    reference = cpu_policy.scores_by_loop(prompts[:k].cpu(), answers[:k].cpu())
    diff = float((scores[:k].cpu() - reference).abs().max())
    scale = float(reference.abs().max())
    # float32 rounding differs between devices and routes; a wrong score differs at O(scale)
    checks.true(f"transformer scores on {device} match the CPU loop (max |diff| {diff:.1e} "
                f"<= 1e-4 x max |W| = {1e-4 * scale:.1e})", diff <= 1e-4 * scale)
    rate = n / seconds
    print(f"  {n} sequences, d = {policy.dim:,}: {rate:,.0f} sequences/s, peak {peak:.0f} MiB")
    return {"sequences": n, "sequences_per_s": rate, "max_abs_diff": diff, "peak_mib": peak}


def sketch_routes(device: str, dry: bool, checks: Checks) -> dict:
    """Part 5: plain forward + backward, factored and jvp sketches of a GPT-2 on ``device``."""
    try:
        import transformers
    except ImportError:
        print("  not measured: transformers is not installed (the optional extra 'hf')")
        return {}
    from ustat_rl.scores.factored import factored_sketch_scores
    from ustat_rl.scores.forward_sketch import jvp_sketch_scores
    from ustat_rl.scores.sequence import sequence_log_probs
    from ustat_rl.scores.spec import SketchSpec

    size = (dict(vocab_size=97, n_positions=16, n_embd=16, n_layer=1, n_head=2) if dry else
            dict(vocab_size=50257, n_positions=64, n_embd=512, n_layer=4, n_head=8))
    n, length = (8, 12) if dry else (64, 40)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        cpu_model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            **size, attn_implementation="eager")).eval()
    model = cpu_model.to(device) if device == "cpu" else \
        transformers.GPT2LMHeadModel(cpu_model.config).to(device).eval()
    if device != "cpu":
        model.load_state_dict(cpu_model.state_dict())
    tokens = torch.randint(0, size["vocab_size"], (n, length),
                           generator=torch.Generator().manual_seed(1)).to(device)
    mask = torch.zeros(tokens.shape, device=device)
    mask[:, 8:] = 1.0

    def plain():
        model.zero_grad(set_to_none=True)
        sequence_log_probs(model, tokens, mask).sum().backward()

    routes = [("plain", 0, plain)]
    routes += [("factored", k, (lambda k=k: factored_sketch_scores(model, tokens, mask,
                                                                   SketchSpec(k, 0, blocks=16))))
               for k in SKETCH_KS]
    routes.append(("jvp", 4, lambda: jvp_sketch_scores(model, tokens, mask, SketchSpec(4, 0))))
    rows = []
    for route, k, fn in routes:
        fn()  # warm-up
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        out, seconds = timed(fn)
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
        rows.append({"route": route, "k": k, "sequences_per_s": n / seconds, "peak_mib": peak})
        print(f"  {route:8s} k={k:5d}: {n / seconds:10,.1f} sequences/s, peak {peak:,.0f} MiB")
    on_device = factored_sketch_scores(model, tokens, mask, SketchSpec(64, 0, blocks=16)).cpu()
    on_cpu = factored_sketch_scores(cpu_model.cpu(), tokens.cpu(), mask.cpu(),
                                    SketchSpec(64, 0, blocks=16))
    diff = float((on_device - on_cpu).abs().max())
    scale = float(on_cpu.abs().max())
    checks.true(f"factored scores on {device} match the CPU's (max |diff| {diff:.1e} <= 1e-3 x "
                f"max |RW| = {1e-3 * scale:.1e})", diff <= 1e-3 * scale)
    return {"rows": rows, "max_abs_diff": diff}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--dry-run-cpu", action="store_true",
                        help="run every part on the CPU with small sizes (tests the script)")
    args = parser.parse_args(argv)
    if args.dry_run_cpu:
        device, n_reps, n_device, n_numba, repeats, n_seq = "cpu", 4000, 2**16, 2**15, 1, 16
    elif torch.cuda.is_available():
        device, n_reps, n_device, n_numba, repeats, n_seq = "cuda", 2**21, 2**24, 2**21, 3, 1024
    else:
        print(NO_CUDA)
        print(NO_CUDA_SKETCH)
        return 0
    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "CPU"
    print(f"device: {device} ({name}); torch {torch.__version__}; {os.cpu_count()} CPU cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    checks = Checks()
    start = time.perf_counter()
    print("1. Monte Carlo against the exact theory")
    rates = check_monte_carlo(device, n_reps, checks)
    print("2. reproducibility")
    check_reproducible(device, min(n_reps, 2**18), checks)
    print("3. throughput (one prompt, K = 10, grpo)")
    rows = throughput(device, n_device, n_numba, repeats)
    print("4. transformer per-sample scores")
    scores = transformer_scores(device, n_seq, checks)
    print("5. projected scores of a GPT-2 built from a config (sketch routes)")
    sketch = sketch_routes(device, args.dry_run_cpu, checks)
    at_64 = next(r for r in rows if r["engine"] == f"torch {device}" and r["group_size"] == 64)
    verdict = "met" if at_64["ratio_to_numba_2"] >= TARGET_RATIO else "NOT met"
    if device == "cpu":
        verdict = "not applicable (dry run on the CPU)"
    print(f"target: torch {device} >= {TARGET_RATIO:g}x numba n_jobs=2 at G = 64: {verdict} "
          f"({at_64['ratio_to_numba_2']:.1f}x)")
    print(f"{checks.count} comparisons, {len(checks.failed)} failed checks; "
          f"{time.perf_counter() - start:.0f} s in all")
    if args.json is not None:
        args.json.write_text(json.dumps({"device": device, "name": name, "rates": rates,
                                         "throughput": rows, "scores": scores,
                                         "sketch": sketch,
                                         "failed": checks.failed}, indent=2))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
