"""C57 (ustat_rl.claims.beyond_frameworks.batch_rules): the claim passes on the code as it is
and fails on a planted bug: a batch statistic leaking across the steps of a Monte Carlo block
(the final stage applied to every step's rewards at once, as code that forgot the batch axis
would), which moves every whitened rule's MSE."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.advantages.multichannel import MultiChannelRule
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_frameworks.batch_rules import batch_rule_names

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=0, quick=True)


def test_c57_covers_every_batch_rule_and_passes():
    assert {"slime_reinforce_pp_baseline", "nemo_rl_reinforce_pp", "roll_batch",
            "areal_grpo", "rllm_prpo", "rllm_reinforce_pp_baseline"} <= set(batch_rule_names())
    result = run_claim(registry()["C57"], CTX)
    assert result.verdict == "pass", [c.name for c in result.checks if not c.passed]


def test_c57_fails_when_batch_statistics_leak_across_steps(monkeypatch):
    real = MultiChannelRule.batched

    def leaking(self, rewards, weights):
        if self.final is None or self.final.statistics != "batch":
            return real(self, rewards, weights)
        R, B, G, _ = np.shape(rewards)
        combined = self.combined_grouped(np.reshape(rewards, (R * B, G, -1)), weights)
        ids = np.repeat(np.arange(R * B), G)
        counts = np.full(R * B, G)
        return self.final.apply(combined.reshape(-1), ids, counts).reshape(R, B, G)

    monkeypatch.setattr(MultiChannelRule, "batched", leaking)
    result = run_claim(registry()["C57"], CTX)
    assert result.verdict == "fail"
    assert any("MSE" in c.name and not c.passed for c in result.checks)
