"""A one-prompt softmax bandit with symbolic logits, success probabilities and reward values.

The policy is ``pi = softmax(theta)`` over ``K`` actions, the reward is two-point,
``Z = lo + (hi - lo) Bernoulli(p_a)``, and an outcome is ``o = (a, z)``; there are ``2K``.
The score ``w(a) = d log pi_a / d theta`` is *derived* by differentiating the log-softmax
(:func:`softmax_score`); it equals ``e_a - pi``. Every other quantity is then a polynomial in
the policy coordinates ``pi_1..pi_{K-1}`` (with ``pi_K = 1 - sum``), ``p_a``, ``lo`` and ``hi``,
so identities are decided exactly by polynomial expansion. A polynomial identity in free
``pi_1..pi_{K-1}`` holds on the whole simplex, hence for every logit vector; :meth:`in_logits`
rewrites any result in terms of ``theta``. (docs/theory.md C3-C10, C26.)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp

from ._core import (
    DISPROVED,
    FAILED,
    PROVED,
    SEARCH_POINTS,
    SEARCH_SEED,
    Derivation,
    Verdict,
    combine,
    decide,
    derivation,
)

__all__ = [
    "SymbolicBandit",
    "symbolic_bandit",
    "softmax_score",
    "score_derivation",
    "compare",
    "compare_cases",
]


@dataclass(frozen=True)
class SymbolicBandit:
    """Symbolic one-prompt softmax bandit (docs/theory.md section 1 notation).

    Quantities are polynomials in ``QQ[pi, p, lo, hi, G, eps]``, promoted to the rational
    function field of the same generators where ``G`` divides (``sympy.polys``): exact,
    canonical, and fast. Vectors are numpy object arrays of
    field elements, shape (K,); keep the array on the left of a product with a field element
    (``w * c``), since the field's own ``__mul__`` does not defer to numpy. :meth:`to_sympy`
    turns any result into sympy expressions.

    Attributes
    ----------
    n_actions : int
        ``K``.
    logits : tuple of sympy.Symbol
        ``theta_1..theta_K`` (real).
    symbols : tuple of sympy.Symbol
        Generators ``pi_1..pi_{K-1}, p_1..p_K, lo, hi, G, epsilon, b``; ``pi`` and ``p``
        positive, ``G`` a positive integer, ``epsilon`` (``1/G`` in series) positive, ``b`` a
        real prompt-only baseline.
    field : sympy FracField
        The field the quantities live in.
    pi_gens, prob_gens : tuple
        Polynomial generators of the free policy coordinates and of the success probabilities.
    lo, hi : polynomial generators
        Reward values.
    group_size, eps : field elements
        ``G`` and ``epsilon``.
    baseline : polynomial generator
        ``b``, a constant (prompt-only) baseline.
    policy : tuple
        ``pi_1..pi_K`` with ``pi_K = 1 - sum_{a<K} pi_a``.
    scores : tuple of ndarray (K,)
        ``w(a) = e_a - pi``.
    outcomes : tuple of (int, field element)
        ``(a, z)`` in the order (a=0, lo), (a=0, hi), (a=1, lo), ... (as in ``ustat_rl``).
    outcome_prob : tuple
        ``P(a, z) = pi_a p_a^[z=hi] (1 - p_a)^[z=lo]``.
    """

    n_actions: int
    logits: tuple
    symbols: tuple
    field: object
    pi_gens: tuple
    prob_gens: tuple
    lo: object
    hi: object
    group_size: object
    eps: object
    baseline: object
    policy: tuple
    scores: tuple
    outcomes: tuple
    outcome_prob: tuple

    # -------------------------------------------------------------- expectations
    def items(self) -> list:
        """``[((a, z, w(a)), P(a, z)), ...]`` over the ``2K`` outcomes."""
        return [((a, z, self.scores[a]), pr) for (a, z), pr in zip(self.outcomes, self.outcome_prob)]

    def expect(self, func):
        """``E f(O)`` for ``func(a, z, w)`` (scalar or vector)."""
        return sum(func(*o) * pr for o, pr in self.items())

    def expect2(self, func):
        """``E f(O, O')`` over two independent outcomes, ``func(o, o')`` with ``o = (a, z, w)``."""
        items = self.items()
        return sum(func(o1, o2) * (p1 * p2) for (o1, p1), (o2, p2) in itertools.product(items, items))

    # -------------------------------------------------------------- closed-form primitives
    @property
    def reward_mean(self) -> tuple:
        """``E[Z | a] = lo + (hi - lo) p_a``."""
        return tuple(self.lo + (self.hi - self.lo) * p for p in self.prob_gens)

    @property
    def reward_second(self) -> tuple:
        """``E[Z^2 | a] = lo^2 (1 - p_a) + hi^2 p_a``."""
        return tuple(self.lo**2 * (1 - p) + self.hi**2 * p for p in self.prob_gens)

    @property
    def value(self):
        """``V = sum_a pi_a E[Z | a]``."""
        return sum(pi * m for pi, m in zip(self.policy, self.reward_mean))

    @property
    def reward_var(self):
        """``Var(Z) = sum_a pi_a E[Z^2 | a] - V^2``."""
        return sum(pi * s for pi, s in zip(self.policy, self.reward_second)) - self.value**2

    @property
    def grad(self) -> np.ndarray:
        """``g = sum_a pi_a E[Z | a] w(a)``, shape (K,)."""
        return sum(w * (pi * m) for pi, m, w in zip(self.policy, self.reward_mean, self.scores))

    def sq_norm(self, a: int):
        """``||w(a)||^2``."""
        return np.dot(self.scores[a], self.scores[a])

    @property
    def score_sq_norm(self):
        """``E||W||^2 = sum_a pi_a ||w(a)||^2``."""
        return sum(pi * self.sq_norm(a) for a, pi in enumerate(self.policy))

    @property
    def grad_sq(self):
        """``||g||^2``."""
        return np.dot(self.grad, self.grad)

    @property
    def trace_sigma_oracle(self):
        """``tr Sigma_oracle = E||W(Z - V)||^2 - ||g||^2``, with ``E[(Z-V)^2 | a]`` per action."""
        v = self.value
        resid = [s - 2 * m * v + v**2 for m, s in zip(self.reward_mean, self.reward_second)]
        return sum(pi * self.sq_norm(a) * r for a, (pi, r)
                   in enumerate(zip(self.policy, resid))) - self.grad_sq

    @property
    def sq_score_reward(self):
        """``E||W Z||^2 = sum_a pi_a ||w(a)||^2 E[Z^2 | a]``."""
        return sum(pi * self.sq_norm(a) * s for a, (pi, s)
                   in enumerate(zip(self.policy, self.reward_second)))

    @property
    def sq_score_times_reward(self):
        """``E[||W||^2 Z] = sum_a pi_a ||w(a)||^2 E[Z | a]``."""
        return sum(pi * self.sq_norm(a) * m for a, (pi, m)
                   in enumerate(zip(self.policy, self.reward_mean)))

    # -------------------------------------------------------------- conversions
    def to_sympy(self, value) -> sp.Basic:
        """Field element, vector or matrix of them -> sympy expression or Matrix."""
        arr = np.asarray(value, dtype=object)
        conv = np.vectorize(lambda e: self.field(e).as_expr(), otypes=[object])(arr)
        if arr.ndim == 0:
            return sp.sympify(conv.item())
        return sp.Matrix(conv.tolist() if arr.ndim == 2 else list(conv))

    def from_sympy(self, expr):
        """sympy expression in this bandit's symbols -> field element."""
        return self.field.from_expr(sp.sympify(expr))

    def in_logits(self, expr) -> sp.Basic:
        """Rewrite a sympy expression with ``pi_a = exp(theta_a) / sum_b exp(theta_b)``."""
        denom = sum(sp.exp(t) for t in self.logits)
        pis = self.symbols[: self.n_actions - 1]
        return sp.sympify(expr).subs({s: sp.exp(t) / denom for s, t in zip(pis, self.logits)})

    def sample_point(self, rng) -> list:
        """Exact point for the counterexample search: open simplex, p in (0,1), G in 2..9."""
        ring = self.field.ring
        k = self.n_actions
        point = []
        for i, gen in enumerate(ring.gens):
            if i < k - 1:
                value = sp.QQ(int(rng.integers(1, 40)), 40 * k)
            elif i < 2 * k - 1:
                value = sp.QQ(int(rng.integers(1, 20)), 20)
            elif gen == self.group_size.numer:
                value = sp.QQ(int(rng.integers(2, 10)))
            else:
                value = sp.QQ(int(rng.integers(-30, 31)), int(rng.integers(1, 8)))
            point.append((gen, value))
        return point


@lru_cache(maxsize=None)
def symbolic_bandit(n_actions: int) -> SymbolicBandit:
    """Build the symbolic bandit with ``K = n_actions`` actions (cached; results are immutable)."""
    if isinstance(n_actions, bool) or not isinstance(n_actions, int):
        raise TypeError(f"`n_actions` must be an integer, got {n_actions!r}")
    if n_actions < 2:
        raise ValueError(f"`n_actions` must be an integer >= 2, got {n_actions}")
    k = n_actions
    logits = sp.symbols(f"theta1:{k + 1}", real=True)
    symbols = (sp.symbols(f"pi1:{k}", positive=True) + sp.symbols(f"p1:{k + 1}", positive=True)
               + sp.symbols("lo hi", real=True) + (sp.Symbol("G", integer=True, positive=True),
                                                   sp.Symbol("epsilon", positive=True),
                                                   sp.Symbol("b", real=True)))
    field, *field_gens = sp.field(symbols, sp.QQ)
    gens = field.ring.gens  # polynomial arithmetic (no gcds) wherever no division is needed
    pi_gens, prob_gens = tuple(gens[: k - 1]), tuple(gens[k - 1: 2 * k - 1])
    lo, hi = gens[2 * k - 1: 2 * k + 1]
    group_size, eps = field_gens[2 * k + 1: 2 * k + 3]
    baseline = gens[2 * k + 3]
    policy = pi_gens + (1 - sum(pi_gens),)
    pi_vec = np.array(policy, dtype=object)
    scores = []
    for a in range(k):
        unit = np.array([field.ring.one if b == a else field.ring.zero for b in range(k)],
                        dtype=object)
        scores.append(unit - pi_vec)
    outcomes, outcome_prob = [], []
    for a in range(k):
        outcomes += [(a, lo), (a, hi)]
        outcome_prob += [policy[a] * (1 - prob_gens[a]), policy[a] * prob_gens[a]]
    return SymbolicBandit(k, tuple(logits), symbols, field, pi_gens, prob_gens, lo, hi,
                          group_size, eps, baseline, policy, tuple(scores), tuple(outcomes),
                          tuple(outcome_prob))


def softmax_score(n_actions: int) -> sp.Matrix:
    """``d log softmax(theta)_a / d theta_b`` by differentiation, as a (K, K) matrix [a, b]."""
    logits = sp.symbols(f"theta1:{n_actions + 1}", real=True)
    denom = sum(sp.exp(t) for t in logits)
    out = sp.zeros(n_actions, n_actions)
    for a in range(n_actions):
        log_pi = sp.log(sp.exp(logits[a]) / denom)
        for b in range(n_actions):
            out[a, b] = sp.diff(log_pi, logits[b])
    return out


def score_derivation(n_actions: int = 3, claimed=None) -> Derivation:
    """The softmax score is ``w(a) = e_a - pi`` (docs/theory.md section 1; used by C4-C10).

    ``claimed(a, b, pi)`` gives the claimed entry ``[w(a)]_b``; default ``[a == b] - pi_b``.
    """
    if claimed is None:
        def claimed(a, b, pi):
            return (1 if a == b else 0) - pi[b]

    def body():
        logits = sp.symbols(f"theta1:{n_actions + 1}", real=True)
        denom = sum(sp.exp(t) for t in logits)
        pi = [sp.exp(t) / denom for t in logits]
        derived = softmax_score(n_actions)
        diff = [sp.cancel(sp.together(derived[a, b] - claimed(a, b, pi)))
                for a in range(n_actions) for b in range(n_actions)]
        return derived, decide(diff)

    return derivation("C4", f"score of softmax, K={n_actions}",
                      "d log pi_a / d theta = e_a - softmax(theta)",
                      "sympy differentiation of log-softmax; cancellation in exp(theta)", body)


def compare(derived, claimed, bandit: SymbolicBandit) -> Verdict:
    """Exact comparison in the bandit's field; a counterexample search when they differ."""
    derived = np.asarray(derived, dtype=object)
    claimed = np.asarray(claimed, dtype=object)
    diff = np.broadcast_to(derived, np.broadcast_shapes(derived.shape, claimed.shape)) - claimed
    nonzero = [bandit.field(d) for d in np.ravel(diff) if d != 0]
    if not nonzero:
        return Verdict(PROVED)
    rng = np.random.default_rng(SEARCH_SEED)
    for _ in range(SEARCH_POINTS):
        point = bandit.sample_point(rng)
        for d in nonzero:
            den = d.denom.evaluate(point)
            num = d.numer.evaluate(point)
            if den != 0 and num != 0:
                where = ", ".join(f"{g}={v}" for g, v in point)
                return Verdict(DISPROVED, f"non-zero difference {num / den} at {where}")
    return Verdict(FAILED, f"difference not zero and no counterexample in {SEARCH_POINTS} points")


def compare_cases(per_case, cases) -> Verdict:
    """Combine per-``K`` verdicts; symbolic zeros there prove only the listed cases."""
    verdicts = []
    for verdict in per_case:
        if verdict.status == "proved":
            verdict = Verdict("proved-for-listed-cases", verdict.detail)
        verdicts.append(verdict)
    return combine(verdicts)

