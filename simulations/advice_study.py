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
from dataclasses import dataclass
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
FULL = dict(budgets=(32, 64, 128), sizes=(2, 4, 8, 16, 32), seeds=tuple(range(10)), steps=120,
            every=20, digits=(2,), warm_steps=1500, train_prompts=512, held_out=150,
            pilot_prompts=64, learning_rate=5e-4, hidden=48)
# one-digit sums after a short warm start: the policy is uncertain on most prompts, so a few
# GRPO steps move it; one budget, three sizes, two seeds (every branch: pilot, training with the
# monitor at G >= 3, summary) in about two minutes on one core of a loaded 2-core machine
QUICK = dict(budgets=(32,), sizes=(2, 4, 8), seeds=(0, 1), steps=30, every=10, digits=(1,),
             warm_steps=150, train_prompts=60, held_out=40, pilot_prompts=16,
             learning_rate=5e-4, hidden=48)


def parse_seeds(text: str) -> tuple[int, ...]:
    """Explicit seeds: ``"100-109"`` (both ends included), ``"0,1,5"``, or a mix
    (``"0-2,7"``); one ``ValueError`` naming ``--seeds`` otherwise."""
    seeds = []
    try:
        for part in str(text).split(","):
            low, dash, high = part.strip().partition("-")
            first, last = int(low), int(high) if dash else int(low)
            if first < 0 or last < first:
                raise ValueError
            seeds.extend(range(first, last + 1))
    except ValueError:
        raise ValueError(f"`--seeds` must be seeds >= 0 as a range 'a-b' (a <= b) or a list "
                         f"'0,1,5', got {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"`--seeds` names a seed twice: {text!r}")
    return tuple(seeds)


def task(plan: dict):
    """The warm-start settings, the training problems and the held-out problems of ``plan``
    (its ``warm_seed``, default 0, seeds the warm start; ``digits`` the operands' digits)."""
    from ustat_rl.frameworks.advice_task import WarmStart, draw_problems

    digits = plan["digits"]
    held = draw_problems(plan["held_out"], seed=2, digits=digits)
    train = draw_problems(plan["train_prompts"], seed=1, exclude=[p for p, _ in held],
                          digits=digits, distinct=False)
    return (WarmStart(seed=plan.get("warm_seed", 0), steps=plan["warm_steps"],
                      hidden=plan["hidden"]), train, held)


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


#: The rule TRL's GRPOTrainer trains with its defaults (scale_rewards="group"), whose advice the
#: study reports beside the paper estimator's (docs/theory.md, "What a step's progress depends on").
TRAINED_RULE = "trl_group"


def pilot_rollouts(plan: dict, cache: Path, seed: int = 0):
    """8 answers to each of the first ``pilot_prompts`` training prompts of the warm-started
    model (step 0), with rewards and sketched scores."""
    import torch

    from ustat_rl.frameworks.advice_task import MAX_COMPLETION, warm_start
    from ustat_rl.frameworks.demo import VOCAB
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
    return causal_lm_pilot(model, ids, reward,
                           Sampling(8, MAX_COMPLETION, seed, eos_token_id=1),
                           SketchSpec(64, child_int(seed, 1)))


def advice_rows(rollouts, budgets) -> pd.DataFrame:
    """Per budget N, the pilot's G* interval and three pieces of advice: the paper estimator's
    (GRPO, its MSE, minimax regret over the interval), and the trained rule's
    (:data:`TRAINED_RULE`) under each target (MSE, scale-free). A pilot that carries no signal
    (every reward equal, every group all-equal) is refused with the report's own message: no
    advice is made up from ties."""
    from ustat_rl.pilot.report import gstar_report

    rows = []
    for N in budgets:
        paper = gstar_report(rollouts, N)
        row = dict(N=N, pilot_gstar=paper.gstar["estimate"], pilot_low=paper.gstar["low"],
                   pilot_high=paper.gstar["high"],
                   pilot_advice=paper.recommended_group_size,
                   pilot_reward=float(np.mean(rollouts.reward)), note="")
        for target in ("mse", "scale_free"):
            trained = gstar_report(rollouts, N, TRAINED_RULE, target=target)
            row[f"advice_trained_{target}"] = trained.recommended_group_size
        rows.append(row)
    return pd.DataFrame(rows)


def pilot(plan: dict, cache: Path, seed: int = 0) -> pd.DataFrame:
    """The pilot's G* interval and advice per N (:func:`advice_rows`) from
    :func:`pilot_rollouts`."""
    return advice_rows(pilot_rollouts(plan, cache, seed), plan["budgets"])


# ------------------------------------------------------------ the protocol's conditions
@dataclass(frozen=True)
class Condition:
    """One task variant of the protocol (docs/advice_wins.md, "Protocol"): the warm start's
    seed and length and the operands' digit counts GRPO trains and is evaluated on."""

    name: str
    warm_seed: int
    warm_steps: int
    digits: tuple
    held_out: int = 150  # one-digit sums number 100: 40 held out, the other 60 trained on


#: The candidates whose pilots were run to choose the protocol's conditions (by the spread of
#: their advice alone, never by a training outcome), cheapest warm starts first: the digit mixes
#: share seed 0's warm start, the one-digit variants train it briefly.
CANDIDATES = (
    Condition("d2-seed0", 0, 1500, (2,)),
    Condition("d2-seed1", 1, 1500, (2,)),
    Condition("d12-seed0", 0, 1500, (1, 2)),
    Condition("d23-seed0", 0, 1500, (2, 3)),
    Condition("d123-seed0", 0, 1500, (1, 2, 3)),
    Condition("d1-seed0-w150", 0, 150, (1,), held_out=40),
    Condition("d1-seed0-w300", 0, 300, (1,), held_out=40),
    Condition("d2-seed0-short", 0, 600, (2,)),
    Condition("d2-seed2", 2, 1500, (2,)),
    Condition("d2-seed1-short", 1, 600, (2,)),
    Condition("d2-seed0-w300", 0, 300, (2,)),
    Condition("d12-seed1", 1, 1500, (1, 2)),
    Condition("d123-seed1", 1, 1500, (1, 2, 3)),
    Condition("d12-seed0-short", 0, 600, (1, 2)),
    Condition("d12-seed0-w300", 0, 300, (1, 2)),
    Condition("d1-seed0-w600", 0, 600, (1,), held_out=40),
    Condition("d3-seed0", 0, 1500, (3,)),
    Condition("d3-seed1", 1, 1500, (3,)),
    Condition("d23-seed1", 1, 1500, (2, 3)),
    Condition("d1-seed0", 0, 1500, (1,), held_out=40),
    Condition("d1-seed1", 1, 1500, (1,), held_out=40),
    *(Condition(f"d2-seed{k}", k, 1500, (2,)) for k in range(3, 6)),
    Condition("d2-seed0-mid", 0, 1000, (2,)),
)

#: The protocol's settings (docs/advice_wins.md, "Protocol"); a condition adds its own.
PROTOCOL = dict(budgets=(48, 96), sizes=(2, 3, 4, 6, 8, 12, 16, 24, 32), steps=120, every=20,
                train_prompts=512, held_out=150, pilot_prompts=256, hidden=48,
                learning_rate=5e-4, learning_rates=(2.5e-4, 5e-4, 1e-3), lr_budget=48)


def condition_plan(condition: Condition, base: dict | None = None) -> dict:
    """``base`` (default :data:`PROTOCOL`) with the condition's warm start and digits."""
    return dict(PROTOCOL if base is None else base, warm_seed=condition.warm_seed, warm_steps=condition.warm_steps,
                digits=tuple(condition.digits), held_out=condition.held_out,
                condition=condition.name)


def run_pilots(out: Path, candidates=CANDIDATES) -> pd.DataFrame:
    """Each candidate's warm start and pilot (``pilot_prompts`` prompts, 8 answers, step 0):
    its advice per budget (:func:`advice_rows`), its rollouts kept under ``<out>/pilots``, one
    row written as each ends (a rerun skips the candidates already in the table)."""
    from ustat_rl.frameworks.advice_task import answer_probability, warm_start

    path = out / "advice_pilots.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    done = set(table["condition"]) if len(table) else set()
    rows = table.to_dict("records")
    (out / "pilots").mkdir(parents=True, exist_ok=True)
    for condition in candidates:
        if condition.name in done:
            continue
        plan = condition_plan(condition)
        start = time.perf_counter()
        settings, _, held = task(plan)
        model, warm_seconds = warm_start(settings, out / "warm_start")
        solved = answer_probability(model, held)
        rollouts = pilot_rollouts(plan, out / "warm_start")
        rollouts.save(out / "pilots" / f"{condition.name}.npz")
        base = dict(condition=condition.name, warm_seed=condition.warm_seed,
                    warm_steps=condition.warm_steps,
                    digits="".join(str(d) for d in condition.digits),
                    held_out_mean=float(solved.mean()), warm_seconds=warm_seconds)
        try:
            advice = advice_rows(rollouts, plan["budgets"])
        except ValueError as err:  # recorded, never turned into advice
            advice = pd.DataFrame([dict(N=N, note=str(err).splitlines()[0])
                                   for N in plan["budgets"]])
        for row in advice.to_dict("records"):
            rows.append({**base, **row, "seconds": time.perf_counter() - start})
        write_csv_atomic(pd.DataFrame(rows), path)
        print(f"{condition.name}: " + ", ".join(
            f"N={r['N']}: paper {r.get('pilot_advice')}, trained mse "
            f"{r.get('advice_trained_mse')}, trained scale-free "
            f"{r.get('advice_trained_scale_free')}" for r in advice.to_dict("records")),
            flush=True)
    table = pd.DataFrame(rows)
    piloted = sorted(set(table.loc[table["note"].fillna("") == "", "condition"]))
    write_csv_atomic(predicted_curves(out, piloted), out / "advice_pilot_curves.csv")
    return table


#: The protocol's conditions, chosen from the candidates' pilots alone
#: (:func:`choose_conditions` on ``advice_pilots.csv``; docs/advice_wins.md, "Protocol").
PROTOCOL_CONDITIONS: tuple[str, ...] = ("d123-seed0", "d3-seed1", "d23-seed1", "d2-seed0-short",
                                         "d2-seed0")
#: Exploration seeds choose each cell's best size; confirmation seeds, run after the analysis
#: (simulations/advice_protocol.py) was committed, score every rule.
EXPLORATION_SEEDS = (0, 1, 2)
CONFIRMATION_SEEDS = (100, 101, 102, 103)
#: The advice a condition is chosen by: the trained rule's, scale-free target, at the larger
#: budget (the protocol's primary advice).
CHOICE_COLUMN, CHOICE_BUDGET = "advice_trained_scale_free", 96


def choose_conditions(pilots: pd.DataFrame, k: int = 5) -> tuple[str, ...]:
    """``k`` conditions whose primary advice spans the widest range, from the pilots alone.

    Candidates with a refused pilot are dropped. The smallest and the largest advice come first,
    then each step adds the candidate whose advice is farthest on a log scale from those chosen
    (ties: the earlier candidate of :data:`CANDIDATES`), so distinct values come before repeats.
    """
    rows = pilots[(pilots["N"] == CHOICE_BUDGET) & pilots[CHOICE_COLUMN].notna()]
    order = {c.name: i for i, c in enumerate(CANDIDATES)}
    advice = {r.condition: float(getattr(r, CHOICE_COLUMN)) for r in rows.itertuples()}
    names = sorted(advice, key=lambda n: order.get(n, len(order)))
    if len(names) < k:
        raise ValueError(f"`pilots` holds {len(names)} conditions with advice, {k} are needed")
    chosen = [min(names, key=lambda n: advice[n]), max(names, key=lambda n: advice[n])]
    while len(chosen) < k:
        rest = [n for n in names if n not in chosen]
        chosen.append(max(rest, key=lambda n: (min(abs(math.log(advice[n] / advice[c]))
                                                   for c in chosen), -order.get(n, 0))))
    return tuple(chosen)


def pilots_markdown(pilots: pd.DataFrame, chosen) -> str:
    """The candidates' pilots as the Markdown table of docs/advice_wins.md's protocol."""
    lines = ["| condition | warm seed | warm steps | digits | held-out reward, step 0 "
             "| pilot G* [90%] | paper advice | trained rule, MSE | trained rule, scale-free "
             "| chosen |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in pilots.groupby("condition", sort=False):
        r = rows.set_index("N")
        first = rows.iloc[0]

        def both(column, r=r):
            if column not in r or r[column].isna().any():
                return "refused"
            return " / ".join(str(int(r.loc[N, column])) for N in PROTOCOL["budgets"])

        gstar = ("n/a" if not math.isfinite(float(first.get("pilot_gstar", math.nan))) else
                 f"{first['pilot_gstar']:.2f} [{first['pilot_low']:.2f}, "
                 f"{first['pilot_high']:.2f}]")
        lines.append(f"| {name} | {int(first['warm_seed'])} | {int(first['warm_steps'])} "
                     f"| {first['digits']} | {first['held_out_mean']:.3f} | {gstar} "
                     f"| {both('pilot_advice')} | {both('advice_trained_mse')} "
                     f"| {both('advice_trained_scale_free')} "
                     f"| {'yes' if name in chosen else ''} |")
    return "\n".join(lines) + "\n"


def protocol_cells(conditions, seeds) -> list[tuple]:
    """``(condition, N, G, learning_rate, seed)`` of the protocol, seed by seed (a study stopped
    early has whole seeds for every condition), the three rates at ``lr_budget`` only."""
    plan = PROTOCOL
    keys = []
    for seed in seeds:
        for name in conditions:
            for N in plan["budgets"]:
                rates = plan["learning_rates"] if N == plan["lr_budget"] else (
                    plan["learning_rate"],)
                for lr in rates:
                    keys.extend((name, N, G, lr, seed) for G in plan["sizes"] if N % G == 0)
    return keys


def run_protocol_cell(name: str, N: int, G: int, learning_rate: float, seed: int, phase: str,
                      cache: str) -> dict:
    """One run of the protocol: :func:`run_cell` under the condition's plan and rate."""
    condition = {c.name: c for c in CANDIDATES}[name]
    plan = dict(condition_plan(condition), learning_rate=learning_rate)
    row = run_cell(N, G, seed, plan, cache)
    return dict(condition=name, phase=phase, learning_rate=learning_rate, **row)


def run_protocol(out: Path, phase: str, seeds, executor, progress: bool) -> pd.DataFrame:
    """The protocol's runs of one phase, each written to ``<out>/advice_protocol.csv`` as it
    ends; a rerun skips the runs already there."""
    conditions = PROTOCOL_CONDITIONS
    if not conditions:
        raise ValueError("PROTOCOL_CONDITIONS is empty: choose the conditions from the pilots "
                         "(--pilots, choose_conditions) and commit them before any run")
    path = out / "advice_protocol.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    done = set() if not len(table) else {
        (r.condition, int(r.N), int(r.G), float(r.learning_rate), int(r.seed))
        for r in table.itertuples()}
    wanted = protocol_cells(conditions, seeds)
    cells = {key: (*key, phase, str(out / "warm_start")) for key in wanted
             if (key[0], key[1], key[2], float(key[3]), key[4]) not in done}
    rows = table.to_dict("records")

    def on_result(key, row):
        rows.append(row)
        write_csv_atomic(pd.DataFrame(rows), path)

    run_cells(cells, run_protocol_cell, on_result, executor, progress=progress,
              n_skipped=len(wanted) - len(cells), desc=f"protocol runs ({phase})")
    return pd.DataFrame(rows)


def predicted_curves(out: Path, conditions) -> pd.DataFrame:
    """Per condition, budget and target, the pilot's predicted error over the budget's divisors:
    the paper estimator's MSE (``pilot_advice``), the trained rule's MSE and its scale-free error,
    from the rollouts ``--pilots`` kept under ``<out>/pilots`` (written by ``--pilots`` to
    ``advice_pilot_curves.csv``, which the summary reads)."""
    from ustat_rl.pilot.report import gstar_report
    from ustat_rl.pilot.rollouts import load_rollouts

    kept = out / "advice_pilot_curves.csv"
    earlier = pd.read_csv(kept) if kept.exists() else pd.DataFrame(columns=["condition"])
    rows = []
    for name in conditions:
        path = out / "pilots" / f"{name}.npz"
        if not path.exists():  # the rollouts are not committed: keep the curves read from them
            found = earlier[earlier["condition"] == name]
            if found.empty:
                raise FileNotFoundError(f"{path} is missing and {kept} holds no curves of "
                                        f"{name!r}: remove its rows from advice_pilots.csv and "
                                        "run --pilots again")
            rows.extend(found.to_dict("records"))
            continue
        rollouts = load_rollouts(path)
        for N in PROTOCOL["budgets"]:
            paper = gstar_report(rollouts, N, extra_estimators=(TRAINED_RULE,))
            free = gstar_report(rollouts, N, TRAINED_RULE, target="scale_free")
            curves = {"pilot_advice": paper.mse["grpo"]["estimate"],
                      "advice_trained_mse": paper.mse[TRAINED_RULE]["estimate"],
                      "advice_trained_scale_free": free.scale_free}
            for target, curve in curves.items():
                rows.extend(dict(condition=name, N=N, target=target, G=G, error=e)
                            for G, e in zip(paper.group_sizes, curve))
    return pd.DataFrame(rows)


def summarise_protocol(out: Path) -> dict:
    """The frozen analysis (simulations/advice_protocol.py) of ``<out>/advice_protocol.csv``."""
    analysis = _load_analysis()
    runs = pd.read_csv(out / "advice_protocol.csv")
    pilots = pd.read_csv(out / "advice_pilots.csv")
    cells, table, verdicts = analysis.endpoint(runs, pilots)
    shapes = analysis.shape_tests(runs, pd.read_csv(out / "advice_pilot_curves.csv"))
    _, tuned, tuned_verdicts, rates = analysis.tuned_rate_endpoint(runs, pilots,
                                                                   PROTOCOL["lr_budget"])
    plateau = analysis.plateau(runs, cells)
    targets = target_difference(analysis, runs, pilots)
    for stem, frame in (("cells", cells), ("endpoint", table), ("verdicts", verdicts),
                        ("shapes", shapes), ("plateau", plateau), ("tuned_endpoint", tuned),
                        ("tuned_verdicts", tuned_verdicts), ("tuned_rates", rates)):
        write_csv_atomic(frame, out / f"advice_protocol_{stem}.csv")
    summary = dict(cells=cells, endpoint=table, verdicts=verdicts, shapes=shapes,
                   plateau=plateau, tuned=tuned, tuned_verdicts=tuned_verdicts,
                   tuned_rates=rates, targets=targets)
    text = protocol_markdown(summary, runs, analysis)
    (out / "advice_protocol_results.md").write_text(text)
    plot_protocol(runs, cells, analysis, out / "advice_protocol")
    print(text)
    return summary


#: The advice columns of the pilots' table in words, primary first.
ADVICE_WORDS = {"advice_trained_scale_free": "trained rule, scale-free (primary)",
                "advice_trained_mse": "trained rule, MSE",
                "pilot_advice": "paper estimator, MSE"}


def target_difference(analysis, runs: pd.DataFrame, pilots: pd.DataFrame) -> dict:
    """The protocol's descriptive comparison of the two advice targets: the pooled difference of
    the scale-free and the MSE advice's regrets (confirmation means; negative: the scale-free
    target lost less), with its 95% interval, from the frozen analysis's own pooling."""
    cells, moments = analysis.cell_regrets(runs, pilots)
    a, b = "advice_trained_scale_free", "advice_trained_mse"

    def difference(row, grid):
        wa, wb = analysis._rule_weights(row, a, grid), analysis._rule_weights(row, b, grid)
        return {G: wa.get(G, 0.0) - wb.get(G, 0.0) for G in grid}

    value, se, df = analysis._pooled(cells, moments, difference)
    low, high = analysis._interval(value, se, df)
    return dict(difference=value, low=low, high=high)


def _confirmation_means(runs: pd.DataFrame, analysis) -> pd.DataFrame:
    chosen = runs[(runs["phase"] == "confirmation")
                  & np.isclose(runs["learning_rate"], analysis.PRIMARY_LR)]
    return chosen.groupby(["condition", "N", "G"])["final_reward"].agg(["mean", "sem", "count"])


def _ci(value, low, high, digits=4) -> str:
    return f"{value:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def protocol_markdown(summary: dict, runs: pd.DataFrame, analysis) -> str:
    """The second study's results as the page shows them, every figure read from ``summary``
    (the frozen analysis's output) or from ``runs``."""
    cells, table, verdicts = summary["cells"], summary["endpoint"], summary["verdicts"]
    means = _confirmation_means(runs, analysis)
    lines = ["**Verdicts** (primary endpoint: regret pooled over the "
             f"{int(verdicts['cells'].iloc[0])} cells at rate {analysis.PRIMARY_LR:g}; "
             "95% intervals; the negative control is the grid's worst size on exploration):",
             "", "| advice | verdict | pooled regret [95%] | advised G per cell | negative "
             "control: worst G's regret (p) |", "|---|---|---|---|---|"]
    for v in verdicts.to_dict("records"):
        lines.append(f"| {ADVICE_WORDS[v['advice']]} | **{v['verdict']}** | "
                     f"{_ci(v['regret'], v['low'], v['high'])} | {v['advised_sizes']} | "
                     f"{v['control_regret']:+.4f} (p = {v['control_p']:.2g}) |")
    lines += ["", "**Each advice against each fixed rule** (difference of pooled regrets, "
              "advice minus rule: negative means the advice lost less; one-sided p-values, "
              "Holm-adjusted over the four rules):", "",
              "| advice | rule | rule's regret [95%] | advice - rule [95%] | p (advice better) "
              "| p (advice worse) |", "|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        lines.append(f"| {ADVICE_WORDS[r['advice']]} | {r['rule']} | "
                     f"{_ci(r['rule_regret'], r['rule_low'], r['rule_high'])} | "
                     f"{_ci(r['difference'], r['difference_low'], r['difference_high'])} | "
                     f"{r['p_better_holm']:.2g} | {r['p_worse_holm']:.2g} |")
    t = summary["targets"]
    lines += ["", "Scale-free against MSE target (descriptive, no verdict rests on it): pooled "
              f"regret difference {_ci(t['difference'], t['low'], t['high'])}.", "",
              "**Per cell** (best grid G chosen on exploration seeds; regrets on confirmation "
              "seeds, each cell's mean over its seeds):", "",
              "| condition | N | best G | primary advice | MSE advice | paper advice | "
              "best's reward | regret: primary | G = 8 | G = 4 | smallest |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells.to_dict("records"):
        m = means.loc[(c["condition"], c["N"])]["mean"]

        def regret(G, m=m, c=c):
            return f"{c['best_mean'] - m[int(G)]:+.4f}"

        lines.append(f"| {c['condition']} | {c['N']} | {c['best_G']} | "
                     f"{int(c['advice_trained_scale_free'])} | {int(c['advice_trained_mse'])} | "
                     f"{int(c['pilot_advice'])} | {c['best_mean']:.4f} | "
                     f"{regret(c['advice_trained_scale_free'])} | {regret(c['G=8'])} | "
                     f"{regret(c['G=4'])} | {regret(c['smallest G'])} |")
    shapes = summary["shapes"]
    lines += ["", "**The law's shape against the trainer's** (confirmation seeds; rho: Spearman "
              "of the predicted error, negated, with the mean final reward over the grid, "
              "one-sided permutation p; the asymmetry: the end the law calls worse minus the "
              "other end, one-sided Welch p):", "",
              "| condition | N | target | rho (p) | law's worse end | reward gap (p) |",
              "|---|---|---|---|---|---|"]
    for r in shapes.to_dict("records"):
        lines.append(f"| {r['condition']} | {r['N']} | {r['target']} | {r['rho']:+.2f} "
                     f"({r['p_rho']:.2g}) | G = {r['predicted_worse_end']} | "
                     f"{r['observed_gap']:+.4f} ({r['p_asymmetry']:.2g}) |")
    for target, block in shapes.groupby("target"):
        way = int((block["observed_gap"] < 0).sum())
        lines.append(f"\nTarget `{target}`: the asymmetry goes the predicted way in {way} of "
                     f"{len(block)} cells ({int((block['p_asymmetry'] < 0.05).sum())} "
                     "significant at 5%, unadjusted).")
    lines += ["", "**Each size at its own rate** (secondary endpoint, N = "
              f"{PROTOCOL['lr_budget']}: each (condition, G) at its best rate on exploration):",
              "", "| advice | verdict | pooled regret [95%] |", "|---|---|---|"]
    for v in summary["tuned_verdicts"].to_dict("records"):
        lines.append(f"| {ADVICE_WORDS[v['advice']]} | {v['verdict']} | "
                     f"{_ci(v['regret'], v['low'], v['high'])} |")
    lines += ["", "**Plateau** (at each cell's best G, confirmation mean held-out reward):", "",
              "| condition | N | best G | step 100 | step 120 | gap |", "|---|---|---|---|---|---|"]
    for r in summary["plateau"].to_dict("records"):
        lines.append(f"| {r['condition']} | {r['N']} | {r['best_G']} | {r['reward_100']:.4f} | "
                     f"{r['reward_120']:.4f} | {r['gap']:+.4f} |")
    return "\n".join(lines) + "\n"


def plot_protocol(runs: pd.DataFrame, cells: pd.DataFrame, analysis, stem: Path):
    """Per condition, the confirmation mean final reward over G at each budget (+- one standard
    error), with the primary advice and the exploration-best size marked."""
    from ustat_rl.interface.plotting import new_figure, save_figure, set_group_size_ticks

    means = _confirmation_means(runs, analysis).reset_index()
    conditions = sorted(cells["condition"].unique())
    fig, axes = new_figure(1, len(conditions), panel_size=(3.4, 3.0), sharex=False)
    for ax, condition in zip(axes[0], conditions):
        for (N, block), colour in zip(means[means["condition"] == condition].groupby("N"),
                                      ("tab:blue", "tab:orange", "tab:green")):
            ax.errorbar(block["G"], block["mean"], yerr=block["sem"], marker="o", capsize=2,
                        color=colour, label=f"N = {N}")
            cell = cells[(cells["condition"] == condition) & (cells["N"] == N)].iloc[0]
            ax.axvline(cell["advice_trained_scale_free"], color=colour, ls="--", lw=0.8)
            best = block[block["G"] == cell["best_G"]]
            ax.plot(best["G"], best["mean"], marker="*", ms=12, color=colour, ls="none")
        set_group_size_ticks(ax, means[means["condition"] == condition]["G"])
        ax.set_title(condition, fontsize=8)
        ax.set_xlabel("G (dashed: primary advice; star: best on exploration)", fontsize=6)
        ax.set_ylabel("final held-out reward (confirmation)")
        ax.legend(fontsize=6)
    return save_figure(fig, stem)


def _load_analysis():
    import importlib.util
    import sys

    path = Path(__file__).with_name("advice_protocol.py")
    spec = importlib.util.spec_from_file_location("advice_protocol", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("advice_protocol", module)
    spec.loader.exec_module(module)
    return module


def check_informative(finals: np.ndarray, where: str) -> None:
    """Refuse, in one ``ValueError``, runs whose final rewards are all equal (all 0 where
    nothing was ever solved): every size ties, and a best G would be an argmax over ties."""
    if not np.all(np.isfinite(finals)):
        raise ValueError(f"the final rewards at {where} hold NaN: a run did not finish")
    if finals.size and np.ptp(finals) == 0.0:
        raise ValueError(f"every run at {where} ended with the same final reward "
                         f"({finals[0]:g}): the runs cannot tell group sizes apart, so no best G "
                         "is named (a warm start that solves nothing gives GRPO no signal)")


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
        check_informative(runs["final_reward"].to_numpy(float), f"N = {int(N)}")
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
    parser.add_argument("--seeds", default=None,
                        help="explicit seeds: a range '100-109' or a list '0,1,5'")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per run")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--summarise-only", action="store_true",
                        help="reread the CSVs and write the summary, figure and table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--protocol", choices=("exploration", "confirmation"), default=None,
                        help="the protocol's runs of one phase (docs/advice_wins.md, "
                             "'Protocol'), to <out>/advice_protocol.csv; with --summarise-only "
                             "its frozen analysis")
    parser.add_argument("--pilots", action="store_true",
                        help="only the candidate conditions' warm starts and pilots (the "
                             "protocol's choice of conditions), to <out>/advice_pilots.csv")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    if args.seeds is not None:
        try:
            plan["seeds"] = parse_seeds(args.seeds)
        except ValueError as err:
            parser.error(str(err))
    if args.steps is not None:
        if args.steps < 2:
            parser.error("--steps must be >= 2")
        plan["steps"] = args.steps
    if plan["steps"] % plan["every"]:
        plan["every"] = plan["steps"]
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    if args.pilots:
        return run_pilots(out)
    if args.protocol is not None:
        if args.summarise_only:
            try:
                return summarise_protocol(out)
            except (ValueError, FileNotFoundError) as err:  # e.g. no confirmation run yet
                parser.exit(2, f"advice_study.py: no summary: {err}\n")
        phase_seeds = EXPLORATION_SEEDS if args.protocol == "exploration" else CONFIRMATION_SEEDS
        seeds = phase_seeds if args.seeds is None else plan["seeds"]
        if not set(seeds) <= set(phase_seeds):
            parser.error(f"--seeds must be among the {args.protocol} seeds {phase_seeds}")
        try:
            return run_protocol(out, args.protocol, seeds, executor_from_args(args, parser),
                                not args.no_progress)
        except ValueError as err:
            parser.exit(2, f"advice_study.py: {err}\n")
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
            try:
                write_csv_atomic(pilot(plan, out / "warm_start"), pilot_path)
            except ValueError as err:  # no signal: stop before training, say why
                parser.exit(2, f"advice_study.py: the pilot refuses: {err}\n")
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
        wanted = [(N, G, s) for N in plan["budgets"] for s in plan["seeds"]
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
    rises = per_cell.assign(rise=per_cell["mean"] - per_cell["start"])
    top = rises.loc[rises["rise"].idxmax()]
    print(f"largest mean rise of the held-out reward: {top['rise']:+.4f} at N = {int(top['N'])}, "
          f"G = {int(top['G'])} (from {top['start']:.4f}, {int(top['seeds'])} seeds)")
    return table, per_cell, verdicts


if __name__ == "__main__":
    main()
