"""Seconds per training step of a TRL GRPO run with and without the G* monitor.

Workload: the demo run of :mod:`ustat_rl.frameworks.demo` (TRL ``GRPOTrainer`` on the CPU, a
GPT-2 built from a config: :data:`WIDTH` wide, :data:`LAYERS` layers; :data:`GROUPS` prompts x
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
HEADING = "## TRL monitor overhead"


def one_run(every: int | None, steps: int) -> dict:
    """Train ``steps`` steps with the monitor every ``every`` steps (``None``: no monitor)."""
    from ustat_rl.frameworks import GroupSizeMonitor
    from ustat_rl.frameworks.demo import demo_trainer, tiny_gpt2

    with tempfile.TemporaryDirectory() as tmp:
        trainer = demo_trainer(tmp, GROUP_SIZE, GROUPS, steps, 1e-3,
                               model=tiny_gpt2(0, WIDTH, LAYERS, 4), bf16=False)
        monitor = None
        if every is not None:
            monitor = GroupSizeMonitor(trainer, every=every, sketch_dim=SKETCH_DIM,
                                       trajectory=Path(tmp) / "t.jsonl")
            trainer.add_callback(monitor)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        wall = time.perf_counter() - start
        times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
        ok = 0 if monitor is None else sum(r["status"] == "ok" for r in monitor.records)
        windows = 0 if monitor is None else len(monitor.records)
    return {"every": every, "steps": steps, "median_step_s": statistics.median(times[1:]),
            "wall_s": wall, "windows": windows, "windows_ok": ok}


def measure(steps: int) -> list[dict]:
    """Each setting in a fresh process (no shared caches), baseline first."""
    rows = []
    for every in (None, *EVERY):
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import bench_monitor as b; print(json.dumps(b.one_run({every!r}, {steps})))")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"every={every}: median {rows[-1]['median_step_s']:.3f} s/step, "
              f"{rows[-1]['windows_ok']}/{rows[-1]['windows']} windows", flush=True)
    return rows


def section(rows, load: str) -> str:
    base = rows[0]["median_step_s"]
    lines = [HEADING, "",
             f"TRL `GRPOTrainer` on the CPU, demo model (GPT-2 config, width {WIDTH}, {LAYERS} "
             f"layers), {GROUPS} prompts x {GROUP_SIZE} answers per step, monitor with k = "
             f"{SKETCH_DIM} (16 blocks). Median seconds per step from TRL's `step_time` over "
             f"steps 2..{rows[0]['steps']}; ratio against the run without the monitor "
             f"(`python benchmarks/bench_monitor.py`). Machine: {platform.machine()}, "
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
    args = parser.parse_args(argv)
    steps = 12 if args.quick else args.steps
    if steps < 3:
        parser.error("--steps must be >= 3")
    rows = measure(steps)
    load = f"load average {os.getloadavg()[0]:.1f} at the end"
    text = section(rows, load)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if args.readme:
        from ustat_rl.runs.records import replace_markdown_section

        replace_markdown_section(args.readme, HEADING, text)
    return rows


if __name__ == "__main__":
    main()
