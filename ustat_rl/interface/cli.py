"""The ``ustat-rl`` command: ``verify`` the paper's claims, ``list`` them, run ``proofs``, and
``gstar``: G* and the noise budget from a practitioner's pilot rollouts."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .. import __version__
from ..formatting import format_number

EPILOG = """examples:
  ustat-rl verify --quick                 all claims, small Monte Carlo sizes (under a minute)
  ustat-rl verify --errata                the paper's slips, with evidence computed in this run
  ustat-rl verify --full --json out.json  all claims, large sizes (tens of minutes on a CPU)
  ustat-rl verify --only C5,C6 --seed 7   two claims with another seed
  ustat-rl list                           the registered claims
  ustat-rl report out.json --results results --out report.html   one offline HTML report
  ustat-rl conformance mymod:adv --convention trl_group   check an advantage function
  ustat-rl gstar pilot.npz --budget 512   G* and predicted MSEs from your own pilot rollouts
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
    verify.add_argument("--only", default=None, help="comma-separated claim IDs, e.g. C5,C6")
    verify.add_argument("--seed", type=_seed, default=20260301,
                        help="root seed, an integer >= 0 (default 20260301)")
    verify.add_argument("--json", type=Path, default=None, help="write results as JSON to PATH")
    verify.add_argument("--n-jobs", type=int, default=1, help="Monte Carlo worker threads")
    verify.add_argument("--details", action="store_true", help="print every sub-check")
    verify.add_argument("--errata", action="store_true",
                        help="print the errata report (paper slips with computed evidence)")

    listing = sub.add_parser("list", help="list the registered claims")
    listing.add_argument("--markdown", action="store_true",
                         help="a Markdown table linked to docs/theory.md (docs/claims.md)")
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
    gstar = sub.add_parser(
        "gstar", help="G* and the noise budget from a pilot of your own policy",
        description="Estimate c1, c2, c3' and G* with intervals from pilot rollouts (.npz or "
                    ".parquet: prompt_id, reward, score), and predict each estimator's MSE over "
                    "the group sizes that divide the budget (docs/theory.md C17, C32).")
    gstar.add_argument("rollouts", type=Path, help="pilot rollouts file (.npz or .parquet)")
    gstar.add_argument("--budget", type=int, required=True, help="samples per step N = B G")
    gstar.add_argument("--estimator", default="grpo",
                       help="advantage rule whose best group size is reported: grpo (default), "
                            "vanilla, oracle, fullmean or any registered rule")
    gstar.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    gstar.add_argument("--json", type=Path, default=None, help="write the report as JSON to PATH")
    gstar.add_argument("--plot", type=Path, default=None, help="write the MSE figure to PATH")
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


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def _writable_path(path: Path) -> str | None:
    """Why ``path`` cannot be written (``None`` if it can), checked before any long work."""
    if path.is_dir():
        return f"{path} is a directory"
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create {parent}: {exc.strerror or exc}"
    if not os.access(parent, os.W_OK):
        return f"{parent} is not writable"
    return None


def _fmt(value: float) -> str:
    return format_number(value)


def _print_table(results, details: bool, stream) -> None:
    """The verdict table: one row per claim, then what its headline compares (in words).

    A condition headline (an ordering, a bound, a spread that must vanish) shows ``holds`` or
    ``fails`` rather than the ``1`` that encodes it; ``details`` lists every sub-check, the
    headline marked ``*``.
    """
    from ..claims.display import row_cells

    header = f"{'claim':<10} {'verdict':<8} {'predicted':>11} {'measured':>11} {'interval':>25} " \
             f"{'evidence':<30} {'s':>6}"
    print(header, file=stream)
    print("-" * len(header), file=stream)
    for r in results:
        cells = row_cells(r.to_dict())
        print(f"{r.claim_id:<10} {r.verdict:<8} {cells.predicted:>11} {cells.measured:>11} "
              f"{cells.interval:>25} {','.join(r.evidence):<30} {r.seconds:6.1f}", file=stream)
        if not details:
            print(f"    compared: {cells.compared}", file=stream)
        shown = r.checks if details else [c for c in r.checks
                                          if not c.passed or c.refutes]
        for c in shown:
            if c.refutes:
                flag = "REFUTES" if c.passed else "FAIL"
            else:
                flag = "ok " if c.passed else ("FAIL" if c.required else "DIFF")
            if details and c.name == r.headline:
                flag = "*" + flag
            print(f"    {flag} {c.name}: predicted {_fmt(c.predicted)}, measured "
                  f"{_fmt(c.measured)} [{_fmt(c.ci_low)}, {_fmt(c.ci_high)}]  {c.note}",
                  file=stream)
        if r.error:
            print("    " + r.error.strip().replace("\n", "\n    "), file=stream)


def _verify(args) -> int:
    from ..claims import VerifyContext, registry, run_claim

    claims = registry()
    wanted = [] if args.only is None else [c.strip() for c in args.only.split(",") if c.strip()]
    if args.only is not None and not wanted:
        print(f"ustat-rl: --only needs at least one claim ID, got {args.only!r}", file=sys.stderr)
        return 2
    unknown = [c for c in wanted if c not in claims]
    if unknown:
        print(f"ustat-rl: unknown claim ID(s) {', '.join(unknown)}; known: "
              f"{', '.join(claims)}", file=sys.stderr)
        return 2
    if args.n_jobs < 1:
        print("ustat-rl: --n-jobs must be >= 1", file=sys.stderr)
        return 2
    if args.json is not None and (why := _writable_path(args.json)) is not None:
        print(f"ustat-rl: --json: {why}", file=sys.stderr)
        return 2
    selected = [claims[c] for c in (wanted or claims)]
    ctx = VerifyContext(seed=args.seed, quick=not args.full, n_jobs=args.n_jobs)
    mode = "quick" if ctx.quick else "full"
    print(f"ustat-rl verify ({mode}, seed {ctx.seed}): {len(selected)} claims", flush=True)
    start = time.perf_counter()
    results = []
    for claim in selected:
        print(f"  {claim.claim_id}: {claim.statement[:90]}...", file=sys.stderr, flush=True)
        results.append(run_claim(claim, ctx))
    total = time.perf_counter() - start
    print()
    _print_table(results, args.details, sys.stdout)
    verdicts = ("pass", "refuted", "differs", "fail", "error")
    counts = {v: sum(r.verdict == v for r in results) for v in verdicts}
    print(f"\nsummary: {counts['pass']} pass, {counts['refuted']} refuted, {counts['differs']} "
          f"differs, {counts['fail']} fail, {counts['error']} error, in {total:.1f} s")
    if args.json is not None:
        from .report import environment

        payload = {"mode": mode, "seed": ctx.seed, "n_jobs": ctx.n_jobs,
                   "version": __version__, "summary": counts,
                   "results": [r.to_dict() for r in results],
                   "seconds": total, "environment": environment()}
        _write_atomic(args.json, json.dumps(payload, indent=2, allow_nan=False).encode())
        print(f"wrote {args.json}")
    if args.errata:
        print(_errata())
    return 0 if counts["fail"] == 0 and counts["error"] == 0 else 1


def _errata() -> str:
    try:
        from proofs_check import errata_report
    except ImportError:
        return "errata report unavailable: proofs_check is not installed"
    return errata_report()


def _compare(args) -> int:
    from ..claims.compare import compare_runs, load_run

    try:
        result = compare_runs(load_run(args.before), load_run(args.after), args.rtol)
    except ValueError as exc:
        print(f"ustat-rl compare: error: {exc}", file=sys.stderr)
        return 2
    for line in result.mismatches:
        print(f"MISMATCH {line}")
    for line in result.notes:
        print(f"moved    {line}")
    print(f"{result.n_values} predictions compared at rtol {args.rtol:g}: "
          f"{len(result.mismatches)} mismatches; {len(result.notes)} measurements moved "
          f"with their outcome unchanged")
    return 0 if result.ok else 1


def _report(args) -> int:
    """``ustat-rl report``: output path and inputs checked before the errata are computed."""
    from .report import load_verify_json, write_report

    if (why := _writable_path(args.out)) is not None:
        print(f"ustat-rl report: --out: {why}", file=sys.stderr)
        return 2
    if args.results is not None and not args.results.is_dir():
        print(f"ustat-rl report: --results: {args.results} is not a folder", file=sys.stderr)
        return 2
    try:
        load_verify_json(args.verify_json)
        summary = write_report(args.out, args.verify_json, args.results)
    except ValueError as exc:
        print(f"ustat-rl report: error: {exc}", file=sys.stderr)
        return 2
    skipped = f", {summary.n_skipped} left out for size" if summary.n_skipped else ""
    print(f"wrote {summary.path} ({summary.n_bytes / 1e6:.2f} MB, {summary.n_figures} "
          f"figures{skipped}) in {summary.seconds:.1f} s")
    return 0


def _list(args) -> int:
    """``ustat-rl list``: plain text, or with ``--markdown`` the table of docs/claims.md."""
    from ..claims import registry

    claims = registry()
    if args.markdown:
        from ..claims.markdown import THEORY_NOTES, claims_table

        if not THEORY_NOTES.is_file():
            print(f"ustat-rl: --markdown needs the theory notes of a source checkout; "
                  f"{THEORY_NOTES} not found", file=sys.stderr)
            return 2
        text = claims_table(claims, THEORY_NOTES.read_text(encoding="utf-8"))
    else:
        text = "".join(f"{c.claim_id:<10} [{c.source}] {c.statement}\n{'':<10} method: {c.method}\n"
                       for c in claims.values())
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def _add_conformance_parser(sub) -> None:
    from ..advantages.conventions import CONVENTION_NAMES

    conf = sub.add_parser(
        "conformance", help="check an advantage function against a framework convention",
        description="Property-test module:function (or path/file.py:function) against a named "
                    "convention of docs/conventions.md. Exit 0: conforms; 1: does not (the "
                    "smallest failing batch is printed); 2: usage or import error.")
    conf.add_argument("target", help="module:function or path/to/file.py:function")
    conf.add_argument("--convention", required=True, choices=CONVENTION_NAMES)
    conf.add_argument("--signature", default="plain", choices=("plain", "verl", "trl"),
                      help="plain: fn(rewards, group_ids); verl: fn(token_level_rewards, "
                           "response_mask, index); trl: fn(rewards, num_generations)")
    conf.add_argument("--torch", action="store_true", help="pass torch tensors, not numpy arrays")
    conf.add_argument("--index", default="uid", choices=("uid", "int"),
                      help="verl signature: group ids as uuid strings (verl's) or 0..k-1 ints")
    conf.add_argument("--max-examples", type=int, default=200, help="batches to try (200)")
    conf.add_argument("--seed", type=int, default=None,
                      help="hypothesis seed (default: derandomized, reproducible)")


def _conformance(args) -> int:
    from ..advantages.conformance import run_command

    return run_command(args.target, args.convention, signature=args.signature, index=args.index,
                       tensors="torch" if args.torch else "numpy",
                       max_examples=args.max_examples, seed=args.seed)
def _gstar(args) -> int:
    """``ustat-rl gstar``: every path and number checked before the pilot is read."""
    from ..pilot.rollouts import check_rollouts_path

    checks = [(args.json, (".json",), "--json"), (args.plot, (".png", ".pdf", ".svg"), "--plot")]
    try:
        check_rollouts_path(args.rollouts, "ROLLOUTS", must_exist=True)
        for path, suffixes, name in checks:
            if path is not None and path.suffix not in suffixes:
                raise ValueError(f"`{name}` must end in one of {suffixes}, got {str(path)!r}")
            if path is not None and not path.parent.is_dir():
                raise ValueError(f"`{name}`: folder {str(path.parent)!r} does not exist")
        if args.budget < 2:
            raise ValueError(f"`--budget` must be an integer >= 2, got {args.budget}")
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        from ..pilot.report import format_report, gstar_report
        from ..pilot.rollouts import load_rollouts

        report = gstar_report(load_rollouts(args.rollouts), args.budget, args.estimator,
                              args.level)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"ustat-rl gstar: error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if args.json is not None:
        _write_atomic(args.json, json.dumps(report.to_dict(), indent=2).encode())
        print(f"wrote {args.json}")
    if args.plot is not None:
        import io

        from .plotting_pilot import plot_gstar_report

        buffer = io.BytesIO()
        plot_gstar_report(report).savefig(buffer, format=args.plot.suffix[1:], dpi=150)
        _write_atomic(args.plot, buffer.getvalue())
        print(f"wrote {args.plot}")
    return 0


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
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
    return _verify(args)


if __name__ == "__main__":
    sys.exit(main())
