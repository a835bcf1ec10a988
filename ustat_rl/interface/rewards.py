"""``ustat-rl rewards``: what a run's logged rewards say about its group size, without scores.

Registered by :mod:`ustat_rl.interface.cli` with :func:`add_parser`; :func:`run` checks every option before
the file is read, prints :func:`ustat_rl.frameworks.rewards_only.format_rewards_report` and
writes the JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import dynamic_sampling as dynamic_sampling_cli

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Read a training run's rollout log and report what the rewards alone say: the per-group success
rate distribution, the predicted and observed fraction of groups whose rewards are all equal at
each G dividing --budget (such groups give a group-normalised rule no signal), the observed
fraction per step, and the group sizes of the reward-only allocations (uniform, Neyman, VIP,
sGPO) for the last step's groups. c1, c2, c3', G* and predicted MSEs need per-sample scores: use
`ustat-rl gstar` on a rollouts file for those.
With --dynamic-sampling (binary rewards): what verl's filter_groups would keep and cost at each
G, from all the file's groups (a run that already filtered logs only the kept groups, so r
reads high).

FILE is one of:
  verl-jsonl        verl's trainer.rollout_data_dir: a {step}.jsonl file or the folder; groups
                    are rebuilt from the prompt text ('input') within each step
  trl-parquet       TRL's completions_{step:05d}.parquet (log_completions=True) or the
                    completions/ folder; groups are runs of one prompt; the reward is TRL's
                    nansum of weight x reward function column
  npz, rollouts-parquet   a file with prompt_id and reward (scores optional, unused here)
"""

EXAMPLES = """\
examples:
  ustat-rl rewards outputs/rollouts/ --budget 512 --group-size 8 --estimator verl_grpo
  ustat-rl rewards run/completions/ --budget 64 --estimator trl_group --json rewards.json
  ustat-rl rewards outputs/rollouts/ --budget 512 --dynamic-sampling --max-gen-batches 10
  ustat-rl rewards run/completions/completions_00050.parquet --budget 64 \\
      --reward-columns accuracy,format --reward-weights 1,0.1
"""


def _names(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"needs at least one comma-separated name, got {text!r}")
    return items


def _weights(text: str) -> list[float]:
    try:
        return [float(t) for t in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None


def add_parser(sub) -> None:
    """The ``rewards`` subcommand on the ``argparse`` subparsers ``sub``."""
    from ..frameworks.dumps import FORMATS

    p = sub.add_parser("rewards", help="what a run's logged rewards say, without scores "
                                       "(verl dumps, TRL completion logs)",
                       description=DESCRIPTION, epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE", help="the log file or folder (see above)")
    p.add_argument("--budget", type=int, required=True,
                   help="completions per step, N = B G (the G of the table are its divisors)")
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="auto (default): from the suffix, a parquet file's columns or a "
                        "folder's files")
    p.add_argument("--group-size", type=int, default=None,
                   help="the run's G (verl rollout.n, TRL num_generations): splits a prompt "
                        "drawn twice in one step into groups of G; every group must then be G")
    p.add_argument("--estimator", default=None,
                   help="the run's advantage rule (e.g. trl_group, verl_grpo), checked against "
                        "the groups; see docs/conventions.md")
    p.add_argument("--reward-key", default="score",
                   help="verl: the record field holding the reward (default score)")
    p.add_argument("--reward-columns", type=_names, default=None,
                   help="TRL: comma-separated reward function columns (default: every numeric "
                        "column but step and advantage)")
    p.add_argument("--reward-weights", type=_weights, default=None,
                   help="TRL: comma-separated reward_weights, one per reward column (default 1)")
    p.add_argument("--step", type=int, default=None,
                   help="the step whose groups the allocations split --budget over "
                        "(default: the last)")
    p.add_argument("--json", type=Path, default=None, help="write the report as JSON to PATH")
    dynamic_sampling_cli.add_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``ustat-rl rewards``; exit status 0, or 2 with a one-line error."""
    from ._outputs import check_report_outputs, error_line, write_report_outputs

    try:
        if not args.file.exists():
            raise FileNotFoundError(f"`FILE` {str(args.file)!r} does not exist")
        check_report_outputs(args.json, None)
        from ..theory.group_size import budget_grid

        budget_grid(args.budget, "--budget")
        if args.group_size is not None and args.group_size < 2:
            raise ValueError(f"`--group-size` must be an integer >= 2, got {args.group_size}")
        if args.estimator is not None:
            from ..advantages import get_rule

            get_rule(args.estimator, "--estimator")
        max_gen_batches = dynamic_sampling_cli.check_arguments(args)
        if dynamic_sampling_cli.variance_filter_name(args) is not None:
            raise ValueError("`--group-filter` reward_variance_top_p/top_k needs the scores of a "
                             "pilot for its bias and MSE: run ustat-rl gstar PILOT --group-filter ...")
        from ..frameworks.dumps import read_rewards
        from ..frameworks.rewards_only import format_rewards_report, rewards_report

        table = read_rewards(args.file, args.format, args.group_size, args.reward_key,
                             args.reward_columns, args.reward_weights)
        filtered = None
        if args.dynamic_sampling:  # first: its refusals come before any other work
            from ..pilot.dynamic_sampling import rewards_dynamic_sampling

            filtered = rewards_dynamic_sampling(table.reward, table.groups()[1], args.budget,
                                                max_gen_batches, group_filter=args.group_filter)
        replaced = None
        if args.replace_ratio is not None:
            from ..pilot.replace_sampling import replace_sampling_report

            replaced = replace_sampling_report(filtered, args.replace_ratio)
        report = rewards_report(table, args.budget, args.estimator, allocation_step=args.step)
        from ..frameworks.flat_groups import flat_group_report

        flat = flat_group_report(table)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(error_line("rewards", exc, ("budget", "group_size", "step", "group_filter",
                                          "replace_ratio", "max_gen_batches")), file=sys.stderr)
        return 2
    print(format_rewards_report(report))
    from ..frameworks.flat_groups import format_flat_groups

    print("\n" + format_flat_groups(flat))
    payload = report.to_dict()
    payload["flat_groups"] = [w.to_dict() for w in flat]
    if filtered is not None:
        print("\n" + dynamic_sampling_cli.format_dynamic_sampling(filtered))
        payload["dynamic_sampling"] = filtered.to_dict()
    if replaced is not None:
        print("\n" + dynamic_sampling_cli.format_replace_sampling(replaced))
        payload["replace_sampling"] = replaced.to_dict()
    write_report_outputs(payload, None, args.json, None)
    return 0
