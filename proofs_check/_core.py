"""Result object and the decision procedure shared by every derivation.

A derivation computes an expression from first principles (a kernel, a recursion, a model) and
compares it with the *claimed* expression, which every derivation takes as a parameter so that a
perturbed claim runs through the same code path. The verdict comes from :func:`decide`:

``proved``
    the difference simplifies to zero for all values of the symbols (under their assumptions);
``proved-for-listed-cases``
    the difference is symbolically zero in each of the listed finite cases (for example each
    group size ``G = 2..8``, or ``K = 2`` and ``K = 3`` actions), with no general proof;
``disproved``
    an exact counterexample was found: a point, drawn from the symbols' domains and evaluated in
    rational arithmetic, where the difference is not zero;
``failed``
    neither: simplification did not reach zero and no counterexample was found, or the
    derivation raised. Nothing is ever called proved because it held at sampled numbers.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Mapping

import numpy as np
import sympy as sp

__all__ = [
    "PROVED",
    "PROVED_CASES",
    "DISPROVED",
    "FAILED",
    "STATUSES",
    "Derivation",
    "Verdict",
    "decide",
    "combine",
    "derivation",
    "is_zero",
    "domain_sampler",
    "decide_nonnegative",
]

PROVED = "proved"
PROVED_CASES = "proved-for-listed-cases"
DISPROVED = "disproved"
FAILED = "failed"
STATUSES = (PROVED, PROVED_CASES, DISPROVED, FAILED)

#: Seed of the deterministic counterexample search (a search, not a test of luck: a point where
#: the difference is non-zero disproves the claim whatever seed found it).
SEARCH_SEED = 20260301
#: Rational points tried by the counterexample search before giving up with ``failed``.
SEARCH_POINTS = 12
#: A transcendental difference counts as non-zero at a point only if its 60-digit value exceeds
#: this in magnitude (evalf's error is far below it), so rounding cannot fake a counterexample.
NONZERO_FLOOR = 1e-30


@dataclass(frozen=True)
class Derivation:
    """Outcome of one symbolic derivation.

    Attributes
    ----------
    claim_id : str
        docs/theory.md claim ID (``"C4"``, ``"C20"``, ...).
    name : str
        Short label of the derivation, unique within the catalogue.
    statement : str
        What is derived, in words.
    method : str
        How: the route from first principles and the decision procedure.
    status : str
        One of :data:`STATUSES`.
    expression : sympy.Basic
        The derived expression (``sympy.nan`` when the derivation raised).
    latex : str
        ``sympy.latex(expression)``.
    seconds : float
        Wall-clock time of the derivation.
    cases : tuple of str
        The finite cases covered, for ``proved-for-listed-cases`` (empty otherwise).
    detail : str
        The counterexample for ``disproved``, the reason for ``failed``, or a remark.
    """

    claim_id: str
    name: str
    statement: str
    method: str
    status: str
    expression: sp.Basic
    latex: str
    seconds: float
    cases: tuple[str, ...] = field(default_factory=tuple)
    detail: str = ""

    @property
    def holds(self) -> bool:
        """True for ``proved`` and ``proved-for-listed-cases``."""
        return self.status in (PROVED, PROVED_CASES)


@dataclass(frozen=True)
class Verdict:
    """Status of one comparison with the evidence behind it."""

    status: str
    detail: str = ""


Sampler = Callable[[np.random.Generator], sp.Rational]


def domain_sampler(symbol: sp.Symbol) -> Sampler:
    """Random exact rationals respecting a symbol's assumptions (integer, positive, ...).

    Names beginning with ``p`` or ``prob`` are read as probabilities in (0, 1) when positive;
    pass an explicit sampler to :func:`decide` for any other constraint.
    """
    if symbol.is_integer:
        low = 2 if symbol.is_positive else -4

        def draw_int(rng):
            return sp.Integer(int(rng.integers(low, low + 9)))

        return draw_int

    def draw(rng):
        value = Fraction(int(rng.integers(1, 97)), int(rng.integers(1, 29)))
        if symbol.is_positive or symbol.is_nonnegative:
            return sp.Rational(value.numerator, value.denominator)
        sign = 1 if rng.random() < 0.5 else -1
        return sign * sp.Rational(value.numerator, value.denominator)

    return draw


def is_zero(expr: sp.Basic) -> bool:
    """Exact zero test: rational-function cancellation first, ``simplify`` as a fallback."""
    expr = sp.sympify(expr)
    if expr == 0:
        return True
    expanded = sp.expand(expr)
    if expanded == 0:
        return True
    if not expanded.has(sp.Sum, sp.Function, sp.Pow) or expanded.is_polynomial():
        return False
    if not expanded.has(sp.Sum) and expanded.is_rational_function():
        # cancellation to lowest terms is a complete zero test for rational functions
        return sp.cancel(sp.together(expanded)) == 0
    try:
        if sp.cancel(sp.together(expanded)) == 0:
            return True
    except sp.PolynomialError:
        pass
    return sp.simplify(expanded) == 0


def _as_exact_scalars(expr) -> list[sp.Basic]:
    if isinstance(expr, sp.MatrixBase):
        return list(expr)
    if isinstance(expr, (list, tuple)):
        out = []
        for item in expr:
            out.extend(_as_exact_scalars(item))
        return out
    return [sp.sympify(expr)]


def decide(difference, *, variables=None, samplers: Mapping[sp.Symbol, Sampler] | None = None,
           constraint: Callable[[dict], bool] | None = None, evaluate=None,
           general: bool = True, try_proof: bool = True) -> Verdict:
    """Decide whether ``difference`` (scalar, matrix or list) vanishes identically.

    Parameters
    ----------
    difference : sympy expression, Matrix or list of them
        Derived minus claimed.
    variables : sequence of sympy.Symbol, optional
        Symbols the counterexample search draws; default every free symbol.
    samplers : mapping, optional
        Per-symbol samplers of exact values; symbols without one use :func:`domain_sampler`.
    constraint : callable, optional
        ``constraint(point) -> bool``; sampled points violating it are skipped (for example
        ``2 beta lambda > 1``).
    evaluate : callable, optional
        ``evaluate(expr, point) -> sympy number``; defaults to ``expr.subs(point)``. Needed for
        expressions holding symbolic sums (see :mod:`proofs_check.ustatistic`).
    general : bool
        Whether a symbolic zero is a general proof (``proved``) or covers only a finite list
        of cases recorded by the caller (``proved-for-listed-cases``).
    try_proof : bool
        Skip the (possibly slow) zero test and search for a counterexample at once; for
        statements that two expressions *differ*. Without a counterexample the verdict is
        ``failed``, never ``proved``.
    """
    parts = _as_exact_scalars(difference)
    if not try_proof:
        nonzero = [p for p in parts if p != 0]
        if not nonzero:
            return Verdict(PROVED if general else PROVED_CASES, "")
    else:
        nonzero = [p for p in parts if not is_zero(p)]
    if not nonzero:
        return Verdict(PROVED if general else PROVED_CASES, "")
    rng = np.random.default_rng(SEARCH_SEED)
    samplers = dict(samplers or {})
    if variables is None:
        variables = set().union(*(p.free_symbols for p in nonzero))
    symbols = sorted(variables, key=str)
    tried = 0
    for _ in range(SEARCH_POINTS * 5):
        point = {s: samplers.get(s, domain_sampler(s))(rng) for s in symbols}
        if constraint is not None and not constraint(point):
            continue
        tried += 1
        for part in nonzero:
            value = sp.sympify(evaluate(part, point) if evaluate else part.subs(point))
            if value.is_number and not value.is_Rational:
                # transcendental value: 60 significant digits, non-zero only if far from 0
                approx = value.evalf(60)
                value = approx if approx.is_finite and abs(approx) > NONZERO_FLOOR else sp.Integer(0)
            if value.is_number and value != 0 and value.is_finite:
                where = ", ".join(f"{s}={v}" for s, v in point.items())
                return Verdict(DISPROVED, f"non-zero difference {value} at {where}")
        if tried >= SEARCH_POINTS:
            break
    return Verdict(FAILED, f"difference did not simplify to zero and no counterexample in "
                           f"{tried} exact points: {sp.sstr(nonzero[0])[:200]}")


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Join sub-verdicts: a counterexample anywhere disproves, any failure fails, and a result
    is only ``proved`` when every part is proved in general."""
    verdicts = list(verdicts)
    for status in (DISPROVED, FAILED, PROVED_CASES):
        hits = [v for v in verdicts if v.status == status]
        if hits:
            return Verdict(status, "; ".join(v.detail for v in hits if v.detail))
    return Verdict(PROVED, "")


def derivation(claim_id: str, name: str, statement: str, method: str,
               body: Callable[[], tuple[sp.Basic, Verdict]], cases: Iterable[str] = ()
               ) -> Derivation:
    """Run ``body() -> (expression, verdict)``, timing it; an exception becomes ``failed``."""
    start = time.perf_counter()
    try:
        expression, verdict = body()
        expression = sp.sympify(expression)
        status, detail = verdict.status, verdict.detail
    except Exception:  # reported in the result, never hidden
        expression, status = sp.nan, FAILED
        detail = "derivation raised: " + traceback.format_exc(limit=3).strip().splitlines()[-1]
    seconds = time.perf_counter() - start
    cases = tuple(cases) if status == PROVED_CASES else ()
    return Derivation(claim_id, name, statement, method, status, expression,
                      sp.latex(expression), seconds, cases, detail)


def _all_coeffs_nonnegative(poly_expr, variables) -> bool:
    poly = sp.Poly(sp.expand(poly_expr), *variables)
    return all(c.is_nonnegative for c in poly.coeffs())


def decide_nonnegative(expr, variables, *, search=None, samplers=None,
                       constraint=None) -> Verdict:
    """Decide ``expr >= 0`` for non-negative ``variables`` (an inequality, not an identity).

    ``proved`` when ``expr`` is a ratio of polynomials whose coefficients are all non-negative
    (a certificate, since every variable is non-negative). Otherwise a counterexample is looked
    for in ``search`` (an expression over a *realisable* family, default ``expr`` itself): a
    point where it is negative gives ``disproved``; none gives ``failed``.
    """
    num, den = sp.fraction(sp.together(sp.expand(expr)))
    if (_all_coeffs_nonnegative(num, variables) and _all_coeffs_nonnegative(den, variables)) or \
            (_all_coeffs_nonnegative(-num, variables) and _all_coeffs_nonnegative(-den, variables)):
        return Verdict(PROVED)
    target = expr if search is None else search
    rng = np.random.default_rng(SEARCH_SEED)
    samplers = dict(samplers or {})
    symbols = sorted(target.free_symbols, key=str)
    tried = 0
    for _ in range(SEARCH_POINTS * 20):
        point = {s: samplers.get(s, domain_sampler(s))(rng) for s in symbols}
        if constraint is not None and not constraint(point):
            continue
        tried += 1
        value = sp.simplify(target.subs(point))
        if value.is_negative:
            where = ", ".join(f"{s}={v}" for s, v in point.items())
            return Verdict(DISPROVED, f"negative value {value} at {where}")
        if tried >= SEARCH_POINTS * 4:
            break
    return Verdict(FAILED, f"no non-negativity certificate and no negative value in {tried} points")
