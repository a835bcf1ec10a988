"""The ``ustat-rl`` command: ``verify`` the paper's claims, ``list`` them, run ``proofs``, and
``gstar``: G* and the noise budget from a practitioner's pilot rollouts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import __version__
from ..runs.script_args import seed_type as _seed
from . import allocate as allocate_cli
from . import dynamic_sampling as dynamic_sampling_cli
from . import logs as logs_cli
from . import rewards as rewards_cli
from ._commands import compare as _compare
from ._commands import gstar_trajectory as _gstar_trajectory
from ._commands import list_claims as _list
from ._commands import print_table as _print_table  # noqa: F401 - the verdict table, for tests
from ._commands import report as _report
from ._commands import verify
from ._outputs import check_report_outputs, error_line, write_report_outputs

EPILOG = """examples:
  ustat-rl verify --quick                 all claims, small Monte Carlo sizes (under a minute)
  ustat-rl verify --errata                the paper's slips, evidence computed now (no claims run)
  ustat-rl verify --full --json out.json  all claims, large sizes (tens of minutes on a CPU)
  ustat-rl verify --only C5,C6 --seed 7   two claims with another seed
  ustat-rl list                           the registered claims
  ustat-rl report out.json --results results --out report.html   one offline HTML report
  ustat-rl conformance mymod:adv --estimator trl_group    check an advantage function
  ustat-rl gstar pilot.npz --budget 512   G* and predicted MSEs from your own pilot rollouts
  ustat-rl gstar pilot.npz --budget 512 --dynamic-sampling   and what DAPO's filter costs
  ustat-rl gstar --trajectory run.jsonl --plot run.png   G* along a training run: one G for all?
  ustat-rl rewards run/completions/ --budget 64   what a verl or TRL run's logged rewards say
  ustat-rl logs outputs/ --group-size 8   what a TRL run's per-step logs alone say
"""


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="ustat-rl",
        description="Executable theory companion to 'Demystifying Group Relative Policy "
                    "Optimization: Its Policy Gradient is a U-Statistic' (arXiv:2603.01162).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ustat-rl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    verify = sub.add_parser(
        "verify", help="check the paper's claims and print a verdict table",
        description="Run each registered claim's check afresh and print predicted vs measured "
                    "values, intervals and verdicts. Exits 1 if any claim fails or errors. "
                    "Verdicts: pass; fail (a prediction contradicted by the evidence); refuted "
                    "(the toolkit's own counterexample shows the claim as stated is false: a "
                    "finding, listed in --errata); differs (an empirical pattern of the paper's "
                    "LLM runs that the analogue does not reproduce, with the reason); error (the "
                    "check crashed).")
    size = verify.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small Monte Carlo sizes (default)")
    size.add_argument("--full", action="store_true", help="large Monte Carlo sizes")
    verify.add_argument("--only", default=None,
                        help="comma-separated claim IDs, e.g. C5,C6 (blanks and case ignored)")
    verify.add_argument("--seed", type=_seed, default=20260301,
                        help="root seed, an integer >= 0 (default 20260301)")
    verify.add_argument("--json", type=Path, default=None, help="write results as JSON to PATH")
    verify.add_argument("--n-jobs", type=int, default=1, help="Monte Carlo worker threads")
    verify.add_argument("--details", action="store_true", help="print every sub-check")
    verify.add_argument("--errata", action="store_true",
                        help="print the errata report (paper slips with evidence computed now, "
                             "about 15 s); alone it runs no claims, with --only it runs those "
                             "claims first")

    listing = sub.add_parser("list", help="list the registered claims (--estimators: the "
                                          "advantage rules)")
    listing.add_argument("--markdown", action="store_true",
                         help="a Markdown table linked to docs/theory.md (docs/claims.md)")
    listing.add_argument("--estimators", action="store_true",
                         help="the advantage rules --estimator accepts, one a line with where "
                              "each comes from (multi-reward rules last)")
    listing.add_argument("--out", type=Path, default=None, help="write the list to PATH")
    compare = sub.add_parser(
        "compare", help="compare two `verify --json` runs (claims, verdicts, exact values)",
        description="Check that two verify runs with the same seed agree: the same claim IDs, "
                    "verdicts and sub-check outcomes, and every prediction equal to a relative "
                    "tolerance. Exits 1 on any mismatch; measurements that moved are listed.")
    compare.add_argument("before", type=Path, help="verify --json file of the reference run")
    compare.add_argument("after", type=Path, help="verify --json file of the new run")
    compare.add_argument("--rtol", type=float, default=1e-12, help="relative tolerance (1e-12)")
    _add_conformance_parser(sub)
    allocate_cli.add_parser(sub)
    rewards_cli.add_parser(sub)
    logs_cli.add_parser(sub)
    gstar = sub.add_parser(
        "gstar", help="G* and the noise budget from a pilot of your own policy",
        description="Estimate c1, c2, c3' and G* with intervals from pilot rollouts (.npz or "
                    ".parquet: prompt_id, reward, score), and predict each estimator's MSE over "
                    "the group sizes that divide the budget (docs/theory.md C17, C32). With "
                    "--trajectory FILE instead of a pilot file: G* along a training run, and "
                    "whether one G lies inside every window's interval (C18).")
    gstar.add_argument("rollouts", type=Path, nargs="?", default=None,
                       help="pilot rollouts file (.npz or .parquet); not with --trajectory")
    gstar.add_argument("--trajectory", type=Path, default=None, metavar="FILE",
                       help="a run's trajectory file (JSON lines, one monitored window a line): "
                            "G*, c1, c2, c3' and all-equal groups against the step, and whether "
                            "one G lies inside every window's interval; --level is then the "
                            "simultaneous level (Bonferroni); --budget and --estimator do not "
                            "apply")
    gstar.add_argument("--budget", type=int, default=None,
                       help="samples per step N = B G (required with a pilot file)")
    gstar.add_argument("--estimator", default=None,
                       help="advantage rule whose best group size is reported: grpo (default), "
                            "vanilla, oracle, fullmean or any registered rule")
    gstar.add_argument("--group-size", type=int, default=None, metavar="G",
                       help="the G a run uses: the critical rollout count B_noise is reported "
                            "there beside G*'s (default: the recommended G)")
    gstar.add_argument("--target", default="mse",
                       help="what the advice minimises: mse (default) or scale_free, the MSE "
                            "after the best rescaling of the estimate (Adam removes the "
                            "gradient's scale; docs/theory.md)")
    gstar.add_argument("--level", type=float, default=0.9,
                       help="interval level (default 0.9); with --trajectory the simultaneous "
                            "level of all windows together")
    gstar.add_argument("--json", type=Path, default=None, help="write the report as JSON to PATH")
    gstar.add_argument("--plot", type=Path, default=None,
                       help="write the MSE figure (with --trajectory: the run's panels) to PATH")
    dynamic_sampling_cli.add_arguments(gstar)
    report = sub.add_parser(
        "report", help="one self-contained HTML report of a verify run and simulation results",
        description="Write one HTML file that opens offline: the verdict table of a `verify "
                    "--json` file, the errata with evidence computed now, every PNG figure "
                    "under --results with its caption and the command that made it, the "
                    "result tables, seeds, timings, versions and machine.")
    report.add_argument("verify_json", type=Path, help="a `ustat-rl verify --json` file")
    report.add_argument("--results", type=Path, default=None,
                        help="folder of simulation outputs (CSV, PNG, *.run.json), searched "
                             "recursively")
    report.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    proofs = sub.add_parser("proofs", help="run the symbolic derivations (proofs_check)")
    proofs.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for proofs_check")
    return parser.parse_args(argv)


def _add_conformance_parser(sub) -> None:
    from ..advantages.conventions import CONVENTION_NAMES, VERL_REMAX
    from ..advantages.multichannel import multichannel_rule_names
    from ..conformance.search import DEFAULT_TIMEOUT, PROGRESS_EVERY

    conf = sub.add_parser(
        "conformance", help="check an advantage function against a framework convention",
        description="Property-test module:function (or path/file.py:function) against a named "
                    "convention of docs/conventions.md. Exit 0: conforms; 1: does not (the "
                    "smallest failing batch is printed); 2: usage or import error. A "
                    "multi-reward rule (trl_sum_then_normalize, trl_normalize_then_sum, "
                    "verl_gdpo, ...) tests fn(rewards (n, K), group_ids, weights (K,)); "
                    "verl_remax tests fn(rewards, group_ids, reference), the reference each "
                    "sample's greedy-rollout reward (verl: fn(token_level_rewards, "
                    "reward_baselines, response_mask)).")
    conf.add_argument("target", help="module:function or path/to/file.py:function")
    conf.add_argument("--estimator", required=True,
                      choices=CONVENTION_NAMES + (VERL_REMAX.name,) + multichannel_rule_names(),
                      help="the advantage rule to test against")
    conf.add_argument("--weights", default=None,
                      help="multi-reward rules: fixed channel weights, e.g. 1,0.5 (default: "
                           "drawn, with 1 to 3 channels)")
    conf.add_argument("--signature", default="plain", choices=("plain", "verl", "trl"),
                      help="plain: fn(rewards, group_ids); verl: fn(token_level_rewards, "
                           "response_mask, index); trl: fn(rewards, num_generations)")
    conf.add_argument("--torch", action="store_true", help="pass torch tensors, not numpy arrays")
    conf.add_argument("--index", default="uid", choices=("uid", "int"),
                      help="verl signature: group ids as uuid strings (verl's) or 0..k-1 ints")
    conf.add_argument("--max-examples", type=int, default=200, help="batches to try (200)")
    conf.add_argument("--seed", type=int, default=None,
                      help="hypothesis seed (default: derandomized, reproducible)")
    conf.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                      help=f"seconds one call of the function may take before the run stops "
                           f"with exit 2 (default {DEFAULT_TIMEOUT:g}); on a terminal, a "
                           f"search longer than {PROGRESS_EVERY:g} s prints a progress line "
                           "on stderr")


def _conformance(args) -> int:
    from ..advantages.multichannel import multichannel_rule_names
    from ..conformance.kit import run_command

    if args.estimator in multichannel_rule_names():
        return _multichannel_conformance(args)
    if args.weights is not None:
        print("ustat-rl conformance: --weights is for multi-reward rules; "
              f"{args.estimator} takes one reward per sample", file=sys.stderr)
        return 2
    return run_command(args.target, args.estimator, signature=args.signature, index=args.index,
                       tensors="torch" if args.torch else "numpy",
                       max_examples=args.max_examples, seed=args.seed, timeout=args.timeout)


def _multichannel_conformance(args) -> int:
    """A multi-reward rule: ``fn(rewards, group_ids, weights)``; ``--signature trl`` draws
    contiguous equal groups (an implementation that reshapes into ``(-1, G)``)."""
    from ..conformance.multichannel import run_multichannel_command

    if args.signature == "verl" or args.torch or args.index != "uid":
        print(f"ustat-rl conformance: {args.estimator} is tested as fn(rewards (n, K), "
              "group_ids, weights) on numpy arrays; --signature verl, --torch and --index do "
              "not apply", file=sys.stderr)
        return 2
    weights = None
    if args.weights is not None:
        try:
            weights = [float(v) for v in args.weights.split(",")]
        except ValueError:
            print(f"ustat-rl conformance: --weights must be comma-separated numbers, got "
                  f"{args.weights!r}", file=sys.stderr)
            return 2
    return run_multichannel_command(args.target, args.estimator, weights=weights,
                                    contiguous=args.signature == "trl",
                                    max_examples=args.max_examples, seed=args.seed,
                                    timeout=args.timeout)


def _gstar(args) -> int:
    """``ustat-rl gstar``: every path and number checked before the pilot is read."""
    from ..pilot.rollouts import check_rollouts_path
    from ..theory.group_size import budget_grid

    if args.trajectory is not None:
        if (args.dynamic_sampling or args.max_gen_batches is not None or args.group_filter
                or args.replace_ratio is not None):
            print("ustat-rl gstar: error: `--dynamic-sampling` needs a pilot rollouts file, not "
                  "--trajectory", file=sys.stderr)
            return 2
        return _gstar_trajectory(args)
    try:
        if args.rollouts is None:
            raise ValueError("give a pilot rollouts file, or --trajectory FILE for a training "
                             "run's windows")
        if args.budget is None:
            raise ValueError("`--budget` is required with a pilot file")
        check_rollouts_path(args.rollouts, "ROLLOUTS", must_exist=True)
        check_report_outputs(args.json, args.plot)
        grid = budget_grid(args.budget, "--budget")  # checked once; the walk passes the grid on
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        if args.group_size is not None and args.group_size < 2:
            raise ValueError(f"`--group-size` must be an integer >= 2, got {args.group_size}")
        max_gen_batches = dynamic_sampling_cli.check_arguments(args)
        if args.estimator is not None:  # a mistyped name, before the pilot is read
            from ..advantages import get_rule

            get_rule(args.estimator)
        from ..theory.group_size import check_advice_target

        check_advice_target(args.target, "--target")
        from ..pilot.report import format_report, gstar_report
        from ..pilot.rollouts import load_rollouts

        rollouts = load_rollouts(args.rollouts, "ROLLOUTS")
        filtered = variance = None
        batch_filter = dynamic_sampling_cli.variance_filter_name(args)
        if batch_filter is not None:  # a filter of the batch, not a group filter of k
            from ..pilot.variance_filter import pilot_variance_filter

            variance = pilot_variance_filter(rollouts, grid, batch_filter,
                                             args.group_filter_param,
                                             args.estimator or "grpo")
        if args.dynamic_sampling:  # first: its refusals (non-binary rewards) come before any work
            from ..pilot.dynamic_sampling import pilot_dynamic_sampling

            filtered = pilot_dynamic_sampling(rollouts, grid, max_gen_batches,
                                              None if batch_filter else args.group_filter)
        replaced = None
        if args.replace_ratio is not None:
            from ..pilot.replace_sampling import pilot_replace_sampling

            replaced = pilot_replace_sampling(rollouts, filtered, args.replace_ratio)
        report = gstar_report(rollouts, grid, args.estimator or "grpo", args.level,
                              run_group_size=args.group_size,
                              target=args.target)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(error_line("gstar", exc, ("budget", "estimator", "level", "group_filter",
                                        "group_filter_param", "replace_ratio",
                                        "max_gen_batches")), file=sys.stderr)
        return 2
    print(format_report(report))
    payload = report.to_dict()
    if filtered is not None:
        print("\n" + dynamic_sampling_cli.format_dynamic_sampling(filtered))
        payload["dynamic_sampling"] = filtered.to_dict()
    if variance is not None:
        from .variance_filter import format_variance_filter

        print("\n" + format_variance_filter(variance))
        payload["variance_filter"] = variance.to_dict()
    if replaced is not None:
        print("\n" + dynamic_sampling_cli.format_replace_sampling(replaced))
        payload["replace_sampling"] = replaced.to_dict()

    def figure():  # matplotlib is loaded only when --plot asks for a figure
        from .plotting_pilot import plot_gstar_report

        return plot_gstar_report(report)

    write_report_outputs(payload, figure, args.json, args.plot)
    return 0


def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    import warnings

    def one_line(message, category, *_args, **_kwargs):  # no source file, no code line
        print(f"ustat-rl {args.command}: warning: {str(message).splitlines()[0]}",
              file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line
            return _dispatch(args)
    except ModuleNotFoundError as exc:  # an optional dependency: one line naming its extra
        from ._commands import missing_dependency

        if (line := missing_dependency(exc)) is None:
            raise
        print(f"ustat-rl {args.command}: error: {line}", file=sys.stderr)
        return 2


def _dispatch(args) -> int:
    if args.command == "list":
        return _list(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "conformance":
        return _conformance(args)
    if args.command == "gstar":
        return _gstar(args)
    if args.command == "report":
        return _report(args)
    if args.command == "proofs":
        import proofs_check

        return int(proofs_check.main(args.rest))
    if args.command in ("allocate", "rewards", "logs"):
        return args.run(args)
    return verify(args, __version__)


if __name__ == "__main__":
    sys.exit(main())
