"""The advice study's exact held-out reward against its written-out product (C83).

:func:`~ustat_rl.frameworks.advice_task.answer_probability` is the advice study's endpoint
(docs/advice_wins.md): the exact probability that a model sampling at temperature 1 writes a
sum's digits and then the end token, computed for many problems at once on right-padded rows.
:func:`~ustat_rl.frameworks.advice_task.exact_reward` is the reward whose expectation it is. On a
small causal model over the demo's vocabulary (any module whose output has ``.logits``; no
``transformers`` needed), for problems of one to three digits in batches of 4 (two batches, rows
of unequal lengths padded), the probability is set against the product, token by token, of the
next-token probabilities of each problem's own unpadded row (softmax written out here); the
reward against the event written out on token ids (the digits then the end token: a padding token
inside the answer, the answer without its end token, or a wrong digit earn 0). Negative control:
the product without the end token's factor, rejected by the same comparison. Exact (float64
rounding): no false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["toy_model", "written_probability"]

#: The problems: operands of one to three digits, answers of one to four digits.
PROBLEMS = (("3+4=", "7"), ("12+9=", "21"), ("55+60=", "115"), ("7+8=", "15"),
            ("999+1=", "1000"), ("40+2=", "42"))
#: Problems per batch of the route (two batches, the second part full).
BATCH = 4


def toy_model():
    """A float64 causal model over the demo's vocabulary, called as
    ``model(input_ids=..., attention_mask=...)`` and returning an object with ``.logits``."""
    import torch

    from ...frameworks.demo import VOCAB

    class Output:
        def __init__(self, logits):
            self.logits = logits

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(len(VOCAB), 6)
            self.mix = torch.nn.Linear(6, 6)
            self.head = torch.nn.Linear(6, len(VOCAB))

        def forward(self, input_ids, attention_mask=None):
            h = torch.tanh(self.mix(self.embed(input_ids).cumsum(dim=1)))  # causal
            return Output(self.head(h))

    gen = torch.Generator().manual_seed(8301)
    with torch.random.fork_rng(devices=[]):
        model = Toy().double()
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(0.8 * torch.randn(param.shape, generator=gen, dtype=torch.float64))
    return model


def written_probability(model, prompt: str, answer: str, with_end: bool = True) -> float:
    """``prod_j softmax(logits at the token before j)[token j]`` over the answer's digits and
    (with ``with_end``) the end token, on the problem's own unpadded row."""
    import torch

    from ...frameworks.demo import VOCAB

    ids = [VOCAB[c] for c in prompt] + [VOCAB[c] for c in answer] + [VOCAB["<eos>"]]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    total = 0.0
    last = len(ids) if with_end else len(ids) - 1
    for j in range(len(prompt), last):
        row = logits[j - 1]
        total += float(row[ids[j]] - torch.logsumexp(row, dim=0))
    return math.exp(total)


@register("C83", "Beyond the paper: the advice study's endpoint answer_probability is the exact "
          "chance that a model sampling at temperature 1 writes the sum's digits and the end "
          "token, on padded batches of problems of unequal lengths, and exact_reward is that "
          "event on token ids",
          "derived (docs/theory.md C83; docs/advice_wins.md's held-out reward)",
          "answer_probability on a small float64 causal model, problems of 1-3 digits in two "
          "padded batches, against the product of next-token softmax probabilities on each "
          "problem's own row; exact_reward on written token sequences; the product without "
          "the end token as the negative control")
def check_c83(ctx) -> list:
    from ...frameworks.advice_task import answer_probability, exact_reward
    from ...frameworks.demo import VOCAB

    model = toy_model()
    got = answer_probability(model, list(PROBLEMS), batch=BATCH)
    want = np.array([written_probability(model, p, a) for p, a in PROBLEMS])
    no_end = np.array([written_probability(model, p, a, with_end=False) for p, a in PROBLEMS])
    checks = [check_exact(f"answer_probability = the product of next-token probabilities on "
                          f"each problem's own row ({len(PROBLEMS)} problems, batches of "
                          f"{BATCH})", want, got, rtol=1e-10, atol=1e-300),
              check_true("negative control: the product without the end token's factor is "
                         "rejected by the same comparison",
                         not check_exact("", no_end, got, rtol=1e-10, atol=1e-300).passed,
                         float(np.max(no_end / want)))]
    digits = [VOCAB[c] for c in "115"]
    end, pad = VOCAB["<eos>"], VOCAB["<pad>"]
    cases = [(digits + [end], 1.0, "the digits then the end token"),
             (digits, 0.0, "the digits without the end token"),
             (digits[:1] + [pad] + digits[1:] + [end], 0.0, "a padding token inside the answer"),
             ([VOCAB["1"], VOCAB["1"], VOCAB["6"], end], 0.0, "a wrong digit")]
    got_rewards = exact_reward(["115"] * len(cases), ["55+60="] * len(cases),
                               completion_ids=[ids for ids, _, _ in cases])
    checks.append(check_exact("exact_reward on token ids: 1 for " + cases[0][2] + "; 0 for "
                              + ", ".join(why for _, _, why in cases[1:]),
                              [want_r for _, want_r, _ in cases], got_rewards, rtol=0.0,
                              atol=0.0))
    return checks
