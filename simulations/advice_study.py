"""Does the advice win? G* against the group size a real TRL GRPO trainer does best with.

The task (:mod:`ustat_rl.frameworks.advice_task`): addition ``"a+b="`` with an exact-match
binary reward, a tied Qwen2 built from a config and warm-started by supervised training on one- to
three-digit sums (seeded, cached under ``<out>/warm_start``). GRPO trains and is evaluated on the
two-digit sums (``digits`` of the plan), where the warm start is uncertain: one-digit sums are
already solved and three-digit sums nearly never, so neither can move. From that one warm start,
every *run* (N, G, seed) trains with ``trl.GRPOTrainer`` (its defaults: linear decay of the
learning rate, no KL term) at N completions per step (N/G prompts of G answers) for ``--steps``
steps, :class:`ustat_rl.frameworks.GroupSizeMonitor` attached for G >= 3. The held-out reward
(the exact probability of a correct answer at temperature 1, averaged over the held-out prompts:
no sampling noise) is recorded every ``--every`` steps.

At step 0 a pilot of the warm-started model on the training prompts (``causal_lm_pilot``, G = 8
answers per prompt) gives, per N, the G* interval and the advice of ``ustat-rl gstar``.

The summary, per (N, G): the final held-out reward's mean over seeds with its 95% t interval;
the *best-G confidence set*: the G whose mean is not significantly below the empirically best G's
(one-sided Welch t tests at 5%, Bonferroni over the other sizes of the grid); the advice's gain
over TRL's default G = 8 and over the best G (Welch 95% intervals); the negative control (the
grid's worst G against the best: must be significant for the study to tell sizes apart); and the
smallest difference the seeds detect with 80% power at that level, from the pooled seed-to-seed
spread.

Each finished run is written at once to ``<out>/advice_study.csv`` (atomically); a rerun skips
the runs already there. ``--summarise-only`` rereads the CSV and writes the summary, the figure
and the Markdown table. Needs the ``trl`` extra; ``--ray-address`` runs the runs on Ray.

Usage::

    python simulations/advice_study.py --quick          # seconds: a smoke test
    python simulations/advice_study.py --out /path      # the full study (see docs/advice_wins.md)
    python simulations/advice_study.py --out /path --summarise-only
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.runs.sweeps import (
    add_executor_arguments,
    default_output,
    executor_from_args,
    run_cells,
    write_csv_atomic,
)
from ustat_rl.stats.best_set import best_set
from ustat_rl.stats.best_set import welch as _welch
from ustat_rl.theory.group_size import best_on_grid

NAME = "advice_study"
TRL_DEFAULT_G, ALPHA, POWER = 8, 0.05, 0.8
FULL = dict(budgets=(32, 64, 128), sizes=(2, 4, 8, 16, 32), seeds=10, steps=120, every=20,
            digits=(2,), warm_steps=1500, train_prompts=512, held_out=150, pilot_prompts=64,
            learning_rate=5e-4, hidden=48)
QUICK = dict(budgets=(8,), sizes=(2, 4), seeds=2, steps=2, every=1, digits=(2,), warm_steps=20,
             train_prompts=16, held_out=12, pilot_prompts=6, learning_rate=5e-4, hidden=16)


def task(plan: dict):
    """The warm-start settings, the training problems and the held-out problems of ``plan``."""
    from ustat_rl.frameworks.advice_task import WarmStart, draw_problems

    digits = plan["digits"]
    held = draw_problems(plan["held_out"], seed=2, digits=digits)
    train = draw_problems(plan["train_prompts"], seed=1, exclude=[p for p, _ in held],
                          digits=digits, distinct=False)
    return WarmStart(steps=plan["warm_steps"], hidden=plan["hidden"]), train, held


def checkpoint_columns(plan: dict) -> list[str]:
    return [f"reward_{s}" for s in range(0, plan["steps"] + 1, plan["every"])]


def run_cell(N: int, G: int, seed: int, plan: dict, cache: str) -> dict:
    """One GRPO run at N completions per step in groups of G; the held-out reward along it."""
    from transformers import TrainerCallback

    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.advice_task import (
        MAX_COMPLETION,
        answer_probability,
        exact_reward,
        warm_start,
    )
    from ustat_rl.frameworks.demo import DemoSetup, demo_trainer
    from ustat_rl.scores.spec import SketchSpec

    settings, train, held = task(plan)
    model, _ = warm_start(settings, Path(cache))
    curve = {}

    class Checkpoints(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % plan["every"] == 0:
                curve[f"reward_{state.global_step}"] = float(answer_probability(model, held).mean())

    curve["reward_0"] = float(answer_probability(model, held).mean())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = demo_trainer(Path(tmp) / "out", G, N // G, plan["steps"],
                               learning_rate=plan["learning_rate"], model=model,
                               reward=exact_reward,
                               setup=DemoSetup(prompts=[p for p, _ in train]),
                               max_completion_length=MAX_COMPLETION, bf16=False, seed=seed)
        trainer.add_callback(Checkpoints())
        monitor = None
        if G >= 3:
            monitor = GroupSizeMonitor(trainer, MonitorConfig(
                schedule=Schedule(every=5, pool=4), sketch=SketchSpec(64, seed, blocks=16),
                outputs=Outputs(Path(tmp) / "t.jsonl")))
            trainer.add_callback(monitor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        ok = [] if monitor is None else [r for r in monitor.records if r.ok]
    row = dict(N=N, G=G, seed=seed, steps=plan["steps"], seconds=time.perf_counter() - start,
               **curve, final_reward=curve[f"reward_{plan['steps']}"], windows_ok=len(ok),
               monitor_gstar=math.nan, monitor_low=math.nan, monitor_high=math.nan,
               monitor_advice=math.nan)
    if ok:
        last = ok[-1]
        row.update(monitor_gstar=last.gstar.estimate, monitor_low=last.gstar.low,
                   monitor_high=last.gstar.high,
                   monitor_advice=last.recommended_group_size)
    return row


def pilot(plan: dict, cache: Path, seed: int = 0) -> pd.DataFrame:
    """The pilot's G* interval and advice per N, from 8 answers to each of ``pilot_prompts``
    training prompts of the warm-started model (step 0)."""
    import torch

    from ustat_rl.frameworks.advice_task import MAX_COMPLETION, warm_start
    from ustat_rl.frameworks.demo import VOCAB
    from ustat_rl.pilot.report import gstar_report
    from ustat_rl.scores.causal_lm import Sampling, causal_lm_pilot
    from ustat_rl.scores.spec import SketchSpec
    from ustat_rl.seeding import child_int

    settings, train, _ = task(plan)
    model, _ = warm_start(settings, cache)
    problems = train[:plan["pilot_prompts"]]
    ids = [torch.tensor([VOCAB[c] for c in p]) for p, _ in problems]
    letters = {v: k for k, v in VOCAB.items()}

    def reward(i, answer):
        text = "".join(letters[t] for t in answer if t > 1)
        return float(answer[-1:] == [1] and text == problems[i][1])

    # the projection's seed is the one the pilot drew from its seed before the spec was explicit
    rollouts = causal_lm_pilot(model, ids, reward,
                               Sampling(8, MAX_COMPLETION, seed, eos_token_id=1),
                               SketchSpec(64, child_int(seed, 1)))
    rows = []
    for N in plan["budgets"]:
        row = dict(N=N, pilot_gstar=math.nan, pilot_low=math.nan, pilot_high=math.nan,
                   pilot_advice=math.nan, pilot_reward=float(np.mean(rollouts.reward)), note="")
        try:
            report = gstar_report(rollouts, N)
        except ValueError as err:  # a degenerate pilot (every group all-equal) has no G*
            row.update(note=str(err).splitlines()[0])
        else:
            row.update(pilot_gstar=report.gstar["estimate"], pilot_low=report.gstar["low"],
                       pilot_high=report.gstar["high"],
                       pilot_advice=report.recommended_group_size)
        rows.append(row)
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame, pilot_table: pd.DataFrame,
              alpha: float = ALPHA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (N, G) the final reward's interval and membership of the best-G confidence set; per N
    the verdicts (advice, gains, negative control, power).

    The set is :func:`ustat_rl.stats.best_set.best_set`'s (its level is claim C64's).
    """
    from scipy import stats

    per_cell, verdicts = [], []
    for N, runs in table.groupby("N"):
        finals = {int(G): g["final_reward"].to_numpy(float) for G, g in runs.groupby("G")}
        found = best_set(finals, alpha)
        sizes, best, level = list(found.sizes), found.best, found.level
        in_set = {}
        for G, p in zip(sizes, found.p_below_best):
            x = finals[G]
            half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
            in_set[G] = found.contains(G)
            per_cell.append(dict(N=int(N), G=G, seeds=x.size, mean=x.mean(), low=x.mean() - half,
                                 high=x.mean() + half, start=runs["reward_0"].mean(),
                                 p_below_best=p, in_best_set=in_set[G]))
        pooled = math.sqrt(np.mean([finals[G].var(ddof=1) for G in sizes]))
        n = min(finals[G].size for G in sizes)
        detectable = (stats.norm.ppf(1 - level) + stats.norm.ppf(POWER)) * pooled * math.sqrt(2 / n)
        worst = min(sizes, key=lambda G: finals[G].mean())
        row = dict(N=int(N), best_G=best, best_set=" ".join(str(G) for G in sizes if in_set[G]),
                   worst_G=worst, worst_significant=not in_set[worst], pooled_sd=pooled,
                   seeds=n, detectable_difference=detectable)
        monitored = runs[runs["windows_ok"] > 0]
        if len(monitored):
            row.update(monitor_low=monitored["monitor_low"].median(),
                       monitor_high=monitored["monitor_high"].median(),
                       monitor_advice=monitored["monitor_advice"].median())
        match = pilot_table[pilot_table["N"] == N]
        if len(match) and math.isfinite(match["pilot_advice"].iloc[0]):
            advice = float(match["pilot_advice"].iloc[0])
            row.update(match.iloc[0].drop(["N", "note"]).to_dict())
            grid = int(best_on_grid(sizes, np.abs(np.log(sizes) - math.log(advice))))
            row.update(advice_grid_G=grid, advice_in_best_set=in_set[grid])
            for other, name in ((TRL_DEFAULT_G, "default"), (best, "best")):
                if other in finals:
                    diff, se, df = _welch(finals[grid], finals[other])
                    half = stats.t.ppf(0.975, df) * se if se > 0 else 0.0
                    row.update({f"gain_over_{name}": diff, f"gain_over_{name}_low": diff - half,
                                f"gain_over_{name}_high": diff + half})
        verdicts.append(row)
    return pd.DataFrame(per_cell), pd.DataFrame(verdicts)


def markdown(per_cell: pd.DataFrame, verdicts: pd.DataFrame) -> str:
    """The two tables of docs/advice_wins.md."""
    lines = ["| N | G | seeds | reward at step 0 | final reward (95% CI) | rise (95% CI) "
             "| in best-G set |", "|---|---|---|---|---|---|---|"]
    for r in per_cell.itertuples():
        lines.append(f"| {r.N} | {r.G} | {r.seeds} | {r.start:.3f} | {r.mean:.3f} "
                     f"[{r.low:.3f}, {r.high:.3f}] | {r.mean - r.start:+.3f} "
                     f"[{r.low - r.start:+.3f}, {r.high - r.start:+.3f}] "
                     f"| {'yes' if r.in_best_set else 'no'} |")
    lines += ["", "| N | best G | best-G set | pilot G* [interval] | pilot advice (grid) "
              "| monitor G* interval (median) | advice - G=8 (95% CI) | advice - best (95% CI) "
              "| worst G significantly worse | detectable difference |",
              "|---|---|---|---|---|---|---|---|---|---|"]

    def ci(r, name):
        value = getattr(r, name, math.nan)
        if not isinstance(value, float) or not math.isfinite(value):
            return "n/a"
        return f"{value:+.3f} [{getattr(r, name + '_low'):+.3f}, {getattr(r, name + '_high'):+.3f}]"

    for r in verdicts.itertuples():
        piloted = hasattr(r, "advice_grid_G") and math.isfinite(r.advice_grid_G)
        pilot_text = (f"{r.pilot_gstar:.3g} [{r.pilot_low:.3g}, {r.pilot_high:.3g}]"
                      if piloted else "n/a")
        advice = f"{int(r.pilot_advice)} ({int(r.advice_grid_G)})" if piloted else "n/a"
        monitor = (f"[{r.monitor_low:.3g}, {r.monitor_high:.3g}]" if hasattr(r, "monitor_low")
                   else "n/a")
        lines.append(f"| {r.N} | {r.best_G} | {{{r.best_set.replace(' ', ', ')}}} | {pilot_text} "
                     f"| {advice} | {monitor} | {ci(r, 'gain_over_default')} "
                     f"| {ci(r, 'gain_over_best')} | G = {r.worst_G}: "
                     f"{'yes' if r.worst_significant else 'no'} | {r.detectable_difference:.3f} |")
    return "\n".join(lines) + "\n"


def plot(table: pd.DataFrame, per_cell: pd.DataFrame, verdicts: pd.DataFrame, stem: Path):
    from ustat_rl.interface.plotting import new_figure, save_figure, set_group_size_ticks

    budgets = sorted(per_cell["N"].unique())
    fig, axes = new_figure(1, len(budgets) + 1, panel_size=(4.2, 3.2), sharex=False)
    for ax, N in zip(axes[0], budgets):
        cells = per_cell[per_cell["N"] == N]
        ax.errorbar(cells["G"], cells["mean"], yerr=[cells["mean"] - cells["low"],
                                                     cells["high"] - cells["mean"]],
                    marker="o", capsize=3, label="final reward (95% CI over seeds)")
        ax.axhline(cells["start"].iloc[0], color="grey", ls=":", label="warm start")
        v = verdicts[verdicts["N"] == N].iloc[0]
        if "pilot_advice" in v and math.isfinite(float(v["pilot_advice"])):
            ax.axvline(v["pilot_advice"], color="tab:red", ls="--", label="pilot's advice")
        set_group_size_ticks(ax, cells["G"])
        ax.set_xlabel("G (N fixed)")
        ax.set_title(f"N = {N}")
        ax.set_ylabel("held-out reward")
        ax.legend(fontsize=6)
    ax = axes[0, -1]
    steps = [c for c in table.columns if c.startswith("reward_")]
    x = [int(c.split("_")[1]) for c in steps]
    last = table[table["N"] == budgets[-1]]
    for G, runs in last.groupby("G"):
        ax.plot(x, runs[steps].mean().to_numpy(), marker=".", label=f"G = {G}")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out reward (mean over seeds)")
    ax.set_title(f"N = {budgets[-1]} along training")
    ax.legend(fontsize=6)
    return save_figure(fig, stem)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per (N, G)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per run")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--summarise-only", action="store_true",
                        help="reread the CSVs and write the summary, figure and table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    for name in ("seeds", "steps"):
        value = getattr(args, name)
        if value is not None:
            if value < 2:
                parser.error(f"--{name} must be >= 2")
            plan[name] = value
    if plan["steps"] % plan["every"]:
        plan["every"] = plan["steps"]
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    path, pilot_path = out / f"{NAME}.csv", out / f"{NAME}_pilot.csv"
    columns = ["N", "G", "seed", "steps", "seconds", *checkpoint_columns(plan), "final_reward",
               "windows_ok", "monitor_gstar", "monitor_low", "monitor_high", "monitor_advice"]
    table = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=columns)
    if not args.summarise_only:
        from ustat_rl.frameworks.advice_task import answer_probability, warm_start

        start = time.perf_counter()
        settings, _, held = task(plan)
        model, warm_seconds = warm_start(settings, out / "warm_start")
        solved = answer_probability(model, held)  # the held-out prompts' spread at step 0
        piloted = set(pd.read_csv(pilot_path)["N"]) if pilot_path.exists() else set()
        if not set(plan["budgets"]) <= piloted:  # a budget added since: the pilot again
            write_csv_atomic(pilot(plan, out / "warm_start"), pilot_path)
        costs = out / f"{NAME}_costs.json"
        if warm_seconds == 0.0 and costs.exists():  # read from the cache: keep its training cost
            warm_seconds = json.loads(costs.read_text())["warm_start_seconds"]
        costs.write_text(json.dumps(dict(
            warm_start_seconds=warm_seconds, pilot_and_warm_seconds=time.perf_counter() - start,
            held_out_mean=float(solved.mean()), held_out_under_0_05=float((solved < 0.05).mean()),
            held_out_over_0_9=float((solved > 0.9).mean()),
            held_out_quartiles=np.quantile(solved, [0.25, 0.5, 0.75]).tolist()), indent=1) + "\n")
        done = {(int(r.N), int(r.G), int(r.seed)) for r in table.itertuples()}
        # seed by seed within a budget, so that a study stopped early has balanced cells
        wanted = [(N, G, s) for N in plan["budgets"] for s in range(plan["seeds"])
                  for G in plan["sizes"] if N % G == 0]
        cells = {key: (*key, plan, str(out / "warm_start")) for key in wanted if key not in done}
        rows = table.to_dict("records")

        def on_result(key, row):
            rows.append(row)
            write_csv_atomic(pd.DataFrame(rows, columns=columns), path)

        run_cells(cells, run_cell, on_result, executor_from_args(args, parser),
                  progress=not args.no_progress, n_skipped=len(wanted) - len(cells),
                  desc="GRPO runs")
        table = pd.DataFrame(rows, columns=columns)
    table = table.astype({c: float for c in columns if c.startswith("reward_")})
    per_cell, verdicts = summarise(table, pd.read_csv(pilot_path))
    write_csv_atomic(per_cell, out / f"{NAME}_cells.csv")
    write_csv_atomic(verdicts, out / f"{NAME}_verdicts.csv")
    (out / f"{NAME}_table.md").write_text(markdown(per_cell, verdicts))
    plot(table, per_cell, verdicts, out / NAME)
    print(markdown(per_cell, verdicts))
    return table, per_cell, verdicts


if __name__ == "__main__":
    main()
