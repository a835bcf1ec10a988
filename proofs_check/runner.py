"""Command line of ``python -m proofs_check``: run the catalogue, print the table, exit code.

Exit status 0 when every claim derivation holds, every printed form is disproved and every
numeric-bridge comparison passes; 1 otherwise (2 for a usage error).
"""

from __future__ import annotations

import argparse
import sys
import time

from ._core import DISPROVED
from .catalogue import CATALOGUE, run_entry

__all__ = ["main", "run_catalogue", "format_table"]


def run_catalogue(claim: str | None = None) -> list[tuple]:
    """Run every catalogue entry (or those for one claim): ``[(entry, Derivation), ...]``."""
    out = []
    for entry in CATALOGUE:
        if claim is not None and claim.split(".")[0] not in entry.evidence_for:
            continue
        out.append((entry, run_entry(entry)))
    return out


def _as_expected(entry, result) -> bool:
    return result.holds if entry.role == "claim" else result.status == DISPROVED


def format_table(rows) -> str:
    """Plain-text table: ID, derivation, role, status, seconds, cases or detail."""
    header = f"{'ID':<5} {'derivation':<46} {'role':<8} {'status':<24} {'s':>6}  cases / detail"
    lines = [header, "-" * len(header)]
    for entry, result in rows:
        flag = "" if _as_expected(entry, result) else "  <-- unexpected"
        info = ", ".join(result.cases) if result.cases else result.detail
        info = info if len(info) <= 70 else info[:67] + "..."
        lines.append(f"{result.claim_id:<5} {result.name[:46]:<46} {entry.role:<8} "
                     f"{result.status:<24} {result.seconds:6.2f}  {info}{flag}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Entry point: ``proofs_check.main(argv) -> int`` (used by ``ustat-rl proofs``)."""
    parser = argparse.ArgumentParser(prog="python -m proofs_check",
                                     description="Symbolic derivations of docs/theory.md claims, "
                                                 "cross-checked against ustat_rl.")
    parser.add_argument("--errata", action="store_true", help="print the errata report (Markdown)")
    parser.add_argument("--claim", help="only derivations for this claim ID, e.g. C4")
    parser.add_argument("--no-bridge", action="store_true",
                        help="skip the numeric and Monte Carlo comparisons")
    parser.add_argument("--full", action="store_true", help="larger Monte Carlo sizes")
    parser.add_argument("--seed", type=int, default=20260301, help="seed of the numeric bridge")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on errors
        return int(exc.code or 0)
    start = time.perf_counter()
    if args.errata:
        from .errata import errata_report

        print(errata_report())
        return 0
    rows = run_catalogue(args.claim)
    print(format_table(rows))
    ok = all(_as_expected(entry, result) for entry, result in rows)
    held = sum(result.holds for entry, result in rows if entry.role == "claim")
    n_claim = sum(entry.role == "claim" for entry, _ in rows)
    disproved = sum(result.status == DISPROVED for entry, result in rows if entry.role != "claim")
    print(f"\nclaim derivations holding: {held}/{n_claim}; printed forms disproved: "
          f"{disproved}/{len(rows) - n_claim}")
    if not args.no_bridge and args.claim is None:
        from .bridge import exact_checks, monte_carlo_checks

        exact = exact_checks(seed=args.seed)
        mc = monte_carlo_checks(seed=args.seed + 1, quick=not args.full)
        for label, checks in (("exact numeric (rtol 1e-12)", exact), ("Monte Carlo", mc)):
            bad = [c for c in checks if not c.ok]
            print(f"bridge, {label}: {len(checks) - len(bad)}/{len(checks)} agree")
            for c in bad:
                print(f"  FAIL {c.name}: {c.describe()}")
            ok = ok and not bad
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
