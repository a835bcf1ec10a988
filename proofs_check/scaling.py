"""Fixed-budget optimal group size (Theorem 7, docs/theory.md C17).

With ``N = B G`` samples per iteration the bound ``c1/B + c2/(BG) + c3/(BG^2)`` becomes
``(c1 G + c2 + c3/G)/N``; with the exact third term ``c3'/(BG(G-1))`` it is
``(c1 G + c2 + c3'/(G-1))/N``. Both are minimised in closed form below, with the curvature shown
positive on the whole domain (so the stationary point is the global minimum) and the minimiser
shown free of ``N``, of the number of iterations ``n``, and of any positive factor or additive
constant a learning-rate schedule puts in front of the MSE.
"""

from __future__ import annotations

import sympy as sp

from ._core import PROVED, Derivation, Verdict, combine, decide, derivation

__all__ = ["fixed_budget_bound", "exact_fixed_budget_mse", "optimal_group_size",
           "optimal_group_size_exact"]

G = sp.Symbol("G", positive=True)  # relaxed to a real variable for the argmin
N, n, T = sp.symbols("N n T", positive=True)
c1, c2, c3 = sp.symbols("c1 c2 c3", positive=True)
c3e = sp.Symbol("c3'", positive=True)
scale, shift = sp.symbols("alpha beta_0", positive=True)


def fixed_budget_bound(group_size=G, budget=N) -> sp.Basic:
    """``c1/B + c2/(BG) + c3/(BG^2)`` at ``B = N/G``."""
    batch = budget / group_size
    return c1 / batch + c2 / (batch * group_size) + c3 / (batch * group_size**2)


def exact_fixed_budget_mse(group_size=G, budget=N) -> sp.Basic:
    """``c1/B + c2/(BG) + c3'/(BG(G-1))`` at ``B = N/G`` (exact minibatch MSE, C6)."""
    batch = budget / group_size
    return (c1 / batch + c2 / (batch * group_size)
            + c3e / (batch * group_size * (group_size - 1)))


def _argmin(objective, domain_low) -> tuple[sp.Basic, Verdict]:
    """Unique stationary point above ``domain_low`` with positive curvature everywhere there."""
    roots = [r for r in sp.solve(sp.diff(objective, G), G)
             if sp.simplify(r - domain_low).is_positive]
    if len(roots) != 1:
        return sp.nan, Verdict("failed", f"stationary points above {domain_low}: {roots}")
    curvature = sp.simplify(sp.diff(objective, G, 2).subs(G, domain_low + sp.Symbol("u", positive=True)))
    if not curvature.is_positive:
        return roots[0], Verdict("failed", f"curvature {curvature} not shown positive")
    return roots[0], Verdict(PROVED)


def _independence(objective, root, domain_low) -> Verdict:
    """The argmin is the same for the total budget ``T = n N`` and for ``alpha f + beta_0``."""
    total = objective.subs(N, T / n)
    scheduled = scale * objective + shift
    checks = []
    for other in (total, scheduled):
        other_root, verdict = _argmin(other, domain_low)
        checks += [verdict, decide(sp.simplify(other_root - root))]
    free = root.free_symbols & {N, n, T, scale, shift}
    checks.append(Verdict(PROVED) if not free else
                  Verdict("disproved", f"argmin depends on {sorted(map(str, free))}"))
    return combine(checks)


#: The paper's minimiser and minimum of the fixed-budget bound (docs/theory.md C17).
PAPER_ARGMIN = sp.sqrt(c3 / c1)
PAPER_MINIMUM = (c2 + 2 * sp.sqrt(c1 * c3)) / N
#: The minimiser and minimum of the exact fixed-budget MSE (derived for this project).
EXACT_ARGMIN = 1 + sp.sqrt(c3e / c1)
EXACT_MINIMUM = (c1 + c2 + 2 * sp.sqrt(c1 * c3e)) / N


def _argmin_and_minimum(objective, lower, claimed_argmin, claimed_minimum):
    """Stationary point above ``lower``, checked against the claimed argmin, minimum and
    independence from N: ``(root, verdict)`` for a derivation body."""
    objective = sp.expand(objective)
    root, verdict = _argmin(objective, lower)
    value = sp.simplify(objective.subs(G, root))
    return root, combine([verdict, decide(sp.simplify(root - claimed_argmin)),
                          decide(sp.simplify(value - claimed_minimum)),
                          _independence(objective, root, lower)])


def optimal_group_size(claimed_argmin=PAPER_ARGMIN, claimed_minimum=PAPER_MINIMUM) -> Derivation:
    """``argmin_G (c1 G + c2 + c3/G)/N = sqrt(c3/c1)``, minimum ``(c2 + 2 sqrt(c1 c3))/N`` (C17)."""

    def body():
        return _argmin_and_minimum(fixed_budget_bound(), 0, claimed_argmin, claimed_minimum)

    return derivation("C17", "C17 G* = sqrt(c3/c1) (paper's bound)",
                      "argmin over G at fixed N of c1/B + c2/(BG) + c3/(BG^2) is sqrt(c3/c1), "
                      "minimum (c2 + 2 sqrt(c1 c3))/N, independent of N, n and the schedule",
                      "unique positive stationary point, curvature > 0 on G > 0", body)


def optimal_group_size_exact(claimed_argmin=EXACT_ARGMIN,
                             claimed_minimum=EXACT_MINIMUM) -> Derivation:
    """``argmin_{G>1} (c1 G + c2 + c3'/(G-1))/N = 1 + sqrt(c3'/c1)`` (C17, exact form)."""

    def body():
        return _argmin_and_minimum(exact_fixed_budget_mse(), 1, claimed_argmin, claimed_minimum)

    return derivation("C17", "C17 G* = 1 + sqrt(c3'/c1) (exact MSE)",
                      "argmin over G > 1 at fixed N of (c1 G + c2 + c3'/(G-1))/N is 1 + "
                      "sqrt(c3'/c1), minimum (c1 + c2 + 2 sqrt(c1 c3'))/N; free of N, n, schedule",
                      "unique stationary point above 1, curvature > 0 on G > 1", body)
