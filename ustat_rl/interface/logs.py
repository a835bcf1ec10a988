"""``ustat-rl logs``: what a trainer's per-step logs alone say about the group size.

Registered by :mod:`ustat_rl.interface.cli` with :func:`add_parser`; :func:`run` checks every
option before the file is read, prints
:func:`ustat_rl.frameworks.logs_report.format_logs_report` and writes the JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Read a TRL run's trainer_state.json (its log_history: per logged step the mean reward 'reward',
'reward_std' and 'frac_reward_zero_std', the share of groups whose rewards are all equal) and
report what those numbers alone determine (beyond the paper; docs/theory.md, "Training logs
alone"):

  dead steps      logged steps where every group was all-equal: zero advantages, no reward signal
  windows         the mean reward and all-equal fraction per window of --window logged steps,
                  with a Student-t interval for the window's average (steps are dependent and
                  drift: no interval over the whole run)
  check of G      with --group-size: each step whose reward_std pins down its batch's size
                  (one generation batch per entry, logging_steps 1) must split into groups of
                  G with the logged all-equal fraction; a G the logs contradict is refused,
                  naming the G they fit
  other G         with --group-size (the run's num_generations) and 0/1 rewards: bounds on the
                  all-equal fraction a(G) = E[p^G + (1-p)^G], the waste, at other G, and on
                  E[p(1-p)], valid for every success-rate distribution with the window's mean
                  reward and a(G0); bounds, not values

What they cannot decide: G* = 1 + sqrt(c3'/c1) needs score norms no reward log carries (use
`ustat-rl gstar` on pilot rollouts), and with non-binary rewards nothing at other G follows (the
command refuses, naming the step that shows it).

PATH is trainer_state.json, a checkpoint-N folder, or the output folder (its latest checkpoint).
TRL writes the file at every save (save_steps). Assumed: scale_rewards "group" or "none" (TRL's
default "group"); with "batch" frac_reward_zero_std flags the whole batch, not groups. verl's
metric lines carry no all-equal share and are not read: use `ustat-rl rewards` on its dumps.
"""

EXAMPLES = """\
examples:
  ustat-rl logs outputs/checkpoint-500/trainer_state.json --group-size 8
  ustat-rl logs outputs/ --group-size 16 --window 20 --json logs.json
  ustat-rl logs outputs/                     dead steps and the all-equal trend only
"""


def add_parser(sub) -> None:
    """The ``logs`` subcommand on the ``argparse`` subparsers ``sub``."""
    p = sub.add_parser("logs", help="what a run's per-step logs alone say (TRL "
                                    "trainer_state.json): waste at other G, dead steps",
                       description=DESCRIPTION, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=Path, metavar="PATH", help="trainer_state.json or its folder")
    p.add_argument("--group-size", type=int, default=None,
                   help="the run's G (TRL num_generations; not in the file): needed for the "
                        "bounds at other G")
    p.add_argument("--window", type=int, default=10,
                   help="logged steps per window, >= 2 (default 10)")
    p.add_argument("--level", type=float, default=0.9,
                   help="interval level per window (default 0.9); the two intervals behind the "
                        "bounds hold together at it")
    p.add_argument("--assume-binary", action="store_true",
                   help="skip the 0/1 reward check on reward_std (for entries that average "
                        "several generation batches, logging_steps > 1)")
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON to PATH")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``ustat-rl logs``; exit status 0, or 2 with a one-line error."""
    from ._outputs import check_report_outputs, write_report_outputs

    try:
        if not args.path.exists():
            raise FileNotFoundError(f"`PATH` {str(args.path)!r} does not exist")
        check_report_outputs(args.json, None)
        if args.group_size is not None and args.group_size < 2:
            raise ValueError(f"`--group-size` must be an integer >= 2, got {args.group_size}")
        if args.window < 2:
            raise ValueError(f"`--window` must be an integer >= 2, got {args.window}")
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        if args.assume_binary and args.group_size is None:
            raise ValueError("`--assume-binary` applies to the bounds at other G: give "
                             "--group-size too")
        from ..frameworks.logs import check_group_size, read_trainer_state
        from ..frameworks.logs_report import format_logs_report, logs_report

        history = read_trainer_state(args.path)
        if args.group_size is not None:  # the user's words in the refusal
            check_group_size(history, args.group_size, "--group-size")
        report = logs_report(history, args.group_size, args.window, args.level,
                             args.assume_binary)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"ustat-rl logs: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(format_logs_report(report))
    write_report_outputs(report.to_dict(), None, args.json, None)
    return 0
