"""Lemma 1 and the full-mean identity for a general group size (docs/theory.md C1, C2).

General ``G`` is handled with indexed symbols ``W[i]``, ``Z[i]`` and sums over ``1..G``. Sums
over a product of full ranges are evaluated by distributivity (:func:`full_sum`): a monomial
``prod_i f_i(index_i)`` summed over independent indices is the product of one-index sums, each
written with the canonical dummy ``t`` so that equal sums are equal sympy objects. Restricted
ranges use two stated lemmas, each checked before use:

* leave-one-out: ``sum_{k != g} f(k) = sum_k f(k) - f(g)``;
* pairs: ``sum_{i<j} f(i, j) = (sum_{i,j} f - sum_i f(i, i)) / 2`` when ``f(i, j) = f(j, i)``
  (the symmetry is verified symbolically; without it the general route does not apply and the
  verdict can only come from a counterexample).

The expanded cases ``G = 2..8`` use explicit symbolic vectors ``W_g`` in ``R^2`` and reals ``Z_g``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import sympy as sp

from ._core import PROVED, Derivation, Verdict, combine, decide, derivation

__all__ = [
    "grpo_kernel_symbolic",
    "full_sum",
    "ustat_identity_general",
    "ustat_identity_expanded",
    "fullmean_identity_general",
    "fullmean_identity_expanded",
    "eq4_as_printed",
]

G = sp.Symbol("G", integer=True, positive=True)
W = sp.IndexedBase("W", real=True)
Z = sp.IndexedBase("Z", real=True)
_T = sp.Symbol("t", integer=True, positive=True)  # canonical dummy of every one-index sum
_I, _J, _K = sp.symbols("i j k", integer=True, positive=True)

#: Group sizes tried by the counterexample search of the general-G derivations.
_G_SAMPLER = {G: lambda rng: sp.Integer(int(rng.integers(2, 7)))}

Kernel = Callable[[sp.Basic, sp.Basic, sp.Basic, sp.Basic], sp.Basic]


def grpo_kernel_symbolic(w_i, z_i, w_j, z_j):
    """The GRPO kernel ``h = (w_i - w_j)(z_i - z_j)/2`` of Lemma 1 (docs/theory.md C1)."""
    return (w_i - w_j) * (z_i - z_j) / 2


def _index_of(factor: sp.Basic, indices) -> sp.Symbol | None:
    found = {s for s in factor.free_symbols if s in indices}
    if len(found) > 1:
        raise ValueError(f"factor {factor} couples two summation indices; expand it first")
    return found.pop() if found else None


def full_sum(expr: sp.Basic, indices, size: sp.Basic = G) -> sp.Basic:
    """``sum_{indices in 1..size} expr`` over independent full ranges, by distributivity.

    Every monomial is split into factors depending on one index each; the sum over that index
    becomes ``Sum(factors(t), (t, 1, size))`` and an index absent from the monomial contributes
    ``size``. Exact for any polynomial in the indexed symbols.
    """
    indices = set(indices)
    total = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(expr)):
        groups: dict = {ix: sp.Integer(1) for ix in indices}
        rest = sp.Integer(1)
        for factor in sp.Mul.make_args(term):
            base, exp = factor.as_base_exp()
            ix = _index_of(base, indices)
            if ix is None:
                rest *= factor
            else:
                groups[ix] *= factor
        for ix, part in groups.items():
            rest *= size if part == 1 else sp.Sum(part.subs(ix, _T), (_T, 1, size))
        total += rest
    return sp.expand(total)


def _sum_excluding(expr, index, excluded, size=G):
    """Leave-one-out lemma: ``sum_{index != excluded} expr``."""
    return full_sum(expr, [index], size) - expr.subs(index, excluded)


def _sum_pairs(expr, i, j, size=G) -> tuple[sp.Basic, Verdict]:
    """Pair lemma ``sum_{i<j} f = (sum_{i,j} f - sum_i f(i,i))/2``, after checking symmetry."""
    swapped = expr.subs({i: j, j: i}, simultaneous=True)
    symmetric = sp.expand(expr - swapped) == 0
    if not symmetric:
        return sp.nan, Verdict("failed", "kernel is not symmetric: the pair lemma does not apply")
    both = full_sum(expr, [i, j], size)
    diagonal = full_sum(expr.subs(j, i), [i], size)
    return sp.expand((both - diagonal) / 2), Verdict(PROVED)


def _indexed_values(size: int) -> dict:
    """Exact values for ``W[1..size]``, ``Z[1..size]`` from a fixed stream (counterexample search)."""
    rng = np.random.default_rng(size)
    values = {}
    for t in range(1, size + 1):
        for base in (W, Z):
            values[base[t]] = sp.Rational(int(rng.integers(-9, 10)), int(rng.integers(1, 7)))
    return values


#: Placeholder for a pair sum the general route could not evaluate (non-symmetric kernel).
_PAIR_SUM = sp.Function("PairSum")


def _evaluate_at(expr, point, kernel: Kernel | None = None):
    """Counterexample evaluation at a concrete ``G`` with exact indexed values."""
    size = int(point[G])
    values = _indexed_values(size)
    explicit = sp.sympify(expr)
    if kernel is not None:
        pairs = sum(kernel(W[i], Z[i], W[j], Z[j])
                    for i in range(1, size + 1) for j in range(i + 1, size + 1))
        explicit = explicit.subs(_PAIR_SUM(G), pairs)
    explicit = explicit.subs(G, size).doit()
    return sp.expand(explicit.subs(values))


def _grpo_general(kernel: Kernel, normaliser) -> tuple[sp.Basic, sp.Basic, Verdict]:
    loo = _sum_excluding(Z[_K], _K, _I) / (G - 1)  # Z_bar_{-i}
    lhs = sp.expand(full_sum(sp.expand(W[_I] * (Z[_I] - loo)), [_I]) / G)
    pair_sum, lemma = _sum_pairs(sp.expand(kernel(W[_I], Z[_I], W[_J], Z[_J])), _I, _J)
    if lemma.status != PROVED:
        pair_sum = _PAIR_SUM(G)  # evaluated literally at small G by the counterexample search
    return lhs, pair_sum * normaliser, lemma


def ustat_identity_general(kernel: Kernel = grpo_kernel_symbolic,
                           normaliser: sp.Basic = 2 / (G * (G - 1))) -> Derivation:
    """Lemma 1 for symbolic ``G``: ``g_GRPO = normaliser * sum_{i<j} kernel`` (docs/theory.md C1).

    Parameters
    ----------
    kernel : callable ``(w_i, z_i, w_j, z_j) -> expr``
        Claimed kernel; default ``(w_i - w_j)(z_i - z_j)/2``.
    normaliser : sympy expression in ``G``
        Claimed factor in front of the pair sum; default ``1/C(G, 2)``.

    Examples
    --------
    >>> ustat_identity_general().status
    'proved'
    >>> ustat_identity_general(normaliser=1 / (G * (G - 1))).status  # factor 2 dropped
    'disproved'
    """

    def body():
        lhs, rhs, lemma = _grpo_general(kernel, normaliser)
        difference = sp.together(sp.expand(lhs - rhs)) if lemma.status == PROVED else lhs - rhs

        verdict = decide(difference, variables=[G], samplers=_G_SAMPLER,
                         evaluate=lambda e, p: _evaluate_at(e, p, kernel))
        if verdict.status == PROVED and lemma.status != PROVED:
            verdict = lemma
        return sp.simplify(lhs), verdict

    return derivation("C1", "C1 U-statistic identity, general G",
                      "(1/G) sum_g W_g (Z_g - Zbar_{-g}) = C(G,2)^{-1} sum_{i<j} (W_i-W_j)(Z_i-Z_j)/2",
                      "indexed symbols; sums by distributivity, leave-one-out and symmetric-pair "
                      "lemmas; rational cancellation in G", body)


def _vector_group(size: int, dim: int = 2):
    scores = [sp.Matrix(sp.symbols(f"w{g}_1:{dim + 1}", real=True)) for g in range(1, size + 1)]
    rewards = list(sp.symbols(f"z1:{size + 1}", real=True))
    return scores, rewards


def _grpo_explicit(scores, rewards):
    size = len(rewards)
    total = sum(rewards)
    out = sp.zeros(*scores[0].shape)
    for w, z in zip(scores, rewards):
        out += w * (z - (total - z) / (size - 1))
    return out / size


def ustat_identity_expanded(sizes=range(2, 9), kernel: Kernel = grpo_kernel_symbolic,
                            normaliser=None) -> Derivation:
    """Lemma 1 fully expanded for each listed ``G`` with symbolic vectors in ``R^2`` (C1)."""
    sizes = tuple(int(s) for s in sizes)

    def body():
        verdicts, last = [], None
        for size in sizes:
            scores, rewards = _vector_group(size)
            lhs = _grpo_explicit(scores, rewards)
            pair_sum = sp.zeros(*scores[0].shape)
            for i in range(size):
                for j in range(i + 1, size):
                    pair_sum += kernel(scores[i], rewards[i], scores[j], rewards[j])
            factor = (sp.Rational(2, size * (size - 1)) if normaliser is None
                      else sp.sympify(normaliser).subs(G, size))
            verdicts.append(decide(sp.expand(lhs - factor * pair_sum), general=False))
            last = lhs
        return last, combine(verdicts)

    return derivation("C1", "C1 U-statistic identity, G=2..8 expanded",
                      "the identity of Lemma 1 with explicit vectors W_g in R^2, for each listed G",
                      "polynomial expansion of both sides, componentwise", body,
                      cases=tuple(f"G={s}" for s in sizes))


def fullmean_identity_general(factor: sp.Basic = (G - 1) / G) -> Derivation:
    """Full-mean estimator = ``factor`` x leave-one-out estimator, symbolic ``G`` (C2)."""

    def body():
        lhs, _, _ = _grpo_general(grpo_kernel_symbolic, 2 / (G * (G - 1)))
        mean = full_sum(Z[_K], [_K]) / G
        fullmean = sp.expand(full_sum(sp.expand(W[_I] * (Z[_I] - mean)), [_I]) / G)
        verdict = decide(sp.together(fullmean - factor * lhs), variables=[G],
                         samplers=_G_SAMPLER, evaluate=_evaluate_at)
        return sp.simplify(fullmean / lhs), verdict

    return derivation("C2", "C2 full-mean = (G-1)/G x leave-one-out, general G",
                      "(1/G) sum_g W_g (Z_g - Zbar) = ((G-1)/G) g_GRPO",
                      "indexed sums by distributivity; the derived expression is the ratio", body)


def fullmean_identity_expanded(sizes=range(2, 9), factor=None) -> Derivation:
    """The C2 identity expanded for each listed ``G`` with vectors in ``R^2``."""
    sizes = tuple(int(s) for s in sizes)

    def body():
        verdicts, ratio = [], None
        for size in sizes:
            scores, rewards = _vector_group(size)
            mean = sum(rewards) / size
            fullmean = sp.zeros(*scores[0].shape)
            for w, z in zip(scores, rewards):
                fullmean += w * (z - mean) / size
            c = sp.Rational(size - 1, size) if factor is None else sp.sympify(factor).subs(G, size)
            verdicts.append(decide(sp.expand(fullmean - c * _grpo_explicit(scores, rewards)),
                                   general=False))
            ratio = c
        return ratio, combine(verdicts)

    return derivation("C2", "C2 full-mean identity, G=2..8 expanded",
                      "full-mean = ((G-1)/G) leave-one-out for explicit vectors, each listed G",
                      "polynomial expansion, componentwise", body,
                      cases=tuple(f"G={s}" for s in sizes))


def eq4_as_printed(sizes=range(2, 6)) -> Derivation:
    """Eq. (4) as printed sums ``Z^{(b,g)}`` over ``k != g``: the baseline is then ``Z_g`` itself
    and the estimator vanishes identically; compared here with Lemma 1's U-statistic."""
    sizes = tuple(int(s) for s in sizes)

    def body():
        verdicts, printed = [], None
        for size in sizes:
            scores, rewards = _vector_group(size)
            printed = sp.zeros(*scores[0].shape)
            for w, z in zip(scores, rewards):
                baseline = sum(z for _ in range(size - 1)) / (size - 1)  # Z_g summed over k != g
                printed += w * (z - baseline) / size
            pair_sum = sp.zeros(*scores[0].shape)
            for i in range(size):
                for j in range(i + 1, size):
                    pair_sum += grpo_kernel_symbolic(scores[i], rewards[i], scores[j], rewards[j])
            verdicts.append(decide(sp.expand(printed - pair_sum * sp.Rational(2, size * (size - 1))),
                                   general=False))
        return sp.expand(printed), combine(verdicts)

    return derivation("C1", "Eq. (4) as printed vs Lemma 1",
                      "printed Eq. (4) (Z^(b,g) inside the sum) equals the U-statistic",
                      "explicit expansion for each listed G", body,
                      cases=tuple(f"G={s}" for s in sizes))
