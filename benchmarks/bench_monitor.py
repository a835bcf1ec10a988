"""Seconds per training step of a TRL GRPO run with and without the G* monitor.

Workload: the demo run of :mod:`ustat_rl.frameworks.demo` (TRL ``GRPOTrainer`` on the CPU, a
GPT-2, or with ``--family qwen2`` a tied Qwen2 (RMSNorm, q/k/v biases, rotary), built from a
config: :data:`WIDTH` wide, :data:`LAYERS` layers; :data:`GROUPS` prompts x
:data:`GROUP_SIZE` answers of at most 3 tokens per step, float32), trained for ``--steps`` steps
in one process per setting: no monitor (the baseline), then
:class:`~ustat_rl.frameworks.trl_monitor.GroupSizeMonitor` with ``every`` in :data:`EVERY`
(``sketch_dim`` :data:`SKETCH_DIM`, 16 blocks, pooling 4 windows). The figure is the median
seconds per step from TRL's own ``step_time`` metric over the steps after the first (warm-up;
a window is estimated inside the generation of its step, so ``step_time`` includes it), and the
wall seconds per step of the whole ``train()`` call; each ratio is against the baseline of the
same run.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py --readme benchmarks/README.md
    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py --family qwen2 --readme benchmarks/README.md
    OMP_NUM_THREADS=1 python benchmarks/bench_monitor.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

WIDTH, LAYERS, GROUPS, GROUP_SIZE, SKETCH_DIM = 64, 2, 16, 8, 64
EVERY = (1, 10, 50)
FAMILIES = ("gpt2", "qwen2")
HEADINGS = {"gpt2": "## TRL monitor overhead", "qwen2": "## TRL monitor overhead, Qwen2"}
HEADING = HEADINGS["gpt2"]


#: The Qwen2 workload: wider and deeper than the GPT-2 one, with answers of up to
#: ``QWEN_COMPLETION`` tokens, so that a step costs what the model computes rather than the
#: trainer's fixed per-step overhead (about 40 ms at width 64 and 3 tokens, which no window's
#: reports could stay within 10% of).
QWEN_WIDTH, QWEN_LAYERS, QWEN_COMPLETION = 256, 4, 16


def build(family: str):
    """The benchmark's model of ``family`` (seed 0, float32)."""
    from ustat_rl.frameworks.demo import tiny_family, tiny_gpt2

    if family == "gpt2":
        return tiny_gpt2(0, WIDTH, LAYERS, 4)
    return tiny_family("qwen2", 0, hidden_size=QWEN_WIDTH, intermediate_size=2 * QWEN_WIDTH,
                       num_hidden_layers=QWEN_LAYERS, num_attention_heads=4,
                       num_key_value_heads=2, tie_word_embeddings=True)


def _workload(family: str) -> dict:
    """Config values of the run beyond the demo's (none for GPT-2). The Qwen2 run keeps its
    parameters (learning rate 0): it learns the toy reward within about 40 steps, after which
    every group is all-equal and the windows are skipped, which would hide their cost; a step's
    cost does not depend on the learning rate."""
    return {} if family == "gpt2" else {"max_completion_length": QWEN_COMPLETION,
                                        "learning_rate": 0.0}


def one_run(every: int | None, steps: int, family: str = "gpt2") -> dict:
    """Train ``steps`` steps with the monitor every ``every`` steps (``None``: no monitor)."""
    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.demo import demo_trainer
    from ustat_rl.scores.spec import SketchSpec

    with tempfile.TemporaryDirectory() as tmp:
        options = {"learning_rate": 1e-3, "bf16": False, **_workload(family)}
        trainer = demo_trainer(tmp, GROUP_SIZE, GROUPS, steps, model=build(family), **options)
        monitor = None
        if every is not None:
            monitor = GroupSizeMonitor(trainer, MonitorConfig(
                schedule=Schedule(every=every), sketch=SketchSpec(SKETCH_DIM),
                outputs=Outputs(Path(tmp) / "t.jsonl")))
            trainer.add_callback(monitor)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        wall = time.perf_counter() - start
        times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
        ok = 0 if monitor is None else sum(r.ok for r in monitor.records)
        windows = 0 if monitor is None else len(monitor.records)
    return {"every": every, "steps": steps, "median_step_s": statistics.median(times[1:]),
            "wall_s": wall, "windows": windows, "windows_ok": ok}


def measure(steps: int, family: str = "gpt2") -> list[dict]:
    """Each setting in a fresh process (no shared caches), baseline first."""
    rows = []
    for every in (None, *EVERY):
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import bench_monitor as b; "
                f"print(json.dumps(b.one_run({every!r}, {steps}, {family!r})))")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"every={every}: median {rows[-1]['median_step_s']:.3f} s/step, "
              f"{rows[-1]['windows_ok']}/{rows[-1]['windows']} windows", flush=True)
    return rows


def section(rows, load: str, family: str = "gpt2") -> str:
    base = rows[0]["median_step_s"]
    if family == "gpt2":
        model, command = f"GPT-2 config, width {WIDTH}, {LAYERS} layers, answers of at most 3 " \
            "tokens", ""
    else:
        model = (f"Qwen2 config, tied head, 4 query and 2 key-value heads, width {QWEN_WIDTH}, "
                 f"{QWEN_LAYERS} layers, answers of at most {QWEN_COMPLETION} tokens, learning "
                 "rate 0 so that every window has reward variation")
        command = f" --family {family}"
    lines = [HEADINGS[family], "",
             f"TRL `GRPOTrainer` on the CPU, demo model ({model}), "
             f"{GROUPS} prompts x {GROUP_SIZE} answers per step, monitor with k = "
             f"{SKETCH_DIM} (16 blocks). Median seconds per step from TRL's `step_time` over "
             f"steps 2..{rows[0]['steps']}; ratio against the run without the monitor "
             f"(`python benchmarks/bench_monitor.py{command}`). Machine: {platform.machine()}, "
             f"{os.cpu_count()} cores, {load}. GPU: not measured: no GPU.", "",
             "| monitor | s/step (median) | ratio to no monitor | windows estimated |",
             "|---|---|---|---|"]
    for r in rows:
        name = "none" if r["every"] is None else f"every {r['every']} steps"
        lines.append(f"| {name} | {r['median_step_s']:.3f} | {r['median_step_s'] / base:.2f}x "
                     f"| {r['windows_ok']} of {r['windows']} |")
    lines += ["", "The median hides the monitored steps when `every` > 1; wall time per step "
              "over the whole run, which includes them:", "",
              "| monitor | wall s/step | ratio |", "|---|---|---|"]
    wall = rows[0]["wall_s"] / rows[0]["steps"]
    for r in rows:
        name = "none" if r["every"] is None else f"every {r['every']} steps"
        lines.append(f"| {name} | {r['wall_s'] / r['steps']:.3f} | "
                     f"{r['wall_s'] / r['steps'] / wall:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="training steps per setting")
    parser.add_argument("--quick", action="store_true", help="12 steps per setting")
    parser.add_argument("--readme", type=Path, help="replace the section in this markdown file")
    parser.add_argument("--json", type=Path, help="write the rows as JSON")
    parser.add_argument("--family", choices=FAMILIES, default="gpt2",
                        help="the model family of the demo run (default gpt2)")
    args = parser.parse_args(argv)
    steps = 12 if args.quick else args.steps
    if steps < 3:
        parser.error("--steps must be >= 3")
    rows = measure(steps, args.family)
    load = f"load average {os.getloadavg()[0]:.1f} at the end"
    text = section(rows, load, args.family)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if args.readme:
        from ustat_rl.runs.records import replace_markdown_section

        replace_markdown_section(args.readme, HEADINGS[args.family], text)
    return rows


if __name__ == "__main__":
    main()
