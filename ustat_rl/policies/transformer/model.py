"""A tiny causal transformer policy with exact sequence log-probabilities and per-sample scores.

The policy ``pi_theta(Y | x)`` generates an answer ``Y`` token by token after the prompt ``x``
(docs/theory.md section 1: ``Y`` is the whole output sequence). Its score is the gradient of the
sequence log-probability, summed over tokens with no length normalisation,

    W = grad_theta log pi_theta(Y | x) = sum_t grad_theta log pi_theta(y_t | x, y_<t),

computed for many sequences at once with ``torch.func.vmap`` over ``torch.func.grad`` of a
``functional_call`` (:meth:`TransformerPolicy.scores`), in chunks to bound memory.

Decoding. A policy is ``constrained`` (the default) or free:

* constrained: at each of the first ``max_answer_len`` steps only the digits and ``<eos>`` may
  be drawn; at step ``max_answer_len`` only ``<eos>``. The output space is then every digit
  string of length ``0..max_answer_len`` (111 outputs for two digits), so values and gradients
  can be computed exactly by enumeration (:meth:`TransformerPolicy.enumerate_outputs`).
* free: every non-special token and ``<eos>`` may be drawn for ``max_new_tokens`` steps. A
  generation with no ``<eos>`` by then is cut there and scores 0 (see
  :func:`ustat_rl.policies.transformer.task.verify_answer`).

Temperature ``tau`` is part of the policy: ``pi(y_t | .) = softmax(logits / tau)`` over the
allowed tokens, and scores are those of this tempered, masked distribution. An immediate
``<eos>`` (empty answer) is a legal output with reward 0.

Checkpoints are in :mod:`.checkpoints`.

Device: CUDA when available, else CPU, unless ``device`` is given. Nothing global is changed;
initialisation draws from a ``torch.Generator``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from ..._validation import as_float, as_int
from .task import BOS, EOS, PAD, CharTokenizer, Question, verify_answer

__all__ = ["TransformerConfig", "TinyTransformer", "TransformerPolicy", "resolve_device"]



def resolve_device(device=None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of :class:`TinyTransformer` (pre-norm GPT blocks, learned positions).

    Attributes
    ----------
    vocab_size : int
    context_len : int
        Longest sequence (prompt block plus answer) the model sees.
    d_model, n_layers, n_heads, d_ff : int
        Width, depth, attention heads and feed-forward width.
    """

    vocab_size: int
    context_len: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.ff2 = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        n, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).split(d, dim=-1)  # each (n, t, d)
        q, k, v = (u.view(n, t, self.n_heads, d // self.n_heads).transpose(1, 2) for u in (q, k, v))
        att = q @ k.transpose(-1, -2) / math.sqrt(d // self.n_heads)  # (n, heads, t, t)
        causal = torch.ones(t, t, dtype=torch.bool, device=h.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        mixed = (att @ v).transpose(1, 2).reshape(n, t, d)
        h = h + self.proj(mixed)
        return h + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(h))))


class TinyTransformer(nn.Module):
    """Causal character transformer: tokens ``(n, t)`` -> next-token logits ``(n, t, vocab)``.

    No dropout and no in-place state, so ``torch.func`` transforms apply directly.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.context_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        h = self.tok(tokens) + self.pos(positions)  # (n, t, d)
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln(h))  # (n, t, vocab)


class TransformerPolicy:
    """Autoregressive answer policy ``pi_theta(Y | x)`` around a :class:`TinyTransformer`.

    Parameters
    ----------
    model : TinyTransformer
    prompt_width : int
        Characters of the longest prompt; prompts are left-padded with ``<pad>`` to this width
        after ``<bos>``, so every prompt block has ``prompt_width + 1`` tokens.
    max_answer_len : int
        Longest answer in characters.
    temperature : float, default 1.0
    constrained : bool, default True
        Constrained (digits, then forced ``<eos>``) or free decoding; see the module notes.
    max_new_tokens : int, optional
        Generation length limit; ``max_answer_len + 1`` by default (the only allowed value when
        ``constrained``).
    """

    def __init__(self, model: TinyTransformer, prompt_width: int, max_answer_len: int,
                 temperature: float = 1.0, constrained: bool = True,
                 max_new_tokens: int | None = None) -> None:
        if not isinstance(model, TinyTransformer):
            raise TypeError(f"`model` must be a TinyTransformer, got {type(model).__name__}")
        self.model = model
        self.tokenizer = CharTokenizer()
        self.prompt_width = as_int(prompt_width, "prompt_width", 1)
        self.max_answer_len = as_int(max_answer_len, "max_answer_len", 1)
        self.temperature = as_float(temperature, "temperature", low=1e-3)
        self.constrained = bool(constrained)
        default_new = self.max_answer_len + 1
        self.max_new_tokens = default_new if max_new_tokens is None else as_int(
            max_new_tokens, "max_new_tokens", 1)
        if self.constrained and self.max_new_tokens != default_new:
            raise ValueError(f"`max_new_tokens` must be max_answer_len + 1 = {default_new} for "
                             f"constrained decoding, got {self.max_new_tokens}")
        if self.prompt_width + 1 + self.max_new_tokens > model.cfg.context_len:
            raise ValueError(f"`model.cfg.context_len` = {model.cfg.context_len} is shorter than "
                             f"prompt block plus answer = {self.prompt_width + 1 + self.max_new_tokens}")
        self._allowed_cpu = self._allowed_table()

    # ------------------------------------------------------------------ basic properties
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def dim(self) -> int:
        """Number of parameters d (length of a score vector)."""
        return sum(p.numel() for p in self.model.parameters())

    def to(self, device=None, dtype: torch.dtype | None = None) -> TransformerPolicy:
        """Move the model in place (``device=None`` picks CUDA when available); returns self."""
        self.model.to(device=resolve_device(device), dtype=dtype)
        return self

    def _allowed_table(self) -> torch.Tensor:
        # (max_new_tokens, vocab) boolean: which token may be drawn at each answer step
        vocab = self.model.cfg.vocab_size
        allowed = torch.zeros(self.max_new_tokens, vocab, dtype=torch.bool)
        if self.constrained:
            allowed[: self.max_answer_len, list(self.tokenizer.digit_ids)] = True
            allowed[:, EOS] = True
        else:
            allowed[:, :] = True
            allowed[:, [PAD, BOS]] = False
        return allowed

    # ------------------------------------------------------------------ encoding
    def encode_prompts(self, questions) -> torch.Tensor:
        """Prompt blocks ``(n, prompt_width + 1)``: ``<bos>``, left padding, prompt characters.

        ``questions`` are :class:`Question` objects or prompt strings; a character outside the
        vocabulary or a prompt longer than ``prompt_width`` raises ValueError.
        """
        rows = []
        for q in questions:
            text = q.text if isinstance(q, Question) else q
            ids = self.tokenizer.encode(text)
            if len(ids) > self.prompt_width:
                raise ValueError(f"prompt {text!r} has {len(ids)} characters, more than "
                                 f"`prompt_width` = {self.prompt_width}")
            rows.append([BOS] + [PAD] * (self.prompt_width - len(ids)) + ids)
        if not rows:
            raise ValueError("`questions` must not be empty")
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def rewards(self, questions, answers: torch.Tensor) -> np.ndarray:
        """Binary rewards ``(n,)`` of ``answers (n, max_new_tokens)`` for ``questions`` (n)."""
        answers = answers.detach().cpu().tolist()
        if len(answers) != len(questions):
            raise ValueError(f"`answers` has {len(answers)} rows for {len(questions)} questions")
        return np.array([verify_answer(q, a, self.tokenizer) for q, a in zip(questions, answers)])

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Draw one answer per prompt row: ``(n, P)`` -> ``(n, max_new_tokens)`` token ids.

        Positions after ``<eos>`` hold ``<pad>``. ``generator`` is a ``torch.Generator`` on the
        policy's device and is the only source of randomness.
        """
        if not isinstance(generator, torch.Generator):
            raise TypeError("`generator` must be a torch.Generator")
        allowed = self._allowed_cpu.to(prompts.device)
        seq = prompts
        done = torch.zeros(prompts.shape[0], dtype=torch.bool, device=prompts.device)
        out = []
        for step in range(self.max_new_tokens):
            logits = self.model(seq)[:, -1, :] / self.temperature  # (n, vocab)
            logits = logits.masked_fill(~allowed[step], float("-inf"))
            nxt = torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)[:, 0]
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
            done = done | (nxt == EOS)
            out.append(nxt)
            seq = torch.cat([seq, nxt[:, None]], dim=1)
        return torch.stack(out, dim=1)

    # ------------------------------------------------------------------ log-probabilities
    def _token_logp(self, logits: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        # logits (..., A, vocab) predicting answers (..., A); returns (...,) summed log-prob
        allowed = self._allowed_cpu.to(logits.device)
        logp = (logits / self.temperature).masked_fill(~allowed, float("-inf")).log_softmax(-1)
        ended = torch.cumsum((answers == EOS).long(), dim=-1) - (answers == EOS).long()
        live = ended == 0  # (..., A) positions up to and including the first <eos>
        safe = torch.where(live, answers, torch.full_like(answers, EOS))
        picked = logp.gather(-1, safe[..., None])[..., 0]
        return torch.where(live, picked, torch.zeros_like(picked)).sum(-1)

    def _seq_logp(self, params, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        tokens = torch.cat([prompts, answers], dim=-1)[..., :-1]
        logits = functional_call(self.model, params, (tokens,))
        return self._token_logp(logits[..., prompts.shape[-1] - 1:, :], answers)

    def log_prob(self, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """Sequence log-probabilities ``(n,)``, differentiable in the model parameters.

        Summed over answer tokens up to and including ``<eos>`` (no length normalisation).
        """
        _check_pair(prompts, answers, self.max_new_tokens)
        params = dict(self.model.named_parameters())
        return self._seq_logp(params, prompts, answers)

    def scores(self, prompts: torch.Tensor, answers: torch.Tensor,
               chunk_size: int = 128) -> torch.Tensor:
        """Per-sample scores ``W_i = grad log pi(Y_i | x_i)``, shape ``(n, d)``, by vmap.

        Parameters are flattened in ``model.named_parameters()`` order. ``chunk_size`` rows are
        processed at a time, bounding memory at about ``chunk_size * d`` numbers of activations
        and gradients.
        """
        _check_pair(prompts, answers, self.max_new_tokens)
        chunk_size = as_int(chunk_size, "chunk_size", 1)
        n = prompts.shape[0]
        out = torch.empty(n, self.dim, dtype=self.dtype, device=self.device)  # (n, d)
        for start, stop, grads in self._score_chunks(prompts, answers, chunk_size):
            offset = 0
            for g in grads:  # copy into place: no (n, d) temporaries
                width = g[0].numel()
                out[start:stop, offset:offset + width] = g.reshape(stop - start, width)
                offset += width
        return out

    def _score_chunks(self, prompts, answers, chunk_size):
        # yields (start, stop, [per-parameter gradients (m, *param.shape)]) for m = stop - start rows
        params = {k: v.detach() for k, v in self.model.named_parameters()}

        def one(p, prompt, answer):
            return self._seq_logp(p, prompt[None], answer[None])[0]

        per_sample = vmap(grad(one), in_dims=(None, 0, 0))
        for start in range(0, prompts.shape[0], chunk_size):
            stop = min(start + chunk_size, prompts.shape[0])
            grads = per_sample(params, prompts[start:stop], answers[start:stop])
            yield start, stop, list(grads.values())

    def score_moments(self, prompts: torch.Tensor, answers: torch.Tensor, weights: torch.Tensor,
                      chunk_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
        """Squared score norms and weighted score sums without storing the ``(n, d)`` scores.

        Parameters
        ----------
        prompts, answers : Tensor (n, P), (n, A)
        weights : Tensor (k, n)
            Coefficients ``c``; row ``j`` of the second output is ``sum_i c_ji W_i``.
        chunk_size : int

        Returns
        -------
        sq_norm : Tensor (n,) float64
            ``||W_i||^2``.
        weighted : Tensor (k, d) float64
            ``c @ W``, flattened like :meth:`scores`.
        """
        _check_pair(prompts, answers, self.max_new_tokens)
        chunk_size = as_int(chunk_size, "chunk_size", 1)
        n = prompts.shape[0]
        if weights.ndim != 2 or weights.shape[1] != n:
            raise ValueError(f"`weights` must have shape (k, {n}), got {tuple(weights.shape)}")
        weights = weights.to(device=self.device, dtype=self.dtype)
        sq_norm = torch.zeros(n, dtype=torch.float64, device=self.device)
        weighted = torch.zeros(weights.shape[0], self.dim, dtype=torch.float64, device=self.device)
        for start, stop, grads in self._score_chunks(prompts, answers, chunk_size):
            offset = 0
            for g in grads:
                flat = g.flatten(1)  # (m, width)
                width = flat.shape[1]
                sq_norm[start:stop] += (flat * flat).sum(dim=1).double()
                weighted[:, offset:offset + width] += (weights[:, start:stop] @ flat).double()
                offset += width
        return sq_norm, weighted

    def scores_by_loop(self, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """The same ``(n, d)`` scores by one backward pass per sequence (slow reference route)."""
        _check_pair(prompts, answers, self.max_new_tokens)
        params = list(self.model.parameters())
        rows = []
        for i in range(prompts.shape[0]):
            logp = self.log_prob(prompts[i:i + 1], answers[i:i + 1])[0]
            grads = torch.autograd.grad(logp, params)
            rows.append(torch.cat([g.reshape(-1) for g in grads]))
        return torch.stack(rows)

    def flat_grad(self, scalar: torch.Tensor) -> torch.Tensor:
        """Gradient ``(d,)`` of a scalar built from this policy, flattened like :meth:`scores`."""
        grads = torch.autograd.grad(scalar, list(self.model.parameters()))
        return torch.cat([g.reshape(-1) for g in grads])

    # ------------------------------------------------------------------ enumeration
    def enumerate_outputs(self) -> torch.Tensor:
        """Every possible output ``(M, max_new_tokens)`` of a constrained policy.

        All digit strings of length ``0..max_answer_len`` followed by ``<eos>``:
        ``M = sum_k 10^k`` (111 for two digits). Free decoding has too many outputs to list.
        """
        if not self.constrained:
            raise ValueError("exact enumeration needs `constrained` decoding")
        rows = []
        digits = self.tokenizer.digit_ids
        for length in range(self.max_answer_len + 1):
            for body in itertools.product(digits, repeat=length):
                pad = [PAD] * (self.max_new_tokens - length - 1)
                rows.append(list(body) + [EOS] + pad)
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def answer_tokens(self, questions) -> torch.Tensor:
        """The correct outputs ``(n, max_new_tokens)``: canonical answer, ``<eos>``, padding."""
        rows = []
        for q in questions:
            ids = self.tokenizer.encode(str(q.answer)) + [EOS]
            if len(ids) > self.max_new_tokens:
                raise ValueError(f"answer {q.answer} does not fit in `max_new_tokens` = "
                                 f"{self.max_new_tokens}")
            rows.append(ids + [PAD] * (self.max_new_tokens - len(ids)))
        return torch.tensor(rows, dtype=torch.long, device=self.device)


def _check_pair(prompts: torch.Tensor, answers: torch.Tensor, max_new_tokens: int) -> None:
    if prompts.ndim != 2 or answers.ndim != 2 or prompts.shape[0] != answers.shape[0]:
        raise ValueError(f"`prompts` (n, P) and `answers` (n, A) must share n, got "
                         f"{tuple(prompts.shape)} and {tuple(answers.shape)}")
    if answers.shape[1] != max_new_tokens:
        raise ValueError(f"`answers` must have {max_new_tokens} columns, got {answers.shape[1]}")
