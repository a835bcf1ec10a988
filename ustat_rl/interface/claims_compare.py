"""Compare two ``ustat-rl verify --json`` runs: same claims, same verdicts, same exact values.

Used to show that a refactoring changed no result: with the same seed and sizes, every claim
ID, verdict and sub-check outcome must match, and every prediction must agree to a relative
tolerance. Measurements are reported when they move: a Monte Carlo estimate may move with the
sampling order, and an exact measurement that is itself a rounding residue (a deviation from
zero, a difference of nearly equal weights) moves with the order of floating-point sums.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RunComparison", "compare_runs", "load_run"]

EXACT_EVIDENCE = ("symbolic", "exact-numeric")


@dataclass
class RunComparison:
    """Differences between two verify runs; ``ok`` when none is a required mismatch.

    Attributes
    ----------
    mismatches : list of str
        Required agreements that failed (claim sets, verdicts, sub-check names, exact values).
    notes : list of str
        Measurements that moved beyond the tolerance with their outcome unchanged (information).
    n_values : int
        Number of values compared to the tolerance.
    """

    mismatches: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    n_values: int = 0

    @property
    def ok(self) -> bool:
        return not self.mismatches


def load_run(path) -> dict:
    """Read a ``verify --json`` file; ``ValueError`` naming the path when it is not one."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read verify results from {path}: {exc}") from None
    if not isinstance(payload, dict) or "results" not in payload:
        raise ValueError(f"{path} is not a `ustat-rl verify --json` file (no 'results')")
    return payload


def _number(value) -> float:
    if value is None:
        return math.nan
    return float(value)  # "nan" strings from older files parse too


#: Values at or below this magnitude compare equal: rounding noise of the O(1) quantities the
#: claims compare (float64 resolves about 2.2e-16 of 1).
ROUNDING_FLOOR = 1e-15


def _same(a, b, rtol: float) -> bool:
    a, b = _number(a), _number(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    # both at rounding level (an exact comparison's discrepancy, say 3e-18 in one run and 7e-18
    # in another): float64 noise of O(1) quantities, not a change of result
    if max(abs(a), abs(b)) <= ROUNDING_FLOOR:
        return True
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def compare_runs(before: dict, after: dict, rtol: float = 1e-12, claims=None) -> RunComparison:
    """Compare two verify payloads claim by claim and sub-check by sub-check.

    ``claims``: an iterable of claim IDs to compare (default: every claim of either run).
    """
    out = RunComparison()
    if claims is not None:
        keep = set(claims)
        before = dict(before, results=[r for r in before["results"] if r["claim_id"] in keep])
        after = dict(after, results=[r for r in after["results"] if r["claim_id"] in keep])
    for key in ("mode", "seed"):
        if before.get(key) != after.get(key):
            out.mismatches.append(f"{key}: {before.get(key)!r} != {after.get(key)!r}")
    old = {r["claim_id"]: r for r in before["results"]}
    new = {r["claim_id"]: r for r in after["results"]}
    for cid in sorted(set(old) ^ set(new)):
        out.mismatches.append(f"{cid}: only in {'before' if cid in old else 'after'}")
    for cid in sorted(set(old) & set(new)):
        a, b = old[cid], new[cid]
        if a["verdict"] != b["verdict"]:
            out.mismatches.append(f"{cid}: verdict {a['verdict']} -> {b['verdict']}")
        checks_a = {c["name"]: c for c in a.get("checks", [])}
        checks_b = {c["name"]: c for c in b.get("checks", [])}
        for name in sorted(set(checks_a) ^ set(checks_b)):
            out.mismatches.append(f"{cid}: sub-check only {'before' if name in checks_a else 'after'}"
                                  f": {name}")
        for name in sorted(set(checks_a) & set(checks_b)):
            ca, cb = checks_a[name], checks_b[name]
            out.n_values += 1
            if not _same(ca["predicted"], cb["predicted"], rtol):
                out.mismatches.append(f"{cid}: predicted of '{name}': {ca['predicted']} -> "
                                      f"{cb['predicted']}")
            if not _same(ca["measured"], cb["measured"], rtol):
                kind = "exact" if ca.get("evidence") in EXACT_EVIDENCE else "Monte Carlo"
                out.notes.append(f"{cid}: {kind} '{name}': {ca['measured']} -> {cb['measured']}")
            if ca.get("passed") != cb.get("passed"):
                out.mismatches.append(f"{cid}: '{name}' passed {ca.get('passed')} -> "
                                      f"{cb.get('passed')}")
    return out
