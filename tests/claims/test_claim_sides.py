"""Two independent sides (benchmarks/claim_sides.py): for each claim it lists, every package
function that both sides of the claim's comparison call has a one-line reason, the scan itself
finds a function two sides share (a planted pair) and flags it when it has none, and
docs/claim_sides.md is what the scan writes now (a stale page fails)."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # traces each side of five claims (about a minute)

sides = load_script("benchmarks/claim_sides.py")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "claim_sides.md"


@pytest.fixture(scope="module")
def scanned():
    """One scan of every claim of the script, shared by the tests below."""
    return sides.scan()


@pytest.mark.parametrize("claim", sorted(sides.SIDES))
def test_every_shared_function_has_a_reason(claim, scanned):
    both, missing = scanned[claim]
    assert missing == [], f"{claim}: shared without a reason: {missing}"


@pytest.mark.parametrize("claim", ["C60", "C65", "C66", "C67", "C69", "C73", "C74", "C78",
                                   "C80", "C81", "C52.pilot"])
def test_the_written_out_sides_share_nothing(claim, scanned):
    """C60's two sides (the package's weights, the reductions written out and differentiated),
    and C65-C67's, C69's, C73's, C74's, C78's, C80's, C81's and C52.pilot's (the package's exact
    answers, pilot and kit against sampling, enumeration, loops, a linear solve, autograd and
    formulas written in the claims package) share no package function at all."""
    both, _ = scanned[claim]
    assert both == []


def test_the_committed_page_is_what_the_scan_writes(scanned):
    written = sides.markdown(scanned)
    assert PAGE.read_text(encoding="utf-8") == written, (
        "docs/claim_sides.md is stale: run python benchmarks/claim_sides.py --markdown "
        "docs/claim_sides.md")


def test_a_stale_page_is_seen(scanned):
    """The staleness test's negative control: a page with one count changed differs."""
    claim = next(iter(scanned))
    both, missing = scanned[claim]
    planted = sides.markdown({**scanned, claim: (both + ["planted.function"], missing)})
    assert planted != sides.markdown(scanned)


def test_a_planted_shared_helper_is_found_and_flagged():
    from ustat_rl.stats.best_set import welch

    pair = {"a": lambda: welch([1.0, 2.0], [0.0, 1.0]), "b": lambda: welch([3.0, 2.0], [1.0, 1.5])}
    both = sides.shared(pair)
    assert "ustat_rl.stats.best_set.welch" in both and "ustat_rl.stats.best_set._welch_parts" in both
    assert "ustat_rl.stats.best_set.welch" in sides.unexplained("C64", both)
    assert sides.unexplained("C64", {"ustat_rl.stats.best_set._welch_parts"}) == []
