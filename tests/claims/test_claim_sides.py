"""Two independent sides (benchmarks/claim_sides.py): for each claim it lists, every package
function that both sides of the claim's comparison call has a one-line reason, and the scan
itself finds a function two sides share (a planted pair) and flags it when it has none."""

from __future__ import annotations

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # traces each side of five claims (about a minute)

sides = load_script("benchmarks/claim_sides.py")


@pytest.mark.parametrize("claim", sorted(sides.SIDES))
def test_every_shared_function_has_a_reason(claim):
    both, missing = sides.scan([claim])[claim]
    assert missing == [], f"{claim}: shared without a reason: {missing}"


@pytest.mark.parametrize("claim", ["C60", "C65", "C66", "C67", "C69", "C73", "C74", "C78",
                                   "C52.pilot"])
def test_the_written_out_sides_share_nothing(claim):
    """C60's two sides (the package's weights, the reductions written out and differentiated),
    and C65-C67's, C69's, C73's, C74's, C78's and C52.pilot's (the package's exact answers and kit
    against sampling, enumeration, loops, a linear solve and formulas written in the claims
    package) share no package function at all."""
    both, _ = sides.scan([claim])[claim]
    assert both == []


def test_a_planted_shared_helper_is_found_and_flagged():
    from ustat_rl.stats.best_set import welch

    pair = {"a": lambda: welch([1.0, 2.0], [0.0, 1.0]), "b": lambda: welch([3.0, 2.0], [1.0, 1.5])}
    both = sides.shared(pair)
    assert "ustat_rl.stats.best_set.welch" in both and "ustat_rl.stats.best_set._welch_parts" in both
    assert "ustat_rl.stats.best_set.welch" in sides.unexplained("C64", both)
    assert sides.unexplained("C64", {"ustat_rl.stats.best_set._welch_parts"}) == []
