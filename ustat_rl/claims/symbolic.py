"""Adapter from ``proofs_check`` to the registry: derivations and comparisons become checks.

``proofs_check`` returns its own result objects (a ``Derivation`` per symbolic derivation, a
``Comparison`` per numeric-bridge comparison) and never imports this package; this module is
the one place in the claims package that imports ``proofs_check``, and it does so lazily, so
that claims without symbolic evidence do not pay for sympy.

A derivation gives a check with ``evidence="symbolic"`` that passes iff the derivation holds.
A comparison gives the check its decision rule names: ``check_exact`` for an exact comparison,
``check_close`` for a Monte Carlo one, an interval check otherwise; the registry recomputes the
verdict and a disagreement with the bridge's own is raised as an error, never hidden.
"""

from __future__ import annotations

import numpy as np

from .registry import Check, check_close, check_exact, check_true

__all__ = [
    "derivation_check",
    "comparison_check",
    "symbolic_checks",
    "counterexample_check",
    "sgd_limit_checks",
    "k3_checks",
]

#: Source string of the claims whose evidence is a derivation of :mod:`proofs_check`.
SYMBOLIC_SOURCE = "proofs_check (sympy), docs/theory.md"


def derivation_check(result) -> Check:
    """One registry ``Check`` from a ``proofs_check`` derivation: passed iff it holds."""
    cases = f" for {', '.join(result.cases)}" if result.cases else ""
    # no timing in the note: verify's JSON must be identical for the same seed apart from "seconds"
    note = (f"{result.status}{cases}; {result.method}. "
            f"{result.detail}").strip()
    return check_true(f"{result.name}: {result.statement}", result.holds,
                      measured=1.0 if result.holds else 0.0, evidence="symbolic", note=note)


def comparison_check(comparison) -> Check:
    """One registry ``Check`` from a numeric-bridge ``Comparison``, under the same rule.

    Raises
    ------
    ValueError
        For a comparison kind the registry has no rule for.
    RuntimeError
        When the registry's verdict differs from the bridge's (the two rules drifted apart).
    """
    c = comparison
    if c.kind == "exact":
        check = check_exact(c.name, c.expected, c.actual, rtol=c.rtol, atol=c.atol)
    elif c.kind == "monte-carlo":
        check = check_close(c.name, c.expected, c.actual, c.std_error, z=c.z)
    elif c.kind == "interval":
        check = Check(c.name, float(c.expected), float(c.actual), c.low, c.high, c.ok,
                      "exact-numeric", c.note)
    else:
        raise ValueError(f"`comparison.kind` must be 'exact', 'monte-carlo' or 'interval', "
                         f"got {c.kind!r}")
    if check.passed != c.ok:
        raise RuntimeError(f"{c.name}: registry verdict {check.passed} differs from the "
                           f"bridge's {c.ok} ({c.describe()})")
    return check


def symbolic_checks(claim_id: str) -> list[Check]:
    """Symbolic evidence for ``claim_id`` from :mod:`proofs_check`, when it provides some.

    Examples
    --------
    >>> [(c.passed, c.evidence) for c in symbolic_checks("C12")]
    [(True, 'symbolic')]
    """
    try:
        from proofs_check import claim_derivations
    except ImportError:
        return []
    return [derivation_check(result) for result in claim_derivations(claim_id)]


def counterexample_check(entry_name: str, name: str, remark: str) -> Check:
    """A ``refutes`` check from a printed form or transcribed statement in the catalogue.

    Passes when the derivation labelled ``entry_name`` is disproved, that is when the toolkit
    has an exact counterexample to the statement; ``remark`` says what repairs it.
    """
    from proofs_check.catalogue import entry_named, run_entry

    result = run_entry(entry_named(entry_name))
    return check_true(name, not result.holds, measured=1.0 if result.holds else 0.0,
                      evidence="symbolic", refutes=True,
                      note=f"{result.status}: {result.detail}. {remark}")


def sgd_limit_checks(rng: np.random.Generator, n_reps: int) -> list[Check]:
    """C20 in 1-D: Monte Carlo SGD against the exact recursion and the corrected limit weight."""
    from proofs_check.bridge import sgd_limit_monte_carlo

    return [comparison_check(c) for c in sgd_limit_monte_carlo(rng, n_reps=n_reps)]


def k3_checks(rng: np.random.Generator, n_samples: int) -> list[Check]:
    """C27: the Monte Carlo mean of K3 against KL(pi || pi_ref)."""
    from proofs_check.bridge import k3_monte_carlo

    return [comparison_check(c) for c in k3_monte_carlo(rng, n_samples=n_samples)]
