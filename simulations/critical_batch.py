"""The critical batch of a real GRPO trainer against the pilot's critical rollout count.

McCandlish et al. ("An Empirical Model of Large-Batch Training", arXiv 1812.06162) measure the
critical batch of training runs from the steps ``S`` needed to reach a target at each batch
``N``: the frontier ``(S/S_min - 1)(E/E_min - 1) = 1`` with ``E = N S`` gives
``S(N) = S_min + E_min/N`` and ``B_crit = E_min/S_min``. This script measures it for
``trl.GRPOTrainer`` on the advice study's task (``simulations/advice_study.py``: its conditions,
warm starts, prompts and exact held-out reward) and compares it with the critical rollout count
``B_noise(G)`` that ``ustat-rl gstar --group-size G`` prints from a pilot
(:func:`ustat_rl.pilot.critical_rollouts.critical_rollout_intervals`). The protocol, fixed
before the runs, is docs/critical_batch.md.

Each run (condition, G, N, seed) trains from the condition's warm start at a constant learning
rate for ``steps`` steps, the held-out reward recorded every ``every`` steps. The summary, per
condition and G: the steps to the target at each N (the first crossing of the seed-mean reward,
interpolated; censored if none), the least-squares line of S on 1/N, ``B_crit`` with a bootstrap
interval over seeds, the prediction at the run's G with its Fieller interval, and their ratio.

Each finished run is written at once to ``<out>/critical_batch.csv`` (atomically); a rerun skips
the runs already there, and the pilots' predictions are kept in
``<out>/critical_batch_predictions.csv``. ``--summarise-only`` rereads both and writes the tables
and the figure. Needs the ``trl`` extra.

Usage::

    python simulations/critical_batch.py --quick              # seconds: a smoke test
    python simulations/critical_batch.py --out DIR --workers 1  # the study (docs/critical_batch.md)
    python simulations/critical_batch.py --out DIR --summarise-only
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
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

NAME = "critical_batch"
TRL_DEFAULT_G = 8
#: Each condition's advised G: the protocol's primary advice (``advice_trained_scale_free`` at
#: N = 96 in docs/advice_wins_data/protocol/advice_pilots.csv).
ADVISED = {"d2-seed0": 4, "d23-seed1": 12}
FULL = dict(conditions=tuple(ADVISED), budgets=(24, 48, 96, 192), seeds=(0, 1, 2), steps=240,
            every=2, learning_rate=5e-4)
# one-digit sums after a 150-step warm start (the advice study's quick task), one G, two budgets,
# two seeds, 20 steps: every branch (warm start, pilot, prediction, runs, fit, table, figure)
QUICK = dict(conditions=("d1-seed0-w150",), budgets=(8, 16), seeds=(0, 1), steps=20, every=5,
             learning_rate=5e-4, sizes=(4,))
#: The target's fraction of the smallest rise (primary first; the others are descriptive).
FRACTIONS = (0.5, 0.25, 0.75)
#: A condition whose smallest seed-mean rise at the last step is below this did not rise: about
#: twice the spread of a 3-seed mean of the final reward in the advice study's protocol runs.
MIN_RISE = 0.02
#: Two-sided level of the measured and of the predicted interval; their ratio's interval, from
#: the two by Bonferroni, holds with probability at least 1 - 2 (1 - LEVEL) = 90%.
LEVEL = 0.95
BOOTSTRAP, BOOTSTRAP_SEED = 2000, 0
#: McCandlish's "small factor": the ratio's band of agreement is [1/FACTOR, FACTOR].
FACTOR = 3.0


def _study():
    """``simulations/advice_study.py`` as a module (its task, warm start, pilot, seeds)."""
    if "advice_study" in sys.modules:
        return sys.modules["advice_study"]
    path = Path(__file__).with_name("advice_study.py")
    spec = importlib.util.spec_from_file_location("advice_study", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["advice_study"] = module
    spec.loader.exec_module(module)
    return module


def condition_plan(name: str, quick: bool = False) -> dict:
    """The advice study's plan of condition ``name`` (the quick task's base when ``quick``)."""
    study = _study()
    condition = {c.name: c for c in study.CANDIDATES}[name]
    return study.condition_plan(condition, study.QUICK if quick else None)


def sizes_of(name: str, plan: dict) -> tuple[int, ...]:
    """The group sizes a condition trains at: the plan's, else its advice and TRL's default."""
    if "sizes" in plan:
        return tuple(plan["sizes"])
    return tuple(sorted({ADVISED[name], TRL_DEFAULT_G}))


def eval_columns(steps: int, every: int) -> list[str]:
    return [f"reward_{s}" for s in range(0, steps + 1, every)]


def run_curve(name: str, N: int, G: int, seed: int, plan: dict, cache: str) -> dict:
    """One GRPO run of the advice study's task at a constant learning rate: the held-out reward
    every ``plan["every"]`` steps. The study's ``run_cell`` decays the rate linearly and cannot
    be told otherwise, so this calls its pieces (task, warm start, reward, trainer) itself."""
    from transformers import TrainerCallback

    from ustat_rl.frameworks.advice_task import (
        MAX_COMPLETION,
        answer_probability,
        exact_reward,
        warm_start,
    )
    from ustat_rl.frameworks.demo import DemoSetup, demo_trainer

    settings, train, held = _study().task(plan)
    model, _ = warm_start(settings, Path(cache))
    curve = {"reward_0": float(answer_probability(model, held).mean())}

    class Evaluations(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % plan["every"] == 0:
                curve[f"reward_{state.global_step}"] = float(answer_probability(model, held).mean())

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = demo_trainer(Path(tmp) / "out", G, N // G, plan["steps"],
                               learning_rate=plan["learning_rate"], lr_scheduler_type="constant",
                               model=model, reward=exact_reward,
                               setup=DemoSetup(prompts=[p for p, _ in train]),
                               max_completion_length=MAX_COMPLETION, bf16=False, seed=seed)
        trainer.add_callback(Evaluations())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        # the rate the optimiser stepped with at the last logged step: the schedule's check
        rates = [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]
    return dict(condition=name, N=N, G=G, seed=seed, steps=plan["steps"],
                learning_rate=plan["learning_rate"], last_rate=rates[-1] if rates else math.nan,
                seconds=time.perf_counter() - start, **curve)


def predictions(name: str, plan: dict, sizes, cache: Path, level: float = LEVEL) -> list[dict]:
    """The pilot's critical rollout count at each G (the advice study's pilot of the condition),
    and the advice the same pilot gives now at N = 96 (a check on the fixed :data:`ADVISED`)."""
    from ustat_rl.pilot.critical_rollouts import critical_rollout_intervals

    study = _study()
    rollouts = study.pilot_rollouts(plan, cache)
    advice = study.advice_rows(rollouts, [96]).iloc[0][study.CHOICE_COLUMN]
    rows = []
    for G, found in zip(sizes, critical_rollout_intervals(rollouts, list(map(float, sizes)),
                                                          level=level)):
        row = dict(condition=name, G=int(G), level=level, advice_now=advice,
                   note=found.note or "")
        for part in ("total", "inter", "intra", "grad_norm_sq"):
            value = getattr(found, part)
            row.update({f"{part}": value.estimate, f"{part}_low": value.low,
                        f"{part}_high": value.high})
        rows.append(row)
    return rows


# ------------------------------------------------------------------ the analysis (pure numpy)
def crossing_steps(steps, curves, target: float) -> np.ndarray:
    """The first step at which each curve reaches ``target``, linear between evaluations.

    ``steps`` (K,) increasing; ``curves`` (..., K). A curve already at the target at ``steps[0]``
    gives ``steps[0]``; one that never reaches it gives NaN (censored)."""
    steps = np.asarray(steps, dtype=float)
    curves = np.asarray(curves, dtype=float)
    if steps.ndim != 1 or curves.shape[-1:] != steps.shape or np.any(np.diff(steps) <= 0):
        raise ValueError("`steps` must be increasing and match the curves' last axis, got "
                         f"{steps.shape} and {curves.shape}")
    if not math.isfinite(target):
        raise ValueError(f"`target` must be finite, got {target}")
    if not np.all(np.isfinite(curves)):  # a missing evaluation is not a curve below the target
        raise ValueError("`curves` hold NaN or inf: a run did not finish or missed an evaluation")
    above = curves >= target  # (..., K)
    first = np.argmax(above, axis=-1)  # (...,) index of the first evaluation at the target
    reached = above.any(axis=-1)
    before = np.maximum(first - 1, 0)
    c0 = np.take_along_axis(curves, before[..., None], -1)[..., 0]
    c1 = np.take_along_axis(curves, first[..., None], -1)[..., 0]
    s0, s1 = steps[before], steps[first]
    # c0 < target <= c1 wherever first > 0, so the denominator is positive there
    frac = np.where(first > 0, (target - c0) / np.where(first > 0, c1 - c0, 1.0), 0.0)
    out = s0 + frac * (s1 - s0)
    return np.where(reached, out, np.nan)


def frontier_line(budgets, steps_needed) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares ``S = S_min + E_min/N`` over the budgets: ``(S_min, E_min)``.

    ``steps_needed`` (..., n_budgets); a row holding NaN (a censored crossing) gives NaN."""
    budgets = np.asarray(budgets, dtype=float)
    if budgets.ndim != 1 or budgets.size < 2 or len(set(budgets)) < 2:
        raise ValueError(f"`budgets` must hold at least two different N, got {budgets}")
    design = np.column_stack([np.ones_like(budgets), 1.0 / budgets])  # (n, 2)
    coef = np.asarray(steps_needed, dtype=float) @ np.linalg.pinv(design).T  # (..., 2)
    return coef[..., 0], coef[..., 1]


def critical_batch(s_min, e_min) -> np.ndarray:
    """``B_crit = E_min/S_min``: 0 where ``E_min <= 0`` (more rollouts saved no step), ``inf``
    where ``S_min <= 0`` (steps fell as 1/N over the whole grid), NaN where either is NaN."""
    s_min, e_min = np.broadcast_arrays(np.asarray(s_min, float), np.asarray(e_min, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = e_min / s_min
    out = np.where(e_min <= 0, 0.0, np.where(s_min <= 0, np.inf, ratio))
    return np.where(np.isnan(s_min) | np.isnan(e_min), np.nan, out)


@dataclass(frozen=True)
class FrontierFit:
    """McCandlish's frontier fitted to the steps to a target at several budgets.

    Attributes
    ----------
    budgets : tuple of int
        The N of the fit.
    steps_needed : tuple of float
        ``S(N)`` from the seed-mean curve (NaN: censored).
    s_min, e_min, b_crit : float
        The line's intercept and slope and ``B_crit = E_min/S_min`` (NaN if a point is
        censored; see :func:`critical_batch` for 0 and inf).
    low, high : float
        The bootstrap percentile interval of ``B_crit`` at ``level`` (NaN without a fit).
    level : float
    undefined_share : float
        Share of resamples whose ``B_crit`` was censored or infinite (counted as inf).
    """

    budgets: tuple
    steps_needed: tuple
    s_min: float
    e_min: float
    b_crit: float
    low: float
    high: float
    level: float
    undefined_share: float

    @property
    def censored(self) -> tuple:
        return tuple(N for N, s in zip(self.budgets, self.steps_needed) if math.isnan(s))


def fit_frontier(curves: dict, steps, target: float, rng, n_boot: int = BOOTSTRAP,
                 level: float = LEVEL) -> FrontierFit:
    """The frontier from seed curves: ``curves`` maps N to an array (seeds, K) of held-out
    rewards at ``steps``; ``S(N)`` is the seed mean's crossing of ``target``. The interval
    redraws the seeds with replacement within each N (the target held), ``n_boot`` times."""
    rng = np.random.default_rng(rng)
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"`n_boot` must be an integer >= 1, got {n_boot!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    budgets = sorted(curves)
    arrays = [np.asarray(curves[N], dtype=float) for N in budgets]
    if any(a.ndim != 2 or a.shape[0] < 1 for a in arrays):
        raise ValueError("`curves` must map each N to an array (seeds, evaluations)")
    point = np.array([crossing_steps(steps, a.mean(axis=0), target) for a in arrays])
    s_min, e_min = frontier_line(budgets, point)
    b_crit = float(critical_batch(s_min, e_min))
    low = high = share = math.nan
    if not np.isnan(point).any():
        boot = np.empty((n_boot, len(budgets)))  # (n_boot, n_budgets)
        for j, a in enumerate(arrays):
            pick = rng.integers(0, a.shape[0], size=(n_boot, a.shape[0]))
            boot[:, j] = crossing_steps(steps, a[pick].mean(axis=1), target)
        values = critical_batch(*frontier_line(budgets, boot))
        values = np.where(np.isnan(values), np.inf, values)
        share = float(np.mean(np.isinf(values)))
        # order statistics, not interpolation: an infinite resample must not meet inf - inf
        low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2],
                                method="inverted_cdf")
    return FrontierFit(tuple(int(N) for N in budgets), tuple(float(s) for s in point),
                       float(s_min), float(e_min), b_crit, float(low), float(high), level, share)


def target_of(runs: pd.DataFrame, last: str, fraction: float) -> tuple[float, float]:
    """``(target, rise_min)`` of one condition's runs (docs/critical_batch.md, "The target"):
    ``r_0 + fraction * rise_min``, ``rise_min`` the smallest rise over (G, N) of the seed-mean
    reward at column ``last``; target NaN when ``rise_min < MIN_RISE`` (it did not rise)."""
    start = runs["reward_0"].to_numpy(float)
    if np.ptp(start) > 1e-9:
        raise ValueError("`runs`: the runs of one condition start from different rewards "
                         f"({start.min():g} to {start.max():g}); they share one warm start")
    r0 = float(start[0])
    rise = float(runs.groupby(["G", "N"])[last].mean().min()) - r0
    return (r0 + fraction * rise if rise >= MIN_RISE else math.nan), rise


def verdict(ratio_low: float, ratio_high: float) -> str:
    """The protocol's reading of the ratio's interval against ``[1/FACTOR, FACTOR]``."""
    if math.isnan(ratio_low) or math.isnan(ratio_high):
        return "not measured"
    if ratio_low >= 1 / FACTOR and ratio_high <= FACTOR:
        return "agreement shown"
    if ratio_high < 1 / FACTOR or ratio_low > FACTOR:
        return "disagreement"
    return "consistent"


def summarise(table: pd.DataFrame, predicted: pd.DataFrame, fractions=FRACTIONS,
              n_boot: int = BOOTSTRAP) -> pd.DataFrame:
    """One row per (condition, G, fraction): S(N), the fit, B_crit with its interval, the
    prediction and the ratio with its interval and verdict."""
    columns = [c for c in table.columns if c.startswith("reward_")]
    steps = sorted(int(c.split("_")[1]) for c in columns)
    columns = [f"reward_{s}" for s in steps]
    rows = []
    for name, runs in table.groupby("condition", sort=False):
        for fraction in fractions:
            target, rise = target_of(runs, columns[-1], fraction)
            for G, cell in runs.groupby("G"):
                base = dict(condition=name, G=int(G), fraction=fraction,
                            start=float(runs["reward_0"].iloc[0]), rise_min=rise, target=target,
                            seeds=int(cell.groupby("N").size().min()))
                match = predicted[(predicted["condition"] == name) & (predicted["G"] == G)]
                pred = (match.iloc[0] if len(match) else
                        pd.Series(dict(total=math.nan, total_low=math.nan, total_high=math.nan)))
                base.update(predicted=pred["total"], predicted_low=pred["total_low"],
                            predicted_high=pred["total_high"])
                if math.isnan(target):
                    rows.append(dict(base, verdict="did not rise"))
                    continue
                curves = {int(N): c[columns].to_numpy(float) for N, c in cell.groupby("N")}
                fit = fit_frontier(curves, steps, target, BOOTSTRAP_SEED, n_boot)
                ratio = fit.b_crit / pred["total"] if pred["total"] > 0 else math.nan
                with np.errstate(divide="ignore", invalid="ignore"):
                    r_low = fit.low / pred["total_high"] if pred["total_high"] > 0 else math.nan
                    r_high = (fit.high / pred["total_low"] if pred["total_low"] > 0 else math.inf)
                if fit.censored or math.isnan(fit.b_crit) or not pred["total"] > 0:
                    r_low = r_high = math.nan
                rows.append(dict(
                    base, **{f"S_{N}": s for N, s in zip(fit.budgets, fit.steps_needed)},
                    censored=" ".join(map(str, fit.censored)), S_min=fit.s_min, E_min=fit.e_min,
                    B_crit=fit.b_crit, B_crit_low=fit.low, B_crit_high=fit.high,
                    undefined_share=fit.undefined_share, ratio=ratio, ratio_low=r_low,
                    ratio_high=r_high, verdict=verdict(r_low, r_high)))
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame) -> str:
    """The results table of docs/critical_batch.md (every fraction; the primary is 1/2)."""
    budgets = sorted(int(c[2:]) for c in summary.columns if c.startswith("S_")
                     and c[2:].isdigit())
    head = (["condition", "G", "f", "start", "smallest rise", "target"]
            + [f"S({N})" for N in budgets]
            + ["S_min", "E_min", "B_crit [95%]", "B_noise(G) [95%]", "ratio [>= 90%]", "verdict"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def num(x):
        return "n/a" if not isinstance(x, (int, float)) or math.isnan(x) else f"{x:.3g}"

    for r in summary.to_dict("records"):
        steps = ["censored" if math.isnan(r.get(f"S_{N}", math.nan)) else f"{r[f'S_{N}']:.1f}"
                 for N in budgets]
        cells = ([r["condition"], str(r["G"]), f"{r['fraction']:g}", f"{r['start']:.4f}",
                  f"{r['rise_min']:+.4f}", num(r["target"])] + steps
                 + [num(r.get("S_min")), num(r.get("E_min")),
                    f"{num(r.get('B_crit'))} [{num(r.get('B_crit_low'))}, "
                    f"{num(r.get('B_crit_high'))}]",
                    f"{num(r['predicted'])} [{num(r['predicted_low'])}, "
                    f"{num(r['predicted_high'])}]",
                    f"{num(r.get('ratio'))} [{num(r.get('ratio_low'))}, "
                    f"{num(r.get('ratio_high'))}]", r["verdict"]])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(summary: pd.DataFrame, stem: Path, table: pd.DataFrame | None = None):
    """Per condition: S(N) against N at the primary fraction, the fitted frontier, and the
    measured B_crit beside the predicted count; with ``table``, a second row of panels with the
    seed-mean held-out reward along training for every (G, N) and the primary target."""
    from ustat_rl.interface.plotting import new_figure, save_figure

    primary = summary[summary["fraction"] == FRACTIONS[0]]
    names = list(dict.fromkeys(primary["condition"]))
    rows = 1 if table is None else 2
    fig, axes = new_figure(rows, len(names), panel_size=(4.2, 3.2), sharex=False)
    if table is not None:
        columns = sorted((c for c in table.columns if c.startswith("reward_")),
                         key=lambda c: int(c.split("_")[1]))
        x = [int(c.split("_")[1]) for c in columns]
        for ax, name in zip(axes[1], names):
            runs = table[table["condition"] == name]
            for (G, N), cell in runs.groupby(["G", "N"]):
                ax.plot(x, cell[columns].mean().to_numpy(float), lw=1,
                        ls="-" if G == runs["G"].min() else "--", label=f"G = {G}, N = {N}")
            start = float(runs["reward_0"].iloc[0])
            ax.axhline(start, color="grey", ls=":", lw=0.8, label="warm start")
            target = primary[primary["condition"] == name]["target"].iloc[0]
            if math.isfinite(target):
                ax.axhline(target, color="black", lw=0.8, label="target (f = 1/2)")
            ax.set_xlabel("training step (constant rate)")
            ax.set_ylabel("held-out reward, mean over seeds")
            ax.set_title(f"{name}: along training", fontsize=8)
            ax.legend(fontsize=5, ncol=2)
    budgets = sorted(int(c[2:]) for c in summary.columns if c.startswith("S_")
                     and c[2:].isdigit())
    for ax, name in zip(axes[0], names):
        for r in primary[primary["condition"] == name].to_dict("records"):
            if r["verdict"] == "did not rise":
                ax.text(0.5, 0.5 - 0.1 * (r["G"] != primary[primary["condition"] == name]["G"]
                                          .min()),
                        f"G = {r['G']}: did not rise (smallest rise {r['rise_min']:+.3f})",
                        transform=ax.transAxes, ha="center", fontsize=7)
                continue
            line = ax.plot(budgets, [r[f"S_{N}"] for N in budgets], "o", label=f"G = {r['G']}")
            grid = np.geomspace(min(budgets), max(budgets), 50)
            if math.isfinite(r["S_min"]):
                ax.plot(grid, r["S_min"] + r["E_min"] / grid, "-", color=line[0].get_color(),
                        label=f"frontier, B_crit = {r['B_crit']:.3g}")
            if math.isfinite(r["predicted"]):
                ax.axvline(r["predicted"], ls=":", color=line[0].get_color(),
                           label=f"B_noise({r['G']}) = {r['predicted']:.3g}")
        ax.set_xscale("log")
        ax.set_xlabel("N (rollouts per step)")
        ax.set_ylabel("steps to the target")
        ax.set_title(name)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    return save_figure(fig, stem)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The protocol (conditions, grid, target rule, fit, agreement) is "
               "docs/critical_batch.md. Defaults: conditions " + ", ".join(FULL["conditions"])
               + f" at their advised G and G = 8, N in {FULL['budgets']}, seeds "
               f"{FULL['seeds']}, {FULL['steps']} steps at a constant rate "
               f"{FULL['learning_rate']:g}, held-out reward every {FULL['every']} steps.")
    parser.add_argument("--quick", action="store_true",
                        help="one tiny condition, one G, two budgets, two seeds, 20 steps")
    parser.add_argument("--seeds", default=None,
                        help="explicit seeds: a range '0-2' or a list '0,1,2' (default 0,1,2)")
    parser.add_argument("--budgets", default=None,
                        help="N per step, comma-separated (default 24,48,96,192); each must be "
                             "divisible by every G the study trains at")
    parser.add_argument("--every", type=int, default=None,
                        help="steps between held-out evaluations (default 10; must divide the "
                             "steps)")
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--summarise-only", action="store_true",
                        help="reread the CSVs and write the tables and the figure")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    if args.seeds is not None:
        try:
            plan["seeds"] = _study().parse_seeds(args.seeds)
        except ValueError as err:
            parser.error(str(err))
    if args.budgets is not None:
        try:
            plan["budgets"] = tuple(sorted({int(b) for b in args.budgets.split(",")}))
        except ValueError:
            parser.error(f"--budgets must be integers separated by commas, got {args.budgets!r}")
        sizes = {G for name in plan["conditions"] for G in sizes_of(name, plan)}
        bad = [N for N in plan["budgets"] if N < 2 or any(N % G for G in sizes)]
        if bad or len(plan["budgets"]) < 2:
            parser.error(f"--budgets must hold two or more N divisible by every G {sorted(sizes)}"
                         f", got {args.budgets!r}")
    if args.every is not None:
        if args.every < 1 or plan["steps"] % args.every:
            parser.error(f"--every must be a positive divisor of {plan['steps']}, got "
                         f"{args.every}")
        plan["every"] = args.every
    out = default_output(args.out, args.quick, NAME)
    out.mkdir(parents=True, exist_ok=True)
    path, pred_path = out / f"{NAME}.csv", out / f"{NAME}_predictions.csv"
    table = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if not args.summarise_only:
        predicted = pd.read_csv(pred_path) if pred_path.exists() else pd.DataFrame(
            columns=["condition", "G"])
        rows = table.to_dict("records")
        done = {(r["condition"], int(r["N"]), int(r["G"]), int(r["seed"])) for r in rows}
        wanted, plans = [], {}
        for name in plan["conditions"]:
            plans[name] = {**condition_plan(name, args.quick),
                           **{k: plan[k] for k in ("steps", "every", "learning_rate")}}
            sizes = sizes_of(name, plan)
            have = set(predicted.loc[predicted["condition"] == name, "G"].astype(int))
            if not set(sizes) <= have:
                new = predictions(name, plans[name], sizes, out / "warm_start")
                predicted = pd.concat([predicted[predicted["condition"] != name],
                                       pd.DataFrame(new)], ignore_index=True)
                write_csv_atomic(predicted, pred_path)
        for seed in plan["seeds"]:  # seed by seed: a study stopped early has whole seeds
            for name in plan["conditions"]:
                wanted.extend((name, N, G, seed) for G in sizes_of(name, plan)
                              for N in plan["budgets"] if N % G == 0)
        cells = {key: (*key, plans[key[0]], str(out / "warm_start")) for key in wanted
                 if key not in done}

        def on_result(key, row):
            rows.append(row)
            write_csv_atomic(pd.DataFrame(rows), path)

        run_cells(cells, run_curve, on_result, executor_from_args(args, parser),
                  progress=not args.no_progress, n_skipped=len(wanted) - len(cells),
                  desc="GRPO runs")
        table = pd.DataFrame(rows)
    if not len(table):
        parser.exit(2, f"critical_batch.py: no runs in {path}\n")
    summary = summarise(table, pd.read_csv(pred_path))
    write_csv_atomic(summary, out / f"{NAME}_summary.csv")
    text = markdown(summary)
    (out / f"{NAME}_table.md").write_text(text)
    plot(summary, out / NAME, table)
    print(text)
    cost = table.groupby("N")["seconds"].mean()
    print("mean seconds per run by N: " + ", ".join(f"{int(N)}: {s:.1f}" for N, s in
                                                    cost.items()))
    return table, summary


if __name__ == "__main__":
    main()
