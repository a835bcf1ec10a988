"""Synthetic integer-arithmetic task: questions, a character tokenizer and a binary verifier.

This is the small-scale analogue of the 500-question task behind the paper's Fig. 4
(docs/theory.md section 5, C11): questions drawn uniformly over five categories,

=================  ==========================  ==========
category           form                        example
=================  ==========================  ==========
``two_step``       ``a ± b ± c``               ``7-2+4=``
``three_step``     ``a ± b ± c ± d``           ``3+5-1-6=``
``multiply``       ``a * b``                   ``12*7=``
``divide``         ``(q b) / b`` (exact)       ``56/8=``
``parentheses``    ``a ± (b ± c)``, ``(a ± b) ± c``  ``9-(4+2)=``
=================  ==========================  ==========

Every answer is an integer in ``[0, max_answer]`` (rejection sampling), so with the default
``max_answer = 99`` an answer has one or two digits and the set of possible outputs is small
enough to enumerate exactly (see :mod:`ustat_rl.policies.transformer.model`). The reward ``Z`` is 1 when the
generated answer is exactly the canonical decimal string of the answer followed by the
end-of-sequence token, and 0 otherwise; in particular an empty generation, a leading zero
(``"07"``), any non-digit character and a generation cut at the length limit before its
end-of-sequence token all score 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validation import as_int, as_rng

__all__ = [
    "CATEGORIES",
    "PAD",
    "BOS",
    "EOS",
    "CharTokenizer",
    "Question",
    "ArithmeticTask",
    "ArithmeticSplits",
    "make_splits",
    "verify_answer",
]

#: The paper's five question categories (docs/theory.md section 5).
CATEGORIES = ("two_step", "three_step", "multiply", "divide", "parentheses")

#: Special token ids: padding, beginning of sequence, end of sequence.
PAD, BOS, EOS = 0, 1, 2
_SPECIALS = ("<pad>", "<bos>", "<eos>")
_CHARS = "0123456789+-*/()="


class CharTokenizer:
    """Character tokenizer over digits, ``+ - * / ( ) =`` and three special tokens.

    Ids 0, 1, 2 are ``<pad>``, ``<bos>``, ``<eos>``; the characters follow in the order of
    ``"0123456789+-*/()="``.

    Examples
    --------
    >>> tok = CharTokenizer()
    >>> tok.encode("3+4=")
    [6, 13, 7, 19]
    >>> tok.decode([6, 13, 7, 19, 2])
    '3+4='
    """

    def __init__(self) -> None:
        self.tokens = _SPECIALS + tuple(_CHARS)
        self._index = {ch: i + len(_SPECIALS) for i, ch in enumerate(_CHARS)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @property
    def digit_ids(self) -> tuple[int, ...]:
        """Ids of ``"0"`` to ``"9"`` in order."""
        return tuple(self._index[d] for d in "0123456789")

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of ``text``; raises ValueError on a character outside the vocabulary."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str, got {type(text).__name__}")
        ids = []
        for position, ch in enumerate(text):
            if ch not in self._index:
                raise ValueError(
                    f"`text` contains {ch!r} at position {position}, which the tokenizer cannot "
                    f"encode; allowed characters are {_CHARS!r}"
                )
            ids.append(self._index[ch])
        return ids

    def decode(self, ids) -> str:
        """Characters of ``ids`` up to the first ``<eos>``; ``<pad>`` and ``<bos>`` are dropped."""
        out = []
        for token in ids:
            token = int(token)
            if token == EOS:
                break
            if token in (PAD, BOS):
                continue
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"token id {token} is outside the vocabulary of size {self.vocab_size}")
            out.append(self.tokens[token])
        return "".join(out)


@dataclass(frozen=True)
class Question:
    """One arithmetic question.

    Attributes
    ----------
    text : str
        The prompt, ending in ``"="``, e.g. ``"7-2+4="``.
    answer : int
        The exact integer answer, in ``[0, max_answer]``.
    category : str
        One of :data:`CATEGORIES`.
    """

    text: str
    answer: int
    category: str


def verify_answer(question: Question, generated, tokenizer: CharTokenizer | None = None) -> float:
    """Binary reward Z: 1.0 iff ``generated`` is the canonical answer followed by ``<eos>``.

    Parameters
    ----------
    question : Question
    generated : sequence of int
        Generated token ids (answer part only). Tokens after the first ``<eos>`` are ignored.
    tokenizer : CharTokenizer, optional

    Returns
    -------
    float
        1.0 or 0.0. An empty answer, a leading zero, any non-digit token, or no ``<eos>`` (the
        generation reached its length limit) all give 0.0: the verifier is deterministic and
        never raises on model output.

    Examples
    --------
    >>> tok = CharTokenizer()
    >>> q = Question("3+4=", 7, "two_step")
    >>> verify_answer(q, tok.encode("7") + [EOS]), verify_answer(q, tok.encode("7"))
    (1.0, 0.0)
    """
    tokenizer = tokenizer or CharTokenizer()
    ids = [int(t) for t in generated]
    if EOS not in ids:
        return 0.0
    body = ids[: ids.index(EOS)]
    target = tokenizer.encode(str(question.answer))
    return 1.0 if body == target else 0.0


def _signed_sum(terms, signs) -> int:
    return terms[0] + sum(s * t for s, t in zip(signs, terms[1:]))


def _op(sign: int) -> str:
    return "+" if sign > 0 else "-"


class ArithmeticTask:
    """Generator of arithmetic questions with configurable difficulty.

    Parameters
    ----------
    max_operand : int, default 9
        Largest operand of the ``±`` categories (difficulty knob).
    max_factor : int, default 9
        Largest small factor of ``multiply`` and largest divisor of ``divide``; the other
        factor and the quotient range up to ``max_answer``.
    max_answer : int, default 99
        Answers lie in ``[0, max_answer]``; its number of digits is the answer length.
    """

    def __init__(self, max_operand: int = 9, max_factor: int = 9, max_answer: int = 99) -> None:
        self.max_operand = as_int(max_operand, "max_operand", 1)
        self.max_factor = as_int(max_factor, "max_factor", 1)
        self.max_answer = as_int(max_answer, "max_answer", 1)
        self.tokenizer = CharTokenizer()

    @property
    def max_answer_len(self) -> int:
        """Number of digits of the longest answer."""
        return len(str(self.max_answer))

    @property
    def prompt_width(self) -> int:
        """Length in characters of the longest possible prompt (``"="`` included)."""
        k = len(str(self.max_operand))
        big = len(str(self.max_answer))
        small = len(str(self.max_factor))
        return max(4 * k + 4, 3 * k + 6, big + small + 2)

    def _draw(self, category: str, rng: np.random.Generator) -> Question:
        m = self.max_operand
        while True:  # rejection sampling: keep the answer in [0, max_answer]
            if category in ("two_step", "three_step"):
                n_terms = 3 if category == "two_step" else 4
                terms = [int(v) for v in rng.integers(0, m + 1, size=n_terms)]
                signs = [int(s) for s in rng.choice([-1, 1], size=n_terms - 1)]
                answer = _signed_sum(terms, signs)
                text = str(terms[0]) + "".join(_op(s) + str(t) for s, t in zip(signs, terms[1:]))
            elif category == "multiply":
                small = int(rng.integers(0, self.max_factor + 1))
                big = int(rng.integers(0, self.max_answer + 1))
                answer = small * big
                text = f"{small}*{big}" if rng.random() < 0.5 else f"{big}*{small}"
            elif category == "divide":
                divisor = int(rng.integers(1, self.max_factor + 1))
                answer = int(rng.integers(0, self.max_answer // divisor + 1))
                text = f"{answer * divisor}/{divisor}"
            elif category == "parentheses":
                a, b, c = (int(v) for v in rng.integers(0, m + 1, size=3))
                s1, s2 = (int(s) for s in rng.choice([-1, 1], size=2))
                if rng.random() < 0.5:  # a ± (b ± c)
                    answer = a + s1 * (b + s2 * c)
                    text = f"{a}{_op(s1)}({b}{_op(s2)}{c})"
                else:  # (a ± b) ± c
                    answer = a + s1 * b + s2 * c
                    text = f"({a}{_op(s1)}{b}){_op(s2)}{c}"
            else:
                raise ValueError(f"`category` must be one of {CATEGORIES}, got {category!r}")
            if 0 <= answer <= self.max_answer:
                return Question(text + "=", answer, category)

    def sample(self, n_questions: int, rng) -> list[Question]:
        """``n_questions`` questions, categories uniform, drawn with ``rng`` (duplicates allowed)."""
        n_questions = as_int(n_questions, "n_questions", 1)
        rng = as_rng(rng)
        cats = rng.integers(0, len(CATEGORIES), size=n_questions)
        return [self._draw(CATEGORIES[int(c)], rng) for c in cats]


@dataclass(frozen=True)
class ArithmeticSplits:
    """Disjoint train and test question sets (no prompt text in both).

    Attributes
    ----------
    train, test : tuple of Question
    seed : int
        The seed that produced them.
    """

    train: tuple[Question, ...]
    test: tuple[Question, ...]
    seed: int


def make_splits(task: ArithmeticTask | None = None, n_test: int = 500, n_train: int = 5000,
                seed: int = 0) -> ArithmeticSplits:
    """Fixed train/test splits by seed: distinct test questions, train questions disjoint from them.

    The test set (the paper used 500 questions) has distinct prompts, categories uniform in
    expectation; the train set may repeat prompts but never contains a test prompt.

    Examples
    --------
    >>> splits = make_splits(n_test=20, n_train=50, seed=1)
    >>> len(splits.test), len(splits.train)
    (20, 50)
    >>> not {q.text for q in splits.test} & {q.text for q in splits.train}
    True
    """
    task = task or ArithmeticTask()
    n_test = as_int(n_test, "n_test", 1)
    n_train = as_int(n_train, "n_train", 1)
    seed = as_int(seed, "seed", 0)
    rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(1,)))
    test: dict[str, Question] = {}
    attempts = 0
    while len(test) < n_test:
        attempts += 1
        if attempts > 100 * n_test:
            raise ValueError(f"`n_test` = {n_test} distinct questions cannot be drawn at this difficulty")
        q = task.sample(1, rng)[0]
        test.setdefault(q.text, q)
    train: list[Question] = []
    while len(train) < n_train:
        batch = task.sample(max(n_train - len(train), 16), rng)
        train.extend(q for q in batch if q.text not in test)
    return ArithmeticSplits(tuple(train[:n_train]), tuple(test.values()), seed)
