"""Forward-mode sketches: ``<W_i, r>`` for a batch by one ``torch.func.jvp`` per direction (C31).

For any model (no hook needs to know its layers), direction ``r`` of ``R`` is drawn on the model's
device, entry-wise i.i.d. with mean 0 and variance ``1/k`` over every trainable parameter, and one
forward-mode pass of the batch's log-probabilities gives column ``r`` of ``R W_i`` for every row:
rows of ``R`` are i.i.d. (a dense projection, ``E[R^T R] = I``), so the jackknife over projection
rows applies column by column. Cost: ``k`` forward passes with tangents, memory of one.

Attention runs through PyTorch's math kernel of ``scaled_dot_product_attention`` here (the fused
CPU and CUDA kernels have no forward-mode derivative): the same function, composed of
differentiable operations, so any model that calls it (every Hugging Face family's ``sdpa``
attention) has a jvp route; its cost is that of the unfused kernel.

Directions come from ``torch.Generator(device).manual_seed(child_int(seed, 0))``, drawn in order (direction,
then parameter in ``named_parameters`` order): bitwise reproducible on one device type; CPU and
CUDA generators differ, so a CUDA run uses another (equally distributed) ``R``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.func import jvp
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..seeding import child_int
from .sequence import sequence_log_probs, trainable_parameters
from .spec import SketchSpec, as_spec

__all__ = ["jvp_sketch_scores", "jvp_projection_matrix"]


def _directions(params: dict, k: int, seed: int, kind: str):
    """Yield ``{name: tangent}`` for each of the ``k`` directions, scaled by ``1/sqrt(k)``."""
    first = next(iter(params.values()))
    # hashed like every other seed of the package: nearby seeds give unrelated streams
    gen = torch.Generator(device=first.device).manual_seed(child_int(seed, 0))
    scale = 1.0 / math.sqrt(k)
    for _ in range(k):
        tangent = {}
        for name, p in params.items():
            if kind == "gaussian":
                draw = torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)
            else:
                draw = 2.0 * torch.randint(0, 2, p.shape, generator=gen, device=p.device,
                                           dtype=p.dtype) - 1.0
            tangent[name] = draw * scale
        yield tangent


def jvp_sketch_scores(model, tokens, target_mask, spec: SketchSpec) -> torch.Tensor:
    """``R W_i`` for every row of a padded batch by ``k`` forward-mode passes (C31).

    Parameters
    ----------
    model : torch.nn.Module
        Any causal LM; scores are taken with dropout off (``eval`` mode, restored afterwards).
    tokens, target_mask : torch.Tensor (b, t)
        As in :func:`ustat_rl.scores.sequence.sequence_log_probs`.
    spec : SketchSpec
        ``dimension`` directions (projection rows, i.i.d.: ``blocks`` is not used) drawn from
        ``seed`` with entries of law ``kind``; the result in ``dtype`` (default: the model's;
        the passes run in the model's precision); scores at ``temperature``.

    Returns
    -------
    torch.Tensor (b, k) on the model's device
    """
    spec = as_spec(spec)
    k, seed, kind, temperature = spec.dimension, spec.seed, spec.kind, spec.temperature
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}
    if not (isinstance(tokens, torch.Tensor) and tokens.ndim == 2
            and tuple(target_mask.shape) == tuple(tokens.shape)):
        raise ValueError("`tokens` and `target_mask` must be tensors of the same shape (b, t)")
    first = next(iter(params.values()))
    dtype = first.dtype if spec.dtype is None else spec.dtype
    out = torch.zeros(tokens.shape[0], k, dtype=dtype, device=first.device)

    def log_probs(p):
        return sequence_log_probs(model, tokens, target_mask, temperature, params=p)

    was_training = model.training
    model.eval()
    handles = [module.register_forward_hook(_padding_stops_tangent)
               for module in model.modules()
               if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None]
    try:
        with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):
            for r, tangent in enumerate(_directions(params, k, seed, kind)):
                out[:, r] = jvp(log_probs, (params,), (tangent,))[1].to(dtype)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return out


def _padding_stops_tangent(module, inputs, output):
    """An embedding's ``padding_idx`` row gets no gradient from that embedding in autograd
    (every other route's convention, and the trainer's); forward mode would carry its tangent,
    so the gathered padding rows are detached (a tied head's use of the row is untouched)."""
    pad = (inputs[0] == module.padding_idx)[..., None]
    return torch.where(pad, output.detach(), output)


def jvp_projection_matrix(model, spec: SketchSpec) -> np.ndarray:
    """The ``(k, d)`` matrix :func:`jvp_sketch_scores` applies with ``spec``, materialised
    (small ``d``)."""
    spec = as_spec(spec)
    k, seed, kind = spec.dimension, spec.seed, spec.kind
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}
    rows = [torch.cat([t.reshape(-1) for t in tangent.values()]).to("cpu", torch.float64)
            for tangent in _directions(params, k, seed, kind)]
    return torch.stack(rows).numpy()
