"""Appendix A, the practical algorithm: the arcsin objective of std normalisation (C26) and
the K3 KL estimator (C27).
"""

from __future__ import annotations

import numpy as np

from .registry import Check, register
from .symbolic import (
    SYMBOLIC_SOURCE,
    k3_checks,
    symbolic_checks,
)


@register("C26", "d/dV 2 arcsin sqrt V = 1/sqrt(V(1-V)); the std-normalised gradient is "
          "grad 2 arcsin sqrt V, parallel to g", "Proposition 13; " + SYMBOLIC_SOURCE,
          "symbolic: derivative; differentiation through softmax logits")
def check_c26(ctx) -> list[Check]:
    return symbolic_checks("C26")


@register("C27", "K3 is unbiased for KL, non-negative, with gradient grad log pi (1 - pi_ref/pi)",
          "Appendix A; " + SYMBOLIC_SOURCE, "symbolic: expectation, convexity, differentiation; "
          "Monte Carlo mean of K3")
def check_c27(ctx) -> list[Check]:
    n_samples = ctx.reps(100000, 1000000)
    return symbolic_checks("C27") + k3_checks(np.random.default_rng(ctx.seed_for("C27")), n_samples=n_samples)
