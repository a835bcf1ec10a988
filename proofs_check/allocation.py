"""Per-prompt group sizes at a fixed budget: why greedy marginal allocation is exact (C40).

For an unbiased rule the batch MSE is ``sum_x f(x)^2 MSE_x(G_x)`` (docs/theory.md C40), a sum of
one term per prompt. Greedy marginal allocation (start every prompt at its smallest group, give
each further rollout to the prompt whose term falls most) minimises such a sum exactly when
every term is decreasing and convex in ``G``: the marginal gains ``h(G) - h(G+1)`` of each
prompt then form a non-increasing sequence, so the set of the ``R`` largest gains over all
prompts is a union of prefixes, the greedy picks exactly that set, and every other allocation
spends its ``R`` rollouts on ``R`` gains whose sum is no larger (the classical result for
separable convex resource allocation; Ibaraki and Katoh 1988, ch. 4).

The derivations below prove the hypothesis for Theorem 2's exact form
``MSE(G) = a/G + b/(G(G-1))`` with ``a = tr Sigma_oracle >= 0`` and
``b = E||W||^2 Var(Z|x) + ||g(x)||^2 >= 0`` (first difference <= 0, second difference >= 0 for
every ``G >= 2``), and for the ``a/G`` form of the oracle and vanilla estimators and of VIP's
variance model; and they check the exchange argument's conclusion in exact rational arithmetic
on listed instances (greedy = minimum over every composition).
"""

from __future__ import annotations

import itertools

import sympy as sp

from ._core import PROVED, PROVED_CASES, Verdict, combine, decide, decide_nonnegative, derivation

__all__ = ["grpo_mse_form", "grpo_convex_decreasing", "one_over_g_convex_decreasing",
           "greedy_equals_minimum", "CLAIMED_FIRST_DIFFERENCE", "CLAIMED_SECOND_DIFFERENCE"]

a, b = sp.symbols("a b", nonnegative=True)
u = sp.Symbol("u", nonnegative=True)  # G = 2 + u ranges over G >= 2
G = sp.Symbol("G", positive=True)


def grpo_mse_form(group_size=G):
    """``a/G + b/(G(G-1))``: Theorem 2's exact per-prompt MSE of leave-one-out GRPO (C5)."""
    return a / group_size + b / (group_size * (group_size - 1))


#: ``MSE(G+1) - MSE(G)``, derived by hand: minus a positive quantity for G >= 2.
CLAIMED_FIRST_DIFFERENCE = -(a / (G * (G + 1)) + 2 * b / ((G - 1) * G * (G + 1)))
#: ``MSE(G+2) - 2 MSE(G+1) + MSE(G)``, derived by hand: positive for G >= 2.
CLAIMED_SECOND_DIFFERENCE = (2 * a / (G * (G + 1) * (G + 2))
                             + 6 * b / ((G - 1) * G * (G + 1) * (G + 2)))


def grpo_convex_decreasing(claimed_first=CLAIMED_FIRST_DIFFERENCE,
                           claimed_second=CLAIMED_SECOND_DIFFERENCE):
    """GRPO's exact MSE is decreasing and convex in ``G`` on ``G >= 2`` for ``a, b >= 0``."""

    def body():
        h = grpo_mse_form
        first = sp.together(h(G + 1) - h(G))
        second = sp.together(h(G + 2) - 2 * h(G + 1) + h(G))
        at = {G: 2 + u}
        verdicts = [decide(sp.simplify(first - claimed_first)),
                    decide(sp.simplify(second - claimed_second)),
                    decide_nonnegative(-claimed_first.subs(at), (a, b, u)),
                    decide_nonnegative(claimed_second.subs(at), (a, b, u))]
        return second, combine(verdicts)

    return derivation("C40", "C40 GRPO MSE convex, decreasing in G",
                      "a/G + b/(G(G-1)) with a, b >= 0 has first difference "
                      "-(a/(G(G+1)) + 2b/((G-1)G(G+1))) <= 0 and second difference "
                      "2a/(G(G+1)(G+2)) + 6b/((G-1)G(G+1)(G+2)) >= 0 for every G >= 2",
                      "finite differences simplified against the claimed forms; sign by "
                      "non-negative coefficients at G = 2 + u", body)


def one_over_g_convex_decreasing():
    """``a/G`` (oracle, vanilla, VIP's ``p(1-p)/G``) is decreasing and convex on ``G >= 1``."""

    def body():
        h = a / G
        first = sp.together(h.subs(G, G + 1) - h)
        second = sp.together(h.subs(G, G + 2) - 2 * h.subs(G, G + 1) + h)
        at = {G: 1 + u}
        verdicts = [decide(sp.simplify(first + a / (G * (G + 1)))),
                    decide(sp.simplify(second - 2 * a / (G * (G + 1) * (G + 2)))),
                    decide_nonnegative(-first.subs(at), (a, u)),
                    decide_nonnegative(second.subs(at), (a, u))]
        return second, combine(verdicts)

    return derivation("C40", "C40 a/G convex, decreasing in G",
                      "a/G with a >= 0 has first difference -a/(G(G+1)) <= 0 and second "
                      "difference 2a/(G(G+1)(G+2)) >= 0 for G >= 1",
                      "finite differences; sign by non-negative coefficients at G = 1 + u", body)


#: Exact rational instances ``(a_x, b_x)`` per prompt, and the spare rollouts, for the exchange
#: argument's check: different orders of magnitude, ties, a prompt with ``a = 0``.
_INSTANCES = (
    ((1, 0), (4, 1)),
    ((sp.Rational(1, 3), 2), (5, 0), (1, 1)),
    ((0, 3), (2, sp.Rational(1, 2)), (7, 7), (1, 0)),
    ((1, 1), (1, 1), (1, 1)),
)
_SPARE = (0, 1, 2, 3, 5, 8)


def _greedy(terms, spare, low=2):
    sizes = [low] * len(terms)
    for _ in range(spare):
        gains = [h(s) - h(s + 1) for h, s in zip(terms, sizes)]
        best = max(range(len(terms)), key=lambda x: (gains[x], -x))
        sizes[best] += 1
    return sizes


def _minimum(terms, spare, low=2):
    best = None
    for extra in itertools.product(range(spare + 1), repeat=len(terms)):
        if sum(extra) != spare:
            continue
        value = sum(h(low + k) for h, k in zip(terms, extra))
        best = value if best is None or value < best else best
    return best


def greedy_equals_minimum(greedy=_greedy):
    """Greedy reaches the minimum over every composition, in exact rationals (listed cases)."""
    cases = []

    def body():
        verdicts = []
        for i, instance in enumerate(_INSTANCES):
            terms = [lambda g, ax=ax, bx=bx: sp.Rational(ax) / g + sp.Rational(bx) / (g * (g - 1))
                     for ax, bx in instance]
            for spare in _SPARE:
                sizes = greedy(terms, spare)
                value = sum(h(s) for h, s in zip(terms, sizes))
                gap = value - _minimum(terms, spare)
                verdicts.append(decide(sp.nsimplify(gap)))
                cases.append(f"instance {i} (P={len(instance)}), R={spare}")
        verdict = combine(verdicts)
        if verdict.status == PROVED:
            verdict = Verdict(PROVED_CASES, f"{len(verdicts)} instances")
        return sp.Integer(len(verdicts)), verdict

    result = derivation("C40", "C40 greedy = exact minimum",
                        "greedy marginal allocation of R spare rollouts attains the minimum of "
                        "sum_x a_x/G_x + b_x/(G_x(G_x-1)) over every composition",
                        "exact rational arithmetic on listed instances, all compositions", body,
                        cases=cases)
    return result
