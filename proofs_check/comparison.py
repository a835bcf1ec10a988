"""Result object of the numeric bridge: one symbolic value compared with its numeric twin.

The bridge (:mod:`proofs_check.bridge`) returns :class:`Comparison` objects, not registry
checks, so that ``proofs_check`` depends only on the maths of ``ustat_rl`` and never on its
claims registry; ``ustat_rl.claims.symbolic`` turns a comparison into a registry ``Check``.
Three decision rules are used, each named by ``kind``:

``"exact"``
    ``|actual - expected| <= atol + rtol |expected|`` elementwise, ``actual`` finite (a closed
    form lambdified from sympy against the library's own computation);
``"monte-carlo"``
    ``|actual - expected| <= z * std_error`` (a Monte Carlo mean against its exact value);
``"interval"``
    ``low <= expected <= high`` for an interval around ``actual`` computed by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Comparison", "Z", "ATOL"]

#: Standard errors allowed between a Monte Carlo mean and its exact value. Two-sided normal
#: tail: P(|N(0,1)| > 4) = 6.3e-5 false failures per comparison (the registry's ``Z_CHECK``).
Z = 4.0

#: Absolute floor of the exact rule, for expected values at or near zero.
ATOL = 1e-12

KINDS = ("exact", "monte-carlo", "interval")


@dataclass(frozen=True, eq=False)
class Comparison:
    """One numeric comparison made by the bridge.

    Attributes
    ----------
    name : str
        What is compared, with the claim ID first (``"C4 h1 symbolic vs ..."``).
    kind : str
        The decision rule: ``"exact"``, ``"monte-carlo"`` or ``"interval"`` (module docstring).
    expected : float or numpy.ndarray
        The reference value (a registry check's ``predicted``); the exact rule's tolerance is
        relative to it.
    actual : float or numpy.ndarray
        The value held against it (a registry check's ``measured``): a lambdified symbolic
        result, a library value or a Monte Carlo mean.
    ok : bool
        Whether ``actual`` agrees with ``expected`` under the rule.
    rtol, atol : float
        Relative and absolute tolerance of the exact rule (``nan`` otherwise).
    std_error : float
        Standard error of a Monte Carlo ``actual`` (``nan`` otherwise).
    z : float
        Standard errors allowed by the Monte Carlo rule (``nan`` otherwise).
    low, high : float
        Acceptance interval of the interval rule (``nan`` otherwise).
    note : str
        How the tolerance was chosen, where the rule alone does not say it.
    """

    name: str
    kind: str
    expected: float | np.ndarray
    actual: float | np.ndarray
    ok: bool
    rtol: float = math.nan
    atol: float = math.nan
    std_error: float = math.nan
    z: float = math.nan
    low: float = math.nan
    high: float = math.nan
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {self.kind!r}")

    @classmethod
    def exact(cls, name: str, expected, actual, rtol: float, atol: float = ATOL) -> Comparison:
        """Arrays equal up to rounding: ``|actual - expected| <= atol + rtol |expected|``."""
        expected = np.asarray(expected, dtype=np.float64)
        actual = np.asarray(actual, dtype=np.float64)
        ok = bool(np.all(np.isfinite(actual))
                  and np.all(np.abs(actual - expected) <= atol + rtol * np.abs(expected)))
        return cls(name, "exact", expected, actual, ok, rtol=float(rtol), atol=float(atol))

    @classmethod
    def monte_carlo(cls, name: str, expected: float, actual: float, std_error: float,
                    z: float = Z) -> Comparison:
        """A Monte Carlo mean ``actual`` within ``z`` standard errors of ``expected``."""
        expected, actual, std_error = float(expected), float(actual), float(std_error)
        ok = (math.isfinite(actual) and math.isfinite(std_error)
              and actual - z * std_error <= expected <= actual + z * std_error)
        return cls(name, "monte-carlo", expected, actual, bool(ok), std_error=std_error,
                   z=float(z))

    @classmethod
    def interval(cls, name: str, expected: float, actual: float, low: float, high: float,
                 note: str = "") -> Comparison:
        """``expected`` inside ``[low, high]``, an interval around ``actual`` (``note``: why)."""
        low, high = float(low), float(high)
        ok = math.isfinite(low) and math.isfinite(high) and low <= float(expected) <= high
        return cls(name, "interval", float(expected), float(actual), bool(ok), low=low,
                   high=high, note=note)

    def describe(self) -> str:
        """One line: the discrepancy and the tolerance it was held to."""
        if self.kind == "exact":
            deviation = float(np.max(np.abs(self.actual - self.expected)))
            return (f"max |actual - expected| = {deviation:.3g}, allowed {self.atol:g} + "
                    f"{self.rtol:g}|expected|")
        if self.kind == "monte-carlo":
            return (f"expected {self.expected!r}, Monte Carlo {self.actual!r} +/- "
                    f"{self.z:g} x {self.std_error:.3g}")
        return (f"expected {self.expected!r} outside [{self.low!r}, {self.high!r}] around "
                f"{self.actual!r}; {self.note}")
