"""Readable verdict rows: what a claim's headline compares, in words.

A claim's row in ``ustat-rl verify`` (and in ``ustat-rl report``) shows one headline sub-check.
When that sub-check is a comparison of numbers, the row shows the prediction, the measurement
and its interval. When it is a condition (an ordering, a bound that holds at every point, a
spread of argmins that must be zero), its "predicted 1" only encodes "holds", so the row says
"holds" or "fails" instead and names the condition with the value it measured.

Functions take the dictionaries of :meth:`ClaimResult.to_dict` (and of ``verify --json`` files,
older ones without the ``headline`` field included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..formatting import format_number, parse_number

__all__ = ["RowCells", "format_number", "headline_check", "is_condition", "row_cells"]


@dataclass(frozen=True)
class RowCells:
    """Text of one verdict row.

    Attributes
    ----------
    predicted, measured, interval : str
        Numbers of a comparison, or ``"holds"``/``"fails"`` and ``"-"`` for a condition.
    compared : str
        What the headline compares, in words (the sub-check's name; for a condition, with the
        value it measured).
    """

    predicted: str
    measured: str
    interval: str
    compared: str


_number = parse_number  # "inf" strings of the JSON files parse too


def is_condition(check: dict) -> bool:
    """Whether a sub-check is a yes/no condition (``check_true``, symbolic derivations).

    Such checks predict 1 ("holds") and carry no interval.
    """
    return (_number(check.get("predicted")) == 1.0 and math.isnan(_number(check.get("ci_low")))
            and math.isnan(_number(check.get("ci_high"))))


def headline_check(result: dict) -> dict | None:
    """The sub-check whose numbers head the row of ``result`` (``None`` when it has none).

    For files written before the ``headline`` field existed, this picks the sub-check that
    decides the verdict, as :func:`ustat_rl.claims.run_claim` now does.
    """
    checks = result.get("checks") or []
    name = result.get("headline")
    for check in checks:
        if name and check.get("name") == name:
            return check
    deciding = {
        "fail": [c for c in checks if c.get("required", True) and not c.get("passed")],
        "refuted": [c for c in checks if c.get("passed") and c.get("refutes")],
        "differs": [c for c in checks if not c.get("passed")],
    }.get(result.get("verdict"), [])
    return deciding[0] if deciding else (checks[0] if checks else None)


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def row_cells(result: dict) -> RowCells:
    """Cells of the verdict row of one claim result.

    Examples
    --------
    >>> flag = {"name": "argmin stable across N and n: [16, 16]", "predicted": 1.0,
    ...         "measured": 0.0, "ci_low": None, "ci_high": None, "passed": True,
    ...         "note": "measured: spread of log2 argmin"}
    >>> cells = row_cells({"headline": flag["name"], "checks": [flag]})
    >>> cells.predicted, cells.measured, cells.interval
    ('holds', 'holds', '-')
    >>> cells.compared
    'argmin stable across N and n: [16, 16] (value 0: spread of log2 argmin)'
    """
    check = headline_check(result)
    if check is None:  # only an error has raised; another verdict without checks is no evidence
        why = {"error": "no comparison (the check raised)",
               "skipped": "no comparison (skipped: an optional package is missing)"}
        return RowCells("-", "-", "-", why.get(result.get("verdict"),
                                                "no comparison recorded (no sub-checks)"))
    name = str(check.get("name", ""))
    if is_condition(check):
        # A symbolic check's measurement is the flag itself (1 proved, 0 not): nothing to add.
        value = "-" if check.get("evidence") == "symbolic" else format_number(check.get("measured"))
        note = _short(str(check.get("note") or "").removeprefix("measured: "))
        compared = name if value == "-" else f"{name} (value {value}{': ' + note if note else ''})"
        return RowCells("holds", "holds" if check.get("passed") else "fails", "-", compared)
    interval = f"[{format_number(check.get('ci_low'))}, {format_number(check.get('ci_high'))}]"
    return RowCells(format_number(check.get("predicted")), format_number(check.get("measured")),
                    interval, name)
