"""``ustat-rl allocate``: per-prompt group sizes from a pilot, against each reward-only allocation.

Registered by :mod:`ustat_rl.interface.cli` with :func:`add_parser`; :func:`run` checks every path and
number before the pilot is read, prints the table of
:func:`ustat_rl.pilot.allocation.format_pilot_allocation` and writes the JSON and the figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``allocate`` subcommand on the ``argparse`` subparsers ``sub``."""
    p = sub.add_parser("allocate", help="per-prompt group sizes from a pilot at a fixed budget",
                       description="Group sizes G_x (sum = --budget) minimising the exact batch "
                                   "gradient MSE estimated from pilot rollouts, the reward-only "
                                   "allocations (uniform, Neyman, VIP, sGPO) at the same budget, and "
                                   "the cross-fitted MSE ratio of each to uniform.")
    p.add_argument("rollouts", type=Path, help="pilot rollouts file (.npz or .parquet)")
    p.add_argument("--budget", type=int, required=True, help="rollouts per batch, N = sum G_x")
    p.add_argument("--estimator", default="grpo",
                   help="advantage rule with an exact MSE (default grpo)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    p.add_argument("--json", type=Path, default=None, help="write the sizes as JSON to PATH")
    p.add_argument("--plot", type=Path, default=None, help="write the sizes figure to PATH")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``ustat-rl allocate``; exit status 0, or 2 with a one-line error."""
    from ..pilot.rollouts import check_rollouts_path
    from ..theory.group_size import check_budget
    from ._outputs import check_report_outputs, error_line, write_report_outputs

    try:
        check_rollouts_path(args.rollouts, "ROLLOUTS", must_exist=True)
        check_report_outputs(args.json, args.plot)
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        check_budget(args.budget, "--budget")  # gstar's cap, before the pilot is read
        from ..pilot.allocation import format_pilot_allocation, pilot_allocation
        from ..pilot.rollouts import load_rollouts
        from ..theory.allocation import rule_min_group_size

        rule_min_group_size(args.estimator)  # an unknown rule fails before the pilot is read
        report = pilot_allocation(load_rollouts(args.rollouts, "ROLLOUTS"), args.budget,
                                  args.estimator, args.level)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(error_line("allocate", exc, ("budget", "estimator", "level")), file=sys.stderr)
        return 2
    print(format_pilot_allocation(report))

    def figure():  # matplotlib is loaded only when --plot asks for a figure
        from .plotting_allocation import plot_allocations

        return plot_allocations(report.allocations, report.prompt_ids)

    write_report_outputs(report.to_dict(), figure, args.json, args.plot)
    return 0
