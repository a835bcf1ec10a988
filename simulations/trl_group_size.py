"""G* through a real trainer: fixed-budget TRL GRPO runs across num_generations, with the monitor.

For each *cell* (``num_generations`` G, seed) a real ``trl.GRPOTrainer`` trains a tied Qwen2 built
from a config (:func:`ustat_rl.frameworks.demo.tiny_family`, the demo's parity reward, binary) for
``--steps`` steps at a fixed budget of N completions per step (B = N/G prompts), with
:class:`ustat_rl.frameworks.GroupSizeMonitor` attached (every 5 steps, pooling 4 windows; G >= 3:
its estimators need three samples per group). After training, the *final reward* is the mean
parity reward of 8 sampled answers to each of the task's 100 prompts (temperature 1, a generator
seeded per cell). The summary gives the mean final reward per G with its standard error over
seeds, the empirical best G, the monitor's G* interval (the median over the runs of each run's last
window's interval), whether the empirical best lies inside it (C18's question, asked through
TRL), and whether the monitor's advice beats TRL's default ``num_generations`` (8), with the
difference's interval.

Each finished cell is written at once to ``<out>/trl_group_size.csv`` (atomically); a rerun
skips the cells already there. Needs the ``trl`` extra.

Usage::

    python simulations/trl_group_size.py --quick     # G in {4, 8}, 2 seeds, 6 steps: about a minute
    python simulations/trl_group_size.py             # G in {2, 4, 8, 16, 32}, 5 seeds, 60 steps
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.interface.plotting import new_figure, save_figure, set_group_size_ticks
from ustat_rl.runs.sweeps import LocalExecutor, default_output, run_cells, write_csv_atomic
from ustat_rl.theory.group_size import best_on_grid

NAME = "trl_group_size"
BUDGET, TRL_DEFAULT_G, LEARNING_RATE, EVAL_ANSWERS = 64, 8, 5e-3, 8
FULL = dict(sizes=(2, 4, 8, 16, 32), seeds=5, steps=60)
QUICK = dict(sizes=(4, 8), seeds=2, steps=6)
COLUMNS = ("G", "seed", "steps", "final_reward", "windows_ok", "gstar", "gstar_low",
           "gstar_high", "recommended_group_size")


def final_reward(model, seed: int) -> float:
    """Mean parity reward of ``EVAL_ANSWERS`` sampled answers to each of the 100 prompts."""
    import torch

    from ustat_rl.frameworks.demo import arithmetic_prompts, char_tokenizer, parity_reward
    from ustat_rl.scores.causal_lm import Sampling, sample_answers

    tokenizer = char_tokenizer()
    generator = torch.Generator().manual_seed(seed)
    rewards = []
    for prompt in arithmetic_prompts():
        ids = torch.tensor(tokenizer(prompt)["input_ids"])
        answers, mask = sample_answers(model, ids, Sampling(EVAL_ANSWERS, 3, eos_token_id=1,
                                                            pad_token_id=0), generator)
        texts = [tokenizer.decode([t for t, m in zip(a, k) if m and t != 1])
                 for a, k in zip(answers.tolist(), mask.tolist())]
        rewards += parity_reward(texts, [prompt] * len(texts))
    return float(np.mean(rewards))


def run_cell(G: int, seed: int, steps: int) -> dict:
    """One training run at ``num_generations = G``."""
    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.demo import demo_trainer, tiny_family
    from ustat_rl.scores.spec import SketchSpec

    with tempfile.TemporaryDirectory() as tmp:
        trainer = demo_trainer(Path(tmp) / "out", G, BUDGET // G, steps,
                               learning_rate=LEARNING_RATE,
                               model=tiny_family("qwen2", seed, tie_word_embeddings=True),
                               bf16=False, seed=seed)
        monitor = None
        if G >= 3:
            monitor = GroupSizeMonitor(trainer, MonitorConfig(
                schedule=Schedule(every=5, pool=4), sketch=SketchSpec(64, seed, blocks=16),
                outputs=Outputs(Path(tmp) / "t.jsonl")))
            trainer.add_callback(monitor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        model = trainer.accelerator.unwrap_model(trainer.model).eval()
        row = dict(G=G, seed=seed, steps=steps, final_reward=final_reward(model, 10_000 + seed),
                   windows_ok=0, gstar=math.nan, gstar_low=math.nan, gstar_high=math.nan,
                   recommended_group_size=math.nan)
        ok = [] if monitor is None else [r for r in monitor.records if r.ok]
    if ok:
        last = ok[-1]
        row.update(windows_ok=len(ok), gstar=last.gstar.estimate,
                   gstar_low=last.gstar.low, gstar_high=last.gstar.high,
                   recommended_group_size=last.recommended_group_size)
    return row


def summarise(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Mean final reward per G with its standard error, and the verdicts in words."""
    per_g = table.groupby("G")["final_reward"].agg(["mean", "std", "count"]).reset_index()
    per_g["se"] = per_g["std"] / np.sqrt(per_g["count"])
    best = per_g.loc[per_g["mean"].idxmax()]
    near = per_g[per_g["mean"] + 2 * np.hypot(per_g["se"], best["se"]) >= best["mean"]]
    monitored = table[table["windows_ok"] > 0]
    low = float(monitored["gstar_low"].median()) if len(monitored) else math.nan
    high = float(monitored["gstar_high"].median()) if len(monitored) else math.nan
    advice = float(monitored["recommended_group_size"].median()) if len(monitored) else math.nan
    near_sizes = near["G"].astype(int).tolist()
    verdict = dict(best_G=int(best["G"]), within_2se_of_best=near_sizes,
                   gstar_low=low, gstar_high=high, advice=advice,
                   best_inside_interval=bool(low <= best["G"] <= high) if len(monitored)
                   else None,
                   near_inside_interval=[g for g in near_sizes if low <= g <= high])
    sizes = per_g["G"].to_numpy()
    if math.isfinite(advice) and TRL_DEFAULT_G in sizes:
        pick = int(best_on_grid(sizes, np.abs(np.log(sizes) - math.log(advice))))
        a, d = (per_g.set_index("G").loc[g] for g in (pick, TRL_DEFAULT_G))
        diff, se = a["mean"] - d["mean"], math.hypot(a["se"], d["se"])
        word = ("beats" if diff - 2 * se > 0 else "is worse than" if diff + 2 * se < 0
                else "is within the noise of")
        verdict.update(advice_grid_G=pick, advice_minus_default=diff, difference_se=se,
                       advice_verdict=f"the advice (G = {pick} on this grid) {word} TRL's "
                                      f"default G = {TRL_DEFAULT_G}: {diff:+.3f} +- {2 * se:.3f}")
    return per_g, verdict


def words(verdict: dict) -> str:
    """The comparison with the monitor's interval, claiming no more than the runs show."""
    near, inside = verdict["within_2se_of_best"], verdict["near_inside_interval"]
    interval = f"[{verdict['gstar_low']:.3g}, {verdict['gstar_high']:.3g}]"
    if verdict["best_inside_interval"] is None:
        return f"empirical best G = {verdict['best_G']}; no run was monitored"
    head = (f"the runs single out G = {verdict['best_G']}" if len(near) == 1 else
            f"the runs do not single out a best G: every G in {near} is within 2 se of the "
            f"best mean (G = {verdict['best_G']})")
    tail = ("inside" if verdict["best_inside_interval"] else "outside") if len(near) == 1 else (
        f"of these, {inside} lie inside it" if inside else "none of these lies inside it")
    return f"{head}; the monitor's G* interval (median over runs) is {interval}: {tail}"


def plot(per_g: pd.DataFrame, verdict: dict, stem: Path) -> list[Path]:
    fig, axes = new_figure(1, 1, panel_size=(4.8, 3.4))
    ax = axes[0, 0]
    ax.errorbar(per_g["G"], per_g["mean"], yerr=2 * per_g["se"], marker="o", capsize=3,
                label="final reward (mean +- 2 se over seeds)")
    low, high = verdict["gstar_low"], verdict["gstar_high"]
    if math.isfinite(low):
        right = high if math.isfinite(high) else float(per_g["G"].max()) * 1.5
        ax.axvspan(max(low, 1.0), right, alpha=0.2, color="tab:green",
                   label="monitor's G* interval (median over runs)")
    set_group_size_ticks(ax, per_g["G"])
    ax.set_xlabel("num_generations G (budget fixed)")
    ax.set_ylabel("final reward")
    ax.set_title("Fixed-budget TRL runs against G, with the monitor's G*")
    ax.legend(fontsize=7)
    return save_figure(fig, stem)


def main(argv=None) -> tuple[pd.DataFrame, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="G in {4, 8}, 2 seeds, 6 steps")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per G")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    for name in ("steps", "seeds"):
        value = getattr(args, name)
        if value is not None:
            if value < 2:
                parser.error(f"--{name} must be >= 2")
            plan[name] = value
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(COLUMNS))
    done = {(int(r.G), int(r.seed)) for r in table.itertuples()}
    wanted = [(G, s) for G in plan["sizes"] for s in range(plan["seeds"])]
    cells = {key: (*key, plan["steps"]) for key in wanted if key not in done}
    rows = table.to_dict("records")

    def on_result(key, row):
        rows.append(row)
        write_csv_atomic(pd.DataFrame(rows, columns=list(COLUMNS)), path)

    run_cells(cells, run_cell, on_result, LocalExecutor(1), progress=not args.no_progress,
              n_skipped=len(wanted) - len(cells), desc="TRL runs")
    table = pd.DataFrame(rows, columns=list(COLUMNS)).astype({"final_reward": float})
    per_g, verdict = summarise(table)
    plot(per_g, verdict, out / NAME)
    print(per_g.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\n{words(verdict)}")
    if "advice_verdict" in verdict:
        print(verdict["advice_verdict"])
    return table, verdict


if __name__ == "__main__":
    main()
