"""C73 (ustat_rl.claims.beyond_answers.quadratic_law): the claim passes on the code as it is,
and bugs planted in the limit law turn its verdict to "fail": the printed ``Omega`` (no
``beta^2``) taken as the corrected one, the weights without their ``1/2``, and the eigenbasis
form with ``- 1/2`` for ``- 1``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_continuous_lyapunov

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.quadratic_law import kronecker_sigma, range_basis
from ustat_rl.theory import limit_law

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=9, quick=True)


def _result():
    return run_claim(registry()["C73"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_printed_omega_as_corrected_fails(monkeypatch):
    original = limit_law.noise_omega
    monkeypatch.setattr(limit_law, "noise_omega", lambda basis, noise_cov, learning_rate,
                        printed=False: original(basis, noise_cov, learning_rate, True))
    result = _result()
    assert result.verdict == "fail" and "quadratic_limit_law" in result.headline


def test_weights_without_half_fails(monkeypatch):
    original = limit_law.limit_weights
    monkeypatch.setattr(limit_law, "limit_weights", lambda curvature, sigma: 2.0 * original(
        curvature, sigma))
    result = _result()
    assert result.verdict == "fail" and "weights" in result.headline


def test_eigenbasis_half_fails(monkeypatch):
    monkeypatch.setattr(limit_law, "eigenbasis_covariance", lambda lam, omega, beta: (
        np.asarray(omega) / (beta * (lam[:, None] + lam[None, :]) - 0.5)))
    result = _result()
    assert result.verdict == "fail" and "eigenbasis_covariance" in result.headline


def test_kronecker_solve_against_scipy():
    m = np.array([[1.0, 0.3], [0.3, 2.0]])
    omega = np.array([[1.0, 0.2], [0.2, 0.5]])
    want = solve_continuous_lyapunov(1.5 * m - 0.5 * np.eye(2), omega)
    assert np.allclose(kronecker_sigma(m, omega, 1.5), want, rtol=1e-12)
    lam, basis = range_basis(np.diag([3.0, 0.0]))
    assert lam.tolist() == [3.0] and basis.shape == (2, 1)
