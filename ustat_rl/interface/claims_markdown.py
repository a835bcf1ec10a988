"""Markdown view of the claims registry, linked to the theory notes (the source of docs/claims.md).

The theory notes ``docs/theory.md`` give every claim a heading that starts with its ID
(``### C5: exact finite-G MSE (Theorem 2)``); :func:`claims_table` links each registered check to
that heading through the anchor GitHub derives from the heading text (:func:`github_anchor`).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["THEORY_NOTES", "github_anchor", "heading_anchors", "claim_anchors", "claim_variants",
           "claims_table"]

#: The theory notes in a source checkout (repository root / docs / theory.md).
THEORY_NOTES = Path(__file__).resolve().parents[2] / "docs" / "theory.md"

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_CLAIM_HEADING = re.compile(r"^(C\d+):")
_FENCE = re.compile(r"^\s*(```|~~~)")


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.

    Only letters, digits, underscores, hyphens and spaces survive; each space becomes one
    hyphen. Repeated headings get ``-1``, ``-2``, ... suffixes, which :func:`heading_anchors`
    adds.

    Examples
    --------
    >>> github_anchor("C5: exact finite-G MSE (Theorem 2)")
    'c5-exact-finite-g-mse-theorem-2'
    >>> github_anchor("7. Beyond the paper: moments")
    '7-beyond-the-paper-moments'
    """
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def heading_anchors(markdown: str) -> dict[str, str]:
    """Map the text of every heading of ``markdown`` (outside code fences) to its anchor."""
    anchors: dict[str, str] = {}
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            continue
        text = match.group(2)
        base = github_anchor(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.setdefault(text, base if count == 0 else f"{base}-{count}")
    return anchors


def claim_anchors(markdown: str) -> dict[str, str]:
    """Map each claim ID with a heading in ``markdown`` (``"C5"``) to that heading's anchor.

    Raises
    ------
    ValueError
        If two headings start with the same claim ID (a reference would be ambiguous).
    """
    found: dict[str, str] = {}
    for text, anchor in heading_anchors(markdown).items():
        match = _CLAIM_HEADING.match(text)
        if match is None:
            continue
        claim_id = match.group(1)
        if claim_id in found:
            raise ValueError(f"claim {claim_id} has two headings in the theory notes")
        found[claim_id] = anchor
    return found


def _cell(text: str) -> str:
    """Text made safe for one Markdown table cell (no pipes, emphasis or line breaks)."""
    text = " ".join(str(text).split())
    for char in "\\|*~<[]`":
        text = text.replace(char, "\\" + char)
    return text


def _number(claim_id: str) -> int:
    return int(claim_id[1:])


def claim_variants(claims) -> dict[str, list[str]]:
    """Every registered check of each claim: base ID -> ``[base, base.x, ...]`` in registry order.

    A suffixed ID (``C18.tf``) is a further check of the claim with the same number; the base
    ID itself is listed only when it is registered.
    """
    variants: dict[str, list[str]] = {}
    for claim_id in claims:
        variants.setdefault(claim_id.split(".")[0], []).append(claim_id)
    return variants


def claims_table(claims, theory_text: str, theory_link: str = "theory.md") -> str:
    """Markdown document listing ``claims`` (a registry mapping), each linked to its notes entry.

    Parameters
    ----------
    claims : mapping of str to Claim
        As returned by :func:`ustat_rl.claims.registry`.
    theory_text : str
        The Markdown of the theory notes; every claim's base ID (the part before a dot) must
        have a heading there.
    theory_link : str
        Path of the notes relative to where the table is written.

    Raises
    ------
    ValueError
        If a registered claim has no heading in the notes.
    """
    anchors = claim_anchors(theory_text)
    missing = sorted({c.split(".")[0] for c in claims} - set(anchors), key=_number)
    if missing:
        raise ValueError(f"claims without a heading in the theory notes: {', '.join(missing)}")
    bases = {c.split(".")[0] for c in claims}
    unchecked = sorted(set(anchors) - bases, key=_number)
    lines = [
        "# Registered claims",
        "",
        "<!-- Generated from the claims registry by "
        "`ustat-rl list --markdown --out docs/claims.md`; do not edit by hand. -->",
        "",
        "One row per check registered in `ustat_rl.claims`; `ustat-rl verify --only ID` runs it "
        "and reports the evidence kinds (symbolic, exact-numeric, monte-carlo) it used. Each ID "
        f"links to its entry in the [theory notes]({theory_link}); a suffixed ID (`C5.tf`, "
        "`C20.dist`, ...) is a further check of the claim with the same number; the variants "
        "column lists every check of the row's claim, and all of them live in one module.",
        "",
        f"{len(claims)} checks of {len(bases)} claims.",
        "",
        "| claim | variants | statement | source | how it is checked | check function |",
        "|---|---|---|---|---|---|",
    ]
    variants = claim_variants(claims)
    for claim_id, claim in claims.items():
        base = claim_id.split(".")[0]
        function = f"{claim.check.__module__}.{claim.check.__qualname__}"
        lines.append(f"| [{claim_id}]({theory_link}#{anchors[base]}) | "
                     f"{_cell(', '.join(variants[base]))} | {_cell(claim.statement)} | "
                     f"{_cell(claim.source)} | {_cell(claim.method)} | `{function}` |")
    if unchecked:
        links = ", ".join(f"[{c}]({theory_link}#{anchors[c]})" for c in unchecked)
        lines += ["", f"Claims of the theory notes with no registered check yet: {links}."]
    return "\n".join(lines) + "\n"
