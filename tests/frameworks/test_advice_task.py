"""The advice study's task (ustat_rl.frameworks.advice_task): problems, the token-exact reward and
the exact held-out reward against sampled answers, with a negative control each."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ustat_rl.frameworks.advice_task import (  # noqa: E402
    WarmStart,
    answer_probability,
    draw_problems,
    exact_reward,
    task_model,
)
from ustat_rl.frameworks.demo import VOCAB  # noqa: E402

pytestmark = pytest.mark.fast


def test_problems_take_the_digit_counts_in_turn_and_avoid_the_excluded():
    held = draw_problems(30, seed=2)
    assert [len(p.split("+")[0]) for p, _ in held[:6]] == [1, 2, 3, 1, 2, 3]
    assert all(int(a) == sum(int(x) for x in p[:-1].split("+")) for p, a in held)
    train = draw_problems(200, seed=1, exclude=[p for p, _ in held], distinct=False)
    assert not {p for p, _ in train} & {p for p, _ in held}


def test_too_many_distinct_one_digit_problems_is_refused_naming_n():
    with pytest.raises(ValueError, match="`n` = 400 asks for 134 problems with 1-digit"):
        draw_problems(400, seed=0)


def test_the_reward_counts_the_answer_tokens_and_stops_only():
    ids = [VOCAB["1"], VOCAB["2"], 1]
    assert exact_reward(["12"], ["5+7="], completion_ids=[ids]) == [1.0]
    # a padding token inside the answer decodes to the same text but earns nothing
    assert exact_reward(["12"], ["5+7="], completion_ids=[[ids[0], 0, ids[1], 1]]) == [0.0]
    assert exact_reward(["12"], ["5+7="]) == [1.0] and exact_reward(["13"], ["5+7="]) == [0.0]


def test_the_exact_reward_matches_sampled_answers():
    # 1000 sampled answers to each of 3 prompts of an untrained model (sampling at temperature 1
    # to 5 new tokens): the share of exact answers lies within 4 binomial standard errors of
    # answer_probability; the answer's digit without the stop (negative control: a formula that
    # forgets the end-of-sequence factor) lies far outside
    model = task_model(WarmStart(hidden=16)).eval()
    problems = [("0+0=", "0"), ("1+2=", "3"), ("4+5=", "9")]
    exact = answer_probability(model, problems)
    with torch.no_grad():
        first = [model(input_ids=torch.tensor([[VOCAB[c] for c in p]])).logits[0, -1]
                 .softmax(-1)[VOCAB[a]].item() for p, a in problems]
    generator = torch.Generator().manual_seed(0)
    for (prompt, answer), p, q in zip(problems, exact, first):
        ids = torch.tensor([[VOCAB[c] for c in prompt]] * 1000)
        with torch.no_grad():
            for _ in range(2):  # the answers here have one digit: two tokens decide the event
                probs = model(input_ids=ids).logits[:, -1].softmax(-1)
                ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)], 1)
        share = float(np.mean([row[4:].tolist() == [VOCAB[answer], 1] for row in ids]))
        se = np.sqrt(p * (1 - p) / 1000)
        assert abs(share - p) < 4 * se
        assert abs(share - q) > 4 * se
