"""C46's third side (ustat_rl.claims.beyond_frameworks.conventions.literal_enumerated_moments):
the exact moments against an enumeration whose advantages come from each framework's formula
written out. A bug in the rule's own data, which the exact side and the rule's enumeration both
read (the divisor of a std-scaled rule: ``s + 2 eps`` for ``s + eps``), leaves those two in
agreement; the written-out side turns the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.advantages import parts
from ustat_rl.claims import VerifyContext, registry, run_claim

pytestmark = pytest.mark.integration  # C46 whole: every registered rule enumerated (seconds)

CTX = VerifyContext(seed=6, quick=True)


def test_a_divisor_bug_both_rule_routes_share_is_caught_by_the_written_out_side(monkeypatch):
    original = parts.Scaling.divisor

    def doubled_epsilon(self, spread):
        if self.epsilon_placement == "added to std":
            return np.asarray(spread, dtype=np.float64) + 2 * self.epsilon
        return original(self, spread)

    monkeypatch.setattr(parts.Scaling, "divisor", doubled_epsilon)
    result = run_claim(registry()["C46"], CTX)
    failed = [c.name for c in result.checks if c.required and not c.passed]
    assert result.verdict == "fail"
    assert any("formula" in name for name in failed), failed
    # the rule's two routes agree with each other under the bug: only other sides see it
    shared = [name for name in failed if "G = [" in name and "formula" not in name]
    assert shared == [], shared
