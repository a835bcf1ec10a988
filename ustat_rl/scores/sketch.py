"""Random projections of per-sample scores: ``R W`` with ``E[R^T R] = I`` (docs/theory.md section 7).

Every kernel of section 7 is quadratic in the scores, so replacing ``W`` by ``R W`` keeps each
moment estimate unbiased, at the price of extra variance of order ``1/k``. Two routes:

* :func:`projection_matrix` and :func:`project_scores` for small models whose full scores are
  known (numpy, e.g. :class:`ustat_rl.policies.softmax.SoftmaxBandit`);
* :func:`sketch_scores` for any torch policy given as ``log_prob(params, sample) -> scalar``:
  per-sample gradients of a chunk of samples (``torch.func``) are multiplied by random
  directions regenerated from the seed for each parameter tensor and column chunk, so no
  ``d x k`` matrix ever exists. :func:`full_scores` returns the unprojected scores.

The directions of parameter tensor ``p`` (in the order of ``params``) and column chunk ``c`` come
from ``torch.Generator().manual_seed(child_int(seed, p, c))`` on the CPU, so a seed gives the same
``R`` on every device; :func:`torch_projection_matrix` materialises it for small ``d``. This route
is the reference; for language models, :mod:`ustat_rl.scores.factored` (one backward pass) and
:mod:`ustat_rl.scores.forward_sketch` (one jvp per row) avoid per-sample gradients.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.func import grad, vmap

from .._validation import as_int
from ..seeding import child_int
from .spec import SketchSpec, as_spec

__all__ = ["projection_matrix", "project_scores", "sketch_scores", "full_scores",
           "torch_projection_matrix", "COLUMN_CHUNK"]

#: Parameter entries per block of regenerated random directions: the block is ``(k, COLUMN_CHUNK)``.
COLUMN_CHUNK = 1 << 16


def projection_matrix(dim, spec: SketchSpec) -> np.ndarray:
    """The ``(k, dim)`` matrix ``R`` of ``spec``: i.i.d. rows, ``E[R^T R] = I`` (section 7).

    ``k = spec.dimension`` rows drawn by ``numpy.random.default_rng(spec.seed)`` with entries
    ``N(0, 1/k)`` (``spec.kind`` ``"gaussian"``) or ``+-1/sqrt(k)`` (``"rademacher"``); the rows
    are i.i.d., so ``spec.blocks`` plays no part (as in the dense and jvp routes).

    Examples
    --------
    >>> R = projection_matrix(3, SketchSpec(4, seed=0, kind="rademacher"))
    >>> R.shape, float(abs(R[0, 0]))
    ((4, 3), 0.5)
    """
    dim = as_int(dim, "dim", 1)
    spec = as_spec(spec)
    k, rng = spec.dimension, np.random.default_rng(spec.seed)
    if spec.kind == "gaussian":
        return rng.standard_normal((k, dim)) / math.sqrt(k)
    return (2.0 * rng.integers(0, 2, size=(k, dim)) - 1.0) / math.sqrt(k)


def project_scores(score, spec: SketchSpec) -> np.ndarray:
    """``score @ R^T`` for the :func:`projection_matrix` of ``spec``: ``(n, d) -> (n, k)``."""
    score = np.asarray(score, dtype=np.float64)
    if score.ndim != 2 or score.shape[1] == 0:
        raise ValueError(f"`score` must have shape (n, d) with d >= 1, got {score.shape}")
    R = projection_matrix(score.shape[1], spec)
    return score @ R.T  # (n, k)


# ---------------------------------------------------------------------- torch
def _directions(k: int, numel: int, seed: int, p: int, c: int, kind: str, column_chunk: int,
                dtype) -> torch.Tensor:
    """The ``(k, m)`` block of ``R`` for parameter tensor ``p``, column chunk ``c``."""
    m = min(column_chunk, numel - c * column_chunk)
    gen = torch.Generator().manual_seed(child_int(seed, p, c))
    if kind == "gaussian":
        block = torch.randn((k, m), generator=gen, dtype=torch.float64)
    else:
        block = 2.0 * torch.randint(0, 2, (k, m), generator=gen, dtype=torch.float64) - 1.0
    return (block / math.sqrt(k)).to(dtype)


def _check_policy(log_prob, params) -> dict:
    if not callable(log_prob):
        raise TypeError("`log_prob` must be callable as log_prob(params, sample) -> scalar")
    if not isinstance(params, dict) or not params:
        raise TypeError("`params` must be a non-empty dict of name -> torch.Tensor")
    for name, value in params.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"`params` entry {name!r} must be a torch.Tensor, got "
                            f"{type(value).__name__}")
    return {name: value.detach() for name, value in params.items()}


def _n_samples(samples) -> int:
    leaves = samples if isinstance(samples, (tuple, list)) else (samples,)
    sizes = {int(leaf.shape[0]) if isinstance(leaf, torch.Tensor) and leaf.ndim else -1
             for leaf in leaves}
    if len(sizes) != 1 or min(sizes) < 1:
        raise ValueError("`samples` must be a tensor or tuple of tensors sharing a non-zero "
                         "leading dimension")
    return sizes.pop()


def _chunk(samples, start: int, stop: int):
    if isinstance(samples, (tuple, list)):
        return tuple(leaf[start:stop] for leaf in samples)
    return samples[start:stop]


def _per_sample_grads(log_prob, params: dict, samples, chunk_size: int):
    """Yield ``(start, stop, {name: (c, *shape)})`` per chunk of samples."""
    n = _n_samples(samples)
    per_sample = vmap(grad(log_prob), in_dims=(None, 0))
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        yield start, stop, per_sample(params, _chunk(samples, start, stop))


def sketch_scores(log_prob, params, samples, spec: SketchSpec, chunk_size: int = 64,
                  column_chunk: int = COLUMN_CHUNK) -> np.ndarray:
    """``R W_i`` for every sample, without a ``d x k`` matrix (docs/theory.md section 7).

    Parameters
    ----------
    log_prob : callable
        ``log_prob(params, sample) -> scalar tensor``, differentiable by ``torch.func.grad``; the
        score of a sample is its gradient in ``params``. For a whole sequence, the sum of its
        token log-probabilities (docs/theory.md section 1).
    params : dict of str to torch.Tensor
        Parameters at which scores are taken (on CUDA if the model is).
    samples : torch.Tensor or tuple of torch.Tensor
        Leading dimension ``n``; ``log_prob`` receives one slice.
    spec : SketchSpec
        ``dimension`` projection rows drawn from ``seed`` (store it as ``Rollouts.sketch_seed``)
        with entries of law ``kind``; the rows are i.i.d. (``blocks`` is not used).
    chunk_size : int
        Samples per ``vmap`` call: memory ``O(chunk_size d + k column_chunk)``.
    column_chunk : int
        Parameter entries per regenerated block of directions. ``R`` is determined by ``seed``,
        ``kind``, the parameter shapes in order and ``column_chunk``: keep it fixed to reproduce
        a projection (the block costs ``8 k column_chunk`` bytes while it is generated).

    Returns
    -------
    ndarray (n, k), float64
    """
    params = _check_policy(log_prob, params)
    spec = as_spec(spec)
    k, seed, kind = spec.dimension, spec.seed, spec.kind
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    column_chunk = as_int(column_chunk, "column_chunk", 1)
    n = _n_samples(samples)
    out = np.zeros((n, k))
    for start, stop, grads in _per_sample_grads(log_prob, params, samples, chunk_size):
        acc = None
        for p, name in enumerate(params):
            flat = grads[name].reshape(stop - start, -1)  # (c, numel_p)
            numel = flat.shape[1]
            for c in range(math.ceil(numel / column_chunk)):
                block = _directions(k, numel, seed, p, c, kind, column_chunk, flat.dtype)
                cols = flat[:, c * column_chunk:c * column_chunk + block.shape[1]]
                part = cols @ block.to(flat.device).T  # (c, k)
                acc = part if acc is None else acc + part
        out[start:stop] = acc.detach().to("cpu", torch.float64).numpy()
    return out


def full_scores(log_prob, params, samples, chunk_size: int = 64) -> np.ndarray:
    """The per-sample scores ``W_i``, flattened in the order of ``params``: ``(n, d)``."""
    params = _check_policy(log_prob, params)
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    rows = []
    for _, _, grads in _per_sample_grads(log_prob, params, samples, chunk_size):
        flat = torch.cat([grads[name].reshape(grads[name].shape[0], -1) for name in params], 1)
        rows.append(flat.detach().to("cpu", torch.float64).numpy())
    return np.concatenate(rows, axis=0)


def torch_projection_matrix(params, spec: SketchSpec,
                            column_chunk: int = COLUMN_CHUNK) -> np.ndarray:
    """The ``(k, d)`` matrix :func:`sketch_scores` applies with ``spec``, materialised (small
    ``d`` only)."""
    if not isinstance(params, dict) or not params:
        raise TypeError("`params` must be a non-empty dict of name -> torch.Tensor")
    spec = as_spec(spec)
    k, seed, kind = spec.dimension, spec.seed, spec.kind
    column_chunk = as_int(column_chunk, "column_chunk", 1)
    blocks = []
    for p, value in enumerate(params.values()):
        numel = value.numel()
        for c in range(math.ceil(numel / column_chunk)):
            blocks.append(_directions(k, numel, seed, p, c, kind, column_chunk, torch.float64))
    return torch.cat(blocks, dim=1).numpy()
