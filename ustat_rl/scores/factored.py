"""Factored (Kronecker) sketches of per-sample scores in one batched backward pass (section 7).

A weight matrix ``theta`` of shape ``(a, b)`` has per-sample gradient ``G_i = sum_t u_t v_t^T``
summed over the positions of sample ``i`` (``u``, ``v`` the layer's output gradient and input, in
the order of the stored tensor). Each of the ``m`` independent blocks of the sketch projects it as
``P = m^(-1/2) A G_i B^T`` with ``A`` ``(k_o, a)`` and ``B`` ``(k_i, b)`` of i.i.d. entries of
mean 0 and variances ``1/k_o`` and ``1/k_i``: ``vec P = m^(-1/2) (A (x) B) vec G_i`` is a
projection of dimension ``k_o k_i = k/m`` with ``E[(A (x) B)^T (A (x) B)] = E[A^T A] (x)
E[B^T B] = I``, so the stacked ``(k, d)`` matrix keeps ``E[R^T R] = I`` and every moment estimate
unbiased (docs/theory.md, C31). It is computed as ``sum_t (A u_t)(B v_t)^T`` from the layer's
inputs and output gradients, never forming ``G_i``. Columns ``g k/m .. (g+1) k/m - 1`` are block
``g``; blocks are independent, columns inside one are not (``Rollouts.sketch_blocks``).

Every trainable parameter is covered, by what it does in the forward pass
(:mod:`ustat_rl.scores.coverage`): matrices applied to inputs through their factors, embedding
rows through the token's column of ``A``, elementwise scales and shifts (every normalisation)
and biases through their exact per-sample gradients times a dense ``N(0, 1/k)`` matrix, and any
other module through the exact per-sample gradient of its own tensors (the fallback,
:func:`uncovered_parameters`), projected by the same factors. A tensor shared by two modules
(a tied embedding and language-model head) has one
pair of factors and both contributions add. The factors are drawn on the CPU in float64 from
``child_int(seed, p, j)`` (``p`` the tensor's index in ``named_parameters``) and moved to the
model's device: they are small (``(m k_o, a)``), and so ``R`` is bitwise the same on every device;
the scores agree across devices to floating-point rounding.

Parameters sharded by FSDP2 (``fully_shard``) are supported (docs/at_scale.md): the factors are
drawn from the global shapes, keyed by the parameters as ``named_parameters`` lists them, and the
projectors read parameter values from what a module holds in its forward (whole under FSDP2), so the
scores are the unsharded model's whatever the number of processes. So are DeepSpeed ZeRO-3's
partitioned parameters (``ds_shape`` their global shape), the hooks running before DeepSpeed's
release.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from functools import lru_cache, partial

import numpy as np
import torch

from .._validation import as_int
from ..seeding import child_int
from ._sketcher import Sketcher
from .coverage import (
    check_supported,
    module_projectors,
    parameter_coverage,
    uncovered_parameters,
    zero3_partitioned,
)
from .projectors import global_shape, named
from .sequence import sequence_log_probs, trainable_parameters
from .spec import FACTORED_KINDS, SketchSpec, as_spec

__all__ = ["FACTORED_KINDS", "block_factors", "uncovered_parameters", "parameter_coverage",
           "factored_sketch_scores", "factored_projection_matrix", "kronecker_projection_matrix",
           "hooked"]

def block_factors(block_dim: int) -> tuple[int, int]:
    """``(k_o, k_i)`` with ``k_o k_i = block_dim`` and ``k_o`` the largest divisor ``<= sqrt``."""
    block_dim = as_int(block_dim, "block_dim", 1)
    k_out = math.isqrt(block_dim)
    while block_dim % k_out:
        k_out -= 1
    return k_out, block_dim // k_out


def _draw(shape, seed: int, kind: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if kind == "gaussian":
        return torch.randn(shape, generator=gen, dtype=torch.float64)
    return 2.0 * torch.randint(0, 2, shape, generator=gen, dtype=torch.float64) - 1.0


def _factors(shapes, k: int, blocks: int, seed: int, kind: str) -> list:
    """Per tensor ``p`` of ``shapes``: ``("matrix", A (m k_o, a), B (m k_i, b))`` for a 2-D
    tensor, else ``("vector", D (k, numel))``; float64 on the CPU, scaled so that ``A`` has
    variance ``1/k_o``, ``B`` ``1/k_i`` and ``D`` ``1/k`` (the ``m^(-1/2)`` is applied to the
    product)."""
    k_out, k_in = block_factors(k // blocks)
    out = []
    for p, shape in enumerate(shapes):
        if len(shape) == 2:
            a, b = shape
            A = _draw((blocks * k_out, a), child_int(seed, p, 0), kind) / math.sqrt(k_out)
            B = _draw((blocks * k_in, b), child_int(seed, p, 1), kind) / math.sqrt(k_in)
            out.append(("matrix", A, B))
        else:
            D = _draw((k, math.prod(shape)), child_int(seed, p, 2), kind) / math.sqrt(k)
            out.append(("vector", D))
    return out


@lru_cache(maxsize=2)
def _device_factors(shapes: tuple, k: int, blocks: int, seed: int, kind: str, device, dtype
                    ) -> tuple:
    """:func:`_factors` on ``device`` in ``dtype``, kept for the next call with the same
    arguments (a monitor or a pilot sketches chunk after chunk with one ``R``): drawing them
    again is most of a small model's sketch. Read only."""
    return tuple(tuple(x if isinstance(x, str) else x.to(device, dtype) for x in spec)
                 for spec in _factors(shapes, k, blocks, seed, kind))


def kronecker_projection_matrix(shapes, spec: SketchSpec) -> np.ndarray:
    """The ``(k, d)`` factored projection ``spec`` of tensors of the given ``shapes``,
    materialised.

    Block ``g`` of a 2-D tensor is ``m^(-1/2) A_g (x) B_g`` acting on the row-major tensor; 1-D
    tensors get dense ``N(0, 1/k)`` columns; tensors are concatenated in order. This is the
    matrix :func:`factored_sketch_scores` applies (:func:`factored_projection_matrix`), and a
    factored projection of known full scores (e.g. a softmax bandit's ``(P, K)`` logit table).

    Examples
    --------
    >>> kronecker_projection_matrix([(3, 2), (2,)], SketchSpec(8, seed=0, blocks=2)).shape
    (8, 8)
    """
    spec = as_spec(spec)
    k, blocks, kind = spec.dimension, spec.blocks, spec.kind
    shapes = [tuple(as_int(n, "shapes", 1) for n in shape) for shape in shapes]
    if not shapes or any(len(shape) not in (1, 2) for shape in shapes):
        raise ValueError(f"`shapes` must be a non-empty list of 1-D or 2-D shapes, got {shapes}")
    k_out, k_in = block_factors(k // blocks)
    parts = []
    for factor in _factors(shapes, k, blocks, spec.seed, kind):
        if factor[0] == "vector":
            parts.append(factor[1])
            continue
        A, B = factor[1], factor[2]
        parts.append(torch.cat([torch.kron(A[g * k_out:(g + 1) * k_out],
                                           B[g * k_in:(g + 1) * k_in]) for g in range(blocks)])
                     / math.sqrt(blocks))
    return torch.cat(parts, dim=1).numpy()


def factored_projection_matrix(model, spec: SketchSpec) -> np.ndarray:
    """The ``(k, d)`` matrix :func:`factored_sketch_scores` applies with ``spec``, materialised
    (small ``d``).

    Columns follow ``named_parameters`` (the layout of full scores), each tensor row-major.
    """
    spec = as_spec(spec)
    check_supported(model)
    shapes = [global_shape(p) for p in trainable_parameters(model).values()]
    return kronecker_projection_matrix(shapes, spec)


def _check_rows(tokens, target_mask) -> None:
    if not (isinstance(tokens, torch.Tensor) and tokens.ndim == 2
            and tuple(target_mask.shape) == tuple(tokens.shape)):
        raise ValueError("`tokens` and `target_mask` must be tensors of the same shape (b, t)")


@contextmanager
def hooked(model, spec: SketchSpec):
    """The model made ready to sketch, once for many passes: its parameters checked (whole, or
    sharded by FSDP2's ``fully_shard``), each module's projector found, the factors drawn
    and a hook installed on every module that owns trainable tensors, dropout off. Yields ``sketch(tokens, target_mask) -> (b, k)``, one
    batched backward pass per call; the hooks are removed and the mode restored on exit."""
    check_supported(model)
    params = trainable_parameters(model)
    first = next(iter(params.values()))
    dtype = first.dtype if spec.dtype is None else spec.dtype
    shapes = tuple(global_shape(p) for p in params.values())
    factors = dict(zip((id(p) for p in params.values()),
                       _device_factors(shapes, spec.dimension, spec.blocks, spec.seed, spec.kind,
                                       first.device, dtype)))
    sketcher = Sketcher(factors, spec.dimension, spec.blocks, block_factors(spec.block_dim),
                        dtype, first.device)
    first_hooks = zero3_partitioned(model)  # before DeepSpeed's hook frees the gathered values
    handles = [module.register_forward_hook(partial(sketcher.hook, named(projector), own),
                                            with_kwargs=True, prepend=first_hooks)
               for module, projector, own in module_projectors(model)]
    was_training = model.training
    model.eval()
    try:
        yield partial(_sketch_pass, model, sketcher, spec.temperature)
    finally:
        for handle in handles:
            handle.remove()
        sketcher.release()
        model.train(was_training)


def _sketch_pass(model, sketcher, temperature, tokens, target_mask) -> torch.Tensor:
    """``R W_i`` of the rows of one padded batch: one forward and one backward pass."""
    _check_rows(tokens, target_mask)
    sketcher.begin(tokens.shape[0])
    try:
        with torch.enable_grad():
            total = sequence_log_probs(model, tokens, target_mask, temperature).sum()
            sketcher.closed = True  # a recomputation in the backward (checkpointing) is not new
            if sketcher.gradless:
                raise ValueError(f"`model`: modules {sorted(set(sketcher.gradless))[:3]} ran "
                                 f"with gradients off inside the forward pass (reentrant "
                                 f"gradient checkpointing?); their scores would be lost")
            if not sketcher.roots:
                raise ValueError("`model` has no trainable module whose output the backward "
                                 "pass can start from")
            grads = torch.autograd.grad(total, [out for out, _ in sketcher.roots],
                                        allow_unused=True)
        for (_, callback), grad in zip(sketcher.roots, grads):
            if grad is not None:
                callback(grad)
    finally:
        sketcher.release()
    return sketcher.acc.detach()


def factored_sketch_scores(model, tokens, target_mask, spec: SketchSpec) -> torch.Tensor:
    """``R W_i`` for every row of a padded batch, in one backward pass (docs/theory.md C31).

    Parameters
    ----------
    model : torch.nn.Module
        Causal LM; every trainable parameter is covered (:mod:`ustat_rl.scores.coverage`; the
        ones :func:`uncovered_parameters` lists take the exact per-sample fallback).
        Scores are taken with dropout off (``eval`` mode, restored afterwards).
    tokens, target_mask : torch.Tensor (b, t)
        As in :func:`ustat_rl.scores.sequence.sequence_log_probs`; rows must not interact
        (no batch norm).
    spec : SketchSpec
        ``dimension`` projection rows ``k`` drawn from ``seed`` in ``blocks`` independent
        factored blocks of ``k/m`` rows each (``k_o k_i = k/m`` by :func:`block_factors`; the
        jackknife over projections resamples blocks), factor entries of law ``kind`` (scaled to
        variance ``1/k_o``, ``1/k_i``), projections and result in ``dtype`` (default: the
        model's; the model itself runs in its own precision), scores at ``temperature``.

    Returns
    -------
    torch.Tensor (b, k) on the model's device
    """
    spec = as_spec(spec)
    _check_rows(tokens, target_mask)
    with hooked(model, spec) as sketch:
        return sketch(tokens, target_mask)
