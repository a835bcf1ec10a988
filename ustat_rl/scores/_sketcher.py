"""The forward hooks behind :func:`ustat_rl.scores.factored.factored_sketch_scores` (C31).

One hook per module that owns trainable tensors, dispatched on the rule
:mod:`ustat_rl.scores.coverage` gives it. In the forward pass a hook projects what the rule needs
of the module's input; in the backward pass a callback on the module's output gradient adds each
sample's projected gradient to ``acc`` ``(B, k)``. Projections run in ``dtype`` with mixed
precision off.
"""

from __future__ import annotations

import math
import weakref
from contextlib import contextmanager
from functools import partial

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

#: Seed of the random probes that check a rule's structure at run time (not of the sketch).
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


class Sketcher:
    """Forward hooks that add each sample's projected gradient to ``acc`` ``(batch, k)``."""

    def __init__(self, factors: dict, k: int, blocks: int, block_shape, dtype, device,
                 batch: int):
        self.k, self.m = k, blocks
        self.k_out, self.k_in = block_shape
        self.dtype = dtype
        self.factors = factors  # {id(parameter): spec}, on ``device`` in ``dtype`` already
        self.acc = torch.zeros(batch, k, dtype=dtype, device=device)
        self.roots = []  # (output, callback) where no input needs grad: taken explicitly
        self.busy = False  # a rule recomputing its module: hooks of its children stay quiet
        self.closed = False  # forward over: recomputation in the backward (checkpointing) is seen
        self.gradless = []  # hooked modules that ran with gradients off inside the forward
        self._hooked = set()  # autograd nodes of hooked outputs
        self._memo = {}  # autograd node -> whether a hooked output lies upstream of it
        self._tensor_hooks = []  # handles of the hooks registered on hooked outputs

    def release(self) -> None:
        """Drop every reference into the autograd graph: the tensor hooks, the roots and the
        nodes. A tensor hook that refers back to this object is a cycle through the autograd
        engine that Python's collector cannot see, so without this the graph of every call,
        its saved activations included, would stay in memory for the life of the process."""
        for handle in self._tensor_hooks:
            handle.remove()
        self._tensor_hooks.clear()
        self.roots.clear()
        self._hooked.clear()
        self._memo.clear()

    @contextmanager
    def quiet(self):
        busy, self.busy = self.busy, True
        try:
            yield
        finally:
            self.busy = busy

    @property
    def batch(self) -> int:
        return self.acc.shape[0]

    # ------------------------------------------------------------------ forward
    def hook(self, rule, own, module, args, kwargs, output):
        if self.busy or self.closed:
            return None
        device = output.device.type if isinstance(output, torch.Tensor) else "cpu"
        with torch.autocast(device, enabled=False):
            return self._hook(rule, own, module, args, kwargs, output)

    def _hook(self, rule, own, module, args, kwargs, output):
        if not torch.is_grad_enabled():
            self.gradless.append(type(module).__name__)
            return None
        if not isinstance(output, torch.Tensor):
            raise ValueError(f"`model`: module {type(module).__name__} returns "
                             f"{type(output).__name__}, not a tensor; the factored sketch cannot "
                             f"follow its parameters (use route='jvp')")
        if not output.requires_grad:
            return None
        replaced = None
        if output.shape[0] != self.batch:
            if output.shape[0] != 1:
                raise ValueError(f"`model`: module {type(module).__name__}'s output has leading "
                                 f"dimension {output.shape[0]}, not the batch's {self.batch}")
            # shared across rows (GPT-2's positions): expanded, so the gradient stays per sample
            output = replaced = output.expand(self.batch, *output.shape[1:])
        if rule == "linear":
            callback = self._linear_callback(module, args[0])
        elif rule == "embedding":
            callback = self._embedding_callback(module, args[0], output)
        elif rule == "elementwise":
            callback = self._elementwise_callback(module, own, args, kwargs, output)
        else:
            callback = self._module_callback(module, own, args, kwargs)
        callback = partial(self._full_precision, callback)
        if self._downstream((args, kwargs)):  # another hooked output upstream: a tensor hook
            self._tensor_hooks.append(output.register_hook(callback))
        else:  # the first trainable module on its path: the backward pass takes it explicitly
            self.roots.append((output, callback))
        self._hooked.add(output.grad_fn)
        return replaced

    def _downstream(self, tree) -> bool:
        """Whether a hooked output lies upstream of a tensor of ``tree`` in the autograd graph.
        ``requires_grad`` alone does not say: with ``enable_input_require_grads`` (gradient
        checkpointing of adapters) the frozen embeddings' output requires grad too."""
        return any(isinstance(t, torch.Tensor) and t.grad_fn is not None and
                   self._reaches(t.grad_fn) for t in tree_flatten(tree)[0])

    def _reaches(self, root) -> bool:
        """Memoised depth-first search of the graph below ``root`` for a hooked node: each node
        is visited once per forward pass."""
        memo, stack = self._memo, [(root, False)]
        while stack:
            node, done = stack.pop()
            if node in memo:
                continue
            if node in self._hooked:
                memo[node] = True
                continue
            children = [child for child, _ in node.next_functions if child is not None]
            if done:
                memo[node] = any(memo[child] for child in children)
            else:
                stack.append((node, True))
                stack.extend((child, False) for child in children if child not in memo)
        return memo[root]

    @staticmethod
    def _full_precision(callback, grad):
        with torch.autocast(grad.device.type, enabled=False):
            callback(grad)

    def _flat(self, x, width):
        return x.reshape(self.batch, -1, width).to(self.dtype)

    def _expand(self, x):
        return x.expand(self.batch, *x.shape[1:]) if x.shape[0] != self.batch else x

    def _outer(self, left, right):
        """``m^(-1/2) sum_t left_t right_t^T`` per sample and block: ``(B, k)``."""
        n = left.shape[0]
        left = left.reshape(n, -1, self.m, self.k_out)
        right = right.reshape(n, -1, self.m, self.k_in)
        return torch.einsum("btmo,btmi->bmoi", left, right).reshape(n, self.k) / math.sqrt(self.m)

    def _vector(self, param, per_sample):
        if param is not None and id(param) in self.factors:
            self.acc += per_sample.to(self.dtype) @ self.factors[id(param)][1].T

    def _project(self, param, per_sample):
        """Add the projection of exact per-sample gradients ``(B, *param.shape)``."""
        spec = self.factors[id(param)]
        if spec[0] == "vector":
            self._vector(param, per_sample.reshape(self.batch, -1))
            return
        A = spec[1].reshape(self.m, self.k_out, -1)  # (m, k_o, a)
        B = spec[2].reshape(self.m, self.k_in, -1)  # (m, k_i, b)
        left = torch.einsum("moa,nab->nmob", A, per_sample.to(self.dtype))
        self.acc += torch.einsum("nmob,mib->nmoi", left, B).reshape(self.batch, self.k) \
            / math.sqrt(self.m)

    # ------------------------------------------------------------------ linear
    def _linear_callback(self, module, x):
        transposed = not isinstance(module, nn.Linear)  # Conv1D stores (in, out)
        spec = self.factors.get(id(module.weight))
        side = None if spec is None else \
            self._flat(self._expand(x.detach()), x.shape[-1]) @ (spec[1] if transposed else
                                                                 spec[2]).T
        return partial(self._matrix, module, spec, side, transposed)

    def _matrix(self, module, spec, side, transposed, grad):
        g = self._flat(grad, grad.shape[-1])  # (B, T, out)
        if spec is not None:
            A, B = spec[1], spec[2]
            if transposed:
                self.acc += self._outer(side, g @ B.T)
            else:
                self.acc += self._outer(g @ A.T, side)
        self._vector(module.bias, g.sum(dim=1))

    # ------------------------------------------------------------------ embedding
    def _embedding_callback(self, module, ids, output):
        scale = None
        if type(module).forward is not nn.Embedding.forward:
            scale = self._gather_scale(module, ids, output)
        return partial(self._embedding, module, self._expand(ids), scale)

    def _gather_scale(self, module, ids, output):
        """``s`` with ``module(ids) = s * weight[ids]`` for every table: read off a table of
        ones and checked on the real table and on a random table of constant rows (stride-0
        tables, no copy)."""
        w = module.weight.detach()
        gen = torch.Generator(device=w.device).manual_seed(PROBE_SEED)
        rows = torch.randn(w.shape[0], generator=gen, device=w.device, dtype=w.dtype)
        with torch.no_grad(), self.quiet():
            with _swapped(module, {"weight": torch.ones_like(w[:1, :1]).expand(w.shape)}):
                scale = module(ids)
            with _swapped(module, {"weight": rows[:, None].expand(w.shape)}):
                probe = module(ids)
            plain = F.embedding(ids, w)
        scale = self._expand(scale)
        if not (_agrees(output.detach(), self._expand(scale * plain))
                and _agrees(self._expand(probe), scale * self._expand(rows[ids])[..., None])):
            raise ValueError(f"`model`: embedding module {type(module).__name__} is not a scaled "
                             f"row gather; the factored sketch cannot cover it (use route='jvp')")
        return scale

    def _embedding(self, module, ids, scale, grad):
        spec = self.factors.get(id(module.weight))
        if spec is None:
            return
        A, B = spec[1], spec[2]
        g = grad if scale is None else grad * scale.to(grad.dtype)
        ids = ids.reshape(self.batch, -1)
        left = A.T[ids]  # (B, T, m k_o): the token's column of A
        if module.padding_idx is not None:  # autograd gives the padding row no gradient
            left = left * (ids != module.padding_idx)[..., None].to(left.dtype)
        self.acc += self._outer(left, self._flat(g, g.shape[-1]) @ B.T)

    # ------------------------------------------------------------------ elementwise
    def _elementwise_callback(self, module, own, args, kwargs, output):
        args, kwargs = _detach(args), _detach(kwargs)
        diagonals = []
        for attr, p in own:
            diagonal = self._diagonal(module, attr, p, args, kwargs, output)
            if diagonal is None:  # not an elementwise map after all: the exact fallback
                return self._module_callback(module, own, args, kwargs)
            diagonals.append((p, diagonal))
        return partial(self._elementwise, diagonals)

    def _diagonal(self, module, attr, p, args, kwargs, output):
        """``d out / d p`` along the last axis (one forward-mode pass with a tangent of ones),
        or ``None`` when the Jacobian is not diagonal there (checked on the first row against a
        random tangent)."""
        if output.shape[-1] != p.numel():
            return None
        n = _leading((args, kwargs))
        known = attr in _DIAGONAL.get(module, ())
        try:
            diagonal = self._tangent(module, attr, p, torch.ones_like(p), args, kwargs)
            if not known:
                gen = torch.Generator(device=p.device).manual_seed(PROBE_SEED)
                v = torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)
                probe = self._tangent(module, attr, p, v, _rows(args, n, slice(0, 1)),
                                      _rows(kwargs, n, slice(0, 1)))
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return None
        if not known:
            if not (isinstance(diagonal, torch.Tensor) and isinstance(probe, torch.Tensor)
                    and _agrees(probe, diagonal[:1] * v)):
                return None
            _DIAGONAL.setdefault(module, set()).add(attr)
        return self._expand(diagonal)

    def _tangent(self, module, attr, p, tangent, args, kwargs):
        """The module's output tangent with ``tangent`` on its tensor ``attr`` (one forward-mode
        pass of the module alone), or ``None`` when the output is not a tensor."""
        with torch.no_grad(), self.quiet(), fwAD.dual_level():
            with _swapped(module, {attr: fwAD.make_dual(p.detach(), tangent)}):
                out = module(*args, **kwargs)
            if not isinstance(out, torch.Tensor):
                return None
            out = fwAD.unpack_dual(out).tangent
            return None if out is None else out.clone()

    def _elementwise(self, diagonals, grad):
        width = grad.shape[-1]
        g = self._flat(grad, width)
        for p, diagonal in diagonals:
            self._vector(p, (g * self._flat(diagonal, width)).sum(dim=1))

    # ------------------------------------------------------------------ fallback
    def _module_callback(self, module, own, args, kwargs):
        return partial(self._module, module, own, _detach(args), _detach(kwargs))

    def _module(self, module, own, args, kwargs, grad):
        """Exact per-sample gradients of the module's own tensors, one sample at a time."""
        n = _leading((args, kwargs))
        per_sample = [[] for _ in own]
        for b in range(self.batch):
            a_b = _rows(args, n, slice(b, b + 1)) if n == self.batch else args
            k_b = _rows(kwargs, n, slice(b, b + 1)) if n == self.batch else kwargs
            with torch.enable_grad(), self.quiet():
                theta = {attr: p.detach().requires_grad_() for attr, p in own}
                with _swapped(module, theta):
                    out = module(*a_b, **k_b)
                grads = torch.autograd.grad(out, list(theta.values()),
                                            grad_outputs=grad[b:b + 1].reshape(out.shape),
                                            allow_unused=True)
            for rows, (_, p), g in zip(per_sample, own, grads):
                rows.append(torch.zeros_like(p) if g is None else g)
        for (_, p), rows in zip(own, per_sample):
            self._project(p, torch.stack(rows))
