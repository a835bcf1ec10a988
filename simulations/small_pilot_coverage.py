"""Coverage of the pilot's intervals on pilots of a few prompts (docs/theory.md C32, "Small pilots").

Config -> simulate -> tidy CSV -> table.

For each policy with known constants (:meth:`~ustat_rl.policies.softmax.SoftmaxBandit.scaling_constants`)
and pilot size (prompts x samples: 3 x 3, 3 x 8, 8 x 8, 16 x 8, 31 x 8), independent pilots of
full scores each give nominal 90% intervals (:func:`ustat_rl.pilot.pilot_intervals`); the table
counts how many cover the exact ``c1``, ``c2``, ``c3'`` and ``G*``. Below 32 prompts the package
reports the cautious intervals of :mod:`ustat_rl.pilot.small_sample`; the ``*_jackknife`` columns
count the jackknife-t intervals alone on the same pilots (the package's intervals at 32 prompts
and above, and the small pilots' before the change: the negative control). ``refused`` counts
pilots that ``ustat-rl gstar`` refuses (all rewards equal, every group all-equal, or a
zero-width interval); coverage is over the others (``pilots``).

Outputs ``small_pilot_coverage.csv`` under ``--out`` and the table as Markdown.

Usage::

    python simulations/small_pilot_coverage.py           # 400 pilots per cell (about 2 minutes)
    python simulations/small_pilot_coverage.py --quick   # 40 pilots per cell (seconds)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ustat_rl.claims.beyond_reach.small_pilot import COVERAGE_LEVEL as LEVEL
from ustat_rl.claims.beyond_reach.small_pilot import COVERED as NAMES
from ustat_rl.claims.beyond_reach.small_pilot import coverage_cell
from ustat_rl.policies import examples
from ustat_rl.runs.records import count_table
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick

#: (prompts, samples per prompt) of the table: the issue's tiny pilots, then up to the threshold.
SIZES = ((3, 3), (3, 8), (8, 8), (16, 8), (31, 8))
#: Policies with known constants: C32's bandit, a two-prompt bandit, a one-answer bandit whose
#: jackknife interval for c1 under-covers worst, and the Fig. 4 analogue (40 prompts).
POLICIES = {
    "interior_optimum_bandit": examples.interior_optimum_bandit,
    "small_bandit": examples.small_bandit,
    "one_answer_bandit(0)": lambda: examples.one_answer_bandit(0.0),
    "arithmetic_bandit(2)": lambda: examples.arithmetic_bandit(2.0),
}
FULL_PILOTS, QUICK_PILOTS = 400, 40
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Config:
    """The options that set what a run computes (full-run values; ``--quick`` pilots apart)."""

    n_pilots: int = option(FULL_PILOTS, flag="--pilots", type=int, quick=QUICK_PILOTS,
                           help=f"pilots per cell (default {FULL_PILOTS})")
    seed: int = option(DEFAULT_SEED, flag="--seed", type=int,
                       help=f"root seed (default {DEFAULT_SEED})")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PILOTS} pilots per cell (seconds)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    return parser


def main(argv=None) -> dict:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    if args.pilots < 1:
        parser.error(f"--pilots must be >= 1, got {args.pilots}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    out = args.out or Path("results") / ("quick" if args.quick else "") / "small_pilot_coverage"
    if out.exists() and not out.is_dir():
        parser.error(f"--out must be a folder, got the file {str(out)!r}")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (name, make) in enumerate(POLICIES.items()):
        bandit = make()
        for j, (P, n) in enumerate(SIZES):
            rng = np.random.default_rng([args.seed, i, j])
            rows.append({"policy": name, **coverage_cell(bandit, P, n, args.pilots, rng)})
    table = pd.DataFrame(rows)
    table.to_csv(out / "small_pilot_coverage.csv", index=False)
    print(f"coverage of nominal {LEVEL:.0%} intervals, full scores ({args.pilots} pilots per "
          "cell, refusals apart):")
    print(count_table(table, (*NAMES, "gstar", *(f"{n}_jackknife" for n in NAMES), "unbounded")))
    return {"coverage": table, "out": out}


if __name__ == "__main__":
    main()
    sys.exit(0)
