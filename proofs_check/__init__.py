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
claim_derivations(claim_id) -> list[Derivation]
    The derivations supporting one claim of the registry.

The package depends on ``ustat_rl``'s maths (the numeric bridge), never on its claims registry:
``ustat_rl.claims.symbolic`` turns derivations and bridge comparisons into registry checks.
"""

from __future__ import annotations

from ._core import DISPROVED, FAILED, PROVED, PROVED_CASES, STATUSES, Derivation
from .comparison import Comparison
from .errata import errata_report
from .evidence import SUPPORTED_CLAIMS, claim_derivations
from .runner import main

__all__ = [
    "Derivation",
    "Comparison",
    "STATUSES",
    "PROVED",
    "PROVED_CASES",
    "DISPROVED",
    "FAILED",
    "SUPPORTED_CLAIMS",
    "main",
    "errata_report",
    "claim_derivations",
]
