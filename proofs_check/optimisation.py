"""Optimisation lemmas that reduce to algebra (docs/theory.md C12, C13, C14, C16, C21).

Inequalities are decided by :func:`decide_nonnegative`: a certificate (a ratio of polynomials
with non-negative coefficients in non-negative variables) proves them; a negative value on a
realisable family disproves them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy as sp

from ._core import (
    DISPROVED,
    PROVED,
    PROVED_CASES,
    Derivation,
    Verdict,
    combine,
    decide,
    decide_nonnegative,
    derivation,
)

__all__ = [
    "pl_example",
    "hessian_pl_bound",
    "descent_contraction",
    "lemma6_discriminant",
    "lemma14_step",
    "lemma14_witness",
    "pl_from_wsc",
]

mu, L, beta, M = sp.symbols("mu L beta M", positive=True)
t1, t2, t = sp.symbols("theta1 theta2 t", real=True)


def pl_example(claimed_mu_max=2) -> Derivation:
    """``J = -theta_1^2`` on R^2: PL exactly for ``mu <= 2``, Hessian singular (C12)."""

    def body():
        J = -t1**2
        g = sp.Matrix([sp.diff(J, v) for v in (t1, t2)])
        # sup J = 0 since J <= 0 and J(0, theta2) = 0
        gap = 0 - J
        ratio = sp.simplify((g.T * g)[0, 0] / (2 * gap))  # PL holds iff mu <= inf ratio
        hessian = sp.hessian(J, (t1, t2))
        verdicts = [decide(sp.simplify(ratio - claimed_mu_max)),
                    decide(hessian.det()),
                    Verdict(PROVED) if ratio.free_symbols == set() else
                    Verdict("failed", f"ratio {ratio} depends on theta")]
        return ratio, combine(verdicts)

    return derivation("C12", "C12 PL example J = -theta1^2",
                      "||g||^2 >= 2 mu Delta for all theta iff mu <= 2; det Hessian = 0",
                      "||g||^2/(2 Delta) is the constant 2 off the maximiser set", body)


def hessian_pl_bound(claimed_limit=None) -> Derivation:
    """At a maximiser, along an eigen-direction with ``-H e = lambda e``,
    ``||g||^2/(2 Delta) -> lambda``; PL then forces ``lambda >= mu`` and L-smoothness
    ``lambda <= L``, so ``mu <= L`` (Lemma 16, C13). Generic 2-D cubic Taylor model."""
    l1, l2 = sp.symbols("lambda1 lambda2", positive=True)
    cubic = sp.symbols("c1:5", real=True)

    def body():
        J = (-(l1 * t1**2 + l2 * t2**2) / 2 + cubic[0] * t1**3 + cubic[1] * t1**2 * t2
             + cubic[2] * t1 * t2**2 + cubic[3] * t2**3)
        g = sp.Matrix([sp.diff(J, v) for v in (t1, t2)])
        verdicts, limits = [], []
        for direction, lam in (((t, 0), l1), ((0, t), l2)):
            at = dict(zip((t1, t2), direction))
            ratio = ((g.T * g)[0, 0] / (2 * (0 - J))).subs(at)
            limit = sp.limit(ratio, t, 0)
            limits.append(limit)
            claimed = lam if claimed_limit is None else claimed_limit(lam)
            verdicts.append(decide(sp.simplify(limit - claimed)))
        verdict = combine(verdicts)
        if verdict.status == PROVED:
            verdict = Verdict(PROVED_CASES)
        return sp.Matrix(limits), verdict

    return derivation("C13", "C13 PL constant <= Hessian eigenvalues <= L",
                      "lim_{t->0} ||g||^2/(2 Delta) along eigenvector k = lambda_k, so mu <= lambda_k",
                      "sympy limit on a generic cubic Taylor model at a maximiser", body,
                      ("d=2, generic cubic Taylor terms",))


def descent_contraction(claimed_rho=1 - 2 * mu * beta + L * mu * beta**2,
                        claimed_constant=L * beta**2 * M / (4 * mu * beta - 2 * L * mu * beta**2)
                        ) -> Derivation:
    """From the descent lemma and PL: ``E Delta' <= rho E Delta + L beta^2 M/2`` and the fixed
    point ``L beta^2 M/(2(1 - rho))`` is Lemma 6's constant (C14)."""

    def body():
        delta, gsq = sp.symbols("Delta gsq", nonnegative=True)
        # Delta' <= Delta - (beta - L beta^2/2) ||g||^2 + L beta^2 M/2 (descent lemma, E over noise)
        step = delta - (beta - L * beta**2 / 2) * gsq + L * beta**2 * M / 2
        # PL: ||g||^2 >= 2 mu Delta; the coefficient of ||g||^2 is negative when beta < 2/L
        bound = sp.expand(step.subs(gsq, 2 * mu * delta))
        rho = bound.coeff(delta)
        constant = sp.simplify(bound.subs(delta, 0) / (1 - rho))
        return rho, combine([decide(sp.expand(rho - claimed_rho)),
                             decide(sp.simplify(constant - claimed_constant))])

    return derivation("C14", "C14 contraction rho and constant (Lemma 6)",
                      "rho = 1 - 2 mu beta + L mu beta^2; limit constant L beta^2 M/(4 mu beta - "
                      "2 L mu beta^2)", "descent lemma + PL, fixed point of the recursion", body)


def lemma6_discriminant(claimed=4 * mu**2 - 4 * mu * L) -> Derivation:
    """Discriminant of ``rho(beta) = L mu beta^2 - 2 mu beta + 1`` is ``4 mu (mu - L)``, so
    ``rho >= 0`` for every ``beta`` iff ``mu <= L`` (Lemma 6; the paper prints ``mu^2 - 4 mu L``)."""

    def body():
        disc = sp.discriminant(L * mu * beta**2 - 2 * mu * beta + 1, beta)
        return sp.factor(disc), decide(sp.expand(disc - claimed))

    return derivation("C14", "C14 Lemma 6 discriminant", "disc_beta(rho) = 4 mu^2 - 4 mu L",
                      "sympy discriminant", body)


A, B, C, eps = sp.symbols("A B C epsilon", positive=True)
alpha, k_extra, s_extra, n = sp.symbols("alpha k s n", nonnegative=True)


def lemma14_step(claimed_constant=None, claimed_threshold=None) -> Derivation:
    """Induction step of Lemma 14 (C16): if ``a_n <= K/n``, ``n >= n*`` and the factor
    ``1 - A/n + B/n^2 >= 0``, then ``a_{n+1} <= K/(n+1)`` for every
    ``K >= (1+eps) C/(A-1)`` and ``n* = B(1+eps)/(eps (A-1))``.

    Proved by the identity ``n^2 [K/(n+1) - f_n K/n - C/n^2] = K(A-1) - BK/n - C + K/(n+1)``
    and a non-negativity certificate after ``A = 1 + alpha``, ``K = constant + k``,
    ``n = n* + s`` (``k, s >= 0``).
    """
    claimed_constant = (1 + eps) * C / (A - 1) if claimed_constant is None else claimed_constant
    claimed_threshold = (B * (1 + eps) / (eps * (A - 1)) if claimed_threshold is None
                         else claimed_threshold)
    K = sp.Symbol("K", positive=True)

    def body():
        factor = 1 - A / n + B / n**2
        slack = K / (n + 1) - (factor * K / n + C / n**2)
        identity = decide(sp.together(n**2 * slack - (K * (A - 1) - B * K / n - C + K / (n + 1))))
        shifted = (n**2 * slack).subs({K: claimed_constant + k_extra}).subs(
            {n: claimed_threshold + s_extra}).subs({A: 1 + alpha})
        variables = [alpha, eps, C, B, k_extra, s_extra]
        positive = {v: (lambda rng: sp.Rational(int(rng.integers(1, 40)), 8)) for v in variables}
        sign = decide_nonnegative(sp.together(shifted), variables, samplers=positive)
        return sp.factor(sp.together(shifted)), combine([identity, sign])

    return derivation("C16", "C16 Lemma 14 induction step",
                      "K/(n+1) >= (1 - A/n + B/n^2) K/n + C/n^2 for n >= n*, K >= (1+eps)C/(A-1) "
                      "(premise: the factor is >= 0)",
                      "polynomial identity + non-negative-coefficient certificate", body)


def _lemma14_bound(step, A_, B_, C_, eps_, a_):
    n0 = math.ceil(B_ * (1 + eps_) / (eps_ * (A_ - 1))) + 1
    return max((1 + eps_) * C_ / ((A_ - 1) * step), a_ * n0 / step), n0


#: A sequence meeting Lemma 14's hypotheses as docs/theory.md states them, found by a linear program
#: that maximises a_4 (A = 6, B = 1/10, C = 1, eps = 1/2, a = 1/10): zero except a_4 = a.
WITNESS14 = {"A": Fraction(6), "B": Fraction(1, 10), "C": Fraction(1), "eps": Fraction(1, 2),
             "a": Fraction(1, 10), "spike": 4}


def lemma14_witness(witness: dict | None = None, horizon: int = 200) -> Derivation:
    """Exact check of Lemma 14 *as stated* (C16) on a witness sequence.

    Hypotheses are verified in exact rationals for ``n < horizon`` and, since the sequence is
    zero from the spike on, beyond it (``0 <= f_n 0 + C/n^2``). The conclusion is then tested at
    every ``n``; a violation disproves the statement as written (the induction step needs
    ``1 - A/n + B/n^2 >= 0`` for ``n >= n0``, which the stated ``n0`` does not guarantee).
    """
    w = dict(WITNESS14 if witness is None else witness)

    def body():
        A_, B_, C_, e_, a_ = w["A"], w["B"], w["C"], w["eps"], w["a"]
        seq = [Fraction(0)] * (horizon + 1)  # seq[n] = a_n, n >= 1
        seq[w["spike"]] = a_
        hyp = all(0 <= seq[m] <= a_ for m in range(1, horizon + 1)) and all(
            seq[m + 1] <= (1 - A_ / m + B_ / m**2) * seq[m] + C_ / m**2 for m in range(1, horizon))
        if not (hyp and A_ > 1):
            return sp.nan, Verdict("failed", "witness does not meet the hypotheses")
        violations = []
        for m in range(1, horizon + 1):
            bound, n0 = _lemma14_bound(m, A_, B_, C_, e_, a_)
            if seq[m] > bound:
                violations.append((m, seq[m], bound, n0))
        if violations:
            m, value, bound, n0 = violations[0]
            return sp.Rational(value - bound), Verdict(
                DISPROVED, f"a_{m} = {value} > bound {bound} (n0 = {n0}; factor at n = {m - 1}: "
                           f"{1 - A_ / (m - 1) + B_ / (m - 1) ** 2})")
        return sp.Integer(0), Verdict(PROVED_CASES)

    return derivation("C16", "C16 Lemma 14 as stated, exact witness",
                      "0 <= a_n <= a, a_{n+1} <= (1 - A/n + B/n^2) a_n + C/n^2, A > 1 imply "
                      "a_n <= max{(1+eps)C/((A-1)n), a n0/n}",
                      "exact rational sequence checked against hypotheses and conclusion", body,
                      ("witness " + ", ".join(f"{k}={v}" for k, v in w.items()),))


def pl_from_wsc(claimed_constant=None) -> Derivation:
    """Weak strong concavity with ``mu`` and L-smoothness give PL with ``mu^2/L`` (Lemma 15, C21).

    From ``<g, Pi(theta) - theta> >= mu d^2``: ``||g|| >= mu d`` (Cauchy-Schwarz); from
    L-smoothness and ``g = 0`` on the optimum set: ``Delta <= L d^2/2``. Writing
    ``||g|| = mu d + s`` and ``Delta = L d^2/2 - r`` (``s, r >= 0``) the PL slack is certified
    non-negative. Example: ``J = -lambda theta_1^2/2`` on R^2 (WSC and L-smooth with
    ``mu = L = lambda``), where ``Q^T Theta* = {0}`` is a single point and ``mu^2/L`` is tight.
    """
    claimed_constant = mu**2 / L if claimed_constant is None else claimed_constant
    d, s, r, lam = sp.symbols("d s r lambda", positive=True)

    def body():
        slack = (mu * d + s) ** 2 - 2 * claimed_constant * (L * d**2 / 2 - r)
        # realisable family for the counterexample search: the quadratic example
        gnorm_sq, gap = lam**2 * t1**2, lam * t1**2 / 2
        family = gnorm_sq - 2 * claimed_constant.subs({mu: lam, L: lam}) * gap
        general = decide_nonnegative(slack, [mu, d, s, r, L], search=family)
        # the example: WSC constant, smoothness constant and the single point Q^T Theta*
        J = -lam * t1**2 / 2
        g = sp.Matrix([sp.diff(J, v) for v in (t1, t2)])
        proj = sp.Matrix([0, t2])  # projection onto Theta* = {theta1 = 0}
        wsc = sp.simplify((g.T * (proj - sp.Matrix([t1, t2])))[0, 0] / t1**2)
        example = [decide(wsc - lam),
                   decide(sp.Matrix([1, 0]).T * proj),  # Q = e1: Q^T theta* = 0 for all theta*
                   decide(sp.simplify((g.T * g)[0, 0] / (2 * (0 - J)) - (mu**2 / L).subs(
                       {mu: lam, L: lam})))]
        return sp.factor(sp.expand(slack)), combine([general] + example)

    return derivation("C21", "C21 WSC + L-smooth => PL with mu^2/L",
                      "||g||^2 >= 2 (mu^2/L) Delta; Q^T Theta* is a single point (example)",
                      "Cauchy-Schwarz + descent bound, non-negativity certificate; quadratic "
                      "example", body)
