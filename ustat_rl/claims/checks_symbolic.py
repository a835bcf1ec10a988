"""Symbolic claims: algebraic lemmas checked by the sympy derivations of ``proofs_check``.

Registers C12, C13, C16, C21, C26, C27 and ``C20.sym`` (the symbolic half of the limit law;
the numeric/Monte Carlo C20 lives elsewhere). Each check runs the derivations afresh; C20.sym
and C27 add a small Monte Carlo twin (``Z_CHECK`` standard errors), and C16 also reports the
exact witness against Lemma 14 as docs/theory.md transcribes it. The evidence comes through
:mod:`ustat_rl.claims.symbolic`, the adapter from ``proofs_check``'s results to checks.
"""

from __future__ import annotations

import numpy as np

from .registry import Check, register
from .symbolic import counterexample_check, k3_checks, sgd_limit_checks, symbolic_checks

SOURCE = "proofs_check (sympy), docs/theory.md"


def _rng(ctx, claim_id: str) -> np.random.Generator:
    return np.random.default_rng(ctx.seed_for(claim_id))


@register("C12", "J = -theta1^2 on R^2 is PL exactly for mu <= 2 and has a singular Hessian",
          "Example after Assumption 4; " + SOURCE, "symbolic: ||g||^2/(2 Delta) and det Hessian")
def check_c12(ctx) -> list[Check]:
    return symbolic_checks("C12")


@register("C13", "At maximisers every positive eigenvalue of -grad g is >= mu, and mu <= L",
          "Lemma 16; " + SOURCE, "symbolic: limit of ||g||^2/(2 Delta) along eigenvectors; "
          "discriminant of rho(beta)")
def check_c13(ctx) -> list[Check]:
    return symbolic_checks("C13")


@register("C16", "Lemma 14: a_n <= max{(1+eps)C/((A-1)n), a n0/n}",
          "Lemma 14; " + SOURCE, "symbolic induction step (premise 1 - A/n + B/n^2 >= 0) and an "
          "exact witness sequence for the statement as transcribed")
def check_c16(ctx) -> list[Check]:
    return symbolic_checks("C16") + [counterexample_check(
        "Lemma 14 as transcribed (C16)", "exact witness sequence violates Lemma 14 as transcribed",
        "The statement needs 1 - A/n + B/n^2 >= 0 for n >= n0 (e.g. n0 >= A); with it the "
        "induction step above is proved.")]


@register("C20.sym", "Lyapunov solution, weights w_k, beta^2 erratum, mean sum w and variance "
          "2 sum w^2 of the limit law", "Theorem 8; " + SOURCE,
          "symbolic: Lyapunov residual, second-moment recursion limit; Monte Carlo of 1-D SGD")
def check_c20_sym(ctx) -> list[Check]:
    n_reps = ctx.reps(10000, 50000)
    return symbolic_checks("C20.sym") + sgd_limit_checks(_rng(ctx, "C20"), n_reps=n_reps)


@register("C21", "Weak strong concavity + L-smoothness imply PL with mu^2/L; Q^T Theta* is a point",
          "Lemma 15; " + SOURCE, "symbolic: non-negativity certificate; quadratic example")
def check_c21(ctx) -> list[Check]:
    return symbolic_checks("C21")


@register("C26", "d/dV 2 arcsin sqrt V = 1/sqrt(V(1-V)); the std-normalised gradient is "
          "grad 2 arcsin sqrt V, parallel to g", "Proposition 13; " + SOURCE,
          "symbolic: derivative; differentiation through softmax logits")
def check_c26(ctx) -> list[Check]:
    return symbolic_checks("C26")


@register("C27", "K3 is unbiased for KL, non-negative, with gradient grad log pi (1 - pi_ref/pi)",
          "Appendix A; " + SOURCE, "symbolic: expectation, convexity, differentiation; "
          "Monte Carlo mean of K3")
def check_c27(ctx) -> list[Check]:
    n_samples = ctx.reps(100000, 1000000)
    return symbolic_checks("C27") + k3_checks(_rng(ctx, "C27"), n_samples=n_samples)
