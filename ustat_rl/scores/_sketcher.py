"""The accumulator behind :func:`ustat_rl.scores.factored.factored_sketch_scores` (C31).

One forward hook per module that owns trainable tensors calls :meth:`Sketcher.hook` with the
module's projector (:mod:`ustat_rl.scores.projectors`, where each projector's test and formula
live). In the forward pass the projector reads what it needs of the module's input; in the
backward pass its callback, on the module's output gradient, adds each sample's projected gradient to ``acc``
``(B, k)``. Projections run in ``dtype`` with mixed precision off. The hooks stay on for a whole
window; :meth:`Sketcher.begin` starts each pass (one chunk of rows) afresh and
:meth:`Sketcher.release` drops the pass's graph.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from functools import partial

import torch
from torch.utils._pytree import tree_flatten


class Sketcher:
    """Forward hooks that add each sample's projected gradient to ``acc`` ``(batch, k)``."""

    def __init__(self, factors: dict, k: int, blocks: int, block_shape, dtype, device):
        self.k, self.m = k, blocks
        self.k_out, self.k_in = block_shape
        self.dtype, self.device = dtype, device
        self.factors = factors  # {id(parameter): spec}, on ``device`` in ``dtype`` already
        self.busy = False  # a projector recomputing its module: hooks of its children stay quiet
        self.begin(0)

    def begin(self, batch: int) -> None:
        """Start a pass over ``batch`` rows: a fresh accumulator, no roots, the forward open."""
        self.acc = torch.zeros(batch, self.k, dtype=self.dtype, device=self.device)
        self.roots = []  # (output, callback) where no input needs grad: taken explicitly
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
        """Inside: the hooks stay quiet (a projector running its module again)."""
        busy, self.busy = self.busy, True
        try:
            yield
        finally:
            self.busy = busy

    @property
    def batch(self) -> int:
        return self.acc.shape[0]

    # ------------------------------------------------------------------ forward
    def hook(self, projector, own, module, args, kwargs, output):
        if self.busy or self.closed:
            return None
        device = output.device.type if isinstance(output, torch.Tensor) else "cpu"
        with torch.autocast(device, enabled=False):
            return self._hook(projector, own, module, args, kwargs, output)

    def _hook(self, projector, own, module, args, kwargs, output):
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
        callback = partial(self._full_precision,
                           projector.callback(self, module, own, args, kwargs, output))
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

    # -------------------------------------------------------------- for the projectors' formulas
    def flat(self, x, width):
        """``x`` as ``(B, positions, width)`` in the projections' precision."""
        return x.reshape(self.batch, -1, width).to(self.dtype)

    def expand(self, x):
        """``x`` broadcast to the batch along its leading dimension (a row shared by all)."""
        return x.expand(self.batch, *x.shape[1:]) if x.shape[0] != self.batch else x

    def outer(self, left, right):
        """``m^(-1/2) sum_t left_t right_t^T`` per sample and block: ``(B, k)``."""
        n = left.shape[0]
        left = left.reshape(n, -1, self.m, self.k_out)
        right = right.reshape(n, -1, self.m, self.k_in)
        return torch.einsum("btmo,btmi->bmoi", left, right).reshape(n, self.k) / math.sqrt(self.m)

    def add_vector(self, param, per_sample):
        """Add ``D_p`` times the exact per-sample gradients ``(B, numel)`` of a 1-D ``param``."""
        if param is not None and id(param) in self.factors:
            self.acc += per_sample.to(self.dtype) @ self.factors[id(param)][1].T

    def add_projection(self, param, per_sample):
        """Add the projection of exact per-sample gradients ``(B, *param.shape)``."""
        spec = self.factors[id(param)]
        if spec[0] == "vector":
            self.add_vector(param, per_sample.reshape(self.batch, -1))
            return
        A = spec[1].reshape(self.m, self.k_out, -1)  # (m, k_o, a)
        B = spec[2].reshape(self.m, self.k_in, -1)  # (m, k_i, b)
        left = torch.einsum("moa,nab->nmob", A, per_sample.to(self.dtype))
        self.acc += torch.einsum("nmob,mib->nmoi", left, B).reshape(self.batch, self.k) \
            / math.sqrt(self.m)
