"""The projectors of the factored sketch, each with its test and its formula side by side (C31).

A projector says which modules it covers (:meth:`Projector.covers`, from what the module's own
trainable tensors do in its forward pass, never from its class name) and how it projects their
per-sample gradients (:meth:`Projector.callback`: run by the forward hook, it reads what the
projector needs of the module's inputs and returns the function that, given the gradient of the
module's output in the backward pass, adds each sample's projected gradient to the sketch).
:data:`PROJECTORS` lists them fastest first; the first whose test passes covers the module, and ``"module"`` covers any.
:mod:`ustat_rl.scores.coverage` applies them to a model; :mod:`ustat_rl.scores._sketcher` holds
the accumulator the formulas add to.
"""

from __future__ import annotations

import math
import sys
import weakref
from contextlib import contextmanager
from functools import partial

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["Projector", "PROJECTORS", "projector_for", "PROBE_SEED", "global_shape"]

#: Seed of the random probes that check a projector's structure at run time (not of the sketch).
PROBE_SEED = 20260301

#: Module -> its tensors whose Jacobian was found diagonal: the structure of a module's forward
#: does not change between calls, so the probe runs once per module and tensor.
_DIAGONAL = weakref.WeakKeyDictionary()


@contextmanager
def _swapped(module, values: dict):
    """``module``'s own tensors replaced by ``values`` for the calls inside (what
    ``torch.func.functional_call`` does for one module, without walking the module tree)."""
    saved = {name: module._parameters[name] for name in values}
    try:
        module._parameters.update(values)
        yield
    finally:
        module._parameters.update(saved)


def _run(module, *args, **kwargs):
    """``module`` run again by a projector on tensors it swapped in (:func:`_swapped`). DeepSpeed
    ZeRO-3's hooks on a module it manages (marked ``ds_id``) would gather the module's
    parameters, and the swapped tensors are none: there its ``forward`` runs without hooks
    (children keep theirs: their parameters are DeepSpeed's)."""
    return module.forward(*args, **kwargs) if hasattr(module, "ds_id") else module(*args, **kwargs)


def global_shape(p) -> tuple:
    """The shape of parameter ``p`` in the unsharded model. DeepSpeed ZeRO-3 leaves a partitioned
    parameter an empty tensor outside its gather and keeps the shape in ``ds_shape``; FSDP2's
    ``DTensor`` parameters report the global shape themselves."""
    return tuple(p.ds_shape) if hasattr(p, "ds_shape") else tuple(p.shape)


def _whole(module, attr: str, param=None) -> torch.Tensor:
    """The value ``module`` holds for its tensor ``attr`` now, whole and detached. Under FSDP2
    (``fully_shard``) a module in its forward holds the all-gathered tensor, not the sharded
    parameter; a tensor still sharded (a ``DTensor``) is gathered here. With ``param`` (the
    parameter as the model lists it) a held copy other than ``param`` itself is cloned: FSDP2
    frees its all-gathered copy after the forward, and the caller keeps the value for the
    backward. DeepSpeed ZeRO-3 holds the gathered value in the parameter itself during the
    module's forward (the hooks run before its release) and frees it afterwards: cloned too."""
    value = module._parameters[attr]
    if hasattr(value, "full_tensor"):  # a DTensor: one all-gather
        return value.full_tensor().detach()
    keep = param is not None and (value is not param or hasattr(value, "ds_id"))
    return value.detach().clone() if keep else value.detach()


def _detach(tree):
    return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, tree)


def _rows(tree, n: int, rows: slice):
    """Slice every tensor whose leading dimension is ``n``; others are shared by all rows."""
    return tree_map(lambda t: t[rows] if isinstance(t, torch.Tensor) and t.ndim and
                    t.shape[0] == n else t, tree)


def _leading(tree) -> int:
    """Leading dimension of the first tensor in ``tree`` (1 when there is none)."""
    leaves = [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor) and t.ndim]
    return leaves[0].shape[0] if leaves else 1


def _agrees(value, expected) -> bool:
    """``value == expected`` to half the square root of the unit roundoff, relative to the
    largest entry: far above rounding, far below the O(1) error of a wrong structure."""
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    tol = 0.5 * math.sqrt(torch.finfo(expected.dtype).eps) * max(scale, 1e-30)
    return value.shape == expected.shape and float((value - expected).abs().max()) <= tol


def _conv1d_type():
    """Hugging Face's ``Conv1D`` if ``transformers`` is already imported (never imports it)."""
    module = sys.modules.get("transformers.pytorch_utils")
    return getattr(module, "Conv1D", None)


class Projector:
    """One way a module's own tensors enter the forward pass: its test and its formula."""

    name = ""

    def covers(self, module, own) -> bool:
        """Whether this projector's formula is exact for ``module``, whose own trainable tensors are
        ``own`` ``[(attribute, parameter), ...]``."""
        raise NotImplementedError

    def callback(self, sk, module, own, args, kwargs, output):
        """Run by the forward hook: the function of the output's gradient that adds each
        sample's projected gradient to the sketcher ``sk``."""
        raise NotImplementedError


class Linear(Projector):
    """A matrix applied to the last axis of the input (``nn.Linear`` whose ``forward`` is its
    own, and Hugging Face's ``Conv1D``, the same map with the matrix stored transposed): the
    per-sample gradient ``sum_t u_t x_t^T`` is projected through its Kronecker factors."""

    name = "linear"

    def covers(self, module, own) -> bool:
        conv1d = _conv1d_type()
        linear = (conv1d is not None and type(module).forward is conv1d.forward) or \
            (isinstance(module, nn.Linear) and type(module).forward is nn.Linear.forward)
        return linear and {name for name, _ in own} <= {"weight", "bias"} \
            and len(global_shape(module.weight)) == 2

    def callback(self, sk, module, own, args, kwargs, output):
        x = args[0]
        transposed = not isinstance(module, nn.Linear)  # Conv1D stores (in, out)
        own = dict(own)  # the parameters as listed (keys of the factors), not what is held now
        spec = sk.factors.get(id(own.get("weight")))
        side = None if spec is None else \
            sk.flat(sk.expand(x.detach()), x.shape[-1]) @ (spec[1] if transposed else spec[2]).T
        return partial(self.gradient, sk, own.get("bias"), spec, side, transposed)

    @staticmethod
    def gradient(sk, bias, spec, side, transposed, grad):
        g = sk.flat(grad, grad.shape[-1])  # (B, T, out)
        if spec is not None:
            A, B = spec[1], spec[2]
            if transposed:
                sk.acc += sk.outer(side, g @ B.T)
            else:
                sk.acc += sk.outer(g @ A.T, side)
        sk.add_vector(bias, g.sum(dim=1))


class Embedding(Projector):
    """Rows of a table gathered by integer ids, times any scale that does not depend on the
    table (``nn.Embedding`` and subclasses such as Gemma's scaled embedding, checked at run
    time; a failed check is refused in one line): the token's column of ``A`` times the
    projected output gradient. ``padding_idx`` rows get no gradient, as in autograd."""

    name = "embedding"

    def covers(self, module, own) -> bool:
        return isinstance(module, nn.Embedding) and module.max_norm is None \
            and {name for name, _ in own} == {"weight"} and not module.sparse

    def callback(self, sk, module, own, args, kwargs, output):
        ids = args[0]
        scale = None
        if type(module).forward is not nn.Embedding.forward:
            scale = self.gather_scale(sk, module, ids, output)
        return partial(self.gradient, sk, module, sk.factors.get(id(dict(own)["weight"])),
                       sk.expand(ids), scale)

    @staticmethod
    def gather_scale(sk, module, ids, output):
        """``s`` with ``module(ids) = s * weight[ids]`` for every table: read off a table of
        ones and checked on the real table and on a random table of constant rows (stride-0
        tables, no copy)."""
        w = _whole(module, "weight")
        gen = torch.Generator(device=w.device).manual_seed(PROBE_SEED)
        rows = torch.randn(w.shape[0], generator=gen, device=w.device, dtype=w.dtype)
        with torch.no_grad(), sk.quiet():
            with _swapped(module, {"weight": torch.ones_like(w[:1, :1]).expand(w.shape)}):
                scale = _run(module, ids)
            with _swapped(module, {"weight": rows[:, None].expand(w.shape)}):
                probe = _run(module, ids)
            plain = F.embedding(ids, w)
        scale = sk.expand(scale)
        if not (_agrees(output.detach(), sk.expand(scale * plain))
                and _agrees(sk.expand(probe), scale * sk.expand(rows[ids])[..., None])):
            raise ValueError(f"`model`: embedding module {type(module).__name__} is not a scaled "
                             f"row gather; the factored sketch cannot cover it (use route='jvp')")
        return scale

    @staticmethod
    def gradient(sk, module, spec, ids, scale, grad):
        if spec is None:
            return
        A, B = spec[1], spec[2]
        g = grad if scale is None else grad * scale.to(grad.dtype)
        ids = ids.reshape(sk.batch, -1)
        left = A.T[ids]  # (B, T, m k_o): the token's column of A
        if module.padding_idx is not None:  # autograd gives the padding row no gradient
            left = left * (ids != module.padding_idx)[..., None].to(left.dtype)
        sk.acc += sk.outer(left, sk.flat(g, g.shape[-1]) @ B.T)


class Module(Projector):
    """Anything else, the general fallback: the exact per-sample gradient of the module's own
    tensors, recomputed sample by sample from its saved inputs and the gradient of its output,
    then projected. Exact for any module whose rows do not interact; one extra forward and
    backward of the module per sample."""

    name = "module"

    def covers(self, module, own) -> bool:
        return True

    def callback(self, sk, module, own, args, kwargs, output):
        values = {attr: _whole(module, attr, p) for attr, p in own}  # kept for the backward
        return partial(self.gradient, sk, module, own, values, _detach(args), _detach(kwargs))

    @staticmethod
    def gradient(sk, module, own, values, args, kwargs, grad):
        """Exact per-sample gradients of the module's own tensors, one sample at a time, at the
        ``values`` they held in the forward pass."""
        n = _leading((args, kwargs))
        per_sample = [[] for _ in own]
        for b in range(sk.batch):
            a_b = _rows(args, n, slice(b, b + 1)) if n == sk.batch else args
            k_b = _rows(kwargs, n, slice(b, b + 1)) if n == sk.batch else kwargs
            with torch.enable_grad(), sk.quiet():
                theta = {attr: value.detach().requires_grad_() for attr, value in values.items()}
                with _swapped(module, theta):
                    out = _run(module, *a_b, **k_b)
                grads = torch.autograd.grad(out, list(theta.values()),
                                            grad_outputs=grad[b:b + 1].reshape(out.shape),
                                            allow_unused=True)
            for rows, value, g in zip(per_sample, values.values(), grads):
                rows.append(torch.zeros_like(value) if g is None else g)
        for (_, p), rows in zip(own, per_sample):
            sk.add_projection(p, torch.stack(rows))


class Elementwise(Projector):
    """1-D tensors of the output's width whose Jacobian is diagonal along the last axis: every
    normalisation's scale and shift (``LayerNorm``, ``RMSNorm`` in any spelling, Gemma's
    ``(1 + w)``). The diagonal is one forward-mode pass of the module alone, checked at run
    time against a random direction; a module that fails the check takes :class:`Module`."""

    name = "elementwise"

    def covers(self, module, own) -> bool:
        shapes = [global_shape(p) for _, p in own]
        return all(len(shape) == 1 for shape in shapes) and len(set(shapes)) == 1

    def callback(self, sk, module, own, args, kwargs, output):
        args, kwargs = _detach(args), _detach(kwargs)
        diagonals = []
        for attr, p in own:
            diagonal = self.diagonal(sk, module, attr, p, args, kwargs, output)
            if diagonal is None:  # not an elementwise map after all: the exact fallback
                return MODULE.callback(sk, module, own, args, kwargs, output)
            diagonals.append((p, diagonal))
        return partial(self.gradient, sk, diagonals)

    def diagonal(self, sk, module, attr, p, args, kwargs, output):
        """``d out / d p`` along the last axis (one forward-mode pass with a tangent of ones),
        or ``None`` when the Jacobian is not diagonal there (checked on the first row against a
        random tangent)."""
        if (output.shape[-1],) != global_shape(p):
            return None
        n = _leading((args, kwargs))
        known = attr in _DIAGONAL.get(module, ())
        value = _whole(module, attr)  # what the module holds now (FSDP2: the gathered tensor)
        try:
            diagonal = self.tangent(sk, module, attr, value, torch.ones_like(value), args, kwargs)
            if not known:
                gen = torch.Generator(device=value.device).manual_seed(PROBE_SEED)
                v = torch.randn(value.shape, generator=gen, device=value.device,
                                dtype=value.dtype)
                probe = self.tangent(sk, module, attr, value, v, _rows(args, n, slice(0, 1)),
                                     _rows(kwargs, n, slice(0, 1)))
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return None
        if not known:
            if not (isinstance(diagonal, torch.Tensor) and isinstance(probe, torch.Tensor)
                    and _agrees(probe, diagonal[:1] * v)):
                return None
            _DIAGONAL.setdefault(module, set()).add(attr)
        return sk.expand(diagonal)

    @staticmethod
    def tangent(sk, module, attr, value, tangent, args, kwargs):
        """The module's output tangent with ``tangent`` on its tensor ``attr`` held at ``value``
        (one forward-mode pass of the module alone), or ``None`` when the output is not a
        tensor."""
        with torch.no_grad(), sk.quiet(), fwAD.dual_level():
            with _swapped(module, {attr: fwAD.make_dual(value, tangent)}):
                out = _run(module, *args, **kwargs)
            if not isinstance(out, torch.Tensor):
                return None
            out = fwAD.unpack_dual(out).tangent
            return None if out is None else out.clone()

    @staticmethod
    def gradient(sk, diagonals, grad):
        width = grad.shape[-1]
        g = sk.flat(grad, width)
        for p, diagonal in diagonals:
            sk.add_vector(p, (g * sk.flat(diagonal, width)).sum(dim=1))


MODULE = Module()

#: The projectors, fastest first; :class:`Module` (``"module"``) is the fallback that covers any.
PROJECTORS: tuple[Projector, ...] = (Linear(), Embedding(), Elementwise(), MODULE)

_BY_NAME = {projector.name: projector for projector in PROJECTORS}


def projector_for(module, own) -> Projector:
    """The first projector of :data:`PROJECTORS` that covers ``module``."""
    return next(projector for projector in PROJECTORS if projector.covers(module, own))


def named(name: str) -> Projector:
    """The projector called ``name``."""
    return _BY_NAME[name]
