"""docs/claims.md is the registry rendered by ``ustat-rl list --markdown``, and stays current."""

import doctest
import re

import pytest

from ustat_rl.claims import Claim, registry
from ustat_rl.interface import claims_markdown, cli
from ustat_rl.interface.claims_markdown import (
    ROUTE_MAP_BEGIN,
    THEORY_NOTES,
    claim_anchors,
    claim_variants,
    claims_table,
    github_anchor,
    heading_anchors,
)

pytestmark = pytest.mark.fast

CLAIMS_MD = THEORY_NOTES.parent / "claims.md"
REGENERATE = "ustat-rl list --markdown --out docs/claims.md"


def _claim(claim_id: str, statement: str = "s") -> Claim:
    def check(ctx):
        return []

    return Claim(claim_id, statement, "Lemma 1", "m", check)


def _elsewhere(ctx):
    """A check function outside the claims package (the variant scan's negative control)."""
    return []


def test_doctests():
    result = doctest.testmod(claims_markdown)
    assert result.attempted > 0 and result.failed == 0


def test_committed_claims_md_is_current():
    expected = claims_table(registry(), THEORY_NOTES.read_text(encoding="utf-8"))
    committed = CLAIMS_MD.read_bytes() if CLAIMS_MD.is_file() else b""
    # the route map after the table is measured (benchmarks/route_map.py, tests/scripts/
    # test_route_map.py); the table before it is the registry's
    table, marker, _ = committed.partition(ROUTE_MAP_BEGIN.encode("utf-8"))
    table = table[:-1] if marker else table
    assert table == expected.encode("utf-8"), (
        f"docs/claims.md is out of date with the claims registry or docs/theory.md; regenerate it "
        f"with `{REGENERATE}` (or `python -m ustat_rl.interface.cli list --markdown --out docs/claims.md`) "
        f"and commit the result")


def test_cli_out_writes_the_table_and_stdout_matches(tmp_path, capsys):
    out = tmp_path / "sub" / "claims.md"
    assert cli.main(["list", "--markdown", "--out", str(out)]) == 0
    assert cli.main(["list", "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == f"wrote {out}\n" + out.read_text(encoding="utf-8")


def test_cli_out_keeps_the_measured_route_map(tmp_path):
    out = tmp_path / "claims.md"
    section = f"{ROUTE_MAP_BEGIN}\n\n| C1 | `ustat_rl.x` |\n\n<!-- route map: end -->\n"
    out.write_text("an old table\n\n" + section, encoding="utf-8")
    assert cli.main(["list", "--markdown", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "an old table" not in text and text.endswith("\n\n" + section)
    assert text.startswith(claims_table(registry(), THEORY_NOTES.read_text(encoding="utf-8")))


def test_every_registered_claim_is_a_linked_row():
    notes = THEORY_NOTES.read_text(encoding="utf-8")
    anchors = claim_anchors(notes)
    rows = [line for line in claims_table(registry(), notes).splitlines()
            if line.startswith("| [")]
    assert [re.match(r"\| \[([^\]]+)\]", r).group(1) for r in rows] == list(registry())
    for row, (claim_id, claim) in zip(rows, registry().items()):
        assert f"(theory.md#{anchors[claim_id.split('.')[0]]})" in row
        assert f"`{claim.check.__module__}.{claim.check.__qualname__}`" in row
        assert row.count(" | ") == 5, f"a cell of {claim_id} breaks the table: {row}"


def test_each_row_lists_every_variant_of_its_claim():
    rows = [line for line in claims_table(registry(), THEORY_NOTES.read_text(encoding="utf-8"))
            .splitlines() if line.startswith("| [")]
    cells = {re.match(r"\| \[([^\]]+)\]", r).group(1): r.split(" | ")[1] for r in rows}
    assert cells["C18"] == cells["C18.tf"] == "C18, C18.tf"
    assert cells["C20"] == "C20, C20.dist, C20.inv, C20.sym"
    assert cells["C4"] == "C4"
    ids = list(registry())
    assert sorted(i for cell in set(cells.values()) for i in cell.split(", ")) == sorted(ids)


def _modules_of_variants(claims) -> dict[str, set[str]]:
    """Claims whose checks (base and suffixed) live in more than one module."""
    modules = {base: {claims[i].check.__module__ for i in ids}
               for base, ids in claim_variants(claims).items()}
    return {base: found for base, found in modules.items() if len(found) > 1}


def test_every_variant_lives_beside_its_base_claim():
    assert _modules_of_variants(registry()) == {}


def test_variant_scan_flags_a_variant_in_another_module():
    # negative control: C18.tf's check moved to another module is found
    claims = dict(registry())
    moved = Claim("C18.tf", "s", "src", "m", _elsewhere)
    claims["C18.tf"] = moved
    assert set(_modules_of_variants(claims)) == {"C18"}


def test_anchors_follow_github_rules():
    assert github_anchor("C17: the optimal group size at a fixed budget (Theorem 7)") == \
        "c17-the-optimal-group-size-at-a-fixed-budget-theorem-7"
    assert github_anchor("  Var(Z | x) & E||W||^2  ") == "varz--x--ew2"
    text = "# A b\n```text\n# not a heading\n```\n## A b\n### C5: x\n"
    assert heading_anchors(text) == {"A b": "a-b", "C5: x": "c5-x"}
    assert list(heading_anchors("# A b\n# A b!\n").values()) == ["a-b", "a-b-1"]


# ----------------------------------------------------------------------------- negative controls


def test_claim_without_heading_is_rejected():
    notes = "### C1: one\n"
    assert "C1" in claims_table({"C1.x": _claim("C1.x")}, notes)
    with pytest.raises(ValueError, match="C2"):
        claims_table({"C1": _claim("C1"), "C2": _claim("C2")}, notes)


def test_repeated_claim_heading_is_rejected():
    with pytest.raises(ValueError, match="C3"):
        claim_anchors("### C3: a\n### C3: b\n")


def test_pipes_and_emphasis_cannot_break_a_row():
    row = claims_table({"C1": _claim("C1", "E||W||^2 * 2 | <b> ~x~")}, "### C1: one\n")
    line = [r for r in row.splitlines() if r.startswith("| [C1]")][0]
    assert re.sub(r"\\.", "", line).count("|") == 7  # only the six cells' delimiters remain


def test_changed_statement_makes_the_committed_table_stale():
    claims = dict(registry())
    claims["C1"] = _claim("C1", claims["C1"].statement + " (reworded)")
    changed = claims_table(claims, THEORY_NOTES.read_text(encoding="utf-8"))
    assert changed.encode("utf-8") != CLAIMS_MD.read_bytes()
