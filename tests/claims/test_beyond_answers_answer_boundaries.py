"""C79 (ustat_rl.claims.beyond_answers.answer_boundaries): the answer objects' small verdicts at
their boundaries. The claim passes on the code as it is; a strictness flipped in each, planted
by monkeypatching, turns it."""

from __future__ import annotations

import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.frameworks.trajectory import RecordInterval
from ustat_rl.pilot.allocation import RatioInterval
from ustat_rl.pilot.uncertainty import Interval
from ustat_rl.stats.rates import SlopeFit
from ustat_rl.theory.allocation import Allocation

pytestmark = pytest.mark.fast


def run():
    return run_claim(registry()["C79"], VerifyContext())


def test_the_claim_passes():
    result = run()
    assert result.verdict == "pass", [c.name for c in result.checks if not c.passed]


@pytest.mark.parametrize("cls, name, planted, words", [
    (Interval, "covers", lambda self, v: bool(self.low < v <= self.high), "Interval.covers"),
    (RecordInterval, "covers", lambda self, v: bool(self.low <= v < self.high),
     "RecordInterval.covers"),
    (SlopeFit, "contains", lambda self, v: bool(self.ci_low <= v < self.ci_high),
     "SlopeFit.contains"),
    (Interval, "width", property(lambda self: min(self.high - self.low, 1e308)), "width"),
    (RatioInterval, "within_noise", property(lambda self: self.low < 1.0 < self.high),
     "within_noise"),
    (Allocation, "budget", property(lambda self: int(self.group_sizes.sum()) - 1), "budget"),
])
def test_a_flipped_boundary_turns_the_claim(monkeypatch, cls, name, planted, words):
    monkeypatch.setattr(cls, name, planted)
    result = run()
    assert result.verdict == "fail" and words in result.headline, result.headline
