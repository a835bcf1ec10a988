"""Pilots from a causal language model: sampled answers, rewards and projected scores (section 7).

For a model whose forward pass maps token ids ``(b, t)`` to logits ``(b, t, vocab)`` (a Hugging
Face ``*ForCausalLM``, whose output has ``.logits``, or any ``nn.Module`` returning the tensor),
:func:`causal_lm_pilot` draws ``G`` answers per prompt with a ``torch.Generator`` (batched over the
group, with the key-value cache when the model has one), scores them with a reward function, and
records per-sample scores ``W = grad log pi(answer | prompt)`` (the sum over answer tokens up to
and including the end token, docs/theory.md section 1), full or projected. Projection routes:

* ``"factored"``: :func:`ustat_rl.scores.factored.factored_sketch_scores`, one batched backward
  pass per group, ``m`` independent Kronecker blocks, exact for every module (the default;
  :func:`ustat_rl.scores.coverage.parameter_coverage` says how each parameter is covered);
* ``"jvp"``: :func:`ustat_rl.scores.forward_sketch.jvp_sketch_scores`, one forward-mode pass per
  direction, for any model;
* ``"dense"``: :func:`ustat_rl.scores.sketch.sketch_scores`, per-sample gradients times
  regenerated dense directions (the reference).

The result is a :class:`Rollouts` ready for ``ustat-rl gstar``, whose ``sketch_route`` says which
route ran. Nothing here imports ``transformers``; the optional extra ``hf`` installs it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from .._validation import as_float, as_int
from ..pilot.rollouts import Rollouts
from .chunks import sketch_rows
from .sequence import functional_safe, model_logits, sequence_log_probs, trainable_parameters
from .sketch import full_scores, sketch_scores
from .spec import DEFAULT_SKETCH_BLOCKS, SketchSpec, as_spec

__all__ = ["causal_lm_log_prob", "sample_answers", "causal_lm_pilot", "Sampling", "ROUTES",
           "DEFAULT_SKETCH_BLOCKS"]

#: Projection routes of :func:`causal_lm_pilot` (``"auto"`` picks one of the first two).
ROUTES = ("factored", "jvp", "dense")



@dataclass(frozen=True)
class Sampling:
    """How a pilot's answers are drawn, checked when made.

    Parameters
    ----------
    group_size : int
        ``G``, answers per prompt (a pilot needs ``>= 3``).
    max_new_tokens : int
        Longest answer.
    seed : int
        Seeds the answers of :func:`causal_lm_pilot` (the projection is the sketch spec's).
    temperature : float
        Sampling temperature (``softmax(logits / temperature)``).
    eos_token_id : int, optional
        The end token: after it an answer is padded and masked out.
    pad_token_id : int
        The token padding an answer after its end.
    use_cache : bool, optional
        Feed one new token per step with the key-value cache (default: whenever the model takes
        ``past_key_values``).

    Examples
    --------
    >>> Sampling(4, 16, seed=3).temperature
    1.0
    """

    group_size: int
    max_new_tokens: int
    seed: int = 0
    temperature: float = 1.0
    eos_token_id: int | None = None
    pad_token_id: int = 0
    use_cache: bool | None = None

    def __post_init__(self):
        values = dict(group_size=as_int(self.group_size, "group_size", 1),
                      max_new_tokens=as_int(self.max_new_tokens, "max_new_tokens", 1),
                      seed=as_int(self.seed, "seed", 0),
                      temperature=as_float(self.temperature, "temperature", low=1e-3),
                      pad_token_id=as_int(self.pad_token_id, "pad_token_id", 0))
        if self.eos_token_id is not None:
            values["eos_token_id"] = as_int(self.eos_token_id, "eos_token_id", 0)
        for name, value in values.items():
            object.__setattr__(self, name, value)


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
        tokens = torch.cat([prompt_ids, answer])[None]  # (1, t + A)
        target = torch.cat([torch.zeros(width, dtype=mask.dtype, device=mask.device), mask])
        return sequence_log_probs(model, tokens, target[None], temperature, params)[0]

    return log_prob


def _cache_argument(model) -> str | None:
    """The key-value cache argument of ``model.forward`` (``cache`` in recent Hugging Face
    releases, ``past_key_values`` before), or ``None`` when it takes none."""
    try:
        names = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if "use_cache" not in names:
        return None
    return next((name for name in ("cache", "past_key_values") if name in names), None)


@torch.no_grad()
def sample_answers(model, prompt_ids: torch.Tensor, sampling: Sampling,
                   generator: torch.Generator):
    """Draw ``sampling.group_size`` answers to one prompt: ``(answers (G, A), mask (G, A))``.

    Plain ancestral sampling (no top-k) from ``softmax(logits / temperature)`` in float64, batched
    over the group, with ``generator`` the only source of randomness (one multinomial draw per
    step; ``sampling.seed`` is not read). After ``eos_token_id`` the answer is padded with
    ``pad_token_id`` and masked out. ``use_cache`` (default: whenever the model takes
    ``past_key_values``) feeds one new token per step with the key-value cache; the distribution
    is the same, so the same generator state gives the same answers up to floating-point rounding
    of the logits. Dropout is off.
    """
    if not isinstance(sampling, Sampling):
        raise TypeError(f"`sampling` must be a Sampling, got {type(sampling).__name__}")
    group_size, max_new_tokens = sampling.group_size, sampling.max_new_tokens
    temperature, use_cache = sampling.temperature, sampling.use_cache
    eos_token_id, pad_token_id = sampling.eos_token_id, sampling.pad_token_id
    cache_name = _cache_argument(model)
    if use_cache and cache_name is None:
        raise ValueError("`use_cache`: the model takes no key-value cache argument")
    use_cache = cache_name is not None if use_cache is None else bool(use_cache)
    was_training = model.training
    model.eval()
    seq = prompt_ids[None, :].expand(group_size, -1)  # (G, t)
    done = torch.zeros(group_size, dtype=torch.bool, device=prompt_ids.device)
    tokens, mask, past, feed = [], [], None, seq
    try:
        for _ in range(max_new_tokens):
            if use_cache:
                out = model(input_ids=feed, use_cache=True, **{cache_name: past})
                past, logits = getattr(out, cache_name), out.logits[:, -1, :]
            else:
                logits = model_logits(model, seq)[:, -1, :]
            probs = torch.softmax(logits.double() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (G,)
            mask.append(~done)
            nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
            tokens.append(nxt)
            if eos_token_id is not None:
                done = done | (nxt == eos_token_id)
            seq, feed = torch.cat([seq, nxt[:, None]], dim=1), nxt[:, None]
    finally:
        model.train(was_training)
    return torch.stack(tokens, dim=1), torch.stack(mask, dim=1).to(torch.float64)


def _pick_route(model, route: str, sketch) -> str:
    """``"factored"`` for ``"auto"``: exact for every module (:mod:`ustat_rl.scores.coverage`),
    one backward pass where the jvp route needs ``k`` forward passes."""
    if route != "auto" and route not in ROUTES:
        raise ValueError(f"`route` must be 'auto' or one of {ROUTES}, got {route!r}")
    if sketch is None:
        return "full"
    return "factored" if route == "auto" else route


def _group_scores(route, model, params, prompt, answers, mask, spec, temperature, chunk_size
                  ) -> np.ndarray:
    """Scores ``(G, k)`` (or ``(G, d)``) of one group's answers, ``chunk_size`` rows per pass."""
    if route in ("full", "dense"):
        log_prob = causal_lm_log_prob(model, prompt, temperature)
        detached = {name: p.detach() for name, p in params.items()}
        samples = (answers, mask.to(next(iter(detached.values())).dtype))
        was_training = model.training
        model.eval()  # dropout off, as in the sampler and the other routes
        try:
            with functional_safe(model):
                if route == "full":
                    return full_scores(log_prob, detached, samples, chunk_size)
                return sketch_scores(log_prob, detached, samples, spec, chunk_size)
        finally:
            model.train(was_training)
    tokens = torch.cat([prompt[None, :].expand(answers.shape[0], -1), answers], dim=1)
    target = torch.cat([torch.zeros(answers.shape[0], prompt.numel(), dtype=mask.dtype,
                                    device=mask.device), mask], dim=1)
    return sketch_rows(model, tokens, target, spec, chunk_size, route)


def causal_lm_pilot(model, prompts: Sequence, reward_fn: Callable, sampling: Sampling,
                    sketch: SketchSpec | None = None, route: str = "auto",
                    chunk_size: int = 16, model_name: str = "") -> Rollouts:
    """A pilot of ``group_size`` answers per prompt, with rewards and scores (section 7).

    Parameters
    ----------
    model : torch.nn.Module
        Causal LM; its trainable parameters define the score. Dropout is off throughout.
    prompts : sequence of 1-D int tensors or lists
        Token ids of each prompt (drawn i.i.d. from the task's prompt distribution).
    reward_fn : callable
        ``reward_fn(prompt_index, answer_ids) -> float`` with ``answer_ids`` a list of ints up to
        and including the end token.
    sampling : Sampling
        How the answers are drawn: ``group_size`` (``>= 3``), ``max_new_tokens``, ``seed``,
        ``temperature`` and the decoding settings of :func:`sample_answers`; the answers do not
        depend on the route.
    sketch : SketchSpec, optional
        The projection (``k = dimension`` rows drawn from its ``seed``; ``blocks`` independent
        blocks on the factored route, whose rows the other routes draw i.i.d.; ``dtype`` of the
        factored and jvp projections, default the model's); its ``temperature`` must be the
        sampling's. ``None`` records full scores (small models only: ``n d`` numbers).
    route : {"auto", "factored", "jvp", "dense"}
        ``"auto"``: factored (exact for every module, the fastest route).
    chunk_size : int
        Answers per ``vmap`` call (full, dense) or per batched pass (factored, jvp).
    model_name : str
        Stored in the metadata.

    Returns
    -------
    Rollouts
        ``sketch_route`` names the route used; ``sketch_blocks`` is ``m`` for a factored sketch.
    """
    from ..seeding import child_int

    if not callable(reward_fn):
        raise TypeError("`reward_fn` must be callable as reward_fn(prompt_index, answer_ids)")
    if not isinstance(sampling, Sampling):
        raise TypeError(f"`sampling` must be a Sampling, got {type(sampling).__name__}")
    group_size = as_int(sampling.group_size, "group_size", 3, "(order-3 kernels)")
    temperature = sampling.temperature
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    prompts = [torch.as_tensor(p, dtype=torch.long) for p in prompts]
    if len(prompts) < 2 or any(p.ndim != 1 or p.numel() == 0 for p in prompts):
        raise ValueError("`prompts` must hold >= 2 non-empty 1-D token-id sequences")
    spec = None if sketch is None else as_spec(sketch, "sketch")
    if spec is not None and spec.temperature != temperature:
        raise ValueError(f"`sketch.temperature` ({spec.temperature:g}) must be the sampling's "
                         f"({temperature:g}): the scores are of the policy that sampled")
    route = _pick_route(model, route, spec)
    params = trainable_parameters(model)
    device = next(iter(params.values())).device
    generator = torch.Generator(device=device).manual_seed(child_int(sampling.seed, 0))
    ids, rewards, scores = [], [], []
    for index, prompt in enumerate(prompts):
        prompt = prompt.to(device)
        answers, mask = sample_answers(model, prompt, sampling, generator)
        for answer, keep in zip(answers.tolist(), mask.tolist()):
            rewards.append(float(reward_fn(index, [t for t, m in zip(answer, keep) if m])))
        scores.append(_group_scores(route, model, params, prompt, answers, mask, spec,
                                    temperature, chunk_size))
        ids.append(np.full(group_size, index))
    dim = sum(p.numel() for p in params.values())
    meta = dict(sketch_kind="none", sketch_route=route) if spec is None else spec.to_meta(route)
    return Rollouts(prompt_id=np.concatenate(ids), reward=np.array(rewards),
                    score=np.concatenate(scores), param_dim=dim, model_name=model_name, **meta)
