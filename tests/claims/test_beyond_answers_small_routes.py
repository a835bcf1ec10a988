"""C81 (ustat_rl.claims.beyond_answers.small_routes): small answering routes against their
written-out forms. The claim passes on the code as it is; a planted bug in each route turns it,
and the failing checks are that route's."""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.frameworks.config as config
import ustat_rl.training.std as std
from ustat_rl.advantages.rule import AdvantageRule
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers import small_routes
from ustat_rl.frameworks.grouped import GroupedRewards
from ustat_rl.policies.transformer.model import TransformerPolicy
from ustat_rl.theory.gram import FactoredGram

pytestmark = pytest.mark.fast


def failed() -> list[str]:
    result = run_claim(registry()["C81"], VerifyContext())
    return [c.name for c in result.checks if not c.passed]


def test_the_claim_passes():
    assert failed() == []


def test_the_written_out_forms_are_the_formulas():
    # G = 4 with two ones: mean 1/2, sample std sqrt(1/3)
    assert small_routes.trl_group_written(1.0, 2, 4) == pytest.approx(0.5 / (3**-0.5 + 1e-4))
    z, groups = np.array([1.0, 0.0, 0.0]), np.array([0, 0, 0])
    np.testing.assert_allclose(small_routes.loo_written(z, groups), [1.0, -0.5, -0.5])


def test_trl_group_rule_off_by_a_part_in_ten_thousand_fails(monkeypatch):
    real = std.trl_group_rule
    monkeypatch.setattr(std, "trl_group_rule", lambda z, m, G: 1.0001 * real(z, m, G))
    assert [n for n in failed() if n.startswith("trl_group_rule")]


def test_a_restriction_that_sorts_its_index_fails(monkeypatch):
    real = FactoredGram.restrict
    monkeypatch.setattr(FactoredGram, "restrict", lambda self, index: real(self, np.sort(index)))
    assert [n for n in failed() if n.startswith("FactoredGram.restrict")]


def test_a_copy_that_returns_the_held_array_fails(monkeypatch):
    held = {}

    def planted(self):
        key = id(self)
        if key not in held:
            held[key] = np.asarray(self)
        return held[key]

    monkeypatch.setattr(FactoredGram, "copy", planted)
    assert [n for n in failed() if "new array" in n]


def test_a_rule_function_that_scales_the_advantages_fails(monkeypatch):
    monkeypatch.setattr(AdvantageRule, "function",
                        property(lambda self: lambda z, i, c: 1.01 * self.apply(z, i, c)))
    names = failed()
    assert names and all(n.startswith("AdvantageRule.function") for n in names)


def test_a_ratio_factor_that_ignores_epsilon_high_fails(monkeypatch):
    monkeypatch.setattr(config, "ratio_one_factor", lambda loss_type, epsilon_high: 1.0)
    assert [n for n in failed() if n.startswith("LossWeighting.ratio_factor")]


def test_rollouts_in_the_groups_order_fail(monkeypatch):
    real = GroupedRewards.to_rollouts

    def planted(self, score=None, **metadata):
        order = np.argsort(self.group_id, kind="stable")
        table = GroupedRewards(self.group_id[order], self.reward[order])
        return real(table, None if score is None else np.asarray(score)[order], **metadata)

    monkeypatch.setattr(GroupedRewards, "to_rollouts", planted)
    assert [n for n in failed() if n.startswith("GroupedRewards.to_rollouts")]


def test_a_flat_gradient_that_drops_the_last_tensor_fails(monkeypatch):
    real = TransformerPolicy.flat_grad

    def planted(self, scalar):
        out = real(self, scalar).clone()
        last = list(self.model.parameters())[-1].numel()
        out[-last:] = 0.0
        return out

    monkeypatch.setattr(TransformerPolicy, "flat_grad", planted)
    names = failed()
    assert names and all("flat_grad" in n for n in names)
