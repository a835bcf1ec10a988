"""The maximiser set of a KL-regularised log-linear bandit, by damped Newton ascent (C19-C23).

Kept apart from :mod:`.loglinear` so each module stays small; :meth:`LogLinearBandit.optimum`
calls :func:`newton_optimum`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Optimum", "newton_optimum"]


@dataclass(frozen=True)
class Optimum:
    """The maximiser set ``Theta* = theta + span(null_basis)`` and its local structure.

    Attributes
    ----------
    theta : ndarray (d,)
        One maximiser (the one whose null-space component is that of the starting point).
    value : float
        ``J* = max J``.
    basis : ndarray (d, r)
        ``Q``: orthonormal basis of the identifiable directions (``Q^T Q = I``).
    null_basis : ndarray (d, d - r)
        Orthonormal basis of ``N``, the directions that leave the policy unchanged.
    hessian : ndarray (r, r)
        ``H* = Q^T H(theta*) Q``, negative definite.
    curvature : ndarray (r,)
        ``Lambda``: eigenvalues of ``-H*``, ascending.
    grad_norm : float
        ``||g(theta*)||`` reached by the solver.
    """

    theta: np.ndarray
    value: float
    basis: np.ndarray
    null_basis: np.ndarray
    hessian: np.ndarray
    curvature: np.ndarray
    grad_norm: float

    def distance(self, theta) -> np.ndarray:
        """``d(theta, Theta*) = ||Q^T (theta - theta*)||`` for ``theta`` of shape ``(..., d)``."""
        return np.linalg.norm((np.asarray(theta) - self.theta) @ self.basis, axis=-1)


def newton_optimum(bandit, theta_init=None, tol: float = 1e-12, max_iter: int = 200) -> Optimum:
    """A maximiser of ``J`` by damped Newton ascent on the identifiable directions.

    See :meth:`ustat_rl.policies.loglinear.LogLinearBandit.optimum`.
    """
    if bandit.kl_weight == 0.0 and theta_init is None:
        raise ValueError("`optimum` needs kl_weight > 0 or an explicit `theta_init` near an "
                         "interior maximiser")
    theta = bandit.ref_theta.copy() if theta_init is None else bandit._theta(theta_init).copy()
    q = bandit.identifiable_basis
    value = bandit.objective(theta)
    for _ in range(max_iter):
        grad = q.T @ bandit.grad(theta)  # (r,)
        if np.linalg.norm(grad) <= tol:
            break
        hess = q.T @ bandit.hessian(theta) @ q
        eig = np.linalg.eigvalsh(hess)
        step = -np.linalg.solve(hess, grad) if eig.max() < 0 else grad  # Newton or gradient
        t = 1.0
        while t > 1e-12:
            trial = theta + t * (q @ step)
            trial_value = bandit.objective(trial)
            if trial_value >= value - 1e-15:
                break
            t *= 0.5
        theta, value = trial, trial_value
    hess = q.T @ bandit.hessian(theta) @ q
    grad_norm = float(np.linalg.norm(bandit.grad(theta)))
    curvature = np.sort(np.linalg.eigvalsh(-hess))
    if grad_norm > max(tol, 1e-9) or curvature[0] <= 0:
        raise ValueError(f"Newton ascent did not reach a strict local maximiser "
                         f"(||g|| = {grad_norm:.2e}, min eig(-H*) = {curvature[0]:.2e})")
    return Optimum(theta, value, q, bandit.null_basis, hess, curvature, grad_norm)
