"""A PL test objective with a Gaussian gradient oracle: the optimisation theory's exact problem.

:class:`NoisyQuadratic` implements the problem protocol of :mod:`ustat_rl.training.algorithm1`
(``draws_per_step``, ``sample_gradient``, ``objective_many``) with closed-form constants, beside
the bandit policies whose moments are exact too (docs/theory.md C14, C15).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from .._validation import as_finite_array, as_float

__all__ = ["NoisyQuadratic"]


class NoisyQuadratic:
    """PL test objective ``J = J* - (theta - theta*)^T A (theta - theta*)/2`` with a null space.

    The gradient oracle returns ``g(theta) + xi`` with ``xi ~ N(0, Gamma)`` independent across
    steps, so ``M = sup MSE = tr Gamma`` (Lemma 6, docs/theory.md C14, C15). With ``A`` positive
    semi-definite, ``J`` is ``L``-smooth with ``L = lambda_max(A)`` and PL with
    ``mu = lambda_min^+(A)`` (C12, C13); the maximisers form ``theta* + null(A)``.

    Parameters
    ----------
    curvature : array_like (d, d)
        ``A``, symmetric positive semi-definite and not zero.
    optimum : array_like (d,)
        One maximiser ``theta*``.
    noise_cov : array_like (d, d)
        ``Gamma``, symmetric positive semi-definite.
    value : float
        ``J*``.

    Examples
    --------
    >>> q = NoisyQuadratic([[2.0, 0.0], [0.0, 0.0]], [0.0, 0.0], [[1.0, 0.0], [0.0, 0.0]])
    >>> q.smoothness, q.pl_constant, q.rank
    (2.0, 2.0, 1)
    """

    def __init__(self, curvature, optimum, noise_cov, value=0.0):
        a = as_finite_array(curvature, "curvature", ndim=(2,))
        d = a.shape[0]
        if a.shape != (d, d) or not np.allclose(a, a.T, atol=1e-12):
            raise ValueError(f"`curvature` must be a symmetric square matrix, got shape {a.shape}")
        eig, vec = np.linalg.eigh(a)
        tol = 1e-10 * max(1.0, abs(eig).max())
        if eig.min() < -tol or eig.max() <= tol:
            raise ValueError("`curvature` must be positive semi-definite and not zero")
        opt = as_finite_array(optimum, "optimum", ndim=(1,))
        gam = as_finite_array(noise_cov, "noise_cov", ndim=(2,))
        if opt.shape != (d,) or gam.shape != (d, d):
            raise ValueError(f"`optimum` must have shape ({d},) and `noise_cov` ({d}, {d})")
        geig, gvec = np.linalg.eigh((gam + gam.T) / 2)
        if geig.min() < -1e-10 * max(1.0, abs(geig).max()):
            raise ValueError("`noise_cov` must be positive semi-definite")
        self.curvature, self.optimum, self.noise_cov = a, opt, gam
        self.value = as_float(value, "value")
        self.dim = d
        keep = eig > tol
        self.identifiable_basis = vec[:, keep]  # (d, r)  Q
        self.null_basis = vec[:, ~keep]
        self.rank = int(keep.sum())
        self.smoothness = float(eig.max())
        self.pl_constant = float(eig[keep].min())
        self._noise_root = gvec * np.sqrt(np.clip(geig, 0.0, None))  # (d, d)  Gamma = R R^T

    def objective(self, theta) -> float:
        u = np.asarray(theta, dtype=np.float64) - self.optimum
        return float(self.value - 0.5 * u @ self.curvature @ u)

    def objective_many(self, theta) -> np.ndarray:
        u = np.asarray(theta, dtype=np.float64) - self.optimum  # (R, d)
        return self.value - 0.5 * np.einsum("rd,de,re->r", u, self.curvature, u)

    def grad(self, theta) -> np.ndarray:
        return -self.curvature @ (np.asarray(theta, dtype=np.float64) - self.optimum)

    def draws_per_step(self, estimator=None, group_size=None, batch_size=None) -> int:
        return self.dim

    def sample_gradient(self, theta, uniforms, estimator=None, group_size=None,
                        batch_size=None) -> np.ndarray:
        # 2^-54 floor: Generator.random can return exactly 0, where ndtri is -inf
        normal = ndtri(np.maximum(uniforms, 2.0**-54))  # (R, d)
        return -(theta - self.optimum) @ self.curvature + normal @ self._noise_root.T


# ---------------------------------------------------------------------- Algorithm 1
