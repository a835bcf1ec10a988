"""Conformance kit: does an advantage function compute a named framework convention?

Give it your ``fn(rewards, group_ids) -> advantages`` (or a verl-style or TRL-style function,
through an adapter) and a convention name from :data:`CONVENTION_NAMES`; property-based testing with
hypothesis draws batches that stress the places where implementations differ: random groups, ties,
near-ties (spreads of 1e-3 down to 1e-9), all-equal groups, one-sample groups, large offsets (1e6),
float32 and float64 inputs, and ragged group ids in any order. The result is a
:class:`ConformanceReport` with the smallest failing batch found (hypothesis shrinks it, then groups
the failure does not need are dropped one at a time).

Tolerance (a bound for any correct implementation whose working precision is float32 or finer,
whatever dtype the kit passes; derived from the formula's conditioning, not tuned). The rules' data
(:class:`~ustat_rl.advantages.conventions.ConventionSpec`: baseline, scale, epsilon and its
placement, the all-equal rule) fix every term. With ``eps`` the machine epsilon of the coarsest of
float32, the input and the output dtypes, ``tiny`` its smallest normal number (values below it may
be flushed to 0), ``n`` the samples a statistic runs over and ``S`` the largest ``|z|`` among them:

- a centred reward ``z - m_g`` is off by at most ``dN = (n + 4)(eps S + tiny)`` (the input
  rounded to the working precision, ``n - 1`` additions, the division and the subtraction, each
  at most ``eps/2`` relative, counted twice to cover second-order terms and the order of a
  vectorised reduction); a leave-one-out numerator by ``n/(n - 1)`` times that;
- a standard deviation by ``ds = sqrt(n/(n - 1)) dN + (n + 3) eps s + sqrt(2 tiny)`` (the
  deviations' errors through the triangle inequality, the rounding of the sum of squares, and
  squares that underflow); whitening adds the batch mean's error to each centred value first,
  and a numerator that is a first stage's advantages (AReaL) carries that stage's own bound;
- a batch's nonzero fraction (verl's GPG) exactly, except that nonzero rewards below ``tiny``
  may count as 0;
- the denominator ``d`` (``s + epsilon``, ``sqrt(s^2 + epsilon)``, ``sqrt(max(s^2, epsilon))``)
  by ``dd = ds + 2 eps d``, never below ``d_low = max(d - dd, floor)``, ``floor`` ``epsilon`` or
  ``sqrt(epsilon)`` where ``s >= 0`` (a statistic that may be negative takes ``|d|``, ``|s|``);

so ``|got - expected| <= (dN + |A| dd) / d_low + 2 eps |A|``, ``A`` the reference advantage. Where
``d_low`` is 0 (no epsilon, and a spread the working precision cannot tell from 0) the sample is
not checked: any value passes there, NaN included (a spread rounded to 0 and divided by). Where a
rule keeps the numerator, or gives 0, when the std is exactly 0, exact ties in the passed values
must take that branch (NeMo-RL's one-pass variance gives such groups a std of rounding noise, hence
its +-1e6 advantages), and so must a statistic below ``-ds`` (MaxRL's group mean); spreads within
``ds`` of 0 may take either. At an offset of 1e6 a group whose spread is below one float32 step is
thus unchecked, while swapping Bessel for the population std, moving the epsilon, flooring the
variance (verl's vectorised GRPO before PR #6348) or leaking another group into the mean is
rejected on the batches hypothesis finds, in float32 and float64 alike. The reference is
:func:`ustat_rl.advantages.conventions.advantages` in float64 on the same inputs (docs/conventions.md).
A rule that subtracts a reference reward the rewards do not hold (``verl_remax``: each prompt's
greedy rollout's reward) gets one drawn per group (a value, one of the group's rewards, or 0,
with the batch's offset), passed with the batch, and counted among the values ``S``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..advantages.conventions import CONVENTION_NAMES, ConventionSpec, advantages, get_convention
from ..advantages.parts import Scaling
from .adapters import (
    INDEX_KINDS,
    REFERENCE_FORMS,
    SIGNATURE_FORMS,
    SIGNATURES,
    VERL_TOKENS,
    BadOutput,
    TargetError,
    adapt,
    first_line,
    load_function,
    probe_call,
    takes_reference,
)
from .report import ConformanceFailure, ConformanceReport
from .search import DEFAULT_TIMEOUT, Search, run_target, usage
from .search import search as run_search

__all__ = ["CONVENTION_NAMES", "SIGNATURES", "INDEX_KINDS", "ConformanceFailure",
           "ConformanceReport", "TargetError", "check_conformance", "check_batch", "tolerance",
           "takes_reference", "adapt", "load_function", "run_command", "TOLERANCE_FORMULA"]

_DTYPES = {"float32": np.float32, "float64": np.float64}


TOLERANCE_FORMULA = ("|got - expected| <= (dN + |A| dd)/d_low + 2 eps |A|: dN, dd the "
                     "numerator's and denominator's rounding bounds at float32 (or the coarser "
                     "passed dtype), d_low the smallest denominator they allow (module docstring)")


# --------------------------------------------------------------------------- tolerance
def _working(dtype):
    coarse = [np.finfo(np.float32)] + ([np.finfo(dtype)] if dtype is not None else [])
    # as Python floats: a float32 scalar would round sqrt(2 tiny) to float32 (6e-8 relative)
    return float(max(f.eps for f in coarse)), float(max(f.tiny for f in coarse))


def tolerance(estimator, rewards, group_ids, dtype=None, reference=None) -> np.ndarray:
    """The allowed ``|got - expected|`` per sample, shape ``(n,)`` (module docstring).

    ``dtype`` is the coarser of the input and output dtypes; the working precision is never
    taken finer than float32. ``inf`` marks samples the working precision cannot resolve.
    ``reference`` (per sample) is the reference reward a rule such as ``verl_remax``
    subtracts; it counts among the values ``S`` of its group.
    """
    spec = get_convention(estimator)
    z = np.asarray(rewards, dtype=np.float64)
    _, inverse, counts = np.unique(np.asarray(group_ids), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    ref = None if reference is None else np.asarray(reference, dtype=np.float64)
    parts = spec.parts(z, inverse, counts, ref)
    eps, tiny = _working(dtype)
    A = np.abs(parts.advantage)
    group_max = np.zeros(counts.size)
    np.maximum.at(group_max, inverse, np.abs(z) if ref is None else np.maximum(np.abs(z),
                                                                               np.abs(ref)))
    n = counts[inverse].astype(np.float64)
    dev_err = (n + 4) * (eps * group_max[inverse] + tiny)  # (n,) error of z - m_g
    deviation = spec.centring.kernel_coefficients(n)[1]  # n/(n - 1) for leave-one-out
    num_err = dev_err * np.where(deviation != 0, np.abs(deviation), 1.0)
    stage = getattr(spec.centring.function, "__self__", None)  # a first stage's advantages
    if isinstance(stage, ConventionSpec):  # numerators within that stage's own bound
        num_err = tolerance(stage, z, group_ids, dtype)
    if spec.scale == "none":
        return num_err + 2 * eps * A
    s, N = parts.std, float(z.size)
    under = np.sqrt(2 * tiny)
    if spec.scale in ("group", "statistic"):  # a spread of the group's rewards
        s_err = np.sqrt(n / np.maximum(n - 1, 1)) * dev_err + (n + 3) * eps * np.abs(s) + under
        s_err = np.where(parts.single, 0.0, s_err)
    elif spec.scale == "leave_one_out":
        s_err = np.sqrt((n - 1) / np.maximum(n - 2, 1)) * dev_err + (n + 3) * eps * s + under
    elif spec.scale == "nonzero":  # a count is exact, but float32 may flush tiny rewards to 0
        flushed = np.count_nonzero((z != 0) & (np.abs(z) < tiny))
        s_err = s - max(np.count_nonzero(z) - flushed, 1) / N
    elif spec.scale == "batch":
        batch_err = (N + 4) * (eps * np.abs(z).max() + tiny)
        s_err = np.sqrt(N / max(N - 1, 1)) * batch_err + (N + 3) * eps * s + under
    else:  # whitening: the batch mean of the numerator adds its error to each centred value
        c = replace(spec, scaling=Scaling()).parts(z, inverse, counts).numerator
        num_err = num_err + num_err.max() + (N + 3) * eps * np.abs(c).max()
        s_err = np.sqrt(N / max(N - 1, 1)) * num_err.max() + (N + 3) * eps * s + under
    d = np.abs(parts.denominator)  # a statistic (a group mean) plus epsilon may be negative
    d_err = s_err + 2 * eps * d
    floor = {"added to std": spec.epsilon, "inside sqrt": np.sqrt(spec.epsilon),
             "variance floor": np.sqrt(spec.epsilon)}.get(spec.epsilon_placement, 0.0)
    d_low = np.maximum(d - d_err, np.where(s >= 0, floor, 0.0))  # the floor needs s >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tol = np.where(d_low > 0, (num_err + A * d_err) / d_low, np.inf) + 2 * eps * A
        if spec.zero_std != "divide":  # an exact tie must take the rule; a near one may not
            undivided = num_err + 2 * eps * A
            either = np.where(floor > 0, (np.abs(parts.numerator) + num_err) / floor, np.inf) + A
            # a statistic that can be negative (a group mean) takes the rule below -s_err too
            ruled = (s == 0) | (s < -s_err)
            tol = np.where(ruled, undivided, np.where(np.abs(s) <= s_err, either, tol))
    return tol


# --------------------------------------------------------------------------- strategies
_KINDS = ("random", "binary", "ties", "near_tie_1e-3", "near_tie_1e-4", "near_tie_1e-5",
          "near_tie_1e-9", "all_equal")


def _batches(spec: ConventionSpec, equal_sizes: bool, contiguous: bool, dtypes):
    from hypothesis import assume
    from hypothesis import strategies as st

    reference = takes_reference(spec)
    value = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)

    @st.composite
    def batches(draw):
        n_groups = draw(st.integers(1, 5))
        low = spec.min_group_size
        if equal_sizes:
            sizes = [draw(st.integers(low, 8))] * n_groups
        else:
            sizes = draw(st.lists(st.integers(low, 8), min_size=n_groups, max_size=n_groups))
        assume(sum(sizes) >= spec.min_batch_size)
        groups = []
        for size in sizes:
            kind = draw(st.sampled_from(_KINDS))
            if kind == "random":
                vals = draw(st.lists(value, min_size=size, max_size=size))
            elif kind == "binary":
                vals = draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=size, max_size=size))
            elif kind == "ties":
                pair = draw(st.lists(value, min_size=2, max_size=2))
                vals = draw(st.lists(st.sampled_from(pair), min_size=size, max_size=size))
            elif kind.startswith("near_tie"):
                delta = float(kind.split("_")[-1])
                base = draw(value)
                steps = draw(st.lists(st.integers(0, 2), min_size=size, max_size=size))
                vals = [base + k * delta for k in steps]
            else:
                vals = [draw(value)] * size
            groups.append(vals)
        offset = draw(st.sampled_from([0.0, 1e6]))
        dtype = draw(st.sampled_from(dtypes))
        ids = draw(st.lists(st.integers(-1000, 1000), min_size=n_groups, max_size=n_groups,
                            unique=True))
        z = np.array([v + offset for vals in groups for v in vals], dtype=dtype)
        group_ids = np.repeat(np.array(ids, dtype=np.int64), sizes)
        if reference:  # one reference reward per group: drawn, one of its rewards, or 0
            refs = [draw(st.one_of(value, st.sampled_from(vals), st.just(0.0)))
                    for vals in groups]
            ref = np.repeat(np.array(refs, dtype=np.float64) + offset, sizes).astype(dtype)
        if not contiguous:
            order = np.array(draw(st.permutations(range(z.size))), dtype=np.int64)
            z, group_ids = z[order], group_ids[order]
            ref = ref[order] if reference else None
        return (z, group_ids, ref) if reference else (z, group_ids)

    return batches()


def _compare(call, spec: ConventionSpec, z, ids, ref=None) -> ConformanceFailure | None:
    expected = (advantages(spec, z, ids) if ref is None
                else spec.advantages(z, ids, reference=ref.astype(np.float64)))
    given = (z.copy(), ids.copy()) + (() if ref is None else (ref.copy(),))
    try:
        got = call(*given)
    except BadOutput as exc:
        return ConformanceFailure(z, ids, expected, None, -1, f"the function {exc}", ref)
    except (Exception, SystemExit) as exc:  # anything raised on a valid batch does not conform
        return ConformanceFailure(z, ids, expected, None, -1,
                                  f"the function raised {first_line(exc)}", ref)
    coarse = z.dtype if np.finfo(z.dtype).eps >= np.finfo(got.dtype).eps else got.dtype
    tol = tolerance(spec, z, ids, coarse, ref)
    diff = np.abs(got.astype(np.float64) - expected)
    # NaN fails, except where tol is inf (a spread rounded to 0, divided by: NaN is correct)
    bad = ~(diff <= tol) & ~np.isposinf(tol)
    if not np.any(bad):
        return None
    excess = np.where(np.isfinite(diff), diff / np.maximum(tol, 1e-300), np.inf)
    i = int(np.argmax(np.where(bad, excess, -1.0)))
    return ConformanceFailure(z, ids, expected, got, i,
                              f"sample {i}: got {float(got[i])!r}, expected {float(expected[i])!r} "
                              f"(|difference| {diff[i]:.3g} > tolerance {tol[i]:.3g})", ref)


def _drop_groups(call, spec: ConventionSpec, failure: ConformanceFailure) -> ConformanceFailure:
    """Remove whole groups while the batch still fails: the smallest batch that shows it."""
    dropped = True
    while dropped:
        dropped = False
        z, ids, ref = failure.rewards, failure.group_ids, failure.reference
        for g in np.unique(ids):
            keep = ids != g
            if keep.sum() >= max(spec.min_batch_size, 1):
                smaller = _compare(call, spec, z[keep], ids[keep],
                                   None if ref is None else ref[keep])
                if smaller is not None:
                    failure, dropped = smaller, True
                    break
    return failure


def check_conformance(fn: Callable, estimator, *, signature: str = "plain",
                      tensors: str = "numpy", index: str = "uid",
                      search: Search | None = None) -> ConformanceReport:
    """Property-test ``fn`` against a named convention (docs/conventions.md).

    Parameters
    ----------
    fn : callable
        The implementation under test, in the form ``signature`` names (see :func:`adapt`).
    estimator : str
        One of :data:`CONVENTION_NAMES`.
    signature : {"plain", "verl", "trl"}
        ``"trl"`` draws contiguous equal-size groups only; conventions that reshape into
        ``(-1, G)`` get equal sizes under every signature; conventions that whiten over the
        batch are tested with one-token responses under ``"verl"`` (verl weighs tokens). A rule
        that subtracts a reference reward (``verl_remax``) gets one per group, passed as
        ``fn(rewards, group_ids, reference)`` or as verl's
        ``fn(token_level_rewards, reward_baselines, response_mask)``; ``"trl"`` has no place
        for it.
    tensors : {"numpy", "torch"}
    index : {"uid", "int"}
        How the verl-style adapter passes group ids (:func:`adapt`).
    search : Search, optional
        How many batches, which seed and reward dtypes, and whether to shrink a failing batch
        (:class:`~ustat_rl.conformance.search.Search`; default ``Search()``: 200 batches,
        derandomized, float32 and float64, shrinking).

    Returns
    -------
    ConformanceReport
    """
    spec = get_convention(estimator)
    search = Search.of(search)
    tokens = 1 if spec.scale == "whiten" else VERL_TOKENS
    call = adapt(fn, signature, tensors, tokens=tokens, index=index,
                 reference=takes_reference(spec))
    strategy = _batches(spec, equal_sizes=spec.equal_group_sizes or signature == "trl",
                        contiguous=signature == "trl",
                        dtypes=[_DTYPES[d] for d in search.dtypes])
    passed, count, seconds, failures, n_shrink = run_search(
        strategy, lambda *batch: _compare(call, spec, *batch), search)
    failure = (_drop_groups(call, spec, failures[-1]) if search.shrink else failures[-1]) \
        if (failures and not passed) else None
    return ConformanceReport(spec.name, signature, passed, count, seconds, TOLERANCE_FORMULA,
                             failure, n_shrink)


def check_batch(fn: Callable, estimator, rewards, group_ids, *, signature: str = "plain",
                tensors: str = "numpy", index: str = "uid",
                reference=None) -> ConformanceFailure | None:
    """The kit's comparison on one given batch: ``None`` when ``fn`` conforms on it, else the
    :class:`ConformanceFailure` (no search, no shrinking; :func:`check_conformance` searches).

    ``rewards`` and ``group_ids`` are what the kit would draw (float32 or float64 rewards, integer ids;
    contiguous equal groups for ``signature="trl"``); the other parameters are
    :func:`check_conformance`'s. Conventions that whiten over the batch get one-token responses
    under ``"verl"``, as there. ``reference`` (per sample, in the rewards' dtype) is required by
    a rule that subtracts a reference reward (``verl_remax``) and refused by the others.

    Examples
    --------
    >>> import numpy as np
    >>> z, ids = np.array([1.0, 0.0, 0.0, 1.0]), np.array([0, 0, 0, 0])
    >>> check_batch(lambda r, g: advantages("trl_group", r, g), "trl_group", z, ids) is None
    True
    >>> check_batch(lambda r, g: r - r.mean(), "trl_group", z, ids).index
    0
    """
    spec = get_convention(estimator)
    z = np.asarray(rewards)
    if z.dtype not in (np.float32, np.float64):
        raise TypeError(f"`rewards` must be a float32 or float64 array, got dtype {z.dtype}")
    if takes_reference(spec) != (reference is not None):
        raise ValueError(f"`reference` must be given for {spec.name!r}" if takes_reference(spec)
                         else f"`reference` is not taken by {spec.name!r}")
    ref = None if reference is None else np.asarray(reference).astype(z.dtype)
    if ref is not None and ref.shape != z.shape:
        raise ValueError(f"`reference` must have the shape of `rewards` {z.shape}, got "
                         f"{ref.shape}")
    call = adapt(fn, signature, tensors, tokens=1 if spec.scale == "whiten" else VERL_TOKENS,
                 index=index, reference=ref is not None)
    return _compare(call, spec, z, np.asarray(group_ids), ref)


def run_command(target: str, estimator: str, *, signature: str = "plain",
                tensors: str = "numpy", max_examples: int = 200, seed: int | None = None,
                index: str = "uid", timeout: float = DEFAULT_TIMEOUT) -> int:
    """``ustat-rl conformance``: print the report; exit code 0 conforms, 1 does not, 2 usage
    (usage and import errors are one line on stderr, as is a call of the function that does not
    return within ``timeout`` seconds: :func:`~ustat_rl.conformance.search.run_target`)."""
    if takes_reference(get_convention(estimator)) and signature == "trl":
        return usage(f"--signature trl passes no reference reward, which {estimator} "
                     "subtracts; use --signature plain (fn(rewards, group_ids, reference)) or "
                     "verl (fn(token_level_rewards, reward_baselines, response_mask))")
    return run_target(target, max_examples, lambda fn: check_conformance(
        fn, estimator, signature=signature, tensors=tensors, index=index,
        search=Search(max_examples, seed)), lambda fn: probe(fn, estimator, signature=signature,
                                                  tensors=tensors, index=index),
        timeout=timeout)


def probe(fn: Callable, estimator, *, signature: str = "plain", tensors: str = "numpy",
          index: str = "uid") -> str | None:
    """Why ``fn`` cannot be tested against ``estimator`` (``None`` if it can): it is called
    once on two groups of distinct rewards; an exception is a usage error (exit 2)."""
    spec = get_convention(estimator)
    tokens = 1 if spec.scale == "whiten" else VERL_TOKENS
    size = max(4, spec.min_group_size)
    z = np.concatenate([np.arange(size) + 0.5 * g for g in range(2)]).astype(np.float64)
    ids = np.repeat(np.arange(2, dtype=np.int64), size)
    if takes_reference(spec):  # verl's remax: a greedy reward per prompt
        call = adapt(fn, signature, tensors, tokens=tokens, index=index, reference=True)
        return probe_call(call, (z, ids, np.repeat([0.25, 1.75], size)),
                          f"fn{REFERENCE_FORMS[signature]}")
    call = adapt(fn, signature, tensors, tokens=tokens, index=index)
    return probe_call(call, (z, ids), f"fn{SIGNATURE_FORMS[signature]}")
