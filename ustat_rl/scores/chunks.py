"""Sketched scores of many rows, a chunk at a time: the one loop the monitor and the pilots share.

:func:`sketch_rows` takes the padded rows of a window (a monitor's generation batch, a pilot's
group) and a :class:`~ustat_rl.scores.spec.SketchSpec`, and returns every row's sketched score.
The model-level work is done once for the window (:func:`ustat_rl.scores.factored.hooked`: the
parameters checked whole, each module's projector found, the factors drawn, the hooks
installed, dropout off); each chunk of ``chunk_size`` rows is then one batched forward and
backward pass, so a window's memory is that of one chunk.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

import numpy as np
import torch

from .._validation import as_int
from .factored import hooked
from .forward_sketch import jvp_sketch_scores
from .spec import SketchSpec

__all__ = ["sketch_rows", "CHUNK_ROUTES"]

#: Routes whose sketch takes padded token rows (the dense and full routes take vmapped samples).
CHUNK_ROUTES = ("factored", "jvp")


def sketch_rows(model, tokens: torch.Tensor, target_mask: torch.Tensor, spec: SketchSpec,
                chunk_size: int, route: str = "factored") -> np.ndarray:
    """``R W_i`` for every row of ``tokens``, ``chunk_size`` rows per pass, in float64 on the CPU.

    Parameters
    ----------
    model : torch.nn.Module
    tokens, target_mask : torch.Tensor (n, t)
        Padded rows and each token's weight in the score, as in
        :func:`ustat_rl.scores.sequence.sequence_log_probs`.
    spec : SketchSpec
        The projection (its ``temperature`` is the policy's).
    chunk_size : int
        Rows per batched pass.
    route : {"factored", "jvp"}
        The factored sketch (one backward pass per chunk, the hooks installed once for all
        chunks) or the forward-mode one (``spec.dimension`` forward passes per chunk; its rows
        of ``R`` are i.i.d., so ``spec.blocks`` is not used).

    Returns
    -------
    numpy.ndarray (n, spec.dimension)
    """
    if not isinstance(spec, SketchSpec):
        raise TypeError(f"`spec` must be a SketchSpec, got {type(spec).__name__}")
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    if route not in CHUNK_ROUTES:
        raise ValueError(f"`route` must be one of {CHUNK_ROUTES}, got {route!r}")
    if not (isinstance(tokens, torch.Tensor) and tokens.ndim == 2
            and tuple(target_mask.shape) == tuple(tokens.shape)):
        raise ValueError("`tokens` and `target_mask` must be tensors of the same shape (n, t)")
    jvp = partial(_jvp_pass, model, spec)
    with hooked(model, spec) if route == "factored" else nullcontext(jvp) as sketch:
        parts = [sketch(tokens[s:s + chunk_size], target_mask[s:s + chunk_size])
                 .to("cpu", torch.float64).numpy()
                 for s in range(0, tokens.shape[0], chunk_size)]
    return np.concatenate(parts)


def _jvp_pass(model, spec, tokens, target_mask) -> torch.Tensor:
    return jvp_sketch_scores(model, tokens, target_mask, spec)
