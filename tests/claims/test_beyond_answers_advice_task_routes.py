"""C83 (ustat_rl.claims.beyond_answers.advice_task_routes): the advice study's exact held-out
reward against its written-out product. The claim passes on the code as it is; planted bugs of
the padded batch, the end token and the reward's event turn it."""

from __future__ import annotations

import pytest
import torch

import ustat_rl.frameworks.advice_task as advice_task
from ustat_rl.claims import VerifyContext, registry, run_claim

pytestmark = pytest.mark.fast


def failed() -> list[str]:
    result = run_claim(registry()["C83"], VerifyContext())
    return [c.name for c in result.checks if not c.passed]


def test_the_claim_passes():
    assert failed() == []


def test_a_target_that_drops_the_end_token_fails(monkeypatch):
    real = advice_task._sequences

    def planted(problems):
        ids, attention, target = real(problems)
        last = attention.sum(dim=1) - 1  # the end token's position in each row
        target = target.clone()
        target[torch.arange(len(problems)), last] = False
        return ids, attention, target

    monkeypatch.setattr(advice_task, "_sequences", planted)
    assert [n for n in failed() if n.startswith("answer_probability")]


def test_rows_padded_on_the_left_fail(monkeypatch):
    """A causal model reads left-padded rows with the padding in its prefix: the probabilities of
    the shorter problems change."""
    real = advice_task._sequences

    def planted(problems):
        ids, attention, target = real(problems)
        shift = (attention == 0).sum(dim=1)
        for i, s in enumerate(shift.tolist()):
            ids[i] = torch.roll(ids[i], s)
            attention[i] = torch.roll(attention[i], s)
            target[i] = torch.roll(target[i], s)
        return ids, attention, target

    monkeypatch.setattr(advice_task, "_sequences", planted)
    assert [n for n in failed() if n.startswith("answer_probability")]


def test_a_reward_that_reads_the_text_alone_fails(monkeypatch):
    real = advice_task.exact_reward
    monkeypatch.setattr(advice_task, "exact_reward",
                        lambda completions, prompts, completion_ids=None, **kw:
                        real(completions, prompts))
    assert [n for n in failed() if n.startswith("exact_reward")]
