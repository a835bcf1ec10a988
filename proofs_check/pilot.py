"""Unbiased moment estimators from a pilot sample (docs/theory.md section 7, C31).

Expectations over i.i.d. draws are taken exactly by one rule: a polynomial in the symbols of draws
``1..n`` is expanded, and each monomial factorises over draws, so its expectation is the product of
single-draw moments ``E[W_1^a W_2^b Z^c]`` (one symbol each). Distinct indices are independent
draws of the same law; a repeated index is the same draw. The moment symbols are free, so a zero
difference holds for every law with finite moments; it is shown for scores in ``R^d`` with
``d = 1, 2, 3`` (the listed cases; every kernel is a sum over coordinates).

Five derivations:

* :func:`kernel_unbiased`: each kernel of section 7, averaged over draws, equals its target;
* :func:`power_sum_forms`: the O(n) closed forms of ``ustat_rl.pilot.estimate.group_moments``
  equal the average of the kernel over all ordered tuples of distinct samples (``n = 3..6``);
* :func:`sketch_inner_product`: ``E_R <R a, R b> = <a, b>`` for i.i.d. entries of mean zero and
  variance ``1/k``, so projected scores keep every kernel unbiased;
* :func:`factored_inner_product`: the same for the factored sketch of ``ustat_rl.scores.factored``,
  ``m`` independent blocks ``P_g(G) = s A_g G B_g^T`` with ``s = (k_o k_i m)^(-1/2)``: the
  expectation over both factors of ``sum_g <P_g(a), P_g(b)>`` is ``<a, b>`` (Frobenius);
* :func:`fieller_quadratic` (C32): Fieller's set for ``rho = c1/c3'`` is ``a rho^2 - 2 b rho + c
  <= 0`` with the coefficients of ``ustat_rl.pilot.fieller``, its ends are the roots, and the
  point estimate ``c1/c3'`` always satisfies it.

Each takes the kernel (or scale) as a parameter, so a biased one (the plug-in variance, a
projection without its ``1/sqrt(k)``) runs through the same code and is disproved.
"""

from __future__ import annotations

import itertools
from typing import Callable

import sympy as sp

from ._core import Derivation, combine, decide, derivation

__all__ = ["KERNELS", "expect_iid", "factored_inner_product", "fieller_quadratic",
           "kernel_unbiased", "plug_in_variance", "power_sum_forms", "sketch_inner_product"]


def _draw(i: int, d: int):
    """Symbols of draw ``i``: the score ``W_i`` in ``R^d`` and the reward ``Z_i``."""
    w = sp.symbols(f"w{i}_1:{d + 1}", real=True)
    return sp.Matrix(w), sp.Symbol(f"z{i}", real=True)


def _moment(exponents: tuple[int, ...]) -> sp.Basic:
    """``E[W_1^a1 ... W_d^ad Z^c]`` of one draw, as a free symbol (``1`` for the empty monomial)."""
    if not any(exponents):
        return sp.Integer(1)
    *w, c = exponents
    name = "*".join([f"W{j + 1}^{a}" for j, a in enumerate(w) if a] + ([f"Z^{c}"] if c else []))
    return sp.Symbol(f"E[{name}]", real=True)


def expect_iid(expr, n: int, d: int) -> sp.Basic:
    """``E[expr]`` for draws ``1..n`` i.i.d.: monomials factorise over draws into moment symbols."""
    draws = [_draw(i, d) for i in range(1, n + 1)]
    gens = [s for w, z in draws for s in (*w, z)]
    poly = sp.Poly(sp.expand(expr), *gens)
    total = sp.Integer(0)
    for powers, coeff in poly.terms():
        term = coeff
        for i in range(n):
            term *= _moment(powers[i * (d + 1):(i + 1) * (d + 1)])
        total += term
    return sp.expand(total)


def _targets(d: int) -> dict:
    """Population values of each moment, in the moment symbols of one draw."""

    def m(w_exponent_at: int | None, w_power: int, z_power: int):
        exps = [0] * d + [z_power]
        if w_exponent_at is not None:
            exps[w_exponent_at] = w_power
        return _moment(tuple(exps))

    V = m(None, 0, 1)
    var = m(None, 0, 2) - V**2
    S = [sum(m(j, 2, q) for j in range(d)) for q in range(3)]  # E[||W||^2 Z^q]
    gsq = sum(m(j, 1, 1) ** 2 for j in range(d))
    return {
        "value": V, "reward_var": var, "score_sq": S[0], "score_sq_reward": S[1],
        "score_sq_reward_sq": S[2], "grad_sq": gsq, "score_sq_reward_var": S[0] * var,
        "score_sq_centred": S[2] - 2 * V * S[1] + V**2 * S[0],
    }


def _sq(w):
    return (w.T * w)[0]


#: The kernels of docs/theory.md section 7 as functions of the draws ``(W_i, Z_i)`` of distinct
#: indices ``i, j, k``.
KERNELS: dict[str, Callable] = {
    "value": lambda d1, d2, d3: d1[1],
    "reward_var": lambda d1, d2, d3: (d1[1] - d2[1]) ** 2 / 2,
    "score_sq": lambda d1, d2, d3: _sq(d1[0]),
    "score_sq_reward": lambda d1, d2, d3: _sq(d1[0]) * d1[1],
    "score_sq_reward_sq": lambda d1, d2, d3: _sq(d1[0]) * d1[1] ** 2,
    "grad_sq": lambda d1, d2, d3: (d1[0].T * d2[0])[0] * d1[1] * d2[1],
    "score_sq_reward_var": lambda d1, d2, d3: _sq(d1[0]) * (d2[1] - d3[1]) ** 2 / 2,
    "score_sq_centred": lambda d1, d2, d3: _sq(d1[0]) * (d1[1] - d2[1]) * (d1[1] - d3[1]),
}


def plug_in_variance(d1, d2, d3):
    """Negative control: the plug-in variance ``(1/n) sum (Z_i - Zbar)^2`` of three draws."""
    z = [d1[1], d2[1], d3[1]]
    mean = sum(z) / 3
    return sum((zi - mean) ** 2 for zi in z) / 3


def kernel_unbiased(name: str, kernel: Callable | None = None, dims=(1, 2, 3)) -> Derivation:
    """``E h(D_1, D_2, D_3) = target`` for the section-7 kernel of moment ``name`` (C31).

    ``kernel`` replaces the listed one (a negative control goes through the same expectation).
    """
    kernel = kernel or KERNELS[name]

    def body():
        verdicts, last = [], sp.nan
        for d in dims:
            draws = [_draw(i, d) for i in (1, 2, 3)]
            last = expect_iid(kernel(*draws), 3, d)
            verdicts.append(decide(last - _targets(d)[name], general=False))
        return last, combine(verdicts)

    return derivation("C31", f"C31 {name} kernel is unbiased",
                      f"E[h_{name}] over distinct i.i.d. draws equals {name}",
                      "expectation over i.i.d. draws with free single-draw moments",
                      body, tuple(f"d={d}" for d in dims))


def _closed_forms(z, s, u_sq, n):
    """The power-sum forms stated in ``ustat_rl.pilot.estimate.group_moments``."""
    S1, S2 = sum(z), sum(zi**2 for zi in z)
    A = [sum(si * zi**q for si, zi in zip(s, z)) for q in range(3)]
    pairs, triples = n * (n - 1), n * (n - 1) * (n - 2)
    return {
        "value": S1 / n, "reward_var": (S2 - S1**2 / n) / (n - 1), "score_sq": A[0] / n,
        "score_sq_reward": A[1] / n, "score_sq_reward_sq": A[2] / n,
        "grad_sq": (u_sq - A[2]) / pairs,
        "score_sq_reward_var": ((n - 1) * (S2 * A[0] - A[2])
                                - (S1**2 * A[0] - 2 * S1 * A[1] + A[2])) / triples,
        "score_sq_centred": ((n - 1) * (n * A[2] - 2 * S1 * A[1]) + (S1**2 - S2) * A[0]) / triples,
    }


def power_sum_forms(sizes=(3, 4, 5, 6), forms: Callable = _closed_forms, d: int = 2) -> Derivation:
    """The O(n) power-sum forms equal the kernel averages over ordered distinct tuples (C31)."""

    def body():
        verdicts, last = [], sp.nan
        for n in sizes:
            draws = [_draw(i, d) for i in range(1, n + 1)]
            z = [dr[1] for dr in draws]
            s = [_sq(dr[0]) for dr in draws]
            u = sum((dr[0] * dr[1] for dr in draws), sp.zeros(d, 1))
            fast = forms(z, s, _sq(u), n)
            for name, kernel in KERNELS.items():
                order = 3 if name in ("score_sq_reward_var", "score_sq_centred") else 2
                tuples = list(itertools.permutations(range(n), order))
                mean = sum(kernel(*[draws[t] for t in tup] + [None] * (3 - order))
                           for tup in tuples) / len(tuples)
                verdicts.append(decide(sp.expand(fast[name] - mean), general=False))
            last = fast["score_sq_centred"]
        return last, combine(verdicts)

    return derivation("C31", "C31 power-sum forms equal the tuple averages",
                      "closed forms in power sums = mean of each kernel over distinct tuples",
                      "expansion of both sides for each listed n, scores in R^2", body,
                      tuple(f"n={n}" for n in sizes))


def sketch_inner_product(rows=(1, 2, 3), d: int = 2, scale: Callable = lambda k: 1 / sp.sqrt(k)
                         ) -> Derivation:
    """``E_R <R a, R b> = <a, b>`` for ``R = scale(k) E`` with i.i.d. entries of ``E``: mean 0,
    variance 1 (Gaussian or Rademacher), so every quadratic kernel stays unbiased (C31)."""

    def body():
        a = sp.Matrix(sp.symbols(f"a1:{d + 1}", real=True))
        b = sp.Matrix(sp.symbols(f"b1:{d + 1}", real=True))
        verdicts, last = [], sp.nan
        for k in rows:
            entries = sp.Matrix(k, d, lambda r, c: sp.Symbol(f"e{r}_{c}", real=True))
            R = scale(k) * entries
            inner = sp.expand(((R * a).T * (R * b))[0])
            # entries are independent with E e = 0 and E e^2 = 1: replace monomials accordingly
            poly = sp.Poly(inner, *list(entries))
            mean = sp.Integer(0)
            for powers, coeff in poly.terms():
                if all(p in (0, 2) for p in powers):
                    mean += coeff
            last = sp.expand(mean)
            verdicts.append(decide(last - (a.T * b)[0], general=False))
        return last, combine(verdicts)

    return derivation("C31", "C31 projected inner products are unbiased",
                      "E_R <R a, R b> = <a, b> when E[R^T R] = I",
                      "entries independent, mean 0, second moment 1/k", body,
                      tuple(f"k={k}" for k in rows))


def _unit_moment_mean(expr, symbols) -> sp.Basic:
    """``E[expr]`` for independent ``symbols`` of mean 0 and second moment 1, ``expr`` of degree
    at most 2 in each: a monomial keeps its coefficient when every power is 0 or 2, else 0."""
    poly = sp.Poly(sp.expand(expr), *symbols)
    if any(p > 2 for powers in poly.monoms() for p in powers):
        raise ValueError("`expr` must have degree <= 2 in each symbol")
    return sp.expand(sum((coeff for powers, coeff in poly.terms()
                          if all(p in (0, 2) for p in powers)), sp.Integer(0)))


def _symbol_matrix(prefix: str, rows: int, cols: int) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda r, c: sp.Symbol(f"{prefix}_{r}_{c}", real=True))


def factored_inner_product(shapes=((2, 2), (2, 3)), factors=((1, 1), (2, 1), (1, 2), (2, 2)),
                           blocks=(1, 2),
                           scale: Callable = lambda k_out, k_in, m: 1 / sp.sqrt(k_out * k_in * m)
                           ) -> Derivation:
    """``E_{A,B} sum_g <s A_g a B_g^T, s A_g b B_g^T>_F = <a, b>_F`` for ``(p, q)`` matrices
    ``a, b``, ``m`` blocks of independent factors ``A_g`` ``(k_o, p)`` and ``B_g`` ``(k_i, q)``
    with i.i.d. entries of mean 0 and variance 1, and ``s = scale(k_o, k_i, m)`` (C31).

    This is ``E[R^T R] = I`` for ``R = s [A_g (x) B_g]_g``: every kernel stays unbiased under the
    factored sketch. ``scale`` replaces the stated one (a negative control: no ``1/sqrt(k)``).
    """

    def body():
        verdicts, last = [], sp.nan
        for p, q in shapes:
            a, b = _symbol_matrix("a", p, q), _symbol_matrix("b", p, q)
            for k_out, k_in in factors:
                for m in blocks:
                    entries, total = [], sp.Integer(0)
                    for g in range(m):
                        A = _symbol_matrix(f"A{g}", k_out, p)
                        B = _symbol_matrix(f"B{g}", k_in, q)
                        entries += list(A) + list(B)
                        pa, pb = A * a * B.T, A * b * B.T
                        total += sum(pa.multiply_elementwise(pb))
                    s = scale(k_out, k_in, m)
                    last = _unit_moment_mean(s**2 * total, entries)
                    verdicts.append(decide(last - sum(a.multiply_elementwise(b)), general=False))
        return last, combine(verdicts)

    cases = tuple(f"{p}x{q}, k_o={ko}, k_i={ki}, m={m}" for p, q in shapes
                  for ko, ki in factors for m in blocks)
    return derivation("C31", "C31 factored projections keep inner products unbiased",
                      "E_{A,B} <R a, R b> = <a, b> for R = (k_o k_i m)^(-1/2) [A_g (x) B_g]_g",
                      "expectation over independent factor entries, mean 0, second moment 1",
                      body, cases)
def _fieller_coefficients(c1, c3, v11, v13, v33, t):
    """``(a, b, c)`` as ``ustat_rl.pilot.fieller.fieller_ratio`` computes them."""
    return c3**2 - t**2 * v33, c1 * c3 - t**2 * v13, c1**2 - t**2 * v11


def fieller_quadratic(coefficients: Callable = _fieller_coefficients) -> Derivation:
    """Fieller's set ``(c1 - rho c3)^2 <= t^2 Var(c1_hat - rho c3_hat)`` as a quadratic (C32).

    Three identities in the free symbols: the difference of the two sides equals
    ``a rho^2 - 2 b rho + c``; ``(b +- sqrt(b^2 - a c))/a`` are its roots; at ``rho = c1/c3`` it
    equals ``-t^2 Var(c1_hat - rho c3_hat)``, so the point estimate lies in the set and
    ``b^2 - a c >= 0`` whenever ``a > 0``. At ``rho = 0`` it is ``c = c1^2 - t^2 v11``: zero is in
    the set exactly when ``|c1| <= t sqrt(v11)``. ``coefficients`` is a parameter so that a
    wrong set (dropping the covariance) runs through the same code and is disproved.
    """
    c1, c3, v13, rho = sp.symbols("c1 c3 v13 rho", real=True)
    v11, v33, t = sp.symbols("v11 v33 t", positive=True)

    def body():
        a, b, c = coefficients(c1, c3, v11, v13, v33, t)
        var = v11 - 2 * rho * v13 + rho**2 * v33
        quadratic = a * rho**2 - 2 * b * rho + c
        verdicts = [decide(sp.expand((c1 - rho * c3) ** 2 - t**2 * var - quadratic))]
        for sign in (1, -1):
            root = (b + sign * sp.sqrt(b**2 - a * c)) / a
            verdicts.append(decide(sp.simplify(sp.expand(quadratic.subs(rho, root) * a))))
        at_estimate = sp.together(quadratic.subs(rho, c1 / c3) + t**2 * var.subs(rho, c1 / c3))
        verdicts.append(decide(sp.simplify(at_estimate)))
        return quadratic, combine(verdicts)

    return derivation("C32", "C32 Fieller's set is the quadratic with ustat_rl's coefficients",
                      "(c1 - rho c3)^2 - t^2 (v11 - 2 rho v13 + rho^2 v33) = a rho^2 - 2 b rho + c,"
                      " ends are its roots, c1/c3 inside", "polynomial identities in the symbols",
                      body)


def all_derivations() -> list[Derivation]:
    """Every derivation of this module with its listed kernel (for the catalogue)."""
    return [kernel_unbiased(name) for name in KERNELS] + [power_sum_forms(),
                                                          sketch_inner_product(),
                                                          factored_inner_product(),
                                                          fieller_quadratic()]

