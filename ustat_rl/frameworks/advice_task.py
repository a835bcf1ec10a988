"""A task where the group size matters, small enough for a CPU: graded addition, warm-started.

The prompts are ``"a+b="`` with ``a`` and ``b`` of one to three digits (the number of digits sets
the difficulty); the reward is binary, 1 when the completion is exactly the decimal sum. A Qwen2
built from a config over the demo's character tokenizer (:mod:`.demo`) is warm-started by
supervised training on freshly drawn problems for a fixed number of steps from a seed, so that
after it some prompts are nearly always solved and some nearly never; GRPO through
``trl.GRPOTrainer`` then has room to raise the reward. The warm start is cached on disk, keyed by a
hash of its settings. Needs the ``trl`` extra (``transformers``, ``torch``).

The held-out reward is computed exactly, not sampled: for a prompt, the probability that the model
sampling at temperature 1 (TRL's default, no top-k or top-p) writes the answer and then the
end-of-sequence token, read from one teacher-forced forward pass. A completion earns the reward in
exactly this event, except for the rare completions carrying padding tokens, which the decoder
drops; the exact figure is therefore a lower bound of the sampled reward, without sampling noise.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .._validation import as_int

__all__ = ["WarmStart", "draw_problems", "exact_reward", "answer_probability", "warm_start",
           "task_model"]

#: Longest answer (three-digit operands: at most four digits) plus the end-of-sequence token.
MAX_COMPLETION = 5


@dataclass(frozen=True)
class WarmStart:
    """Settings of the supervised warm start (and of the model it starts from)."""

    seed: int = 0
    steps: int = 300
    batch: int = 64
    learning_rate: float = 3e-3
    hidden: int = 48
    layers: int = 2

    def key(self) -> str:
        """A short hash of the settings: the cache file's name."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def draw_problems(n: int, seed: int, digits=(1, 2, 3), exclude=(),
                  distinct: bool = True) -> list[tuple[str, str]]:
    """``n`` problems ``("a+b=", "a+b")``, the digit count of both operands taking the values of
    ``digits`` in turn (so each count has its share), the operands drawn uniformly (seeded), none
    of them in ``exclude`` (prompts), all different when ``distinct`` (else drawn with
    replacement)."""
    n = as_int(n, "n", 1)
    if not digits or any(as_int(d, "digits", 1) > 3 for d in digits):
        raise ValueError(f"`digits` must hold digit counts in 1..3, got {digits!r}")
    excluded = set(exclude)
    for d in set(digits):  # the problems with d-digit operands number 10^d * 10^d (d = 1: 100)
        wanted = sum(1 for i in range(n) if digits[i % len(digits)] == d)
        space = (10 ** d - (0 if d == 1 else 10 ** (d - 1))) ** 2
        taken = sum(1 for p in excluded if len(p.split("+")[0]) == d)
        if space - taken < (wanted if distinct else 1):
            raise ValueError(f"`n` = {n} asks for {wanted} problems with {d}-digit operands; "
                             f"only {space - taken} are left after `exclude`")
    rng = np.random.default_rng(as_int(seed, "seed", 0))
    seen, out = set(), []
    while len(out) < n:
        d = int(digits[len(out) % len(digits)])
        low = 0 if d == 1 else 10 ** (d - 1)
        a, b = (int(x) for x in rng.integers(low, 10 ** d, size=2))
        prompt = f"{a}+{b}="
        if prompt not in excluded and not (distinct and prompt in seen):
            seen.add(prompt)
            out.append((prompt, str(a + b)))
    return out


def exact_reward(completions, prompts, completion_ids=None, **kwargs) -> list[float]:
    """TRL reward function: 1.0 when the completion is exactly the sum for ``"a+b="``, else 0.0.

    With ``completion_ids`` (TRL passes the tokens up to and including the end of sequence), the
    tokens must be the answer's digits and the end-of-sequence token: a padding token sampled
    inside an answer, invisible in the decoded text, earns nothing, so the reward is the event
    whose probability :func:`answer_probability` computes.
    """
    from .demo import VOCAB

    out = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        a, b = prompt[:-1].split("+")
        answer = str(int(a) + int(b))
        if completion_ids is None:
            out.append(1.0 if completion == answer else 0.0)
        else:
            tokens = [int(t) for t in completion_ids[i]]
            out.append(1.0 if tokens == [VOCAB[c] for c in answer] + [1] else 0.0)
    return out


def _sequences(problems):
    """Token ids of prompt + answer + end of sequence, right-padded, and the answer's mask."""
    import torch

    from .demo import VOCAB

    rows = [[VOCAB[c] for c in p] + [VOCAB[c] for c in a] + [1] for p, a in problems]
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attention = torch.zeros_like(ids)
    target = torch.zeros_like(ids, dtype=torch.bool)
    for i, ((p, _), row) in enumerate(zip(problems, rows)):
        ids[i, :len(row)] = torch.tensor(row)
        attention[i, :len(row)] = 1
        target[i, len(p):len(row)] = True
    return ids, attention, target


def _answer_log_probs(model, problems):
    """Per problem, the log-probability of its answer and end-of-sequence token after its
    prompt (a tensor carrying gradients)."""
    ids, attention, target = _sequences(problems)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
    log_p = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    return (log_p * target[:, 1:]).sum(-1)


def answer_probability(model, problems, batch: int = 256) -> np.ndarray:
    """Per problem ``(prompt, answer)``, the exact probability that ``model`` sampling at
    temperature 1 writes ``answer`` and stops (see the module's note)."""
    import torch

    if not problems:
        raise ValueError("`problems` must hold at least one (prompt, answer) pair")
    out = []
    with torch.no_grad():
        for start in range(0, len(problems), batch):
            out.append(_answer_log_probs(model, problems[start:start + batch]).exp())
    return torch.cat(out).double().numpy()


def task_model(settings: WarmStart):
    """The untrained tied Qwen2 of ``settings`` over the demo's vocabulary (seeded)."""
    from .demo import tiny_family

    heads = max(settings.hidden // 16, 1)
    return tiny_family("qwen2", settings.seed, tie_word_embeddings=True,
                       hidden_size=settings.hidden, intermediate_size=2 * settings.hidden,
                       num_hidden_layers=settings.layers, num_attention_heads=heads,
                       num_key_value_heads=heads)


def warm_start(settings: WarmStart = WarmStart(), cache: Path | None = None):
    """The warm-started model and the seconds its training took (0.0 when read from
    ``cache/<key>.pt``; written there after training when ``cache`` is given)."""
    import torch

    model = task_model(settings)
    path = None if cache is None else Path(cache) / f"advice_task-{settings.key()}.pt"
    if path is not None and path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), 0.0
    start = time.perf_counter()
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
    model.train()
    with torch.random.fork_rng():
        torch.manual_seed(settings.seed)
        for step in range(as_int(settings.steps, "steps", 0)):
            problems = draw_problems(settings.batch, seed=settings.seed * 1_000_003 + step)
            loss = -_answer_log_probs(model, problems).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    seconds = time.perf_counter() - start
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # one partial file per process: workers that train the same warm start at once each
        # write their own and the last rename wins (the same seed gives the same weights)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(model.state_dict(), partial)
        partial.replace(path)
    return model.eval(), seconds
