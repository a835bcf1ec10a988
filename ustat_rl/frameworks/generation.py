"""One generation batch as a training loop holds it: this process's prompt and completion tokens
with their masks, checked when made (:class:`Generation`), and its token ids checked against the
policy's vocabulary (:func:`checked_token_ids`), before the monitor does any work
(:meth:`ustat_rl.frameworks.entry.WindowMonitor.step`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Generation", "checked_token_ids"]


def _matrix(value, name: str, rows=None, like=None, integer=False) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.ndim != 2 or value.shape[0] == 0:
        raise ValueError(f"`{name}` must be a 2-D torch.Tensor (rows, tokens) with >= 1 row, got "
                         f"{getattr(value, 'shape', type(value).__name__)}")
    if integer and value.is_floating_point():
        raise ValueError(f"`{name}` must hold integer token ids, got dtype {value.dtype}")
    if rows is not None and value.shape[0] != rows:
        raise ValueError(f"`{name}` has {value.shape[0]} rows; the batch has {rows}")
    if like is not None and tuple(value.shape) != tuple(like.shape):
        raise ValueError(f"`{name}` must have the shape of its ids {tuple(like.shape)}, got "
                         f"{tuple(value.shape)}")
    return value


def _binary_mask(mask: torch.Tensor, name: str) -> torch.Tensor:
    """``mask`` if every entry is 0 or 1; a one-line refusal naming it otherwise."""
    bad = (mask != 0) & (mask != 1)
    if bool(bad.any()):
        row, col = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"`{name}` must hold 0 and 1 only (1 on real tokens), got "
                         f"{mask[row, col].item()!r} at row {row}, column {col}")
    return mask


def _vocabulary(model) -> int | None:
    """Rows of the model's token embedding (its vocabulary), ``None`` when it has none: the
    input embedding of a Hugging Face model, else the first embedding module."""
    get = getattr(model, "get_input_embeddings", None)
    embedding = get() if callable(get) else None
    if not isinstance(embedding, torch.nn.Embedding):
        embedding = next((m for m in model.modules() if isinstance(m, torch.nn.Embedding)), None)
    return None if embedding is None else int(embedding.num_embeddings)


def _checked_ids(ids: torch.Tensor, name: str, vocabulary: int | None, mask=None) -> None:
    """Refuse token ids (those under ``mask``, all without one) below 0 or past the vocabulary."""
    values = ids if mask is None else ids[mask.bool()]
    if values.numel() == 0:
        return
    low, high = int(values.min()), int(values.max())
    if low < 0:
        raise ValueError(f"`{name}` holds a negative token id ({low})")
    if vocabulary is not None and high >= vocabulary:
        raise ValueError(f"`{name}` holds token id {high}, beyond the model's vocabulary of "
                         f"{vocabulary} tokens (ids 0..{vocabulary - 1})")


@dataclass(frozen=True)
class Generation:
    """One generation batch's tokens as a loop holds them (this process's rows), checked when
    made; the monitor takes it with the batch's rewards (:meth:`WindowMonitor.step`).

    Attributes
    ----------
    prompt_ids, prompt_mask : torch.Tensor (n, p)
        The prompts, padded on either side; the mask is 1 on real tokens.
    completion_ids, completion_mask : torch.Tensor (n, t)
        The completions, right-padded; the mask is 1 on the tokens the loss counts.
    token_weights : torch.Tensor (n, t), optional
        Each token's weight in the score (default ``completion_mask``; e.g. times an
        importance ratio).
    group_ids : array_like (n,), optional
        Each row's prompt (anything comparable); default a hash of its prompt tokens. Rows of a
        group must be contiguous blocks of ``group_size``.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    token_weights: torch.Tensor | None = None
    group_ids: object = None

    def __post_init__(self):
        prompt_ids = _matrix(self.prompt_ids, "prompt_ids", integer=True)
        n = prompt_ids.shape[0]
        prompt_mask = _matrix(self.prompt_mask, "prompt_mask", like=prompt_ids)
        completion_ids = _matrix(self.completion_ids, "completion_ids", rows=n, integer=True)
        completion_mask = _matrix(self.completion_mask, "completion_mask", like=completion_ids)
        _binary_mask(prompt_mask, "prompt_mask")
        _binary_mask(completion_mask, "completion_mask")
        empty = torch.nonzero(prompt_mask.sum(dim=1) == 0).flatten()
        if empty.numel():
            raise ValueError(f"`prompt_mask` row {int(empty[0])} is all zero ({empty.numel()} of "
                             f"{n} rows): a completion would be scored without its prompt")
        if self.token_weights is not None:
            _matrix(self.token_weights, "token_weights", like=completion_ids)
        if self.group_ids is not None and np.asarray(self.group_ids).shape[:1] != (n,):
            raise ValueError(f"`group_ids` must hold {n} ids, one per completion")

    @property
    def rows(self) -> int:
        """``n``, this process's completions."""
        return int(self.prompt_ids.shape[0])


def checked_token_ids(generation: Generation, model) -> None:
    """Refuse, in one line naming the field, token ids of ``generation`` below 0 or past the
    vocabulary of ``model`` (prompt ids under their mask, every completion id)."""
    vocabulary = _vocabulary(model)
    _checked_ids(generation.prompt_ids, "prompt_ids", vocabulary, generation.prompt_mask)
    _checked_ids(generation.completion_ids, "completion_ids", vocabulary)
