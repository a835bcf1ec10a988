"""Theorem 8's limit law on a noisy quadratic against the Lyapunov equation solved by hand (C73).

:func:`ustat_rl.theory.limit_law.quadratic_limit_law` gives the weights of the weighted
chi-square limit of ``n Delta_n`` for SGD with rate ``beta/i`` on a
:class:`~ustat_rl.policies.quadratic.NoisyQuadratic` (curvature ``A``, noise covariance
``Gamma``), through scipy's Lyapunov solver in the problem's identifiable basis;
:func:`~ustat_rl.theory.limit_law.eigenbasis_covariance` is the closed form
``Sigma_kl = Omega_kl / (beta (lambda_k + lambda_l) - 1)`` in the eigenbasis of ``Lambda``.
Here both are set against the equation ``(beta Lambda - I/2) Sigma + Sigma (beta Lambda -
I/2) = Omega`` written as the linear system ``(I kron M + M kron I) vec Sigma = vec Omega``,
``M = beta Lambda - I/2``, in a basis of ``A``'s range found here (``A`` of rank 2 in 3
dimensions, so the identifiable basis matters; the basis is turned so that ``Lambda`` is not
diagonal there, and the solve is turned back for the eigenbasis form): the weights are the eigenvalues of
``Lambda Sigma / 2`` (similar to ``Sigma^{1/2} Lambda Sigma^{1/2}/2``), and ``Q Sigma Q^T``,
``Q Omega Q^T`` do not depend on the basis chosen in the range. The paper's printed ``Omega``
(no ``beta^2``) gives ``weights / beta^2``.

All exact (rtol 1e-9: a 4 x 4 linear solve against scipy's Bartels-Stewart), no sampling: no
false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, register

__all__ = ["LAW_EIGENVALUES", "LAW_ROTATION_SEED", "LAW_NOISE", "LAW_RATES", "LAW_RTOL",
           "law_problem", "range_basis", "kronecker_sigma"]

#: ``A``'s eigenvalues (rank 2 of 3), the seed of the rotation that hides them, ``Gamma``.
LAW_EIGENVALUES = (2.0, 0.7, 0.0)
LAW_ROTATION_SEED = 73
LAW_NOISE = ((1.0, 0.3, -0.2), (0.3, 0.8, 0.1), (-0.2, 0.1, 0.5))
#: Learning rates ``beta`` (``beta lambda_min`` = 0.8, 1.4, above 1/2 as Theorem 8 needs).
LAW_RATES = (8.0 / 7.0, 2.0)
#: A 4 x 4 solve and an eigendecomposition against scipy's: rounding only.
LAW_RTOL = 1e-9


def _rotation() -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(LAW_ROTATION_SEED).normal(size=(3, 3)))
    return q


def law_problem():
    """The :class:`~ustat_rl.policies.quadratic.NoisyQuadratic` of the claim."""
    from ...policies.quadratic import NoisyQuadratic

    u = _rotation()
    curvature = u @ np.diag(LAW_EIGENVALUES) @ u.T
    return NoisyQuadratic((curvature + curvature.T) / 2.0, np.zeros(3), np.array(LAW_NOISE))


def range_basis(curvature, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """``(eigenvalues (r,), basis (d, r))`` of the nonzero part of a symmetric matrix."""
    lam, vec = np.linalg.eigh(curvature)
    keep = lam > tol * lam.max()
    return lam[keep], vec[:, keep]


def kronecker_sigma(curvature, omega, beta) -> np.ndarray:
    """``Sigma`` solving ``M Sigma + Sigma M = Omega``, ``M = beta Lambda - I/2``, as one linear
    system in ``vec Sigma``."""
    r = curvature.shape[0]
    m = beta * curvature - 0.5 * np.eye(r)
    system = np.kron(np.eye(r), m) + np.kron(m, np.eye(r))  # (r^2, r^2)
    return np.linalg.solve(system, omega.reshape(-1)).reshape(r, r)


@register("C73", "Beyond the paper: Theorem 8's limit law on a noisy quadratic (weights, the "
          "printed Omega's weights, Sigma and Omega) and the eigenbasis closed form of Sigma "
          "equal the Lyapunov equation solved by hand as a Kronecker linear system",
          "derived (docs/theory.md C73; Theorem 8, C20)",
          "quadratic_limit_law and eigenbasis_covariance on a rank-2 curvature in 3 dimensions "
          "at beta lambda_min = 0.8 and 1.4 against (I kron M + M kron I) vec Sigma = vec Omega "
          "in a basis of A's range found here; all exact (rtol 1e-9)")
def check_c73(ctx) -> list:
    from ...theory.limit_law import eigenbasis_covariance, quadratic_limit_law

    problem = law_problem()
    A, noise = problem.curvature, problem.noise_cov
    lam, eigvec = range_basis(A)
    turn = np.array([[np.cos(0.5), -np.sin(0.5)], [np.sin(0.5), np.cos(0.5)]])
    basis = eigvec @ turn  # (d, r) a basis of the range in which Lambda is not diagonal
    q = problem.identifiable_basis
    checks = []
    for beta in LAW_RATES:
        law = quadratic_limit_law(problem, beta)
        curvature = basis.T @ A @ basis  # (r, r)
        omega = beta**2 * basis.T @ noise @ basis
        sigma = kronecker_sigma(curvature, omega, beta)
        weights = np.sort(np.linalg.eigvals(curvature @ sigma / 2.0).real)[::-1]
        checks.append(check_exact(f"quadratic_limit_law (beta {beta:.4g}): weights and the "
                                  "printed Omega's weights against the Kronecker solve",
                                  [weights, weights / beta**2], [law.weights,
                                                                  law.weights_printed],
                                  rtol=LAW_RTOL, atol=1e-13))
        checks.append(check_exact(f"quadratic_limit_law (beta {beta:.4g}): Sigma and Omega "
                                  "mapped back to the parameter space",
                                  [basis @ sigma @ basis.T, basis @ omega @ basis.T],
                                  [q @ law.sigma @ q.T, q @ law.omega @ q.T],
                                  rtol=LAW_RTOL, atol=1e-13))
        in_eigenbasis = eigvec.T @ noise @ eigvec * beta**2  # Omega in Lambda's eigenbasis
        checks.append(check_exact(f"eigenbasis_covariance (beta {beta:.4g}): the Kronecker "
                                  "solve turned into Lambda's eigenbasis",
                                  turn @ sigma @ turn.T,
                                  eigenbasis_covariance(lam, in_eigenbasis, beta),
                                  rtol=LAW_RTOL, atol=1e-13))
    return checks
