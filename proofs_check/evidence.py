"""Symbolic evidence for the claims registry (``ustat-rl verify``).

:func:`symbolic_evidence` turns the catalogue's derivations for one claim into registry
``Check`` objects with ``evidence="symbolic"``. A derivation passes when its verdict matches its
role: a claim must hold; a printed form or a statement as transcribed must be disproved for the
check "the toolkit reproduces the erratum" to pass, and its failure to hold is reported by a
separate check on the claim itself (see :mod:`ustat_rl.claims.checks_symbolic`).
"""

from __future__ import annotations

import re

from ustat_rl.claims.registry import Check, check_true

from ._core import Derivation
from .catalogue import CATALOGUE, entries_for, run_entry

__all__ = ["symbolic_evidence", "derivation_check", "SUPPORTED_CLAIMS"]

#: Claim IDs with at least one derivation in the catalogue.
SUPPORTED_CLAIMS = tuple(sorted({c for e in CATALOGUE for c in e.evidence_for},
                                key=lambda c: int(c[1:])))

_CLAIM_ID = re.compile(r"^C\d+(\.[A-Za-z0-9_]+)?$")


def derivation_check(result: Derivation) -> Check:
    """One registry ``Check`` from a derivation (``passed`` iff it holds, for a claim entry)."""
    cases = f" for {', '.join(result.cases)}" if result.cases else ""
    # no timing in the note: verify's JSON must be identical for the same seed apart from "seconds"
    note = (f"{result.status}{cases}; {result.method}. "
            f"{result.detail}").strip()
    return check_true(f"{result.name}: {result.statement}", result.holds,
                      measured=1.0 if result.holds else 0.0, evidence="symbolic", note=note)


def symbolic_evidence(claim_id: str, include_printed: bool = False) -> list[Check]:
    """Run the catalogue's derivations for ``claim_id`` and return them as ``Check`` objects.

    Parameters
    ----------
    claim_id : str
        A docs/theory.md claim ID such as ``"C4"`` (a suffix as in ``"C20.sym"`` is ignored).
    include_printed : bool
        Also return the checks of printed forms / statements as transcribed; their ``passed``
        is whether they *hold* (so a disproved printed form gives ``passed=False``).

    Returns
    -------
    list of Check
        Empty when no derivation supports the claim.

    Examples
    --------
    >>> [(c.passed, c.evidence) for c in symbolic_evidence("C12")]
    [(True, 'symbolic')]
    """
    if not isinstance(claim_id, str):
        raise TypeError(f"`claim_id` must be a string like 'C4', got {claim_id!r}")
    if not _CLAIM_ID.match(claim_id):
        raise ValueError(f"`claim_id` must look like 'C4' or 'C20.sym', got {claim_id!r}")
    checks = []
    for entry in entries_for(claim_id):
        if entry.role != "claim" and not include_printed:
            continue
        checks.append(derivation_check(run_entry(entry)))
    return checks
