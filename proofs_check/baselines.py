"""Prompt-only baselines: MSE(b), the optimal constant b*, the finite-G reversal (C8, C9, C10).

General results are derived for *any* joint law of ``(W, Z)`` given the prompt, in terms of the
moments ``m0 = E||W||^2``, ``m1 = E[||W||^2 Z]``, ``m2 = E[||W||^2 Z^2]``, ``V = E Z``,
``s2 = Var Z`` and ``gsq = ||g||^2``, using only the score identity ``E W = 0`` and linearity
(the map :func:`_moment` sends ``||W||^2 Z^k`` to its moment). The softmax bandit supplies the
cross-check (:func:`baseline_mse_bandit`) and the exact witness for C9.
"""

from __future__ import annotations

from typing import Callable, Sequence

import sympy as sp

from ._core import PROVED, PROVED_CASES, Derivation, Verdict, combine, decide, derivation
from .bandit_model import compare, compare_cases, symbolic_bandit
from .hoeffding import _iid_mse, claimed_mse

__all__ = [
    "MOMENTS",
    "derived_baseline_mse",
    "claimed_baseline_mse",
    "paper_second_moment",
    "baseline_mse_general",
    "baseline_mse_bandit",
    "prompt_baseline_optimality",
    "optimal_constant_baseline",
    "value_baseline_counterexample",
    "reversal_condition",
    "reversal_binary_threshold",
]

G = sp.Symbol("G", integer=True, positive=True)
b = sp.Symbol("b", real=True)
V = sp.Symbol("V", real=True)
m0 = sp.Symbol("m0", positive=True)
m1, m2 = sp.symbols("m1 m2", real=True)
s2, gsq = sp.symbols("s2 gsq", nonnegative=True)
_N, _Z = sp.symbols("N_W Z", real=True)  # ||W||^2 and Z inside expectations
MOMENTS = {"m0": m0, "m1": m1, "m2": m2, "V": V, "s2": s2, "gsq": gsq, "b": b, "G": G}

#: Assumption 2 (||W||^2 uncorrelated with Z): m1 = m0 V.
ASSUMPTION_2 = {m1: m0 * V}


def _moment(poly: sp.Basic) -> sp.Basic:
    """Linear map ``E``: ``||W||^2 Z^k -> m_k`` on polynomials of degree 1 in ``||W||^2``."""
    table = {0: m0, 1: m1, 2: m2}
    out = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(poly)):
        coeff, rest = term.as_independent(_N, _Z)
        k = sp.degree(rest, _Z) if rest.has(_Z) else 0
        if sp.expand(rest / _Z**k) != _N:
            raise ValueError(f"term {term} is not ||W||^2 Z^k times a constant")
        out += coeff * table[int(k)]
    return out


def trace_sigma_oracle() -> sp.Basic:
    """``tr Sigma_oracle = E||W(Z - V)||^2 - ||g||^2``."""
    return _moment(_N * (_Z - V) ** 2) - gsq


def covariance() -> sp.Basic:
    """``Cov(||W||^2, Z) = m1 - m0 V``."""
    return m1 - m0 * V


def derived_baseline_mse(baseline=b, group_size=G) -> sp.Basic:
    """``MSE(b) = (E||W(Z - b)||^2 - ||E W(Z - b)||^2)/G``; ``E W(Z - b) = g`` since ``E W = 0``."""
    return (_moment(_N * (_Z - baseline) ** 2) - gsq) / group_size


def claimed_baseline_mse(baseline=b, group_size=G, cross_factor=2) -> sp.Basic:
    """docs/theory.md C8: ``[tr S + 2(V - b) Cov(||W||^2, Z) + (V - b)^2 m0]/G``."""
    return (trace_sigma_oracle() + cross_factor * (V - baseline) * covariance()
            + (V - baseline) ** 2 * m0) / group_size


def paper_second_moment(baseline=b, group_size=G) -> sp.Basic:
    """The second moment as the proof of Corollary 5 has it (docs/theory.md section 6): the cross
    term without its factor 2 and without the ``(1 - 1/G)||g||^2`` term."""
    return (trace_sigma_oracle() + gsq + (V - baseline) * covariance()
            + (V - baseline) ** 2 * m0) / group_size


def baseline_mse_general(claimed: sp.Basic | None = None) -> Derivation:
    """MSE of any prompt-only baseline, for any law of ``(W, Z)`` (C8)."""
    claimed = claimed_baseline_mse() if claimed is None else claimed

    def body():
        derived = derived_baseline_mse()
        return sp.factor_terms(derived), decide(sp.expand(derived - claimed))

    return derivation("C8", "C8 MSE of a prompt-only baseline",
                      "MSE(b) = [tr S + 2(V-b) Cov(||W||^2,Z) + (V-b)^2 E||W||^2]/G",
                      "moments m0, m1, m2 with E W = 0; polynomial identity", body)


def prompt_baseline_optimality(claimed_gap: sp.Basic | None = None) -> Derivation:
    """Under Assumption 2, ``MSE(b) - tr S/G = m0 (V - b)^2/G >= 0``, zero iff ``b = V``; and
    ``MSE(0) - MSE(V) = m0 V^2/G > 0`` when ``V != 0`` (C8)."""
    claimed_gap = m0 * (V - b) ** 2 / G if claimed_gap is None else claimed_gap

    def body():
        gap = sp.expand((derived_baseline_mse() - trace_sigma_oracle() / G).subs(ASSUMPTION_2))
        verdicts = [decide(gap - claimed_gap)]
        # a square times a positive factor: non-negative, and zero exactly at b = V
        factored = sp.factor(gap)
        square_form = sp.expand(factored - m0 * (b - V) ** 2 / G) == 0
        verdicts.append(Verdict(PROVED) if square_form else
                        Verdict("failed", f"gap {factored} is not m0 (b-V)^2/G"))
        vanilla_gap = sp.expand((derived_baseline_mse(0) - derived_baseline_mse(V))
                                .subs(ASSUMPTION_2))
        verdicts.append(decide(vanilla_gap - m0 * V**2 / G))
        return factored, combine(verdicts)

    return derivation("C8", "C8 value baseline optimal under Assumption 2",
                      "MSE(b) - tr S/G = E||W||^2 (V-b)^2/G >= 0; vanilla worse by E||W||^2 V^2/G",
                      "substitute m1 = m0 V; factorisation into a square", body)


def baseline_mse_bandit(cases: Sequence[int] = (2, 3), claimed: Callable | None = None
                        ) -> Derivation:
    """Cross-check of C8 on the softmax bandit: the iid-mean variance of ``W(Z - b)`` equals the
    general closed form with the bandit's own moments."""

    def default(bd):
        cov = bd.sq_score_times_reward - bd.score_sq_norm * bd.value
        diff = bd.value - bd.baseline
        return (bd.trace_sigma_oracle + diff * cov * 2 + diff**2 * bd.score_sq_norm) / bd.group_size

    claimed = claimed or default

    def body():
        verdicts, last = [], None
        for k in cases:
            bd = symbolic_bandit(k)
            derived, mean = _iid_mse(bd, lambda a, z, w, base=bd.baseline: w * (z - base))
            verdicts.append(combine([compare(derived, claimed(bd), bd),
                                     compare(mean, bd.grad, bd)]))
            last = bd.to_sympy(derived)
        return last, compare_cases(verdicts, cases)

    return derivation("C8", "C8 baseline MSE on the softmax bandit",
                      "E||g_b - g||^2 by enumeration equals the C8 closed form",
                      "exact expectation over outcomes and outcome pairs", body,
                      tuple(f"K={k}" for k in cases))


def optimal_constant_baseline(claimed: sp.Basic = m1 / m0) -> Derivation:
    """``argmin_b MSE(b) = b* = E[||W||^2 Z]/E||W||^2`` and ``MSE(V) - MSE(b*) = Cov^2/(m0 G)`` (C9)."""

    def body():
        mse = derived_baseline_mse()
        stationary = sp.solve(sp.diff(mse, b), b)
        curvature = sp.simplify(sp.diff(mse, b, 2))
        verdicts = [Verdict(PROVED) if len(stationary) == 1 else
                    Verdict("failed", f"stationary points {stationary}"),
                    Verdict(PROVED) if curvature.is_positive else
                    Verdict("failed", f"curvature {curvature} not shown positive")]
        best = stationary[0] if stationary else sp.nan
        verdicts.append(decide(sp.together(best - claimed)))
        gain = sp.together(derived_baseline_mse(V) - derived_baseline_mse(best))
        verdicts.append(decide(sp.together(gain - covariance() ** 2 / (m0 * G))))
        return best, combine(verdicts)

    return derivation("C9", "C9 optimal constant baseline b*",
                      "b* = E[||W||^2 Z]/E||W||^2; MSE(V) - MSE(b*) = Cov(||W||^2,Z)^2/(E||W||^2 G)",
                      "stationary point and curvature of the derived MSE(b)", body)


#: Exact witness for C9 on the K=2 bandit: pi = (1/5, 4/5), p = (9/10, 1/10), Bernoulli reward.
WITNESS = {"pi1": sp.Rational(1, 5), "p1": sp.Rational(9, 10), "p2": sp.Rational(1, 10),
           "lo": 0, "hi": 1}


def value_baseline_counterexample(witness: dict | None = None) -> Derivation:
    """A softmax bandit where ``b*`` beats the value baseline: exact gap ``> 0`` (C9).

    The claim is existential, so one exact rational witness settles it; the status names it.
    """
    witness = dict(WITNESS if witness is None else witness)

    def body():
        bd = symbolic_bandit(2)
        size = sp.Integer(4)
        point = {s: witness[str(s)] for s in bd.symbols if str(s) in witness}
        star = bd.to_sympy(bd.sq_score_times_reward) / bd.to_sympy(bd.score_sq_norm)
        mse = lambda base: bd.to_sympy(_iid_mse(bd, lambda a, z, w: w * (z - base))[0])  # noqa: E731
        value = bd.to_sympy(bd.value)
        b_sym = bd.symbols[-1]
        mse_b = mse(bd.baseline)
        gap = (mse_b.subs(b_sym, value) - mse_b.subs(b_sym, star)).subs(bd.symbols[2 * 2 + 1], size)
        gap_at = sp.nsimplify(gap.subs(point))
        status = Verdict(PROVED_CASES) if gap_at.is_positive else Verdict(
            "disproved", f"gap {gap_at} is not positive at the witness")
        return gap_at, status

    cases = (", ".join(f"{k}={v}" for k, v in witness.items()) + ", G=4",)
    return derivation("C9", "C9 b* beats the value baseline (witness)",
                      "there is a bandit with MSE(V) - MSE(b*) > 0 (Assumption 2 fails)",
                      "exact rational evaluation of the derived gap at a witness", body, cases)


def reversal_condition(claimed: sp.Basic | None = None) -> Derivation:
    """``MSE_vanilla - MSE_GRPO = [2 V m1 - V^2 m0 - c/(G-1)]/G`` with ``c = m0 s2 + gsq``; under
    Assumption 2, GRPO is better iff ``c/(G - 1) < m0 V^2`` (C10)."""
    c = m0 * s2 + gsq
    claimed = (m0 * V**2 - c / (G - 1)) / G if claimed is None else claimed

    def body():
        vanilla = derived_baseline_mse(0)
        grpo = trace_sigma_oracle() / G + c / (G * (G - 1))
        diff = sp.together(vanilla - grpo)
        general = decide(sp.together(diff - (2 * V * m1 - V**2 * m0 - c / (G - 1)) / G))
        under = decide(sp.together(diff.subs(ASSUMPTION_2) - claimed))
        return sp.factor(diff.subs(ASSUMPTION_2)), combine([general, under])

    return derivation("C10", "C10 finite-G reversal condition",
                      "under Assumption 2: MSE_vanilla - MSE_GRPO = (E||W||^2 V^2 - c/(G-1))/G, "
                      "c = E||W||^2 Var Z + ||g||^2",
                      "difference of the exact MSEs (C5, C8 at b = 0)", body)


def reversal_binary_threshold(claimed: Callable | None = None) -> Derivation:
    """Binary reward with one success probability ``p`` for every action: Assumption 2 holds,
    ``g = 0``, and GRPO beats vanilla iff ``G - 1 > (1 - p)/p`` (C10), derived on the bandit."""
    claimed = claimed or (lambda p: (1 - p) / p)

    def body():
        verdicts, threshold = [], sp.nan
        for k in (2, 3):
            bd = symbolic_bandit(k)
            p = sp.Symbol("p", positive=True)
            subs = {s: p for s in bd.symbols[k - 1: 2 * k - 1]}
            subs.update({bd.symbols[2 * k - 1]: 0, bd.symbols[2 * k]: 1})
            cov = bd.to_sympy(bd.sq_score_times_reward - bd.score_sq_norm * bd.value).subs(subs)
            gsq_ = bd.to_sympy(bd.grad_sq).subs(subs)
            diff = bd.to_sympy(claimed_mse(bd, "vanilla") - claimed_mse(bd, "grpo")).subs(subs)
            verdicts += [decide(sp.simplify(cov)), decide(sp.simplify(gsq_))]
            size = bd.symbols[2 * k + 1]
            score_sq = bd.to_sympy(bd.score_sq_norm).subs(subs)  # E||W||^2 > 0
            # G (G - 1) E||W||^2 > 0, so the sign is that of a polynomial in G and p alone
            scaled = sp.factor(sp.cancel(diff * size * (size - 1) / score_sq))
            if scaled.free_symbols - {size, p}:
                verdicts.append(Verdict("failed", f"sign factor depends on the policy: {scaled}"))
                continue
            poly = sp.Poly(scaled, size)
            roots = sp.solve(scaled, size)
            if poly.degree() != 1 or not poly.LC().is_positive or len(roots) != 1:
                verdicts.append(Verdict("failed", f"G (G-1) (MSE_v - MSE_GRPO)/E||W||^2 = {scaled}"))
                continue
            threshold = sp.simplify(roots[0] - 1)
            verdicts.append(decide(sp.simplify(threshold - claimed(p))))
        return threshold, compare_cases(verdicts, (2, 3))

    return derivation("C10", "C10 binary threshold G - 1 > (1-p)/p",
                      "equal success probability p: GRPO beats vanilla iff G - 1 > (1-p)/p",
                      "root in G of MSE_vanilla - MSE_GRPO on the bandit, Cov = g = 0 shown",
                      body, ("K=2", "K=3"))
