"""The limit law of Theorem 8: ``n Delta(pi_theta_n) -> sum_k w_k chi^2_{1,k}`` (docs/theory.md C20).

With learning rate ``beta / i``, group size ``G`` and batch size ``B`` fixed, ``sqrt(n) Q^T
(theta_n - theta*) -> N(0, Sigma)`` where ``Sigma`` solves the Lyapunov equation

    (beta Lambda - I/2) Sigma + Sigma (beta Lambda - I/2) = Omega,

``Lambda = -H*`` (the paper writes it in the eigenbasis of ``-H*``; here ``Lambda`` may be the
full matrix) and ``Omega = beta^2 Q^T Gamma Q``, ``Gamma`` the gradient-noise covariance at
``theta*``. Since ``Delta ~ u^T Lambda u / 2``, the weights are the eigenvalues of
``Sigma^{1/2} Lambda Sigma^{1/2} / 2``.

**Erratum.** The paper prints ``Omega = Q^T Gamma Q``; the martingale increment of the recursion
is ``beta Q^T (g_hat - g)``, so its covariance carries ``beta^2``. Both are computed here
(``printed=True`` for the paper's), so the simulations can tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from .._validation import as_finite_array, as_float

__all__ = ["LimitLaw", "lyapunov_covariance", "limit_weights", "noise_omega", "bandit_limit_law",
           "quadratic_limit_law", "scalar_limit_weight", "eigenbasis_covariance"]


@dataclass(frozen=True)
class LimitLaw:
    """Weights of the weighted chi-square limit of ``n Delta_n`` (Theorem 8, docs/theory.md C20).

    Attributes
    ----------
    weights : ndarray (r,)
        ``w`` with the corrected ``Omega = beta^2 Q^T Gamma Q``, descending.
    weights_printed : ndarray (r,)
        ``w`` with the paper's printed ``Omega = Q^T Gamma Q`` (equal to ``weights / beta^2``).
    sigma : ndarray (r, r)
        Limit covariance of ``sqrt(n) Q^T (theta_n - theta*)`` (corrected).
    omega : ndarray (r, r)
        Corrected ``Omega``.
    curvature : ndarray (r, r)
        ``Lambda = -H*`` (matrix form).
    learning_rate : float
        ``beta``.
    """

    weights: np.ndarray
    weights_printed: np.ndarray
    sigma: np.ndarray
    omega: np.ndarray
    curvature: np.ndarray
    learning_rate: float

    @property
    def mean(self) -> float:
        """Limit mean of ``n Delta_n``: ``sum w``."""
        return float(np.sum(self.weights))

    @property
    def variance(self) -> float:
        """Limit variance: ``2 sum w^2``."""
        return float(2.0 * np.sum(self.weights**2))


def _check_stable(curvature: np.ndarray, beta: float) -> None:
    lam = np.linalg.eigvalsh(curvature)
    if lam.min() * beta <= 0.5:
        raise ValueError(f"Theorem 8 needs beta * lambda_min(-H*) > 1/2, got "
                         f"beta = {beta:g}, lambda_min = {lam.min():.4g}")


def lyapunov_covariance(curvature, omega, learning_rate) -> np.ndarray:
    r"""``Sigma`` solving ``(beta Lambda - I/2) Sigma + Sigma (beta Lambda - I/2) = Omega``.

    .. math::

        (\beta\Lambda - I/2)\Sigma + \Sigma(\beta\Lambda - I/2) = \Omega

    Parameters
    ----------
    curvature : array_like (r, r)
        ``Lambda = -H*``, symmetric positive definite.
    omega : array_like (r, r)
    learning_rate : float
        ``beta``, with ``beta lambda_min > 1/2``.
    """
    lam = as_finite_array(curvature, "curvature", ndim=(2,))
    om = as_finite_array(omega, "omega", ndim=(2,))
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    if lam.shape != om.shape or lam.shape[0] != lam.shape[1]:
        raise ValueError(f"`curvature` and `omega` must be square of one shape, got "
                         f"{lam.shape} and {om.shape}")
    _check_stable(lam, beta)
    drift = beta * lam - 0.5 * np.eye(lam.shape[0])
    sigma = solve_continuous_lyapunov(drift, om)
    return (sigma + sigma.T) / 2


def eigenbasis_covariance(curvature_eigenvalues, omega_eigenbasis, learning_rate) -> np.ndarray:
    r"""The closed form in the eigenbasis: ``Sigma_kl = Omega_kl / (beta (lambda_k + lambda_l) - 1)``.

    .. math::

        \Sigma_{kl} = \frac{\Omega_{kl}}{\beta(\lambda_k + \lambda_l) - 1}

    An independent route to :func:`lyapunov_covariance` (docs/theory.md C20).
    """
    lam = as_finite_array(curvature_eigenvalues, "curvature_eigenvalues", ndim=(1,))
    omega = as_finite_array(omega_eigenbasis, "omega_eigenbasis", ndim=(2,))
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    if omega.shape != (lam.size, lam.size):
        raise ValueError(f"`omega_eigenbasis` must be {lam.size} x {lam.size} (one row and column "
                         f"per eigenvalue), got {omega.shape}")
    _check_stable(np.diag(lam), beta)
    return omega / (beta * (lam[:, None] + lam[None, :]) - 1.0)


def limit_weights(curvature, sigma) -> np.ndarray:
    r"""Eigenvalues of ``Sigma^{1/2} Lambda Sigma^{1/2} / 2``, descending.

    .. math::

        w = \operatorname{eig}\big(\Sigma^{1/2}\Lambda\Sigma^{1/2}/2\big)
    """
    eig, vec = np.linalg.eigh(np.asarray(sigma))
    root = (vec * np.sqrt(np.clip(eig, 0.0, None))) @ vec.T
    w = np.linalg.eigvalsh(0.5 * root @ np.asarray(curvature) @ root)
    return np.sort(np.clip(w, 0.0, None))[::-1]


def noise_omega(basis, noise_cov, learning_rate, printed: bool = False) -> np.ndarray:
    r"""``Omega = beta^2 Q^T Gamma Q`` (corrected) or the paper's printed ``Q^T Gamma Q``.

    .. math::

        \Omega = \beta^2 Q^\top \Gamma Q
    """
    q = np.asarray(basis)
    om = q.T @ np.asarray(noise_cov) @ q
    return om if printed else float(learning_rate) ** 2 * om


def _law(curvature, basis, noise_cov, beta) -> LimitLaw:
    omega = noise_omega(basis, noise_cov, beta)
    sigma = lyapunov_covariance(curvature, omega, beta)
    printed = lyapunov_covariance(curvature, noise_omega(basis, noise_cov, beta, printed=True),
                                  beta)
    return LimitLaw(limit_weights(curvature, sigma), limit_weights(curvature, printed), sigma,
                    omega, np.asarray(curvature), float(beta))


def bandit_limit_law(bandit, learning_rate, estimator="grpo", group_size=8, batch_size=1,
                     optimum=None, baseline=None) -> LimitLaw:
    r"""Theorem 8's weights for Algorithm 1 on a KL-regularised :class:`LogLinearBandit`.

    .. math::

        \Lambda = -Q^\top H(\theta^*) Q, \qquad \Omega = \beta^2 Q^\top \Gamma Q

    ``Gamma`` is the exact covariance of the minibatch estimator at ``theta*``
    (:meth:`LogLinearBandit.noise_covariance`) and ``Lambda = -Q^T H(theta*) Q``.
    """
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    opt = bandit.optimum() if optimum is None else optimum
    gamma = bandit.noise_covariance(opt.theta, estimator, group_size, batch_size, baseline)
    return _law(-opt.hessian, opt.basis, gamma, beta)


def quadratic_limit_law(problem, learning_rate) -> LimitLaw:
    r"""Theorem 8's weights for a :class:`~ustat_rl.training.NoisyQuadratic`.

    .. math::

        \Lambda = Q^\top A Q, \qquad \Omega = \beta^2 Q^\top \Gamma Q
    """
    beta = as_float(learning_rate, "learning_rate", low=0.0)
    q = problem.identifiable_basis
    return _law(q.T @ problem.curvature @ q, q, problem.noise_cov, beta)


def scalar_limit_weight(curvature: float, noise_var: float, learning_rate: float) -> float:
    r"""1-D weight ``lambda beta^2 gamma / (2 (2 beta lambda - 1))`` (docs/theory.md C15, C20).

    .. math::

        w = \frac{\lambda\beta^2\gamma}{2(2\beta\lambda - 1)}

    Also the limit of ``n E Delta_n`` for ``J = -lambda theta^2 / 2`` with noise variance
    ``gamma``: the 1/i bound of Lemma 6 is tight there.
    """
    lam, gam, beta = float(curvature), float(noise_var), float(learning_rate)
    if 2 * beta * lam <= 1:
        raise ValueError(f"needs 2 beta lambda > 1, got {2 * beta * lam:g}")
    return lam * beta**2 * gam / (2.0 * (2.0 * beta * lam - 1.0))
