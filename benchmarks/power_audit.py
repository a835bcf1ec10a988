"""The smallest error each claim of ``ustat-rl verify`` would see, read from a run's evidence.

A comparison of a prediction with an interval about a measured value passes an error smaller
than the interval. For every sub-check with a finite interval, ``Check.detectable``
(:func:`ustat_rl.claims.detectable_error`) is the error of the prediction, relative to it, that
the comparison rejects at least half the time: the interval's larger half-width over the
predicted value. This script reads those figures from a ``verify --json`` file (or runs
``verify --quick`` at its default seed to write one) and reports, per claim, its sharpest and its
bluntest sampled comparison, and every required sampled comparison that cannot see an error of
the stated line (10% by default) with even odds: the list of claims whose power is below a
purpose that a relative error of that size would defeat.

Usage (from the repository root)::

    python benchmarks/power_audit.py                          # runs verify --quick, prints
    python benchmarks/power_audit.py --from run.json --line 0.05
    python benchmarks/power_audit.py --markdown docs/power.md # the generated page
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ustat_rl.claims import detectable_error  # noqa: E402

#: Evidence kinds of a sampled comparison (its interval is a confidence interval); the others'
#: intervals are rounding tolerances.
SAMPLED = ("monte-carlo",)


@dataclass
class ClaimPower:
    """What one claim's comparisons would see (relative errors; NaN where none)."""

    claim_id: str
    verdict: str
    sampled: int = 0          # sampled comparisons with a finite interval and a non-zero prediction
    sampled_at_zero: int = 0  # sampled comparisons of a prediction of 0 (absolute errors only)
    exact: int = 0            # exact comparisons (their tolerance is rounding)
    conditions: int = 0       # yes/no comparisons (orderings, bounds): no interval
    sharpest: float = float("nan")
    sharpest_name: str = ""
    bluntest: float = float("nan")
    bluntest_name: str = ""
    exact_worst: float = float("nan")
    blunt: list[tuple[str, float]] = field(default_factory=list)  # required, above the line


def _number(value) -> float:
    """A JSON number of verify's: ``null`` is NaN, the strings ``"inf"``/``"-inf"`` infinite."""
    return float("nan") if value is None else float(value)


def audit(payload: dict, line: float = 0.10) -> list[ClaimPower]:
    """Per claim of a ``verify --json`` payload, the relative errors its comparisons would see.

    Parameters
    ----------
    payload : dict
        A ``verify --json`` file's contents.
    line : float
        The relative error a sampled comparison should see at least half the time; a required
        one that cannot is listed in ``ClaimPower.blunt``.
    """
    if not (isinstance(line, (int, float)) and 0 < line < math.inf):
        raise ValueError(f"line must be a positive number (a relative error), got {line!r}")
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, list) or not results:
        raise ValueError("the verify JSON holds no results: write it with `ustat-rl verify "
                         "--quick --json PATH`")
    rows = []
    for result in results:
        row = ClaimPower(result["claim_id"], result["verdict"])
        for check in result.get("checks") or []:
            low, high = _number(check.get("ci_low")), _number(check.get("ci_high"))
            predicted, measured = _number(check.get("predicted")), _number(check.get("measured"))
            if not (math.isfinite(low) and math.isfinite(high)):
                row.conditions += 1
                continue
            rel = detectable_error(predicted, measured, low, high)
            if check.get("evidence") not in SAMPLED:
                row.exact += 1
                if math.isfinite(rel) and not rel <= row.exact_worst:
                    row.exact_worst = rel
                continue
            if not math.isfinite(rel):
                row.sampled_at_zero += 1
                continue
            row.sampled += 1
            if not rel >= row.sharpest:
                row.sharpest, row.sharpest_name = rel, check["name"]
            if not rel <= row.bluntest:
                row.bluntest, row.bluntest_name = rel, check["name"]
            if check.get("required", True) and rel > line:
                row.blunt.append((check["name"], rel))
        rows.append(row)
    return rows


def _pct(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:.2%}" if value < 0.1 else f"{value:.1%}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def markdown(rows: list[ClaimPower], payload: dict, line: float, source: str) -> str:
    """The generated page: what the audit is, the claims below the line, and the whole table."""
    n_sampled = sum(r.sampled for r in rows)
    blunt = [r for r in rows if r.blunt]
    n_blunt = sum(len(r.blunt) for r in blunt)
    blind = [r for r in rows if r.sampled and r.sharpest > line]
    out = [
        "# What each claim would see: the smallest detectable error",
        "",
        f"<!-- Generated by `{source}`; do not edit by hand. -->",
        "",
        "A claim compares a prediction with an interval about a measured value, so an error "
        "smaller than the interval passes. For every comparison with a finite interval the "
        "*detectable error* is the interval's larger half-width over the predicted value: an "
        "error of the prediction that large leaves it outside the interval at least half the "
        "time (the measured value's noise having median 0), and a smaller one may well pass. "
        "Sampled (Monte Carlo) comparisons are listed by claim; an exact comparison's interval "
        "is its rounding tolerance (its largest relative figure is the last column). Yes/no "
        "comparisons (orderings, bounds) and sampled comparisons of a prediction of 0 (bias "
        "checks, whose absolute interval is in `verify --details`) have no relative figure and "
        "are only counted. `ustat-rl verify --details` prints each comparison's figure, and "
        "`verify --json` records it (`detectable`).",
        "",
        f"Run: `verify` {payload.get('mode', '?')} mode, seed {payload.get('seed', '?')}, "
        f"version {payload.get('version', '?')}; {len(rows)} claims, {n_sampled} sampled "
        f"comparisons with a relative figure. The line: {line:.0%} of the predicted value.",
        "",
        "## Below the line",
        "",
    ]
    if blind:
        out.append(f"Claims none of whose sampled comparisons sees a {line:.0%} error with even "
                   "odds (their purpose must be met by their exact or yes/no comparisons, or "
                   "they are weak): " + ", ".join(f"{r.claim_id} (sharpest {_pct(r.sharpest)})"
                                                  for r in blind) + ".")
    else:
        out.append(f"Every claim with a sampled comparison has one that sees a {line:.0%} error "
                   "with even odds.")
    out += ["", f"Required sampled comparisons that cannot see a {line:.0%} error with even odds "
            f"({n_blunt} of {n_sampled}, in {len(blunt)} claims):", ""]
    if not blunt:
        out.append("none.")
    for r in blunt:
        shown = "; ".join(f"{_cell(name)} ({_pct(rel)})" for name, rel in r.blunt)
        out.append(f"- **{r.claim_id}**: {shown}")
    out += ["", "## Every claim", "",
            "| claim | verdict | sampled | at 0 | exact | yes/no | sharpest sampled | "
            "bluntest sampled | exact, largest |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sharp = (f"{_pct(r.sharpest)}: {_cell(r.sharpest_name)}" if r.sampled else "-")
        blunt_cell = (f"{_pct(r.bluntest)}: {_cell(r.bluntest_name)}" if r.sampled > 1 else "-")
        exact = f"{r.exact_worst:.1e}" if math.isfinite(r.exact_worst) else "-"
        out.append(f"| {r.claim_id} | {r.verdict} | {r.sampled} | {r.sampled_at_zero} | "
                   f"{r.exact} | {r.conditions} | {sharp} | {blunt_cell} | {exact} |")
    return "\n".join(out) + "\n"


def _run_verify(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "ustat_rl.interface.cli", "verify", "--quick",
                    "--json", str(path)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="a `ustat-rl verify --json` file (default: run verify --quick, "
                             "about 75 s)")
    parser.add_argument("--line", type=float, default=0.10,
                        help="relative error a sampled comparison should see (default 0.10)")
    parser.add_argument("--markdown", type=Path, default=None, help="write the page to PATH")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.line) and args.line > 0):
        parser.error(f"--line must be a positive number, got {args.line}")
    if args.source is not None and not args.source.is_file():
        parser.error(f"--from: no such file: {args.source}")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.source
        if path is None:
            path = Path(tmp) / "verify.json"
            print("running ustat-rl verify --quick (about 75 s) ...", file=sys.stderr)
            _run_verify(path)
        try:
            payload = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            parser.error(f"--from: not a verify JSON file ({exc})")
    try:
        rows = audit(payload, args.line)
    except ValueError as exc:
        parser.error(str(exc))
    command = "python benchmarks/power_audit.py" + (
        f" --from {args.source}" if args.source is not None else "") + (
        f" --line {args.line:g}" if args.line != 0.10 else "") + (
        f" --markdown {args.markdown}" if args.markdown else "")
    text = markdown(rows, payload, args.line, command)
    if args.markdown is not None:
        args.markdown.write_text(text)
        print(f"wrote {args.markdown}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
