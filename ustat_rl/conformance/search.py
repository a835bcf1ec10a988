"""The search both conformance kits run, and the command-line wrapper they share.

:func:`search` draws batches with hypothesis and stops at the first one ``compare`` rejects
(shrunk by hypothesis); :func:`run_target` loads ``module:function`` and turns a report into
``ustat-rl conformance``'s exit code. The single-reward kit
(:mod:`ustat_rl.conformance.kit`) and the multi-reward kit
(:mod:`ustat_rl.conformance.multichannel`) differ only in their batches, their
comparison and their tolerance.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from .adapters import TargetError, first_line, load_function

__all__ = ["DTYPE_NAMES", "check_search_options", "search", "run_target"]

#: The reward dtypes a kit can draw.
DTYPE_NAMES = ("float32", "float64")


def check_search_options(max_examples, dtypes) -> None:
    """Name the parameter at fault before any batch is drawn."""
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise ValueError(f"`max_examples` must be an integer >= 1, got {max_examples!r}")
    if isinstance(dtypes, str) or not dtypes or any(d not in DTYPE_NAMES for d in dtypes):
        raise ValueError(f"`dtypes` must be a non-empty sequence of {DTYPE_NAMES}, got "
                         f"{dtypes!r}")


def search(strategy, compare: Callable, *, max_examples: int, seed: int | None,
           shrink: bool = True):
    """Run ``compare(*batch)`` (``None`` or a failure) on hypothesis's batches of ``strategy``.

    Returns ``(passed, batches drawn, seconds, failures, shrink calls)``, the last failure the
    shrunk one: the batches drawn are those up to and including the first failing one (never
    more than ``max_examples``), the shrink calls those hypothesis made after it to find a
    smaller failing batch (with ``shrink=False`` only hypothesis's replay of the first failing
    batch, reported as drawn: faster, and enough for a verdict). ``seed=None`` runs derandomized, so a
    report is reproducible; the batches drawn do not depend on ``shrink``.
    """
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hypothesis_seed
    except ImportError:
        raise ImportError("the conformance kit needs hypothesis: pip install hypothesis") from None
    failures: list = []
    count = [0]
    outcomes: list = []  # per call, whether it failed: the calls after the first are shrinking
    judge = compare

    def compare(*batch):
        failure = judge(*batch)
        outcomes.append(failure is not None)
        return failure

    # the derandomized search's seed is a digest of the decorated function's source, so the
    # options live in one object whatever they are: the same batches with or without shrinking
    chosen = settings(max_examples=max_examples, deadline=None, database=None,
                      derandomize=seed is None, suppress_health_check=list(HealthCheck),
                      print_blob=False, report_multiple_bugs=False,
                      **({} if shrink else {"phases": (Phase.explicit, Phase.reuse,
                                                        Phase.generate)}))

    @settings(chosen)
    @given(strategy)
    def conforms(batch):
        count[0] += 1
        failure = compare(*batch)
        if failure is not None:
            failures.append(failure)
            raise AssertionError(failure.message)

    if seed is not None:
        conforms = hypothesis_seed(seed)(conforms)
    start = time.perf_counter()
    try:
        conforms()
        passed = True
    except AssertionError:
        passed = False
    except Exception:  # e.g. hypothesis's Flaky for a function whose failure does not replay
        if not failures:
            raise
        passed = False
    drawn = outcomes.index(True) + 1 if True in outcomes else len(outcomes)
    return passed, drawn, time.perf_counter() - start, failures, len(outcomes) - drawn


def usage(message: str) -> int:
    """One line on stderr, exit code 2."""
    print(f"ustat-rl conformance: {message}", file=sys.stderr)
    return 2


def run_target(target: str, max_examples: int, check: Callable,
               probe: Callable | None = None) -> int:
    """``ustat-rl conformance``: load ``target``, print ``check(fn)``'s report; exit code 0
    conforms, 1 does not, 2 a usage or import error (one line on stderr).

    ``probe(fn)`` (optional) calls the function once on a plain valid batch and returns why it
    cannot be tested (``None`` if it can): a function that cannot be called with the signature
    asked for, or raises on that batch, is a usage error, told before any search; one that
    runs but returns wrong values is searched and reported as not conforming.
    """
    if max_examples < 1:
        return usage("--max-examples must be >= 1")
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return usage("needs hypothesis (pip install hypothesis)")
    try:
        fn = load_function(target)
    except TargetError as exc:
        return usage(f"cannot load {target!r}: {exc}")
    if probe is not None and (problem := probe(fn)) is not None:
        return usage(f"{target.rsplit(':', 1)[-1]}: {problem}")  # the function, not its file
    from hypothesis.errors import Unsatisfiable

    try:
        report = check(fn)
    except (ValueError, TypeError) as exc:  # an option the kit refuses: one line, no search
        return usage(first_line(exc).split(": ", 1)[-1])
    except Unsatisfiable:  # hypothesis's own words would name its internals
        return usage("no valid batch could be drawn for these options (group sizes, channels)")
    print(report.summary())
    return 0 if report.passed else 1
