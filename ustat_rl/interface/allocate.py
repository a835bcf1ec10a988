"""``ustat-rl allocate``: per-prompt group sizes from a pilot, against every reward-only rule.

Registered by :mod:`ustat_rl.cli` with :func:`add_parser`; :func:`run` checks every path and
number before the pilot is read, prints the table of
:func:`ustat_rl.pilot.allocation.format_pilot_allocation` and writes the JSON and the figure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``allocate`` subcommand on the ``argparse`` subparsers ``sub``."""
    p = sub.add_parser("allocate", help="per-prompt group sizes from a pilot at a fixed budget",
                       description="Group sizes G_x (sum = --budget) minimising the exact batch "
                                   "gradient MSE estimated from pilot rollouts, the reward-only "
                                   "rules (uniform, Neyman, VIP, sGPO) at the same budget, and "
                                   "the cross-fitted MSE ratio of each to uniform.")
    p.add_argument("rollouts", type=Path, help="pilot rollouts file (.npz or .parquet)")
    p.add_argument("--budget", type=int, required=True, help="rollouts per batch, N = sum G_x")
    p.add_argument("--estimator", default="grpo",
                   help="advantage rule with an exact MSE (default grpo)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    p.add_argument("--json", type=Path, default=None, help="write the sizes as JSON to PATH")
    p.add_argument("--plot", type=Path, default=None, help="write the sizes figure to PATH")
    p.set_defaults(run=run)


def _check_output(path: Path | None, suffixes, name: str) -> None:
    if path is None:
        return
    if path.suffix not in suffixes:
        raise ValueError(f"`{name}` must end in one of {suffixes}, got {str(path)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"`{name}`: folder {str(path.parent)!r} does not exist")


def run(args) -> int:
    """Run ``ustat-rl allocate``; exit status 0, or 2 with a one-line error."""
    from .._paths import write_atomic as _write_atomic
    from ..pilot.rollouts import check_rollouts_path

    try:
        check_rollouts_path(args.rollouts, "ROLLOUTS", must_exist=True)
        _check_output(args.json, (".json",), "--json")
        _check_output(args.plot, (".png", ".pdf", ".svg"), "--plot")
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        if args.budget < 1:
            raise ValueError(f"`--budget` must be a positive integer, got {args.budget}")
        from ..pilot.allocation import format_pilot_allocation, pilot_allocation
        from ..pilot.rollouts import load_rollouts
        from ..theory.allocation import rule_min_group_size

        rule_min_group_size(args.estimator)  # an unknown rule fails before the pilot is read
        report = pilot_allocation(load_rollouts(args.rollouts), args.budget, args.estimator,
                                  args.level)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"ustat-rl allocate: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(format_pilot_allocation(report))
    if args.json is not None:
        _write_atomic(args.json, json.dumps(report.to_dict(), indent=2).encode())
        print(f"wrote {args.json}")
    if args.plot is not None:
        import io

        from .plotting_allocation import plot_allocations

        buffer = io.BytesIO()
        plot_allocations(report.allocations, report.prompt_ids).savefig(
            buffer, format=args.plot.suffix[1:], dpi=150)
        _write_atomic(args.plot, buffer.getvalue())
        print(f"wrote {args.plot}")
    return 0
