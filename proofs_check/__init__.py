"""Symbolic derivations of the claims of docs/theory.md, cross-checked against ``ustat_rl``.

One module per result, one function per derivation, each returning a frozen
:class:`Derivation` (claim ID, statement, method, status, the derived sympy expression and its
LaTeX, seconds). ``python -m proofs_check`` runs the catalogue and prints a table;
``python -m proofs_check --errata`` prints the errata report.

Public entry points
-------------------
main(argv) -> int
    The command line (``ustat-rl proofs`` calls it).
errata_report() -> str
    Markdown errata with evidence computed at call time.
symbolic_evidence(claim_id) -> list[Check]
    Registry checks (``evidence="symbolic"``) for one claim.
"""

from __future__ import annotations

from ._core import DISPROVED, FAILED, PROVED, PROVED_CASES, STATUSES, Derivation
from .errata import errata_report
from .evidence import SUPPORTED_CLAIMS, symbolic_evidence
from .runner import main

__all__ = [
    "Derivation",
    "STATUSES",
    "PROVED",
    "PROVED_CASES",
    "DISPROVED",
    "FAILED",
    "SUPPORTED_CLAIMS",
    "main",
    "errata_report",
    "symbolic_evidence",
]
