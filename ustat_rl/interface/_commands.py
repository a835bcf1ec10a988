"""The ``verify``, ``list``, ``compare`` and ``report`` subcommands of ``ustat-rl`` (see cli.py),
and ``gstar --trajectory``.

Each one checks its arguments and output paths before any work and reports a bad input as one
line on stderr with exit code 2. Claim IDs given to ``--only`` follow one rule
(:func:`resolve_claim_ids`): surrounding blanks are dropped and case is ignored.
"""

from __future__ import annotations

import difflib
import json
import math
import sys
import time
from pathlib import Path

from .._paths import check_output, write_atomic

__all__ = ["compare", "gstar_trajectory", "list_claims", "missing_dependency", "report",
           "resolve_claim_ids", "verify"]


def missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """One line naming the extra that installs the module ``exc`` found missing, or ``None``
    when the missing module is part of this project (a bug, to be raised as it is).

    The extra is looked up in this distribution's metadata (``pyproject.toml``'s
    ``[project.optional-dependencies]``), preferring a specific extra over ``dev``.
    """
    import re
    from importlib import metadata

    top = (exc.name or "").partition(".")[0]
    if not top or top in ("ustat_rl", "proofs_check"):
        return None

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    extras = []
    try:
        requires = metadata.requires("ustat-rl") or []
    except metadata.PackageNotFoundError:
        requires = []
    for line in requires:
        name = re.match(r"[A-Za-z0-9_.-]+", line)
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        if name and extra and canonical(name.group(0)) == canonical(top):
            extras.append(extra.group(1))
    extras.sort(key=lambda e: (e == "dev", e))
    how = f"pip install 'ustat-rl[{extras[0]}]'" if extras else f"pip install {top}"
    return f"needs the optional package {top!r}, which is not installed: {how}"


def resolve_claim_ids(text: str, known) -> list[str]:
    """The canonical claim IDs named by ``text``, a comma-separated list.

    Each item is stripped of surrounding blanks and matched to a known ID ignoring case
    (``" c5"`` -> ``"C5"``); repeats are kept once, in the order given.

    Raises
    ------
    ValueError
        If ``text`` names no ID, or an item matches none; the message lists the closest IDs.
    """
    known = list(known)
    by_key = {k.casefold(): k for k in known}
    items = [item.strip() for item in str(text).split(",")]
    items = [item for item in items if item]
    if not items:
        raise ValueError(f"--only needs at least one claim ID, got {text!r}")
    out, unknown = [], []
    for item in items:
        canonical = by_key.get(item.casefold())
        if canonical is None:
            unknown.append(item)
        elif canonical not in out:
            out.append(canonical)
    if unknown:
        hints = []
        for item in unknown:
            near = difflib.get_close_matches(item.casefold(), list(by_key), n=4, cutoff=0.5)
            hint = f" (did you mean {', '.join(by_key[n] for n in near)}?)" if near else ""
            hints.append(f"{item!r}{hint}")
        raise ValueError(f"--only: unknown claim ID {'; '.join(hints)}; `ustat-rl list` "
                         "shows all")
    return out


def check_output_file(path, option: str) -> None:
    """A command's output file: writable (:func:`ustat_rl._paths.check_output`) and in a folder
    that exists, as ``gstar --json`` requires; a command does not create folders silently."""
    if path is None:
        return
    if not Path(path).parent.exists():
        raise ValueError(f"{option}: folder {str(Path(path).parent)!r} does not exist")
    check_output(path, option)


def _fail(command: str, message: str) -> int:
    print(f"ustat-rl {command}: error: {message}", file=sys.stderr)
    return 2


def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4g}"


def print_table(results, details: bool, stream) -> None:
    """The verdict table: one row per claim, then what its headline compares (in words).

    A condition headline (an ordering, a bound, a spread that must vanish) shows ``holds`` or
    ``fails`` rather than the ``1`` that encodes it; ``details`` lists every sub-check, the
    headline marked ``*``.
    """
    from .claims_display import row_cells

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
            # the error it would see, with --details (benchmarks/power_audit.py, docs/power.md)
            sees = (f" (detects a {c.detectable:.2g} relative error at least half the time)"
                    if details and math.isfinite(c.detectable) else "")
            print(f"    {flag} {c.name}: predicted {_fmt(c.predicted)}, measured "
                  f"{_fmt(c.measured)} [{_fmt(c.ci_low)}, {_fmt(c.ci_high)}]{sees}  {c.note}",
                  file=stream)
        if r.error:
            print("    " + r.error.strip().replace("\n", "\n    "), file=stream)


def errata() -> str:
    """The errata report with its evidence computed now (or why it is unavailable)."""
    try:
        from proofs_check import errata_report
    except ImportError:
        return "errata report unavailable: proofs_check is not installed"
    return errata_report()


def verify(args, version: str) -> int:
    """``ustat-rl verify``; with ``--errata`` and no ``--only``, the errata alone (no claims)."""
    from ..claims import registry

    claims = registry()
    try:
        wanted = [] if args.only is None else resolve_claim_ids(args.only, claims)
        if args.n_jobs < 1:
            raise ValueError(f"--n-jobs must be an integer >= 1, got {args.n_jobs}")
        check_output_file(args.json, "--json")
        if args.errata and not wanted and args.json is not None:
            raise ValueError("--json records claims, and --errata alone runs none: add "
                             "--only IDS (or drop --errata to run them all)")
    except ValueError as exc:
        return _fail("verify", str(exc))
    if args.errata and not wanted:
        print(errata())
        return 0
    from ..claims import VerifyContext, run_claim

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
    print_table(results, args.details, sys.stdout)
    from .report import VERDICTS, environment

    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    print(f"\nsummary: {counts['pass']} pass, {counts['refuted']} refuted, {counts['differs']} "
          f"differs, {counts['fail']} fail, {counts['error']} error, {counts['skipped']} skipped "
          f"(an optional extra not installed), in {total:.1f} s")
    if args.json is not None:
        payload = {"mode": mode, "seed": ctx.seed, "n_jobs": ctx.n_jobs,
                   "version": version, "summary": counts,
                   "results": [r.to_dict() for r in results],
                   "seconds": total, "environment": environment()}
        write_atomic(args.json, json.dumps(payload, indent=2, allow_nan=False).encode())
        print(f"wrote {args.json}")
    if args.errata:
        print(errata())
    return 0 if counts["fail"] == 0 and counts["error"] == 0 else 1


def compare(args) -> int:
    """``ustat-rl compare``: two verify runs with the same seed agree."""
    from .claims_compare import compare_runs, load_run

    if not (args.rtol >= 0.0 and math.isfinite(args.rtol)):
        return _fail("compare", f"--rtol must be a finite number >= 0, got {args.rtol}")
    try:
        result = compare_runs(load_run(args.before), load_run(args.after), args.rtol)
    except ValueError as exc:
        return _fail("compare", str(exc))
    for line in result.mismatches:
        print(f"MISMATCH {line}")
    for line in result.notes:
        print(f"moved    {line}")
    print(f"{result.n_values} predictions compared at rtol {args.rtol:g}: "
          f"{len(result.mismatches)} mismatches; {len(result.notes)} measurements moved "
          f"with their outcome unchanged")
    return 0 if result.ok else 1


def report(args) -> int:
    """``ustat-rl report``: output path and inputs checked before the errata are computed."""
    from .report import load_verify_json, write_report

    try:
        check_output(args.out, "--out")
        if args.results is not None and not Path(args.results).is_dir():
            raise ValueError(f"--results: {args.results} is not a folder")
        load_verify_json(args.verify_json)
        summary = write_report(args.out, args.verify_json, args.results)
    except ValueError as exc:
        return _fail("report", str(exc))
    skipped = f", {summary.n_skipped} left out for size" if summary.n_skipped else ""
    print(f"wrote {summary.path} ({summary.n_bytes / 1e6:.2f} MB, {summary.n_figures} "
          f"figures{skipped}) in {summary.seconds:.1f} s")
    for line in summary.dropped:
        print(f"left out: {line}", file=sys.stderr)
    return 0


def list_claims(args) -> int:
    """``ustat-rl list``: plain text, or with ``--markdown`` the table of docs/claims.md; with
    ``--estimators`` the advantage rules (:func:`estimators_text`)."""
    try:
        check_output(args.out, "--out")
        if args.estimators and args.markdown:
            raise ValueError("--markdown is the claims' table; --estimators lists the rules as "
                             "plain text")
    except ValueError as exc:
        return _fail("list", str(exc))
    if args.estimators:
        text = estimators_text()
    elif args.markdown:
        from ..claims import registry
        from .claims_markdown import THEORY_NOTES, claims_table, keep_route_map

        if not THEORY_NOTES.is_file():
            return _fail("list", f"--markdown needs the theory notes of a source checkout; "
                                 f"{THEORY_NOTES} not found")
        text = claims_table(registry(), THEORY_NOTES.read_text(encoding="utf-8"))
        if args.out is not None and Path(args.out).is_file():
            # the measured route map at the file's end is not the registry's to recompute
            text = keep_route_map(text, Path(args.out).read_text(encoding="utf-8"))
    else:
        from ..claims import registry

        claims = registry()
        text = "".join(f"{c.claim_id:<10} [{c.source}] {c.statement}\n{'':<10} method: {c.method}\n"
                       for c in claims.values())
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.out, text.encode("utf-8"))
        print(f"wrote {args.out}")
    return 0


def estimators_text() -> str:
    """``ustat-rl list --estimators``: each registered rule name, with the framework and option
    it reproduces; the multi-reward rules after the single-reward ones."""
    from ..advantages import get_rule, rule_names
    from ..advantages.multichannel import get_multichannel_rule, multichannel_rule_names

    rules = ([get_rule(n) for n in rule_names()]
             + [get_multichannel_rule(n) for n in multichannel_rule_names()])
    width = max(len(r.name) for r in rules)
    lines = []
    for i, rule in enumerate(rules):
        if i == len(rule_names()):
            lines.append("multi-reward rules (fn(rewards (n, K), group_ids, weights)):")
        source = rule.provenance
        lines.append(f"{rule.name:<{width}}  {source.framework}: {source.option}")
    return "\n".join(lines) + "\n"


def gstar_trajectory(args) -> int:
    """``ustat-rl gstar --trajectory FILE``: G* along a run and the universality verdict (C18).

    Conflicting arguments and output paths are checked before the file is read; a bad file is
    one line naming the file and line.
    """
    from ._outputs import check_report_outputs, write_report_outputs

    try:
        if args.rollouts is not None:
            raise ValueError(f"give a pilot rollouts file ({args.rollouts}) or --trajectory, "
                             "not both")
        for name, value in (("--budget", args.budget), ("--estimator", args.estimator)):
            if value is not None:
                raise ValueError(f"`{name}` applies to a pilot file; a trajectory's windows "
                                 "carry the run's own")
        if not 0.0 < args.level < 1.0:
            raise ValueError(f"`--level` must lie strictly between 0 and 1, got {args.level}")
        check_report_outputs(args.json, args.plot)
        from ..frameworks.trajectory import read_trajectory
        from ..frameworks.universality import format_universality, gstar_universality

        result = gstar_universality(read_trajectory(args.trajectory), args.level)
        if args.plot is not None and not result.windows:
            raise ValueError(f"`--plot`: {args.trajectory} holds no estimated window to plot")
    except ValueError as exc:
        return _fail("gstar", str(exc))
    print(format_universality(result))

    def figure():  # matplotlib is loaded only when --plot asks for a figure
        from .plotting_trajectory import plot_trajectory

        return plot_trajectory(result)

    write_report_outputs(result.to_dict(), figure, args.json, args.plot)
    return 0
