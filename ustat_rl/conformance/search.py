"""The search both conformance kits run, and the command-line wrapper they share.

:func:`search` draws batches with hypothesis and stops at the first one ``compare`` rejects
(shrunk by hypothesis); :func:`run_target` loads ``module:function`` and turns a report into
``ustat-rl conformance``'s exit code, calling the function through :func:`bounded_calls`: each
call in a worker thread that is abandoned after a per-call timeout (a target that never returns
is refused in one line, not waited on for ever), with a progress line on stderr during a long
search when stderr is a terminal (a log or a pipe gets the report alone, the same however busy
the machine). The single-reward kit
(:mod:`ustat_rl.conformance.kit`) and the multi-reward kit
(:mod:`ustat_rl.conformance.multichannel`) differ only in their batches, their
comparison and their tolerance.
"""

from __future__ import annotations

import numbers
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validation import as_instance
from .adapters import TargetError, first_line, load_function

__all__ = ["DTYPE_NAMES", "DEFAULT_TIMEOUT", "PROGRESS_EVERY", "Search", "TargetTimeout",
           "bounded_calls", "search", "run_target"]

#: The reward dtypes a kit can draw.
DTYPE_NAMES = ("float32", "float64")

#: Seconds one call of the function under test may take before it is abandoned
#: (``ustat-rl conformance --timeout``). A batch holds at most a few dozen rewards, so a
#: conforming function returns in far less; the margin covers a first call that compiles or
#: loads (torch, numba).
DEFAULT_TIMEOUT = 60.0

#: Seconds between two progress lines of a long search.
PROGRESS_EVERY = 10.0


class TargetTimeout(BaseException):
    """A call of the function under test did not return within the timeout.

    A ``BaseException``, like ``KeyboardInterrupt``: a hang is not a wrong answer that the
    search may shrink (each shrinking call would wait out the timeout again), so it passes
    through the kit's comparison and hypothesis to :func:`run_target`.
    """

    def __init__(self, seconds: float, n_rewards: int | None):
        self.seconds, self.n_rewards = seconds, n_rewards
        size = "" if n_rewards is None else f" on a batch of {n_rewards} rewards"
        super().__init__(f"did not return within {seconds:g} s{size}")


def bounded_calls(fn: Callable, timeout: float, progress: Callable | None = None,
                  every: float | None = None) -> Callable:
    """``fn`` called in a daemon worker thread per call, abandoned after ``timeout`` seconds
    (:class:`TargetTimeout`); what ``fn`` returns or raises is passed on unchanged.

    ``progress(calls, seconds)``, when given, is called after a call once at least ``every``
    seconds (default :data:`PROGRESS_EVERY`) have passed since the start or since the last time
    it was called.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"`timeout` must be a number of seconds > 0, got {timeout!r}")
    every = PROGRESS_EVERY if every is None else every
    start = time.monotonic()
    state = {"calls": 0, "shown": start}

    def call(*args, **kwargs):
        box: dict = {}

        def work():
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread as it is
                box["error"] = exc

        worker = threading.Thread(target=work, name="conformance-target", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():  # left running: a daemon thread does not keep the process alive
            size = np.size(args[0]) if args else None
            raise TargetTimeout(float(timeout), None if size is None else int(size))
        state["calls"] += 1
        now = time.monotonic()
        if progress is not None and now - state["shown"] >= every:
            state["shown"] = now
            progress(state["calls"], now - start)
        if "error" in box:
            raise box["error"]
        return box["value"]

    return call


@dataclass(frozen=True)
class Search:
    """How a kit searches for a failing batch: the same settings for both kits.

    Attributes
    ----------
    max_examples : int
        Batches hypothesis generates before shrinking (at least 1).
    seed : int, optional
        ``None`` (default) runs hypothesis derandomized, so a report is reproducible.
    dtypes : sequence of {"float32", "float64"}
        The reward dtypes drawn (kept as a tuple).
    shrink : bool
        Shrink a failing batch (the default); ``False`` reports the first one as drawn, faster.

    Each setting is checked when the object is made, before any batch is drawn, and an error
    names it.
    """

    max_examples: int = 200
    seed: int | None = None
    dtypes: tuple = DTYPE_NAMES
    shrink: bool = True

    def __post_init__(self):
        n = self.max_examples
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"`max_examples` must be an integer >= 1, got {n!r}")
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise ValueError(f"`seed` must be an integer or None, got {seed!r}")
        dtypes = self.dtypes
        if isinstance(dtypes, str) or not dtypes or any(d not in DTYPE_NAMES for d in dtypes):
            raise ValueError(f"`dtypes` must be a non-empty sequence of {DTYPE_NAMES}, got "
                             f"{dtypes!r}")
        object.__setattr__(self, "dtypes", tuple(dtypes))
        if not isinstance(self.shrink, bool):
            raise ValueError(f"`shrink` must be True or False, got {self.shrink!r}")

    @classmethod
    def of(cls, search) -> Search:
        """``search`` itself, or ``Search()`` for ``None``; anything else is a ``TypeError``."""
        return as_instance(search, cls, "search", none_is_default=True)


def search(strategy, compare: Callable, options: Search):
    """Run ``compare(*batch)`` (``None`` or a failure) on hypothesis's batches of ``strategy``,
    as ``options`` (:class:`Search`; its ``dtypes`` are the strategy's to draw) says.

    Returns ``(passed, batches drawn, seconds, failures, shrink calls)``, the last failure the
    shrunk one: the batches drawn are those up to and including the first failing one (never
    more than ``max_examples``), the shrink calls those hypothesis made after it to find a
    smaller failing batch (with ``shrink=False`` only hypothesis's replay of the first failing
    batch, reported as drawn: faster, and enough for a verdict). ``seed=None`` runs derandomized, so a
    report is reproducible; the batches drawn do not depend on ``shrink``.
    """
    max_examples, seed, shrink = options.max_examples, options.seed, options.shrink
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


def _on_terminal() -> bool:
    """Whether stderr is a terminal (progress lines go there only)."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def usage(message: str) -> int:
    """One line on stderr, exit code 2."""
    print(f"ustat-rl conformance: {message}", file=sys.stderr)
    return 2


def run_target(target: str, max_examples: int, check: Callable,
               probe: Callable | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
    """``ustat-rl conformance``: load ``target``, print ``check(fn)``'s report; exit code 0
    conforms, 1 does not, 2 a usage or import error (one line on stderr).

    Every call of the function goes through :func:`bounded_calls`: one that does not return
    within ``timeout`` seconds ends the run with one line (exit 2), and, when stderr is a
    terminal, a search that runs longer than :data:`PROGRESS_EVERY` seconds prints a progress
    line on stderr at that pace.

    ``probe(fn)`` (optional) calls the function once on a plain valid batch and returns why it
    cannot be tested (``None`` if it can): a function that cannot be called with the signature
    asked for, or raises on that batch, is a usage error, told before any search; one that
    runs but returns wrong values is searched and reported as not conforming.
    """
    if max_examples < 1:
        return usage("--max-examples must be >= 1")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        return usage(f"--timeout must be a number of seconds > 0, got {timeout!r}")
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return usage("needs hypothesis (pip install hypothesis)")
    try:
        fn = load_function(target)
    except TargetError as exc:
        return usage(f"cannot load {target!r}: {exc}")
    name = target.rsplit(':', 1)[-1]  # the function, not its file

    def progress(calls: int, seconds: float) -> None:
        print(f"ustat-rl conformance: {name}: {calls} calls in {seconds:.0f} s (up to "
              f"{max_examples} batches, then shrinking a failing one)", file=sys.stderr,
              flush=True)

    fn = bounded_calls(fn, timeout, progress if _on_terminal() else None)
    from hypothesis.errors import Unsatisfiable

    try:
        if probe is not None and (problem := probe(fn)) is not None:
            return usage(f"{name}: {problem}")
        report = check(fn)
    except TargetTimeout as exc:
        return usage(f"{name} {exc} (--timeout {timeout:g}): a function that does not return "
                     "cannot be tested; check it on a small batch by hand")
    except (ValueError, TypeError) as exc:  # an option the kit refuses: one line, no search
        return usage(first_line(exc).split(": ", 1)[-1])
    except Unsatisfiable:  # hypothesis's own words would name its internals
        return usage("no valid batch could be drawn for these options (group sizes, channels)")
    print(report.summary())
    return 0 if report.passed else 1
