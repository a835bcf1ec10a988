r"""The Gram matrix of a pilot's gradient estimates, held as its ``(P, k)`` factor (section 7).

A pilot's Gram matrix of ``g(x_a)`` estimates is ``<g_hat_a, g_hat_b>`` off the diagonal (unbiased
for distinct prompts, which are independent) and the unbiased ``||g(x_a)||^2`` on it:

.. math::

    \Gamma = F F^\top - \operatorname{diag}(\|F_a\|^2) + \operatorname{diag}(d_a),

with ``F`` the ``(P, k)`` per-prompt gradient means and ``d`` the diagonal. Stored dense it takes
``P^2`` floats (3.2 GB at 20,000 prompts) although every quantity of the theory needs only its
products with vectors, ``Gamma x = F (F^T x) - ||F_a||^2 x + d x``, which cost ``O(P k)``.
:class:`FactoredGram` holds ``F`` and ``d``, computes those products without forming ``Gamma``,
and turns into the dense matrix wherever an array is asked for (indexing, ``np.asarray``, any
other numpy operation), so code written for a dense Gram matrix gets the same values.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FactoredGram"]


class FactoredGram:
    """``F F^T`` with its diagonal replaced by ``diagonal``: a symmetric ``(P, P)`` matrix held
    in ``O(P k)`` memory (module docstring).

    Parameters
    ----------
    factor : ndarray (P, k)
        ``F``, whose rows' inner products are the off-diagonal entries.
    diagonal : ndarray (P,)
        The diagonal.
    """

    def __init__(self, factor, diagonal):
        factor = np.array(factor, dtype=np.float64)
        diagonal = np.array(diagonal, dtype=np.float64)
        if factor.ndim != 2:
            raise ValueError(f"`factor` must be 2-D (P, k), got shape {factor.shape}")
        if diagonal.shape != (factor.shape[0],):
            raise ValueError(f"`diagonal` must have shape ({factor.shape[0]},), got "
                             f"{diagonal.shape}")
        own = np.einsum("pk,pk->p", factor, factor)  # (P,) ||F_a||^2
        for array in (factor, diagonal, own):
            array.setflags(write=False)
        self.factor, self.diagonal, self._shift = factor, diagonal, diagonal - own

    shape = property(lambda self: (self.factor.shape[0],) * 2)
    ndim = 2
    dtype = np.dtype(np.float64)
    T = property(lambda self: self)  # symmetric

    @property
    def size(self) -> int:
        return self.shape[0] ** 2

    def is_finite(self) -> bool:
        """Whether every entry is finite (checked on ``F`` and the diagonal; a product of finite
        rows can still overflow, which :meth:`dot` would show as ``inf``)."""
        return bool(np.all(np.isfinite(self.factor)) and np.all(np.isfinite(self.diagonal)))

    def dot(self, x) -> np.ndarray:
        """``Gamma x`` for ``x`` of shape ``(P,)`` or ``(P, n)``, in ``O(P k n)``."""
        x = np.asarray(x, dtype=np.float64)
        shift = self._shift if x.ndim == 1 else self._shift[:, None]
        return self.factor @ (self.factor.T @ x) + shift * x

    def restrict(self, index) -> "FactoredGram":
        """The Gram matrix of the prompts ``index`` (``Gamma[ix_(index, index)]``)."""
        return FactoredGram(self.factor[index], self.diagonal[index])

    def __array__(self, dtype=None, copy=None):
        dense = self.factor @ self.factor.T
        dense[np.diag_indices_from(dense)] = self.diagonal
        return dense if dtype is None else dense.astype(dtype)

    def copy(self) -> np.ndarray:
        """The dense matrix (a new array)."""
        return np.asarray(self)

    def __getitem__(self, key):
        return np.asarray(self)[key]

    def __matmul__(self, other):
        other = np.asarray(other)
        return self.dot(other) if other.ndim in (1, 2) else NotImplemented

    def __rmatmul__(self, other):
        other = np.asarray(other)
        if other.ndim == 1:
            return self.dot(other)
        return self.dot(other.T).T if other.ndim == 2 else NotImplemented

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # x @ Gamma (numpy's matmul ufunc) without forming Gamma; any other operation on the
        # dense matrix, so that it gives the values a dense Gram matrix would
        if ufunc is np.matmul and method == "__call__" and not kwargs and len(inputs) == 2:
            left, right = inputs
            return self.__rmatmul__(left) if right is self else self.__matmul__(right)
        inputs = tuple(np.asarray(v) if isinstance(v, FactoredGram) else v for v in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __repr__(self) -> str:
        return f"FactoredGram(P={self.shape[0]}, k={self.factor.shape[1]})"
