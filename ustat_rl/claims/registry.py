"""The claims registry: one entry per claim of docs/theory.md, each with a check.

A check is a function ``check(ctx) -> list[Check]`` that computes its evidence afresh on every
call; :func:`run_claim` times it and folds the sub-checks into one :class:`ClaimResult`.
Nothing here stores a verdict: verdicts come from comparing a measurement with a prediction
under a tolerance derived from standard errors (or rounding error, for exact identities).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import pkgutil
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..formatting import json_ready
from ..seeding import child_seed
from ..tolerances import EXACT_RTOL, Z_CHECK

__all__ = [
    "Z_CHECK",
    "Check",
    "ClaimResult",
    "Claim",
    "VerifyContext",
    "register",
    "registry",
    "run_claim",
    "load_checks",
    "check_close",
    "check_exact",
    "check_interval",
    "check_true",
    "detectable_error",
    "MissingExtra",
    "require_extra",
]

#: ``Z_CHECK`` (4 standard errors, two-sided false-failure rate 6.3e-5 per comparison) and
#: ``EXACT_RTOL`` live in :mod:`ustat_rl.tolerances`, with the run's false-failure budget (1e-2)
#: and the share of it one claim may spend; claims above it compare at ``Z_STRICT``. Summed over
#: every required comparison of ``ustat-rl verify --quick`` the stated rates give a union bound
#: of about 0.8% per run (8.1e-3, docs/calibration.md); ``benchmarks/calibration.py`` measures the rates over many seeds
#: (docs/calibration.md).

EVIDENCE_KINDS = ("symbolic", "exact-numeric", "monte-carlo")


@dataclass(frozen=True)
class Check:
    """One comparison inside a claim's check.

    Attributes
    ----------
    name : str
        What is compared, e.g. ``"G*MSE_oracle slope, G in 2..256"``.
    predicted : float
        The value the claim predicts.
    measured : float
        The value the toolkit measured (exactly or by Monte Carlo).
    ci_low, ci_high : float
        Interval for ``measured`` (``Z_CHECK`` standard errors, or the rounding tolerance).
    passed : bool
        Whether the prediction is inside the interval (or the stated condition holds).
    evidence : str
        One of ``"symbolic"``, ``"exact-numeric"``, ``"monte-carlo"``.
    note : str
        The tolerance and anything a reader needs to interpret the comparison.
    required : bool
        ``True`` for consequences of the paper's theorems, which must hold. ``False`` for an
        empirical pattern of the paper's LLM experiments checked on an analogue: when it does
        not reproduce, the claim's verdict is ``"differs"`` (reported, explained in ``note``,
        and not a failure of the toolkit).
    refutes : bool
        ``True`` for a check whose passing *demonstrates that the claim as stated is false*
        (an exact counterexample, say). When it passes and every required check passes, the
        claim's verdict is ``"refuted"``: a finding recorded in the errata, not a failure.
    """

    name: str
    predicted: float
    measured: float
    ci_low: float
    ci_high: float
    passed: bool
    evidence: str
    note: str = ""
    required: bool = True
    refutes: bool = False

    @property
    def detectable(self) -> float:
        """The error of ``predicted``, relative to ``|predicted|``, that this comparison rejects
        at least half the time (:func:`detectable_error`); NaN for a yes/no condition or a
        prediction of 0."""
        return detectable_error(self.predicted, self.measured, self.ci_low, self.ci_high)


def detectable_error(predicted: float, measured: float, ci_low: float, ci_high: float) -> float:
    """The smallest error a comparison would see, relative to the value it predicts.

    A comparison passes when ``predicted`` lies in ``[ci_low, ci_high]``, an interval about
    ``measured``. Were the truth off the prediction by ``d``, the interval would sit about a
    measured value centred ``d`` away; with noise of median 0 it leaves the prediction outside
    at least half the time once ``|d|`` reaches the interval's larger half-width. That
    half-width over ``|predicted|`` is returned: a check detects, with probability at least
    one half, a relative error this large, and may well miss a smaller one.

    Returns NaN where there is no finite interval (a yes/no condition) or ``predicted`` is 0
    or not finite (a relative error is undefined there).
    """
    predicted, measured = float(predicted), float(measured)
    low, high = float(ci_low), float(ci_high)
    if not all(math.isfinite(v) for v in (predicted, measured, low, high)) or predicted == 0.0:
        return float("nan")
    return max(high - measured, measured - low) / abs(predicted)


@dataclass(frozen=True)
class ClaimResult:
    """Outcome of one claim's check (the row ``ustat-rl verify`` prints).

    The headline numbers (``predicted``, ``measured``, ``ci_low``, ``ci_high``) are those of the
    sub-check named by ``headline``: the one that decides the verdict (the first failing
    required check for ``"fail"``, the first passing refuting check for ``"refuted"``, the first
    pattern that does not reproduce for ``"differs"``), else the first sub-check; ``checks``
    holds them all. ``verdict`` is ``"pass"`` when every sub-check
    passes, ``"fail"`` when a required one does not, ``"refuted"`` when the toolkit's own
    evidence shows the claim as stated to be false (a passing ``refutes`` check),
    ``"differs"`` when only empirical patterns (``required=False``) do not reproduce, and
    ``"error"`` when the check raised, and ``"skipped"`` when it needs an optional package
    that is not installed (:func:`require_extra`; ``error`` then says which extra, in one line).
    """

    claim_id: str
    statement: str
    source: str
    method: str
    predicted: float
    measured: float
    ci_low: float
    ci_high: float
    verdict: str
    seconds: float
    evidence: tuple[str, ...]
    checks: tuple[Check, ...] = field(default_factory=tuple)
    error: str = ""
    headline: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dictionary: NaN (nothing measured) becomes ``null``, ``±inf`` the strings
        ``"inf"`` and ``"-inf"`` (JSON has no literal for them). Each check carries its
        ``detectable`` relative error (:attr:`Check.detectable`)."""
        out = asdict(self)
        for row, check in zip(out["checks"], self.checks):
            row["detectable"] = check.detectable
        return _jsonable(out)


_jsonable = json_ready


@dataclass(frozen=True)
class VerifyContext:
    """Settings handed to every check.

    Attributes
    ----------
    seed : int
        Root seed; each check derives its own stream from ``(seed, claim number)``.
    quick : bool
        Smaller Monte Carlo sizes (the ``--quick`` budget of about 3 minutes in total).
    n_jobs : int
        Worker threads for the Monte Carlo engine.
    """

    seed: int = 20260301
    quick: bool = True
    n_jobs: int = 1

    def seed_for(self, claim_id: str, *extra: int) -> np.random.SeedSequence:
        """Independent, reproducible seed sequence for one claim (and optional sub-stream)."""
        # A stable hash of the whole ID, so "C20" and "C20.dist" get unrelated streams.
        number = int.from_bytes(hashlib.sha256(claim_id.encode()).digest()[:4], "little")
        return child_seed(self.seed, number, *extra)

    def reps(self, quick: int, full: int) -> int:
        return quick if self.quick else full


@dataclass(frozen=True)
class Claim:
    """A registered claim: its docs/theory.md ID, statement, source and check."""

    claim_id: str
    statement: str
    source: str
    method: str
    check: Callable[[VerifyContext], list[Check]]


_REGISTRY: dict[str, Claim] = {}


class MissingExtra(RuntimeError):
    """Raised by a check whose route needs an optional package that is not installed: the
    claim's verdict is ``"skipped"`` with this one-line reason, not ``"error"``."""


def require_extra(extra: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``modules`` imports.

    Parameters
    ----------
    extra : str
        The ``ustat-rl`` extra that installs them (named in the reason).
    modules : str
        Top-level module names, e.g. ``"pyarrow"``.
    """
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtra(f"skipped: needs extra {extra} ({module} is not installed; "
                               f"pip install 'ustat-rl[{extra}]')") from None


def register(claim_id: str, statement: str, source: str, method: str):
    """Decorator registering ``check(ctx) -> list[Check]`` under ``claim_id``."""

    def decorator(func):
        if claim_id in _REGISTRY:
            raise ValueError(f"claim {claim_id} is registered twice")
        _REGISTRY[claim_id] = Claim(claim_id, statement, source, method, func)
        return func

    return decorator


def _claim_key(claim_id: str):
    digits = "".join(ch for ch in claim_id if ch.isdigit())
    return (int(digits) if digits else 10**6, claim_id)


_LOADED = False

#: Name prefixes of the check modules, and of the subpackages whose modules all are ones.
CHECK_PREFIXES = ("paper_", "beyond_")


def load_checks() -> None:
    """Import every check module of the claims package once, which registers their claims.

    The modules are found beside this one (not through the package's ``__init__``, which
    re-exports this module: importing it from here would close a circle).
    """
    global _LOADED
    if _LOADED:
        return
    package = __name__.rsplit(".", 1)[0]
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if not info.name.startswith(CHECK_PREFIXES):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        if info.ispkg:
            for sub in sorted(pkgutil.iter_modules(module.__path__), key=lambda m: m.name):
                importlib.import_module(f"{module.__name__}.{sub.name}")
    _LOADED = True


def registry() -> dict[str, Claim]:
    """All registered claims, ordered by ID number (imports the check modules)."""
    load_checks()
    return {cid: _REGISTRY[cid] for cid in sorted(_REGISTRY, key=_claim_key)}


def run_claim(claim: Claim, ctx: VerifyContext) -> ClaimResult:
    """Run one claim's check, timing it and turning an exception into an ``error`` verdict."""
    start = time.perf_counter()
    verdict = "error"
    try:
        checks = list(claim.check(ctx))
        if not checks:
            raise RuntimeError("check returned no comparisons")
        error = ""
    except MissingExtra as exc:  # an optional route that this install does not have
        checks, error, verdict = [], str(exc), "skipped"
    except Exception:  # a crashing check is reported, never hidden
        checks = []
        error = traceback.format_exc(limit=5)
    seconds = time.perf_counter() - start
    if error:
        nan = float("nan")
        return ClaimResult(claim.claim_id, claim.statement, claim.source, claim.method,
                           nan, nan, nan, nan, verdict, seconds, (), (), error)
    deciding = {
        "fail": [c for c in checks if c.required and not c.passed],
        "refuted": [c for c in checks if c.passed and c.refutes],
        "differs": [c for c in checks if not c.passed],
    }
    verdict = next((v for v, found in deciding.items() if found), "pass")
    # The row shows the comparison that explains its verdict.
    head = deciding[verdict][0] if verdict != "pass" else checks[0]
    evidence = tuple(k for k in EVIDENCE_KINDS if any(c.evidence == k for c in checks))
    return ClaimResult(claim.claim_id, claim.statement, claim.source, claim.method,
                       head.predicted, head.measured, head.ci_low, head.ci_high,
                       verdict, seconds, evidence, tuple(checks), headline=head.name)


# ---------------------------------------------------------------------------------------------
# Comparators shared by every check (and by the negative controls in the tests)
# ---------------------------------------------------------------------------------------------


def check_close(name: str, predicted: float, measured: float, std_error: float,
                z: float = Z_CHECK, note: str = "") -> Check:
    """Monte Carlo comparison: pass iff ``|measured - predicted| <= z * std_error``."""
    predicted, measured, std_error = float(predicted), float(measured), float(std_error)
    if not (math.isfinite(measured) and math.isfinite(std_error)):
        return Check(name, predicted, measured, float("nan"), float("nan"), False, "monte-carlo",
                     "non-finite estimate")
    low, high = measured - z * std_error, measured + z * std_error
    tol = f"|measured - predicted| <= {z:g} se (se = {std_error:.3g}; {_false_rate(z)})"
    return Check(name, predicted, measured, low, high, bool(low <= predicted <= high),
                 "monte-carlo", f"{tol}. {note}".strip())


def check_exact(name: str, predicted, measured, rtol: float = EXACT_RTOL, atol: float = 1e-12,
                evidence: str = "exact-numeric", note: str = "") -> Check:
    """Exact comparison of arrays: pass iff ``|measured - predicted| <= atol + rtol |predicted|``.

    The headline ``measured`` is the largest absolute deviation found.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    measured = np.asarray(measured, dtype=np.float64)
    deviation = np.abs(measured - predicted)
    allowed = atol + rtol * np.abs(predicted)
    passed = bool(np.all(np.isfinite(measured)) and np.all(deviation <= allowed))
    head_pred = float(np.ravel(predicted)[0]) if predicted.size == 1 else 0.0
    head_meas = (float(np.ravel(measured)[0]) if measured.size == 1
                 else float(np.max(deviation)))
    tol = float(np.max(allowed))
    return Check(name, head_pred, head_meas, head_meas - tol, head_meas + tol, passed, evidence,
                 f"max |deviation| = {float(np.max(deviation)):.2e} <= {atol:g} + {rtol:g}|pred|. "
                 f"{note}".strip())


def check_interval(name: str, predicted: float, measured: float, ci_low: float, ci_high: float,
                   evidence: str = "monte-carlo", note: str = "") -> Check:
    """Pass iff ``predicted`` lies in the interval ``[ci_low, ci_high]``."""
    passed = bool(math.isfinite(ci_low) and math.isfinite(ci_high) and ci_low <= predicted <= ci_high)
    return Check(name, float(predicted), float(measured), float(ci_low), float(ci_high), passed,
                 evidence, note)


def check_true(name: str, condition: bool, measured: float = float("nan"),
               evidence: str = "exact-numeric", note: str = "", required: bool = True,
               refutes: bool = False) -> Check:
    """A yes/no condition (for example an ordering); ``predicted`` is 1 for 'holds'.

    With ``refutes=True`` the condition is a counterexample to the claim as stated.
    """
    return Check(name, 1.0, float(measured), float("nan"), float("nan"), bool(condition),
                 evidence, note, required, refutes)


def _false_rate(z: float) -> str:
    from scipy.stats import norm

    return f"two-sided false-failure rate {2 * norm.sf(z):.1e}"
