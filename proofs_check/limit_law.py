"""Limit law of the last iterate: Lyapunov equation, weights and the beta^2 erratum (C20, C15).

The weights come from ``(beta Lambda - I/2) Sigma + Sigma (beta Lambda - I/2) = Omega`` and
``w = eig(Sigma^{1/2} Lambda Sigma^{1/2} / 2)``. Independently, the one-dimensional recursion
``theta_{i+1} = theta_i + (beta/i)(-lambda theta_i + xi_i)``, ``Var xi = gamma``, gives the
second-moment recursion ``v_{n+1} = (1 - beta lambda/n)^2 v_n + beta^2 gamma/n^2``; the limit
``u = lim n v_n`` must make the ``1/n`` term of ``u_{n+1} - u_n`` vanish, which fixes ``u`` and
hence ``lim n E Delta_n = lambda u / 2`` with ``Delta = lambda theta^2/2``. Comparing the two
routes decides which ``Omega`` is right: the paper's ``Q^T Gamma Q`` or ``beta^2 Q^T Gamma Q``.
"""

from __future__ import annotations

import sympy as sp
import sympy.stats as stats

from ._core import PROVED, Derivation, Verdict, combine, decide, derivation

__all__ = [
    "lyapunov_weight_1d",
    "recursion_limit_1d",
    "limit_weight_1d",
    "omega_erratum",
    "lyapunov_diagonal",
    "lyapunov_offdiagonal",
    "chi2_mixture_moments",
]

beta, lam, gamma = sp.symbols("beta lambda gamma", positive=True)
n = sp.Symbol("n", positive=True)
u = sp.Symbol("u", positive=True)

#: The constraint under which the limit exists (learning rate beta/i with 2 beta lambda > 1).
STABLE = sp.Gt(2 * beta * lam, 1)


def _stable(point) -> bool:
    return bool(2 * point.get(beta, 1) * point.get(lam, 1) > 1)


def corrected_omega(noise=gamma):
    """``Omega = beta^2 Q^T Gamma Q`` (project's erratum)."""
    return beta**2 * noise


def paper_omega(noise=gamma):
    """``Omega = Q^T Gamma Q`` as printed in the paper."""
    return noise


def lyapunov_weight_1d(omega) -> sp.Basic:
    """Solve ``2 (beta lambda - 1/2) Sigma = Omega``; ``w = lambda Sigma / 2``."""
    sigma = sp.Symbol("Sigma", positive=True)
    (solution,) = sp.solve(sp.Eq(2 * (beta * lam - sp.Rational(1, 2)) * sigma, omega), sigma)
    return sp.simplify(lam * solution / 2)


def recursion_limit_1d(increment_power: int = 1) -> tuple[sp.Basic, Verdict]:
    """``lim n E Delta_n`` from the exact second-moment recursion, by matching the 1/n term.

    The noise enters as ``beta xi_n / n^increment_power``: 1 is the recursion of Algorithm 1
    (increment ``Delta M_n / n``); 0 is an increment without ``1/n``, for which ``n E Delta_n``
    has no finite limit (the drift of ``u_n`` then has a non-vanishing term of order ``n``).
    """
    v_n = u / n
    v_next = (1 - beta * lam / n) ** 2 * v_n + beta**2 * gamma / n ** (2 * increment_power)
    drift = sp.expand((n + 1) * v_next - u)  # u_{n+1} - u_n when u_n = u
    series = sp.series(drift.subs(n, 1 / sp.Symbol("h", positive=True)),
                       sp.Symbol("h", positive=True), 0, 2).removeO()
    lead = sp.expand(series.coeff(sp.Symbol("h", positive=True), 1))
    constant = sp.simplify(series.coeff(sp.Symbol("h", positive=True), 0))
    growing = sp.simplify(drift.subs(n, 1 / sp.Symbol("h", positive=True))
                          * sp.Symbol("h", positive=True))
    if sp.limit(growing, sp.Symbol("h", positive=True), 0) != 0:
        return sp.oo, Verdict("disproved", "u_{n+1} - u_n grows like n: n E Delta_n diverges")
    roots = sp.solve(lead, u)
    if constant != 0 or len(roots) != 1:
        return sp.nan, Verdict("failed", f"drift expansion {series}")
    # stability of the fixed point: the 1/n coefficient is (1 - 2 beta lambda)(u - u*)
    slope = sp.simplify(sp.diff(lead, u))
    if sp.simplify(slope - (1 - 2 * beta * lam)) != 0:
        return sp.nan, Verdict("failed", f"unexpected slope {slope}")
    return sp.simplify(lam * roots[0] / 2), Verdict(PROVED)


def limit_weight_1d(omega=None, increment_power: int = 1) -> Derivation:
    """The Lyapunov weight with ``Omega`` equals the recursion limit ``lim n E Delta_n`` (C20, C15).

    Default ``Omega = beta^2 gamma`` (corrected); ``omega=gamma`` is the paper's printed form.
    """
    omega = corrected_omega() if omega is None else omega

    def body():
        weight = lyapunov_weight_1d(omega)
        limit, verdict = recursion_limit_1d(increment_power)
        if verdict.status != PROVED:
            return limit, verdict
        return weight, combine([verdict, decide(sp.simplify(weight - limit),
                                                constraint=_stable)])

    return derivation("C20", "C20 1-D weight = lim n E Delta_n",
                      "w = lambda beta^2 gamma/(2(2 beta lambda - 1)) from the Lyapunov equation "
                      "equals the limit of the exact second-moment recursion",
                      "solve the Lyapunov equation; match the 1/n term of u_{n+1} - u_n", body)


def omega_erratum(claimed_ratio=beta**2) -> Derivation:
    """Weights with the corrected ``Omega`` are ``beta^2`` times those with the printed one."""

    def body():
        ratio = sp.simplify(lyapunov_weight_1d(corrected_omega()) / lyapunov_weight_1d(paper_omega()))
        return ratio, decide(sp.simplify(ratio - claimed_ratio))

    return derivation("C20", "C20 erratum: Omega needs beta^2",
                      "w(beta^2 Q^T Gamma Q) / w(Q^T Gamma Q) = beta^2",
                      "ratio of the two Lyapunov solutions", body)


def _lyapunov_residual(lams, sigma, omega):
    shift = sp.diag(*[beta * lk - sp.Rational(1, 2) for lk in lams])
    return sp.simplify(shift * sigma + sigma * shift - omega)


def lyapunov_diagonal(r: int = 3, claimed_weight=None) -> Derivation:
    """Diagonal r-dimensional case: ``Sigma_kk = beta^2 gamma_k/(2 beta lambda_k - 1)`` solves the
    Lyapunov equation and ``w_k = lambda_k Sigma_kk / 2`` are the eigenvalues (C20)."""
    lams = sp.symbols(f"lambda1:{r + 1}", positive=True)
    gams = sp.symbols(f"gamma1:{r + 1}", positive=True)
    if claimed_weight is None:
        def claimed_weight(lk, gk):
            return lk * beta**2 * gk / (2 * (2 * beta * lk - 1))

    def body():
        omega = sp.diag(*[beta**2 * g for g in gams])
        sigma = sp.diag(*[beta**2 * g / (2 * beta * lk - 1) for lk, g in zip(lams, gams)])
        residual = decide(_lyapunov_residual(lams, sigma, omega))
        root = sp.diag(*[sp.sqrt(sigma[k, k]) for k in range(r)])
        target = root * sp.diag(*lams) * root / 2
        eig = sorted(target.eigenvals().keys(), key=sp.default_sort_key)
        claimed = sorted([claimed_weight(lk, g) for lk, g in zip(lams, gams)],
                         key=sp.default_sort_key)
        weights = decide([sp.simplify(a - b) for a, b in zip(eig, claimed)]
                         if len(eig) == len(claimed) else [sp.Integer(1)])
        return sp.Matrix(eig), combine([residual, weights])

    return derivation("C20", f"C20 diagonal Lyapunov, r={r}",
                      "Sigma = diag(beta^2 gamma_k/(2 beta lambda_k - 1)), w_k = lambda_k Sigma_kk/2",
                      "matrix residual of the Lyapunov equation; eigenvalues of Sigma^1/2 Lambda "
                      "Sigma^1/2 / 2", body)


def lyapunov_offdiagonal(r: int = 2, claimed_entry=None) -> Derivation:
    """Eigenbasis formula ``Sigma_kl = beta^2 Omega_kl/(beta(lambda_k + lambda_l) - 1)`` solves
    the Lyapunov equation for a general symmetric ``Omega`` (C20).

    ``claimed_entry(omega_kl, lambda_k, lambda_l)`` gives the claimed ``Sigma_kl`` for the
    right-hand side ``beta^2 Omega``.
    """
    lams = sp.symbols(f"lambda1:{r + 1}", positive=True)
    if claimed_entry is None:
        def claimed_entry(omega_kl, lk, ll):
            return beta**2 * omega_kl / (beta * (lk + ll) - 1)

    def body():
        omega = sp.Matrix(r, r, lambda i, j: sp.Symbol(f"O{min(i, j) + 1}{max(i, j) + 1}"))
        scaled = beta**2 * omega
        sigma = sp.Matrix(r, r, lambda i, j: claimed_entry(omega[i, j], lams[i], lams[j]))
        return sigma, decide(_lyapunov_residual(lams, sigma, scaled))

    return derivation("C20", f"C20 Lyapunov eigenbasis formula, r={r}",
                      "Sigma_kl = beta^2 Omega_kl/(beta(lambda_k+lambda_l) - 1)",
                      "matrix residual of the Lyapunov equation", body)


def chi2_mixture_moments(r: int = 3, claimed_mean=None, claimed_var=None) -> Derivation:
    """Mean ``sum w_k`` and variance ``2 sum w_k^2`` of ``sum_k w_k chi2_{1,k}`` (C20).

    The chi-square moments are integrated from the density by ``sympy.stats``; the mixture's
    from linearity and independence.
    """
    ws = sp.symbols(f"w1:{r + 1}", positive=True)
    claimed_mean = sum(ws) if claimed_mean is None else claimed_mean
    claimed_var = 2 * sum(w**2 for w in ws) if claimed_var is None else claimed_var

    def body():
        xs = [stats.ChiSquared(f"X{k + 1}", 1) for k in range(r)]
        mix = sum(w * x for w, x in zip(ws, xs))
        mean = sp.simplify(stats.E(mix))
        var = sp.simplify(stats.variance(mix))
        return sp.Matrix([mean, var]), combine([decide(sp.expand(mean - claimed_mean)),
                                                decide(sp.expand(var - claimed_var))])

    return derivation("C20", f"C20 weighted chi-square mean and variance, r={r}",
                      "E sum w_k chi2_1 = sum w_k; Var = 2 sum w_k^2",
                      "sympy.stats integration of the chi-square density", body)
