"""Exact bias of the frameworks' loss aggregations on the transformer policies (docs/conventions.md).

Answers of the study policies have 1, 2 or 3 tokens (digits and the end token), so the
reductions of the per-token loss weigh them differently (``ustat_rl.frameworks.aggregation``). For each
policy, prompt, group size and reduction this script computes, by summing over the 111 answers
of the prompt, the exact mean ``E g_hat(x)`` of one group's estimate and compares it with
``g(x)``:

* ``rel_bias = ||E g_hat - g|| / ||g||``;
* ``scale = <E g_hat, g> / ||g||^2``, the part a learning rate could absorb;
* ``orth = ||E g_hat - scale g|| / ||g||``, the part that changes the direction;
* ``cosine`` between ``E g_hat`` and ``g``.

Config -> exact sums -> tidy CSV ``transformer_aggregation_bias.csv``. Cost: one pass of
per-answer scores per prompt (111 per-sample gradients, a few seconds on one CPU core), then
``O(111 d)`` per (G, reduction). Run::

    python simulations/transformer_aggregation_bias.py --prompts 5
    python simulations/transformer_aggregation_bias.py --quick   # one policy, one prompt, seconds

Full runs write to ``results``, quick runs to ``results/quick/transformer_aggregation_bias``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ustat_rl.frameworks.aggregation import AGGREGATIONS, exact_aggregation_mean
from ustat_rl.policies.transformer import (
    POLICY_NAMES,
    ArithmeticTask,
    answer_table,
    load_study_policy,
    make_splits,
)
from ustat_rl.runs.script_args import check_script_args, positive_int
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.training.transformer import moderate_questions

#: Group sizes and advantage conventions tabulated.
GROUP_SIZES = (4, 16)
CONVENTIONS = ("grpo", "trl_group")
#: ``L`` of seq-mean-token-sum-norm: the longest answer (two digits and the end token).
HORIZON = 3
#: Moderate prompts per policy in a full and in a ``--quick`` run.
FULL_PROMPTS, QUICK_PROMPTS = 5, 1


def simulate_prompt(table, question_text: str, policy_name: str) -> list[dict]:
    """Rows of the CSV for one prompt: every (convention, G, reduction)."""
    g = (table.prob * table.reward) @ table.scores  # (d,) g(x)
    g_norm = float(np.linalg.norm(g))
    length_prob = {t: float(table.prob[table.lengths == t].sum()) for t in (1, 2, 3)}
    rows = []
    for convention in CONVENTIONS:
        for G in GROUP_SIZES:
            for mode in AGGREGATIONS:
                mean = exact_aggregation_mean(table.prob, table.reward, table.lengths,
                                              table.scores, convention, G, mode, HORIZON)
                scale = float(mean @ g) / g_norm**2
                rows.append(dict(
                    policy=policy_name, prompt=question_text, value=float(table.prob @ table.reward),
                    p_len1=length_prob[1], p_len2=length_prob[2], p_len3=length_prob[3],
                    convention=convention, group_size=G, aggregation=mode,
                    rel_bias=float(np.linalg.norm(mean - g)) / g_norm, scale=scale,
                    orth=float(np.linalg.norm(mean - scale * g)) / g_norm,
                    cosine=float(mean @ g) / (float(np.linalg.norm(mean)) * g_norm)))
    return rows


@dataclass(frozen=True)
class Config:
    """The options that set what a run tabulates (full-run values, ``--quick`` ones beside)."""

    policies: tuple = option(tuple(POLICY_NAMES), flag="--policies", nargs="+",
                             choices=POLICY_NAMES, quick=("weak",),
                             help="default: all (with --quick: weak)")
    n_prompts: int = option(FULL_PROMPTS, flag="--prompts", type=positive_int,
                            quick=QUICK_PROMPTS,
                            help=f"moderate prompts per policy (default {FULL_PROMPTS}, "
                                 f"with --quick {QUICK_PROMPTS})")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the weak policy and one prompt (seconds; a smoke test)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default results, with --quick "
                             "results/quick/transformer_aggregation_bias)")
    return parser


def main(argv=None) -> pd.DataFrame:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    args.out = args.out or (Path("results", "quick", "transformer_aggregation_bias") if args.quick
                            else Path("results"))
    check_script_args(parser, args)
    start = time.perf_counter()
    test = list(make_splits(ArithmeticTask(), seed=0).test)
    rows = []
    for name in args.policies:
        policy, _ = load_study_policy(name, device="cpu", dtype=torch.float64)
        for q in moderate_questions(policy, test, limit=args.prompts):
            rows.extend(simulate_prompt(answer_table(policy, q), q.text, name))
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "transformer_aggregation_bias.csv"
    table.to_csv(path, index=False)
    summary = (table[table.convention == "grpo"]
               .groupby(["policy", "group_size", "aggregation"])[["scale", "orth", "cosine"]]
               .agg(["min", "max"]))
    print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"wrote {path} ({time.perf_counter() - start:.1f} s)")
    return table


if __name__ == "__main__":
    main()
