"""Gradient MSE against group size for transformer policies: the Fig. 4 analogue (docs/theory.md C5, C7, C11).

Config -> simulate -> tidy CSV -> figure.

For each *cell* (policy in weak / medium / strong, prompt set in all / moderate) this computes

* the exact prompt-averaged per-prompt MSE of vanilla, GRPO and oracle for G in {4, ..., 64}, by
  enumerating the 111 possible answers of every prompt (:func:`ustat_rl.policies.transformer.exact_moments`)
  and :func:`ustat_rl.theory.prompt_averaged_mse`: no Monte Carlo reference gradient is needed, ``g(x)`` and ``V(x)`` are exact;
* a Monte Carlo estimate of the same quantity on the first ``--mc-prompts`` prompts of the set
  (autoregressive sampling, vmap per-sample scores, nested groups), with normal 95% intervals
  ``mse_mc +- 1.96 se`` and the exact value for those same prompts (``mse_exact``);
* the scaling constants c1, c2, c3' and ``G* = 1 + sqrt(c3'/c1)`` with 95% bootstrap intervals
  over prompts, and GLS log-log slopes (:func:`ustat_rl.stats.rates.loglog_slope`) of the Monte Carlo
  MSE_oracle (predicted -1) and of ``||g_GRPO - g_oracle||^2`` (= MSE_GRPO - MSE_oracle,
  predicted -2 asymptotically in G; exactly -2 against ``x = sqrt(G(G-1))``, since the exact gap
  is proportional to ``1/(G(G-1))``; both fits are written).

``moderate`` keeps the prompts with 0.2 <= V(x) <= 0.8 under that policy ("moderate p" in C11).
Each finished cell is written at once (atomically) to ``<out>/transformer_gradient_mse.csv``
and its companions; a rerun skips cells already there. Seeds are per cell, so a resumed run
reproduces an uninterrupted one. The ``device`` column records where each cell ran.

Usage::

    python simulations/transformer_gradient_mse.py --quick        # about 20 s on one CPU core
    python simulations/transformer_gradient_mse.py                # full: about 15 min per prompt set on CPU
    python simulations/transformer_gradient_mse.py --device cuda  # full, on a GPU
    python simulations/transformer_gradient_mse.py --workers 2    # cells on a local pool of 2 processes
    python simulations/transformer_gradient_mse.py --ray-address auto  # cells on a running Ray cluster

Full runs write to ``results``, quick runs to ``results/quick/transformer_gradient_mse``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ustat_rl import theory
from ustat_rl.interface.plotting import plot_mse_grid, save_figure
from ustat_rl.montecarlo.transformer import mc_squared_errors
from ustat_rl.policies.transformer import (
    POLICY_NAMES,
    ArithmeticTask,
    bootstrap_constants,
    exact_moments,
    load_study_policy,
    make_splits,
    resolve_device,
)
from ustat_rl.runs.script_args import check_script_args, seed_type
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.runs.sweeps import (
    CellFailedError,
    add_executor_arguments,
    default_output,
    executor_from_args,
    order_rows,
    run_cells,
    write_csv_atomic,
    write_run_record,
)
from ustat_rl.stats.rates import loglog_slope
from ustat_rl.training.transformer import moderate_questions

ESTIMATORS = ("vanilla", "grpo", "oracle")
GROUP_SIZES = (4, 8, 16, 32, 64)
PROMPT_SETS = ("all", "moderate")
DEFAULT_SEED = 2603
Z_CI = float(norm.ppf(0.975))  # 1.96
NAMES = {"mc": "transformer_gradient_mse.csv", "exact": "transformer_gradient_mse_exact.csv",
         "constants": "transformer_scaling_constants.csv", "fits": "transformer_mse_slopes.csv"}
SIZES = {  # (exact prompts, Monte Carlo prompts, replicates per prompt)
    "full": (500, 30, 40),
    "quick": (6, 3, 8),
}




def simulate_cell(policy_name: str, prompt_set: str, test, sizes, seed: int, device) -> dict:
    """All tables of one (policy, prompt set) cell."""
    n_exact, n_mc, n_reps = sizes
    policy, _ = load_study_policy(policy_name, device=device)
    questions = list(test) if prompt_set == "all" else moderate_questions(policy, list(test))
    questions = questions[:n_exact]
    key = {"policy": policy_name, "prompt_set": prompt_set}
    moments = exact_moments(policy, questions, progress=True)
    mc_questions = questions[:n_mc]
    mc = mc_squared_errors(policy, mc_questions, GROUP_SIZES, n_reps, seed, progress=True)
    mc_moments = exact_moments(policy, mc_questions)
    rows, exact_rows = [], []
    for est in ESTIMATORS + ("grpo-oracle",):
        if est == "grpo-oracle":
            exact_sub = (theory.prompt_averaged_mse(mc_moments, "grpo", GROUP_SIZES)
                         - theory.prompt_averaged_mse(mc_moments, "oracle", GROUP_SIZES))
        else:
            exact_sub = theory.prompt_averaged_mse(mc_moments, est, GROUP_SIZES)
            exact_all = theory.prompt_averaged_mse(moments, est, GROUP_SIZES)
            exact_rows += [{**key, "estimator": est, "group_size": g, "n_prompts": len(questions),
                            "mse_exact": v} for g, v in zip(GROUP_SIZES, exact_all)]
        for g, ex in zip(GROUP_SIZES, exact_sub):
            mean, se = mc.get((est, g))
            rows.append({**key, "estimator": est, "group_size": g, "n_prompts_mc": len(mc_questions),
                         "n_reps": n_reps, "mse_mc": mean, "se": se, "ci_low": mean - Z_CI * se,
                         "ci_high": mean + Z_CI * se, "mse_exact": ex, "device": str(policy.device),
                         "seed": seed})
    ci = bootstrap_constants(moments, np.random.default_rng(seed), 2000)
    const = {**key, "n_prompts": len(questions), "device": str(policy.device)}
    for name, value in (("c1", ci.constants.c1), ("c2", ci.constants.c2), ("c3", ci.constants.c3),
                        ("g_star", ci.g_star)):
        const.update({name: value, f"{name}_low": ci.low[name], f"{name}_high": ci.high[name]})
    fits = []
    sizes = np.array(GROUP_SIZES, float)
    scales = {"G": sizes, "sqrt(G(G-1))": np.sqrt(sizes * (sizes - 1))}
    for label, scale, predicted in (("oracle", "G", -1.0), ("grpo-oracle", "G", -2.0),
                                    ("grpo-oracle", "sqrt(G(G-1))", -2.0)):
        sub = mc.subset([(label, g) for g in GROUP_SIZES])
        if np.all(sub.mean > 0):
            fit = loglog_slope(scales[scale], sub.mean, cov=sub.cov, level=0.95)
            fits.append({**key, "quantity": label, "x": scale, "predicted": predicted,
                         "slope": fit.slope, "ci_low": fit.ci_low, "ci_high": fit.ci_high,
                         "level": 0.95})
    return {"mc": pd.DataFrame(rows), "exact": pd.DataFrame(exact_rows),
            "constants": pd.DataFrame([const]), "fits": pd.DataFrame(fits)}


def make_figure(table: pd.DataFrame, out: Path) -> list[Path]:
    est = table[table["estimator"].isin(ESTIMATORS)]
    exact = est[["policy", "prompt_set", "estimator", "group_size", "mse_exact"]]
    fig = plot_mse_grid(est, exact, row="prompt_set", col="policy", estimators=ESTIMATORS,
                        orders={"policy": [p for p in POLICY_NAMES if p in set(est["policy"])]},
                        title=lambda r, c, cell: f"{c} policy, {r} prompts")
    fig.suptitle("Gradient MSE vs group size on transformer policies: Monte Carlo and exact "
                 "enumeration (C5.tf, C11.tf)", fontsize=10)
    return save_figure(fig, out / "transformer_gradient_mse")


@dataclass(frozen=True)
class Config:
    """The options that choose a run's cells (the sizes of a cell are ``SIZES``)."""

    seed: int = option(DEFAULT_SEED, flag="--seed", type=seed_type,
                       help="root seed, an integer >= 0")
    policies: tuple = option(tuple(POLICY_NAMES), flag="--policies", nargs="+",
                             choices=POLICY_NAMES, help=None)
    prompt_sets: tuple = option(PROMPT_SETS, flag="--prompt-sets", nargs="+", choices=PROMPT_SETS,
                                quick=("moderate",), help="default: both (quick: moderate only)")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that choose the cells come from :class:`Config`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for smoke tests (~20 s)")
    add_config_arguments(parser, Config, ["seed"])
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default results, with --quick "
                             "results/quick/transformer_gradient_mse)")
    parser.add_argument("--device", default=None, help="torch device (default: CUDA if available)")
    add_config_arguments(parser, Config, ["policies", "prompt_sets"])
    add_executor_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    args.executor = executor_from_args(args, parser)
    args.out = default_output(args.out, args.quick, "transformer_gradient_mse", full="results")
    check_script_args(parser, args)
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    start = time.perf_counter()
    sizes = SIZES["quick" if args.quick else "full"]
    prompt_sets = args.prompt_sets
    device = resolve_device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    paths = {k: args.out / v for k, v in NAMES.items()}
    done = set()
    if paths["mc"].exists():
        old = pd.read_csv(paths["mc"])
        done = set(zip(old["policy"], old["prompt_set"]))
    test = make_splits(ArithmeticTask(), seed=0).test
    order = [(p, s) for p in args.policies for s in prompt_sets]
    cells = {}
    for pol, pset in order:
        if (pol, pset) not in done:
            seed = int(np.random.SeedSequence(args.seed, spawn_key=(POLICY_NAMES.index(pol),
                                              PROMPT_SETS.index(pset))).generate_state(1)[0])
            cells[(pol, pset)] = (pol, pset, test, sizes, seed, device)
    computed = []

    def save(key, tables):  # in this process, as each cell finishes
        for name in ("exact", "constants", "fits", "mc"):  # main table last: it marks the cell done
            rows = tables[name]
            if paths[name].exists():  # rows a killed run left for this cell are replaced
                old = pd.read_csv(paths[name])
                old = old[[k != key for k in zip(old["policy"], old["prompt_set"])]]
                rows = pd.concat([old, rows], ignore_index=True)
            write_csv_atomic(order_rows(rows, ["policy", "prompt_set"], order), paths[name])
        computed.append(key)

    try:
        run_cells(cells, simulate_cell, save, args.executor, n_skipped=len(order) - len(cells))
    except CellFailedError as err:
        raise SystemExit(f"error: {err}") from None
    table = pd.read_csv(paths["mc"])
    figures = make_figure(table, args.out)
    write_run_record(args.out, "transformer_gradient_mse", __file__, argv, seed=args.seed,
                     seconds=time.perf_counter() - start, files=[*paths.values(), *figures])
    print(f"cells computed {computed}, skipped {len(order) - len(computed)}; wrote "
          f"{', '.join(str(p) for p in paths.values())}, {', '.join(map(str, figures))} "
          f"({time.perf_counter() - start:.1f} s)")
    return {"computed": computed, "paths": paths, "figures": figures}


if __name__ == "__main__":
    main()
