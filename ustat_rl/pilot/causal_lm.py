"""Pilots from a causal language model: sampled answers, rewards and projected scores (section 7).

For a model whose forward pass maps token ids ``(b, t)`` to logits ``(b, t, vocab)`` (a Hugging
Face ``*ForCausalLM``, whose output has ``.logits``, or any ``nn.Module`` returning the tensor),
:func:`causal_lm_pilot` draws ``G`` answers per prompt with a ``torch.Generator``, scores them
with a reward function, and records per-sample scores ``W = grad log pi(answer | prompt)`` (the
sum over answer tokens up to and including the end token, docs/theory.md section 1), full or
projected by :func:`ustat_rl.pilot.sketch.sketch_scores`. The result is a :class:`Rollouts` ready
for ``ustat-rl gstar``. Nothing here imports ``transformers``; the optional extra ``hf`` installs
it for the tests and for users.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch.func import functional_call

from .._validation import as_float, as_int
from .rollouts import Rollouts
from .sketch import full_scores, sketch_scores

__all__ = ["causal_lm_log_prob", "sample_answers", "causal_lm_pilot"]


def _logits(model, tokens: torch.Tensor, params=None) -> torch.Tensor:
    out = model(tokens) if params is None else functional_call(model, params, (tokens,))
    return out.logits if hasattr(out, "logits") else out


def causal_lm_log_prob(model, prompt_ids: torch.Tensor, temperature: float = 1.0) -> Callable:
    """``log_prob(params, (answer, mask)) -> log pi(answer | prompt)`` for one fixed prompt.

    Parameters
    ----------
    model : torch.nn.Module
    prompt_ids : torch.Tensor (t,)
        The prompt's token ids.
    temperature : float
        The sampling temperature, part of the policy.

    Returns
    -------
    callable
        Takes the parameter dict and one sample ``(answer (A,), mask (A,))``: the sum of the
        answer tokens' log-probabilities where ``mask`` is 1 (tokens after the end token are
        padding, with mask 0). Differentiable by ``torch.func.grad``, batched by ``vmap``.
    """
    temperature = as_float(temperature, "temperature", low=1e-3)
    width = prompt_ids.shape[0]

    def log_prob(params, sample):
        answer, mask = sample
        tokens = torch.cat([prompt_ids, answer])[None, :-1]  # (1, t + A - 1)
        logits = _logits(model, tokens, params)[0, width - 1:] / temperature  # (A, vocab)
        picked = torch.log_softmax(logits, dim=-1).gather(-1, answer[:, None])[:, 0]  # (A,)
        return torch.sum(picked * mask)

    return log_prob


@torch.no_grad()
def sample_answers(model, prompt_ids: torch.Tensor, group_size: int, max_new_tokens: int,
                   generator: torch.Generator, eos_token_id: int | None = None,
                   pad_token_id: int = 0, temperature: float = 1.0):
    """Draw ``group_size`` answers to one prompt: ``(answers (G, A), mask (G, A))``.

    Plain ancestral sampling (no cache, no top-k) from ``softmax(logits / temperature)``, with
    ``generator`` the only source of randomness. After ``eos_token_id`` the answer is padded with
    ``pad_token_id`` and masked out.
    """
    group_size = as_int(group_size, "group_size", 1)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", 1)
    temperature = as_float(temperature, "temperature", low=1e-3)
    seq = prompt_ids[None, :].expand(group_size, -1)  # (G, t)
    done = torch.zeros(group_size, dtype=torch.bool, device=prompt_ids.device)
    tokens, mask = [], []
    for _ in range(max_new_tokens):
        probs = torch.softmax(_logits(model, seq)[:, -1, :].double() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (G,)
        mask.append(~done)
        nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
        tokens.append(nxt)
        if eos_token_id is not None:
            done = done | (nxt == eos_token_id)
        seq = torch.cat([seq, nxt[:, None]], dim=1)
    return torch.stack(tokens, dim=1), torch.stack(mask, dim=1).to(probs.dtype)


def causal_lm_pilot(model, prompts: Sequence, reward_fn: Callable, group_size, max_new_tokens,
                    seed, sketch_dim=None, kind: str = "gaussian", eos_token_id=None,
                    pad_token_id: int = 0, temperature: float = 1.0, chunk_size: int = 16,
                    model_name: str = "") -> Rollouts:
    """A pilot of ``group_size`` answers per prompt, with rewards and scores (section 7).

    Parameters
    ----------
    model : torch.nn.Module
        Causal LM; its trainable parameters define the score.
    prompts : sequence of 1-D int tensors or lists
        Token ids of each prompt (drawn i.i.d. from the task's prompt distribution).
    reward_fn : callable
        ``reward_fn(prompt_index, answer_ids) -> float`` with ``answer_ids`` a list of ints up to
        and including the end token.
    group_size : int
        Answers per prompt, ``>= 3``.
    max_new_tokens : int
    seed : int
        Seeds the answer sampling and, separately, the projection.
    sketch_dim : int, optional
        ``k``; ``None`` records full scores (small models only: ``n d`` numbers).
    kind : {"gaussian", "rademacher"}
    eos_token_id, pad_token_id, temperature
        Decoding, as in :func:`sample_answers`.
    chunk_size : int
        Samples per ``vmap`` call.
    model_name : str
        Stored in the metadata.

    Returns
    -------
    Rollouts
    """
    from ..seeding import child_int

    if not callable(reward_fn):
        raise TypeError("`reward_fn` must be callable as reward_fn(prompt_index, answer_ids)")
    group_size = as_int(group_size, "group_size", 3, "(order-3 kernels)")
    seed = as_int(seed, "seed", 0)
    prompts = [torch.as_tensor(p, dtype=torch.long) for p in prompts]
    if len(prompts) < 2 or any(p.ndim != 1 or p.numel() == 0 for p in prompts):
        raise ValueError("`prompts` must hold >= 2 non-empty 1-D token-id sequences")
    params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
    device = next(iter(params.values())).device
    generator = torch.Generator(device=device).manual_seed(child_int(seed, 0))
    sketch_seed = child_int(seed, 1)
    ids, rewards, scores = [], [], []
    for index, prompt in enumerate(prompts):
        prompt = prompt.to(device)
        answers, mask = sample_answers(model, prompt, group_size, max_new_tokens, generator,
                                       eos_token_id, pad_token_id, temperature)
        mask = mask.to(next(iter(params.values())).dtype)
        for answer, keep in zip(answers.tolist(), mask.tolist()):
            rewards.append(float(reward_fn(index, [t for t, m in zip(answer, keep) if m])))
        log_prob = causal_lm_log_prob(model, prompt, temperature)
        if sketch_dim is None:
            scores.append(full_scores(log_prob, params, (answers, mask), chunk_size))
        else:
            scores.append(sketch_scores(log_prob, params, (answers, mask), sketch_dim,
                                        sketch_seed, kind, chunk_size))
        ids.append(np.full(group_size, index))
    dim = sum(p.numel() for p in params.values())
    meta = dict(sketch_kind="none", param_dim=dim, model_name=model_name)
    if sketch_dim is not None:
        meta.update(sketch_kind=kind, sketch_seed=sketch_seed)
    return Rollouts(prompt_id=np.concatenate(ids), reward=np.array(rewards),
                    score=np.concatenate(scores), **meta)
