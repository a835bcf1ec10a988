"""Whole-sequence log-probabilities of a causal language model over a padded batch (section 1).

The score of an answer is the gradient of ``log pi(answer | prompt)``, the sum over the answer's
tokens (up to and including the end token) of their log-probabilities. Every route of
:mod:`ustat_rl.pilot` (full scores, dense, factored and forward-mode sketches) differentiates the
one function here, so the policy they score is the same.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch.func import functional_call

__all__ = ["model_logits", "sequence_log_probs", "trainable_parameters", "functional_safe"]


def model_logits(model, tokens: torch.Tensor, params=None) -> torch.Tensor:
    """Logits ``(b, t, vocab)`` of ``model`` at ``tokens`` ``(b, t)``, optionally at ``params``.

    Accepts a Hugging Face ``*ForCausalLM`` (output with ``.logits``) or any module returning
    the tensor.
    """
    out = model(tokens) if params is None else functional_call(model, params, (tokens,))
    return out.logits if hasattr(out, "logits") else out


def sequence_log_probs(model, tokens: torch.Tensor, target_mask: torch.Tensor,
                       temperature: float = 1.0, params=None) -> torch.Tensor:
    """``sum_t mask[b, t] log pi(tokens[b, t] | tokens[b, :t])`` for every row ``b``: ``(b,)``.

    Parameters
    ----------
    model : torch.nn.Module
    tokens : torch.Tensor (b, t) of int
        Prompt and answer of each row, right-padded after the end token (causal attention, so
        padding never changes an earlier position).
    target_mask : torch.Tensor (b, t)
        1 at the answer tokens that count (up to and including the end token), 0 at the prompt
        and the padding; column 0 is never a target.
    temperature : float
        Sampling temperature, part of the policy.
    params : dict, optional
        Parameters for ``torch.func.functional_call`` (``None``: the module's own).
    """
    logits = model_logits(model, tokens[:, :-1], params) / temperature  # (b, t - 1, vocab)
    picked = torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, 1:, None])[..., 0]
    return torch.sum(picked * target_mask[:, 1:].to(picked.dtype), dim=1)


def trainable_parameters(model) -> dict:
    """``{name: parameter}`` of the trainable parameters, tied tensors listed once (the order of
    ``named_parameters``, which fixes the layout of full scores)."""
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("`model` has no trainable parameters (requires_grad=True)")
    return params


@contextmanager
def functional_safe(model):
    """Lift Hugging Face's ``enable_input_require_grads`` hook for a ``torch.func`` pass.

    Gradient checkpointing of a model (``gradient_checkpointing_enable``, and TRL's
    ``gradient_checkpointing=True``) installs a forward hook that calls ``requires_grad_`` on the
    embeddings' output, which ``vmap`` and ``grad`` refuse; the hook changes nothing the full and
    dense routes compute, so it is removed for the pass and put back.
    """
    if getattr(model, "_require_grads_hook", None) is None:
        yield
        return
    model.disable_input_require_grads()
    try:
        yield
    finally:
        model.enable_input_require_grads()
