"""Hoeffding decomposition of the GRPO kernel on a symbolic softmax bandit (docs/theory.md C3-C5, C7).

Everything is derived from the kernel ``h(o, o') = (w_a - w_a')(z - z')/2`` alone, by exact
expectation over the ``2K`` outcomes: ``h0 = E h``, ``h1(o) = E h(o, O')``,
``h2 = h - h1(o) - h1(o') + h0``, ``zeta1 = tr Cov h1``, ``zeta2 = tr Cov h``, and the exact
variance of the U-statistic for symbolic ``G`` by counting pairs of pairs that share 0, 1 or 2
indices. Each derivation takes the kernel and the claimed closed form as parameters, compares
them exactly (polynomials in ``pi``, ``p``, ``lo``, ``hi``) and reports
``proved-for-listed-cases`` with the cases ``K = 2`` and ``K = 3`` actions.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
import sympy as sp

from ._core import PROVED, Derivation, Verdict, combine, decide, derivation
from .bandit_model import SymbolicBandit, compare, compare_cases, symbolic_bandit
from .ustatistic import grpo_kernel_symbolic

__all__ = [
    "G",
    "components",
    "claimed_h1",
    "claimed_h2",
    "claimed_mse",
    "derived_mse_grpo",
    "hoeffding_h0",
    "hoeffding_h1",
    "hoeffding_h2",
    "hoeffding_orthogonality",
    "hoeffding_zetas",
    "exact_mse_general",
    "exact_mse_enumerated",
    "mse_expansion",
    "oracle_ratio_limit",
]

G = sp.Symbol("G", integer=True, positive=True)
EPS = sp.Symbol("epsilon", positive=True)  # 1/G in the expansion
CASES = (2, 3)


def _dot(u, v):
    return np.dot(u, v)


def _apply(kernel, o1, o2) -> np.ndarray:
    # vectors are numpy object arrays of field elements: keep arrays on the left of products
    return np.asarray(kernel(o1[2], o1[1], o2[2], o2[1]), dtype=object)


def components(n_actions: int, kernel: Callable = grpo_kernel_symbolic) -> dict:
    """``h0``, ``h1``, ``h2``, ``zeta1``, ``zeta2`` from the kernel alone, by exact expectation.

    Returns a dict with ``h0`` (K,), ``h1`` (list over outcomes), ``h2`` (dict over outcome
    pairs), ``kernel`` (dict over pairs), ``zeta1``, ``zeta2`` and the shared-index covariance
    ``cov1 = E[(h(O1,O2) - h0).(h(O1,O3) - h0)]``.
    """
    return _components(n_actions, kernel)


@lru_cache(maxsize=None)
def _components(n_actions: int, kernel: Callable) -> dict:
    b = symbolic_bandit(n_actions)
    items = b.items()
    n = len(items)
    pr = [p for _, p in items]
    table = {(i, j): _apply(kernel, items[i][0], items[j][0]) for i in range(n) for j in range(n)}
    h1 = [sum(table[i, j] * pr[j] for j in range(n)) for i in range(n)]
    h0 = sum(h1[i] * pr[i] for i in range(n))
    h2 = {(i, j): table[i, j] - h1[i] - h1[j] + h0 for i in range(n) for j in range(n)}
    zeta1 = sum(pr[i] * _dot(h1[i] - h0, h1[i] - h0) for i in range(n))
    centred = {key: value - h0 for key, value in table.items()}
    zeta2 = sum(pr[i] * pr[j] * _dot(centred[i, j], centred[i, j])
                for i in range(n) for j in range(n))
    # Cov(h(O1,O2), h(O1,O3)) summed over three outcomes from the table (not from h1)
    cov1 = sum(pr[i] * pr[j] * pr[k] * _dot(centred[i, j], centred[i, k])
               for i in range(n) for j in range(n) for k in range(n))
    return {"bandit": b, "items": items, "kernel": table, "h0": h0, "h1": h1, "h2": h2,
            "zeta1": zeta1, "zeta2": zeta2, "cov1": cov1}


def claimed_h1(b: SymbolicBandit, a: int, z) -> np.ndarray:
    """docs/theory.md C4: ``h1(a, z) = (w(a)(z - V) + g)/2``."""
    return (b.scores[a] * (z - b.value) + b.grad) / 2


def claimed_h2(b: SymbolicBandit, o1, o2) -> np.ndarray:
    """docs/theory.md C4: ``h2 = -(w(a)(z' - V) + w(a')(z - V))/2``."""
    (a1, z1), (a2, z2) = o1, o2
    return -(b.scores[a1] * (z2 - b.value) + b.scores[a2] * (z1 - b.value)) / 2


def _run_cases(cases, per_case) -> tuple[sp.Basic, Verdict]:
    verdicts, last = [], None
    for k in cases:
        expr, verdict = per_case(k)
        verdicts.append(verdict)
        last = expr
    return last, compare_cases(verdicts, cases)


def _cases(cases) -> tuple[str, ...]:
    return tuple(f"K={k}" for k in cases)


def hoeffding_h0(cases: Sequence[int] = CASES, kernel=grpo_kernel_symbolic,
                 claimed: Callable | None = None) -> Derivation:
    """``h0 = E h(O, O') = g = E[W Z]``: GRPO is unbiased for every ``G >= 2`` (C3, C4)."""
    claimed = claimed or (lambda b: b.grad)

    def per_case(k):
        comp = components(k, kernel)
        b = comp["bandit"]
        return b.to_sympy(comp["h0"]), compare(comp["h0"], claimed(b), b)

    return derivation("C4", "C4 h0 = g (unbiasedness, C3)", "E h(O, O') = g(x) = E[W Z | x]",
                      "exact expectation over 2K x 2K outcomes; polynomial identity",
                      lambda: _run_cases(cases, per_case), _cases(cases))


def hoeffding_h1(cases: Sequence[int] = CASES, kernel=grpo_kernel_symbolic,
                 claimed: Callable = claimed_h1) -> Derivation:
    """``h1(a, z) = E h((a, z), O') = (w(a)(z - V) + g)/2`` for every outcome (C4)."""

    def per_case(k):
        comp = components(k, kernel)
        b = comp["bandit"]
        claims = [claimed(b, a, z) for a, z in b.outcomes]
        return b.to_sympy(comp["h1"][-1]), compare(np.array(comp["h1"]), np.array(claims), b)

    return derivation("C4", "C4 h1 = (W(Z-V) + g)/2", "2(h1 - h0) = W(Z - V) - g: the linear "
                      "part of GRPO is g_oracle - g",
                      "conditional expectation over the second outcome; polynomial identity",
                      lambda: _run_cases(cases, per_case), _cases(cases))


def hoeffding_h2(cases: Sequence[int] = CASES, kernel=grpo_kernel_symbolic,
                 claimed: Callable = claimed_h2) -> Derivation:
    """Degenerate part ``h2 = -(W1 (Z2 - V) + W2 (Z1 - V))/2`` for every outcome pair (C4)."""

    def per_case(k):
        comp = components(k, kernel)
        b = comp["bandit"]
        n = len(b.outcomes)
        pairs = [(i, j) for i in range(n) for j in range(n)]
        derived = np.array([comp["h2"][i, j] for i, j in pairs])
        claims = np.array([claimed(b, b.outcomes[i], b.outcomes[j]) for i, j in pairs])
        return b.to_sympy(comp["h2"][0, n - 1]), compare(derived, claims, b)

    return derivation("C4", "C4 h2 = -(W1(Z2-V) + W2(Z1-V))/2",
                      "h - h1(o) - h1(o') + h0 equals the closed form",
                      "exact enumeration of all outcome pairs; polynomial identity",
                      lambda: _run_cases(cases, per_case), _cases(cases))


def hoeffding_orthogonality(cases: Sequence[int] = CASES, h1: Callable = claimed_h1,
                            h2: Callable = claimed_h2) -> Derivation:
    """The closed-form parts reconstruct the kernel and are mutually uncorrelated (C4).

    Checks, for the claimed ``h1`` and ``h2`` and ``h0 = g``: (a) ``h = h0 + (h1(o) - h0) +
    (h1(o') - h0) + h2`` for every pair; (b) ``E h1(O) = h0``; (c) ``E h2(o, O') = 0`` for every
    ``o`` (degeneracy); (d) ``E[(h1(O1) - h0) h2(O1, O2)^T] = 0``; (e)
    ``E[h2(O1, O2) h2(O1, O3)^T] = 0``. (c) implies the three parts of the U-statistic are
    uncorrelated.
    """

    def per_case(k):
        comp = components(k)
        b, items = comp["bandit"], comp["items"]
        n, h0 = len(items), b.grad
        lin = [np.asarray(h1(b, a, z), dtype=object) - h0 for a, z in b.outcomes]
        deg = {(i, j): np.asarray(h2(b, b.outcomes[i], b.outcomes[j]), dtype=object)
               for i in range(n) for j in range(n)}
        pr = [p for _, p in items]
        recon = np.array([comp["kernel"][i, j] - (h0 + lin[i] + lin[j] + deg[i, j])
                          for i in range(n) for j in range(n)])
        mean_lin = sum(lin[i] * pr[i] for i in range(n))
        degenerate = np.array([sum(deg[i, j] * pr[j] for j in range(n)) for i in range(n)])
        cross = sum(np.outer(lin[i], deg[i, j]) * (pr[i] * pr[j])
                    for i in range(n) for j in range(n))
        cond = [sum(deg[i, j] * pr[j] for j in range(n)) for i in range(n)]  # E[h2(o_i, O')]
        pairs = sum(np.outer(cond[i], cond[i]) * pr[i] for i in range(n))
        parts = [recon, mean_lin, degenerate, cross, pairs]
        verdict = combine(compare(part, 0, b) for part in parts)
        return b.to_sympy(cross), verdict

    return derivation("C4", "C4 orthogonality of h0, h1, h2",
                      "kernel = h0 + linear + degenerate parts; the parts are uncorrelated",
                      "exact expectations over up to three outcomes; polynomial identities",
                      lambda: _run_cases(cases, per_case), _cases(cases))


def _residual(b: SymbolicBandit):
    """``E||W||^2 Var(Z) + ||g||^2``, the exact second-order coefficient (C5)."""
    return b.score_sq_norm * b.reward_var + b.grad_sq


def hoeffding_zetas(cases: Sequence[int] = CASES, kernel=grpo_kernel_symbolic,
                    claimed_zeta1: Callable | None = None,
                    claimed_zeta2: Callable | None = None) -> Derivation:
    """``zeta1 = tr Sigma_oracle / 4`` and ``zeta2 = (tr Sigma_oracle + E||W||^2 Var Z + ||g||^2)/2``.

    Also checks that the shared-index covariance computed from the kernel table equals
    ``zeta1`` (the identity the variance formula of section 3 rests on).
    """
    claimed_zeta1 = claimed_zeta1 or (lambda b: b.trace_sigma_oracle / 4)
    claimed_zeta2 = claimed_zeta2 or (lambda b: (b.trace_sigma_oracle + _residual(b)) / 2)

    def per_case(k):
        comp = components(k, kernel)
        b = comp["bandit"]
        verdict = combine([compare(comp["zeta1"], claimed_zeta1(b), b),
                           compare(comp["zeta2"], claimed_zeta2(b), b),
                           compare(comp["cov1"], comp["zeta1"], b)])
        return b.to_sympy(np.array([comp["zeta1"], comp["zeta2"]])), verdict

    return derivation("C4", "C4 zeta1, zeta2", "zeta1 = tr Sigma_o/4; zeta2 = (tr Sigma_o + "
                      "E||W||^2 Var Z + ||g||^2)/2; Cov(h12, h13) = zeta1",
                      "exact expectations from the kernel table", lambda: _run_cases(cases, per_case),
                      _cases(cases))


def claimed_mse(b: SymbolicBandit, estimator: str, group_size=None):
    """docs/theory.md C5 closed forms of the per-prompt MSE (``group_size`` defaults to symbolic G)."""
    group_size = b.group_size if group_size is None else group_size
    if estimator == "oracle":
        return b.trace_sigma_oracle / group_size
    if estimator == "vanilla":
        return (b.sq_score_reward - b.grad_sq) / group_size
    if estimator == "grpo":
        return b.trace_sigma_oracle / group_size + _residual(b) / (group_size * (group_size - 1))
    raise ValueError(f"`estimator` must be one of 'oracle', 'vanilla', 'grpo', got {estimator!r}")


def _pair_counts(group_size=G) -> tuple:
    """Ordered pairs of index pairs sharing 2, 1 or 0 indices (``G`` may be a field element)."""
    pairs = group_size * (group_size - 1) / 2
    return pairs, pairs * 2 * (group_size - 2), pairs * (group_size - 2) * (group_size - 3) / 2


def _pair_count_verdict() -> Verdict:
    """The counts add up to ``C(G,2)^2`` (identity in ``G``) and match enumeration, G = 2..8."""
    same, one, none = _pair_counts()
    total = decide(sp.expand(same + one + none - (G * (G - 1) / 2) ** 2))
    listed = []
    for size in range(2, 9):
        idx = list(itertools.combinations(range(size), 2))
        shared = [len(set(p) & set(q)) for p in idx for q in idx]
        counts = [shared.count(2), shared.count(1), shared.count(0)]
        listed.append(decide(sp.Matrix(counts) - sp.Matrix([same, one, none]).subs(G, size),
                             general=False))
    return combine([total] + listed)


def derived_mse_grpo(comp: dict, group_size=None):
    """``Var U`` from pair counting with the kernel's own covariances (field element in ``G``).

    ``group_size`` defaults to the bandit's symbolic ``G``; pass ``1/epsilon`` for series.
    """
    b = comp["bandit"]
    group_size = b.group_size if group_size is None else group_size
    same, one, none = _pair_counts(group_size)
    h0, pr = comp["h0"], [p for _, p in comp["items"]]
    n = len(pr)
    # disjoint pairs are independent: their covariance is ||E(h - h0)||^2, computed, not assumed
    mean_centred = sum((comp["kernel"][i, j] - h0) * (pr[i] * pr[j])
                       for i in range(n) for j in range(n))
    cov0 = _dot(mean_centred, mean_centred)
    pairs = group_size * (group_size - 1) / 2
    return (same * comp["zeta2"] + one * comp["cov1"] + none * cov0) / pairs**2


def _iid_mse(b: SymbolicBandit, func):
    """``E||mean of G iid X - E X||^2 = G^-2 (G D + G(G-1) Off)`` with D, Off by enumeration."""
    mean = b.expect(func)
    diag = b.expect(lambda a, z, w: _dot(func(a, z, w) - mean, func(a, z, w) - mean))
    off = b.expect2(lambda o1, o2: _dot(func(*o1) - mean, func(*o2) - mean))
    size = b.group_size
    return (size * diag + size * (size - 1) * off) / size**2, mean


def exact_mse_general(cases: Sequence[int] = CASES, kernel=grpo_kernel_symbolic,
                      claimed: Callable = claimed_mse) -> Derivation:
    """Exact MSE(G) of vanilla, GRPO and oracle for symbolic ``G`` (C5).

    GRPO: ``Var U = C(G,2)^-2 sum over pairs of pairs of Cov``, with the covariance of pairs that
    share one index computed from the kernel (not from ``h1``) and the pair counts checked both
    as a symbolic identity and by enumeration for ``G = 2..8``. Vanilla and oracle: the variance
    of a mean of ``G`` iid terms, with the cross-covariance computed by enumeration.
    """

    def per_case(k):
        comp = components(k, kernel)
        b = comp["bandit"]
        grpo = derived_mse_grpo(comp)
        vanilla, _ = _iid_mse(b, lambda a, z, w: w * z)
        oracle, mean_o = _iid_mse(b, lambda a, z, w: w * (z - b.value))
        verdict = combine([_pair_count_verdict(),
                           compare(grpo, claimed(b, "grpo"), b),
                           compare(vanilla, claimed(b, "vanilla"), b),
                           compare(oracle, claimed(b, "oracle"), b),
                           compare(mean_o, b.grad, b)])
        return b.to_sympy(grpo), verdict

    return derivation("C5", "C5 exact MSE(G): vanilla, GRPO, oracle",
                      "MSE_GRPO = tr S/G + (E||W||^2 Var Z + ||g||^2)/(G(G-1)); MSE_oracle = tr S/G; "
                      "MSE_vanilla = (E||WZ||^2 - ||g||^2)/G, symbolic G",
                      "pair counting (identity + enumeration G=2..8) with exact kernel covariances",
                      lambda: _run_cases(cases, per_case), _cases(cases))


ENUMERATED_CASES = ((2, (2, 3, 4)), (3, (2,)))


def exact_mse_enumerated(cases=ENUMERATED_CASES, claimed: Callable = claimed_mse) -> Derivation:
    """Independent route: enumerate all ``(2K)^G`` groups and average ``||g_hat - g||^2`` (C5)."""
    labels = tuple(f"K={k}, G={s}" for k, sizes in cases for s in sizes)

    def body():
        verdicts, last = [], None
        for k, sizes in cases:
            b = symbolic_bandit(k)
            items, g, v = b.items(), b.grad, b.value
            for size in sizes:
                total = {"grpo": 0, "vanilla": 0, "oracle": 0}
                for group in itertools.product(items, repeat=size):
                    prob = np.prod([pr for _, pr in group])
                    zs = [o[1] for o, _ in group]
                    ws = [o[2] for o, _ in group]
                    s = sum(zs)
                    est = {
                        "grpo": sum(w * (z - (s - z) / (size - 1)) for w, z in zip(ws, zs)) / size,
                        "vanilla": sum(w * z for w, z in zip(ws, zs)) / size,
                        "oracle": sum(w * (z - v) for w, z in zip(ws, zs)) / size,
                    }
                    for name, value in est.items():
                        total[name] += prob * _dot(value - g, value - g)
                for name, value in total.items():
                    verdicts.append(compare(value, claimed(b, name, b.field(size)), b))
                last = b.to_sympy(total["grpo"])
        verdict = combine(verdicts)
        if verdict.status == PROVED:
            verdict = Verdict("proved-for-listed-cases")
        return last, verdict

    return derivation("C5", "C5 exact MSE by full enumeration of groups",
                      "the closed forms equal the MSE averaged over every group outcome",
                      "exact enumeration of (2K)^G groups, polynomial identity", body, labels)


def _taylor(value, eps, order: int) -> list:
    """Taylor coefficients at ``eps = 0`` of a field element analytic there."""
    coeffs = []
    for _ in range(order):
        num, den = value.numer, value.denom
        den0 = den.subs(eps.numer, 0)
        if den0 == 0:
            raise ValueError("expression has a pole at epsilon = 0")
        c = value.field(num.subs(eps.numer, 0)) / value.field(den0)
        coeffs.append(c)
        value = (value - c) / eps
    return coeffs


def mse_expansion(cases: Sequence[int] = CASES, claimed_leading: Callable | None = None,
                  claimed_next: Callable | None = None) -> Derivation:
    """Series of the derived MSE_GRPO in ``eps = 1/G``: ``tr Sigma_oracle eps + c eps^2 + ...``.

    ``c = E||W||^2 Var Z + ||g||^2`` (the exact residual), and every further coefficient is ``c``
    too, since ``1/(G(G-1)) = eps^2/(1 - eps)``.
    """
    claimed_leading = claimed_leading or (lambda b: b.trace_sigma_oracle)
    claimed_next = claimed_next or _residual

    def per_case(k):
        comp = components(k)
        b = comp["bandit"]
        coeff = _taylor(derived_mse_grpo(comp, 1 / b.eps), b.eps, 5)
        verdict = combine([compare(coeff[0], 0, b),
                           compare(coeff[1], claimed_leading(b), b),
                           compare(np.array(coeff[2:]), claimed_next(b), b)])
        eps = sp.Symbol("epsilon", positive=True)
        series = sum(b.to_sympy(c) * eps**n for n, c in enumerate(coeff)) + sp.O(eps**5)
        return series, verdict

    return derivation("C5", "C5 expansion of MSE_GRPO in 1/G",
                      "MSE_GRPO = tr S eps + c eps^2 + c eps^3 + O(eps^4), eps = 1/G, "
                      "c = E||W||^2 Var Z + ||g||^2",
                      "exact Taylor coefficients of the derived MSE (rational in eps)",
                      lambda: _run_cases(cases, per_case), _cases(cases))


def oracle_ratio_limit(cases: Sequence[int] = CASES, claimed=1) -> Derivation:
    """``MSE_GRPO / MSE_oracle -> 1`` as ``G -> infinity`` (Corollary 4, C7)."""
    tr, res = sp.Symbol("trS", positive=True), sp.Symbol("c", nonnegative=True)
    structured = tr / G + res / (G * (G - 1))

    def per_case(k):
        comp = components(k)
        b = comp["bandit"]
        # the derived MSE has this structure, with tr S > 0 and c >= 0 from the bandit
        size = b.group_size
        same = compare(derived_mse_grpo(comp),
                       b.trace_sigma_oracle / size + _residual(b) / (size * (size - 1)), b)
        ratio = sp.limit(structured / (tr / G), G, sp.oo)
        return ratio, combine([same, decide(ratio - claimed)])

    return derivation("C7", "C7 MSE_GRPO/MSE_oracle -> 1",
                      "lim_{G->oo} MSE_GRPO/MSE_oracle = 1 (tr Sigma_oracle > 0)",
                      "sympy limit of the derived ratio", lambda: _run_cases(cases, per_case),
                      _cases(cases))
