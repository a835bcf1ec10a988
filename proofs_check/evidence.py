"""Derivations behind the claims registry (``ustat-rl verify``).

:func:`claim_derivations` runs the catalogue's derivations that support one claim and returns
the :class:`~proofs_check._core.Derivation` objects. Turning them into registry checks is the
registry's business (``ustat_rl.claims.symbolic``): this package never imports the registry,
so the dependency runs one way, from the claims to the derivations.
"""

from __future__ import annotations

import re

from ._core import Derivation
from .catalogue import CATALOGUE, entries_for, run_entry

__all__ = ["claim_derivations", "SUPPORTED_CLAIMS"]

#: Claim IDs with at least one derivation in the catalogue.
SUPPORTED_CLAIMS = tuple(sorted({c for e in CATALOGUE for c in e.evidence_for},
                                key=lambda c: int(c[1:])))

_CLAIM_ID = re.compile(r"^C\d+(\.[A-Za-z0-9_]+)?$")


def claim_derivations(claim_id: str, include_printed: bool = False) -> list[Derivation]:
    """Run the catalogue's derivations for ``claim_id``, in catalogue order.

    Parameters
    ----------
    claim_id : str
        A docs/theory.md claim ID such as ``"C4"`` (a suffix as in ``"C20.sym"`` is ignored).
    include_printed : bool
        Also run the printed forms / statements as transcribed that name the claim; for those
        ``holds`` is False when the toolkit disproves them.

    Returns
    -------
    list of Derivation
        Empty when no derivation supports the claim.

    Examples
    --------
    >>> [(d.claim_id, d.holds) for d in claim_derivations("C12")]
    [('C12', True)]
    """
    if not isinstance(claim_id, str):
        raise TypeError(f"`claim_id` must be a string like 'C4', got {claim_id!r}")
    if not _CLAIM_ID.match(claim_id):
        raise ValueError(f"`claim_id` must look like 'C4' or 'C20.sym', got {claim_id!r}")
    return [run_entry(entry) for entry in entries_for(claim_id)
            if entry.role == "claim" or include_printed]
