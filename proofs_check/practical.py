"""Practical GRPO: the arcsin objective and the K3 KL estimator (docs/theory.md C26, C27).

Softmax policies are written with ``u_a = exp(theta_a) > 0`` so that every quantity is a
rational function of positive symbols (exact cancellation); ``d/d theta_b = u_b d/d u_b``.
"""

from __future__ import annotations

from typing import Callable

import sympy as sp

from ._core import PROVED, PROVED_CASES, Derivation, Verdict, combine, decide, derivation

__all__ = [
    "arcsin_derivative",
    "normalised_gradient",
    "k3_unbiased",
    "k3_nonnegative",
    "k3_gradient",
    "k3_expected_gradient",
    "paper_k3_factor",
]

V = sp.Symbol("V", positive=True)
q = sp.Symbol("q", positive=True)  # V = q/(1+q) maps (0, oo) onto (0, 1)
r = sp.Symbol("r", positive=True)


def _policy(k: int):
    us = sp.symbols(f"u1:{k + 1}", positive=True)  # u_a = exp(theta_a)
    total = sum(us)
    return us, [x / total for x in us]


def _dtheta(expr, u):
    return u * sp.diff(expr, u)


def _as_listed(verdict: Verdict) -> Verdict:
    return Verdict(PROVED_CASES, verdict.detail) if verdict.status == PROVED else verdict


#: docs/theory.md C26: d/dV 2 arcsin sqrt V.
ARCSIN_DERIVATIVE = 1 / sp.sqrt(V * (1 - V))


def arcsin_derivative(claimed=ARCSIN_DERIVATIVE) -> Derivation:
    """``d/dV 2 arcsin(sqrt V) = 1/sqrt(V (1 - V))`` on ``0 < V < 1`` (C26)."""

    def body():
        derived = sp.diff(2 * sp.asin(sp.sqrt(V)), V)
        on_domain = {V: q / (1 + q)}
        diff = sp.simplify((derived - claimed).subs(on_domain))
        return derived, decide(diff, samplers={q: lambda rng: sp.Rational(int(rng.integers(1, 50)), 7)})

    return derivation("C26", "C26 d/dV 2 arcsin sqrt(V)", "d/dV 2 arcsin sqrt V = 1/sqrt(V(1-V))",
                      "sympy derivative, V = q/(1+q) with q > 0", body)


def normalised_gradient(cases=(2, 3), claimed: Callable | None = None) -> Derivation:
    """Binary reward: the std-normalised population gradient ``E[W(Z - V)]/sqrt(V(1-V))`` equals
    ``grad_theta 2 arcsin sqrt(V(theta))`` and is parallel to ``g`` (C26).

    ``g = E[W Z]`` with ``W = e_a - pi`` is compared with ``grad V``; ``Var Z = V(1 - V)``; the
    ratio ``R`` of the two sides is shown to satisfy ``R^2 = 1`` identically, and since ``R`` is
    continuous on a connected domain its sign at one point fixes ``R = 1``.
    """

    def default(g_b, value):
        return g_b / sp.sqrt(value * (1 - value))

    claimed = claimed or default

    def body():
        verdicts, last = [], None
        for k in cases:
            us, pi = _policy(k)
            ps = sp.symbols(f"p1:{k + 1}", positive=True)
            value = sum(a * b for a, b in zip(pi, ps))
            second = sum(a * b for a, b in zip(pi, ps))  # E Z^2 = E Z for binary Z
            verdicts.append(decide(sp.cancel(second - value**2 - value * (1 - value))))
            point = {x: sp.Integer(i + 1) for i, x in enumerate(us)}
            point.update({p: sp.Rational(i + 1, k + 2) for i, p in enumerate(ps)})
            for b in range(k):
                g_b = sum(pi[a] * ps[a] * ((1 if a == b else 0) - pi[b]) for a in range(k))
                verdicts.append(decide(sp.cancel(_dtheta(value, us[b]) - g_b)))
                lhs = _dtheta(2 * sp.asin(sp.sqrt(value)), us[b])
                ratio = lhs / claimed(g_b, value)
                square = sp.cancel(sp.together(ratio**2))  # sqrt(x)**2 = x: rational
                verdicts.append(decide(square - 1))
                sign = sp.nsimplify(ratio.subs(point))
                verdicts.append(Verdict(PROVED) if sign == 1 else
                                Verdict("disproved", f"ratio {sign} at {point}"))
                last = lhs
        return last, _as_listed(combine(verdicts))

    return derivation("C26", "C26 normalised gradient = grad 2 arcsin sqrt V",
                      "E[W(Z-V)]/std(Z) = grad 2 arcsin sqrt V(theta) = g/sqrt(V(1-V)), parallel to g",
                      "differentiation through softmax logits (u = exp theta); R^2 = 1 and sign",
                      body, tuple(f"K={k}" for k in cases))


def _reference(k: int):
    """Reference policy ``y_a / sum y`` with positive weights ``y`` (logs then expand exactly)."""
    ys = sp.symbols(f"y1:{k + 1}", positive=True)
    total = sum(ys)
    return [x / total for x in ys]


def k3_unbiased(cases=(2, 3, 4), estimator: Callable | None = None) -> Derivation:
    """``E_pi[r - log r - 1] = KL(pi || pi_ref)`` with ``r = pi_ref/pi`` (C27).

    ``estimator(ratio) -> expr`` defaults to K3; pass another (e.g. ``(log r)^2/2``) to test it.
    Both policies are normalised positive weights, so the logarithms expand exactly.
    """
    estimator = estimator or (lambda ratio: ratio - sp.log(ratio) - 1)

    def body():
        verdicts, last = [], None
        for k in cases:
            _, pi = _policy(k)
            ref = _reference(k)
            mean = sum(p * estimator(qq / p) for p, qq in zip(pi, ref))
            kl = sum(p * sp.log(p / qq) for p, qq in zip(pi, ref))
            diff = sp.expand_log(sp.expand(mean - kl), force=True)
            diff = sp.cancel(sp.together(sp.expand(diff)))
            verdicts.append(decide(diff))
            last = mean
        return last, _as_listed(combine(verdicts))

    return derivation("C27", "C27 K3 is unbiased for KL", "E_pi[r - log r - 1] = KL(pi || pi_ref)",
                      "expectation over K categories, logarithms expanded (positive weights)",
                      body, tuple(f"K={k}" for k in cases))


def k3_nonnegative(estimator: Callable | None = None) -> Derivation:
    """``f(r) = r - log r - 1 >= 0`` for ``r > 0``: strictly convex, stationary only at 1, f(1)=0."""
    estimator = estimator or (lambda ratio: ratio - sp.log(ratio) - 1)

    def body():
        f = estimator(r)
        stationary = sp.solve(sp.diff(f, r), r)
        curvature = sp.simplify(sp.diff(f, r, 2))
        verdicts = [Verdict(PROVED) if curvature.is_positive else
                    Verdict("failed", f"f'' = {curvature} not shown positive"),
                    Verdict(PROVED) if len(stationary) == 1 else
                    Verdict("failed", f"stationary points {stationary}")]
        if len(stationary) == 1:
            minimum = sp.simplify(f.subs(r, stationary[0]))
            verdicts.append(Verdict(PROVED) if minimum.is_nonnegative else
                            Verdict("disproved", f"minimum value {minimum} at r = {stationary[0]}"))
        return f, combine(verdicts)

    return derivation("C27", "C27 K3 >= 0 pointwise", "r - log r - 1 >= 0 for r > 0",
                      "strict convexity, unique stationary point, value there", body)


def paper_k3_factor(pi_y, ref_y):
    """The factor ``mu - 1`` of the paper's Lemma 11 kernel, reading ``mu = pi_theta/pi_ref``."""
    return pi_y / ref_y - 1


def k3_gradient(k: int = 3, claimed_factor: Callable | None = None) -> Derivation:
    """``grad_theta K3(y) = grad log pi(y) (1 - pi_ref(y)/pi(y))`` for a softmax policy (C27).

    ``claimed_factor(pi_y, ref_y)`` multiplies the score; the default is ``1 - ref/pi``;
    :func:`paper_k3_factor` is the form with ``(mu - 1)``.
    """
    claimed_factor = claimed_factor or (lambda pi_y, ref_y: 1 - ref_y / pi_y)

    def body():
        us, pi = _policy(k)
        ref = sp.symbols(f"q1:{k + 1}", positive=True)  # any positive reference values
        verdicts, grad = [], None
        for y in range(k):
            ratio = ref[y] / pi[y]
            k3 = ratio - sp.log(ratio) - 1
            grad = sp.Matrix([sp.simplify(_dtheta(k3, us[b])) for b in range(k)])
            score = sp.Matrix([(1 if y == b else 0) - pi[b] for b in range(k)])
            claimed = score * claimed_factor(pi[y], ref[y])
            verdicts.append(decide((grad - claimed).applyfunc(sp.cancel)))
        return grad, combine(verdicts)

    return derivation("C27", f"C27 gradient of K3, K={k}",
                      "grad_theta [r - log r - 1] = grad log pi_theta(y) (1 - pi_ref(y)/pi_theta(y))",
                      "differentiation through softmax logits (u = exp theta); cancellation", body)


def _reverse_kl(ref, pi):
    return sum(qq * sp.log(qq / p) for qq, p in zip(ref, pi))


def _forward_kl(ref, pi):
    return sum(p * sp.log(p / qq) for qq, p in zip(ref, pi))


def k3_expected_gradient(k: int = 3, claimed: Callable = _reverse_kl,
                         other: Callable = _forward_kl) -> Derivation:
    """``E_pi[grad K3] = -sum_a pi_ref(a) grad log pi(a) = grad KL(pi_ref || pi)``: the
    pathwise gradient of the K3 sample mean targets the *reverse* KL (C27, derived).

    ``claimed(ref, pi)`` is the divergence whose gradient ``E grad K3`` should equal, ``other``
    one it should differ from (a counterexample point is required).
    """

    def body():
        us, pi = _policy(k)
        ref = _reference(k)
        expected = sp.zeros(k, 1)
        for y in range(k):
            score = sp.Matrix([(1 if y == b else 0) - pi[b] for b in range(k)])
            expected += pi[y] * score * (1 - ref[y] / pi[y])
        reverse, forward = claimed(ref, pi), other(ref, pi)
        grad_rev = sp.Matrix([_dtheta(reverse, u) for u in us])
        grad_fwd = sp.Matrix([_dtheta(forward, u) for u in us])
        same = decide((expected - grad_rev).applyfunc(
            lambda e: sp.cancel(sp.together(sp.expand_log(e, force=True)))))
        distinct = decide(list(expected - grad_fwd), try_proof=False)
        differs = (Verdict(PROVED) if distinct.status == "disproved" else
                   Verdict("failed", "E grad K3 was not shown to differ from grad KL(pi||ref)"))
        return expected.applyfunc(sp.cancel), _as_listed(combine([same, differs]))

    return derivation("C27", f"C27 E grad K3 = grad KL(ref||pi), K={k}",
                      "the expected pathwise K3 gradient is the reverse-KL gradient, not "
                      "grad KL(pi||pi_ref)", "exact expectation and differentiation", body,
                      (f"K={k}",))
