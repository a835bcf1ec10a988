"""Tests for the synthetic arithmetic task, tokenizer and verifier (docs/theory.md section 5, C11)."""

from __future__ import annotations

import doctest
from collections import Counter

import numpy as np
import pytest

import ustat_rl.policies.transformer.task as arithmetic
from ustat_rl.policies.transformer.task import (
    CATEGORIES,
    EOS,
    PAD,
    ArithmeticTask,
    CharTokenizer,
    Question,
    make_splits,
    verify_answer,
)

pytestmark = pytest.mark.fast

#: Category counts are Binomial(n, 1/5); |count - n/5| <= Z sd fails with probability 6.3e-5 each.
Z = 4.0


def _evaluate(text: str) -> float:
    # independent route to the answer: Python's own arithmetic on the prompt text
    return eval(text.rstrip("="), {"__builtins__": {}})  # noqa: S307 - digits and + - * / ( ) only


def test_doctests():
    assert doctest.testmod(arithmetic).failed == 0


def test_answers_match_python_arithmetic_and_range():
    task = ArithmeticTask()
    questions = task.sample(2000, np.random.default_rng(0))
    for q in questions:
        assert _evaluate(q.text) == q.answer
        assert 0 <= q.answer <= task.max_answer
        assert len(q.text) <= task.prompt_width
    # negative control: a wrong answer is caught by the same route
    q = questions[0]
    assert _evaluate(q.text) != q.answer + 1


def test_categories_uniform():
    n = 5000
    counts = Counter(q.category for q in ArithmeticTask().sample(n, np.random.default_rng(1)))
    assert set(counts) == set(CATEGORIES)
    sd = np.sqrt(n * 0.2 * 0.8)
    assert all(abs(counts[c] - n / 5) <= Z * sd for c in CATEGORIES)


def test_difficulty_changes_operands():
    hard = ArithmeticTask(max_operand=20, max_answer=99)
    texts = [q.text for q in hard.sample(500, np.random.default_rng(2)) if q.category == "two_step"]
    assert any(any(int(tok) > 9 for tok in t.rstrip("=").replace("-", "+").split("+")) for t in texts)
    assert max(len(t) for t in texts) <= hard.prompt_width


def test_splits_fixed_by_seed_and_disjoint():
    a = make_splits(n_test=100, n_train=300, seed=3)
    b = make_splits(n_test=100, n_train=300, seed=3)
    c = make_splits(n_test=100, n_train=300, seed=4)
    assert a.test == b.test and a.train == b.train
    assert a.test != c.test
    test_texts = {q.text for q in a.test}
    assert len(test_texts) == 100
    assert not test_texts & {q.text for q in a.train}


def test_tokenizer_roundtrip_and_bad_input():
    tok = CharTokenizer()
    text = "(12-3)*4/2="
    assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="'x'"):
        tok.encode("3x4=")
    with pytest.raises(ValueError, match="' '"):
        tok.encode("3 + 4=")
    with pytest.raises(TypeError):
        tok.encode(34)


def test_verifier_rules():
    tok = CharTokenizer()
    q = Question("9+8-5=", 12, "two_step")
    good = tok.encode("12") + [EOS]
    assert verify_answer(q, good) == 1.0
    assert verify_answer(q, good + [PAD]) == 1.0  # padding after <eos> is ignored
    assert verify_answer(q, tok.encode("12") + [EOS] + tok.encode("3")) == 1.0
    assert verify_answer(q, tok.encode("12")) == 0.0  # length limit reached, no <eos>
    assert verify_answer(q, [EOS]) == 0.0  # empty generation
    assert verify_answer(q, tok.encode("012") + [EOS]) == 0.0  # leading zero is not canonical
    assert verify_answer(q, tok.encode("13") + [EOS]) == 0.0
    assert verify_answer(q, tok.encode("1+1") + [EOS]) == 0.0
    assert verify_answer(Question("0*7=", 0, "multiply"), tok.encode("0") + [EOS]) == 1.0


def test_invalid_task_arguments():
    with pytest.raises(ValueError, match="max_operand"):
        ArithmeticTask(max_operand=0)
    with pytest.raises(TypeError, match="max_answer"):
        ArithmeticTask(max_answer=9.5)
    with pytest.raises(ValueError, match="n_test"):
        # only 136 distinct questions exist at this difficulty
        make_splits(ArithmeticTask(max_operand=1, max_factor=1, max_answer=1), n_test=150, n_train=5)
