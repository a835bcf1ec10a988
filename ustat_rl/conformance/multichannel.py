"""Conformance kit for multi-reward rules: does ``fn(rewards (n, K), group_ids, weights)`` compute
a :class:`~ustat_rl.advantages.multichannel.MultiChannelRule`?

Hypothesis draws batches of ``K`` channels (each group's channel random, binary, tied, nearly
tied at 1e-3 or 1e-6, or all equal), weights, ids in any order (or contiguous groups for an
implementation that reshapes into ``(-1, G)``), in float32 and float64, and compares ``fn`` with
the rule in float64 (:meth:`MultiChannelRule.advantages`).

Tolerance: each stage's rounding is bounded as the single-reward kit bounds it
(:func:`ustat_rl.conformance.kit.tolerance`), and the errors are carried through the
rule. With ``eps`` the working machine epsilon (float32 or the coarser passed dtype):

- channel stage: ``D_k`` per sample, the kit's tolerance of the channel rule on channel ``k``
  (a rule with no channel stage takes the raw rewards: ``D_k = eps |z_k| + tiny``);
- weighted sum ``x = sum_k w_k c_k``: ``Dx = sum_k |w_k| D_k + (K + 2) eps sum_k |w_k c_k|``
  (the products, the ``K - 1`` additions, and weights rounded to the working precision);
- final stage over a set ``S`` (the group, or the batch for a batch statistic) of ``n_S``
  samples whose largest input error is ``D_S``: its numerator is off by ``eN = 2 D_S``, its
  spread by ``es = 2 D_S sqrt(n_S/(n_S - 1))`` (triangle inequality), and its denominator ``d``
  is at least ``d_low = max(d - es - (n_S + 5) eps d, floor)`` (``floor`` the epsilon's), so
  ``|got - expected| <= kit(final, x) + (eN + |A| es) / d_low``; where ``d_low`` is 0, or a
  stage that keeps its numerator at zero spread sees a spread within its error of 0, the sample
  is not checked.

Planted bugs (the orders swapped, a population std, the batch step dropped, a group's mean
leaked) are rejected on the batches hypothesis finds, in float32 and float64.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..advantages.multichannel import get_multichannel_rule
from .adapters import BadOutput, probe_call, unchanged
from .kit import tolerance
from .report import ConformanceFailure, ConformanceReport
from .search import DEFAULT_TIMEOUT, Search, run_target, usage
from .search import search as run_search

__all__ = ["multichannel_tolerance", "check_multichannel_conformance", "run_multichannel_command",
           "TOLERANCE_FORMULA"]

TOLERANCE_FORMULA = ("|got - expected| <= kit(final, x) + (2 D_S + |A| es)/d_low with x the "
                     "weighted sum and D_S its largest error over the final stage's set (module "
                     "docstring)")

_DTYPES = {"float32": np.float32, "float64": np.float64}
_KINDS = ("random", "binary", "ties", "near_tie_1e-3", "near_tie_1e-6", "all_equal")
_WEIGHTS = ((1.0,), (1.0, 0.5), (0.3, 1.0, 2.0), (1.0, -0.5), (2.0, 2.0, 2.0))


def _working(dtype):
    coarse = [np.finfo(np.float32)] + ([np.finfo(dtype)] if dtype is not None else [])
    return max(f.eps for f in coarse), max(f.tiny for f in coarse)


def _set_max(values, inverse, counts, batch: bool):
    """The largest value over each sample's set: its group, or the whole batch."""
    if batch:
        return np.full(values.size, values.max())
    top = np.zeros(counts.size)
    np.maximum.at(top, inverse, values)
    return top[inverse]


def multichannel_tolerance(estimator, rewards, group_ids, weights=None, dtype=None) -> np.ndarray:
    """The allowed ``|got - expected|`` per sample, ``(n,)`` (module docstring); ``inf`` marks
    samples the working precision cannot resolve."""
    estimator = get_multichannel_rule(estimator)
    z, inverse, counts, w = estimator.check_inputs(rewards, group_ids, weights)
    eps, tiny = _working(dtype)
    K = z.shape[1]
    if estimator.channel is None:
        stage = [z[:, k] for k in range(K)]
        errors = [eps * np.abs(z[:, k]) + tiny for k in range(K)]
    else:
        stage = [estimator.channel.apply(z[:, k], inverse, counts) for k in range(K)]
        errors = [tolerance(estimator.channel, z[:, k], group_ids, dtype) for k in range(K)]
    x = sum(wk * c for wk, c in zip(w, stage))
    dx = (sum(abs(wk) * e for wk, e in zip(w, errors))
          + (K + 2) * eps * sum(abs(wk) * np.abs(c) for wk, c in zip(w, stage)))
    if estimator.final is None:
        return dx
    final = estimator.final
    parts = final.parts(x, inverse, counts)
    batch = final.statistics == "batch"
    n_set = np.full(x.size, float(x.size)) if batch else counts[inverse].astype(np.float64)
    d_set = _set_max(dx, inverse, counts, batch)
    d_num = _set_max(dx, inverse, counts, False) if final.scaling.kind == "batch std" else d_set
    e_num, A = 2.0 * d_num, np.abs(parts.advantage)
    if final.scaling.kind == "none":
        return tolerance(final, x, group_ids, dtype) + e_num
    e_s = 2.0 * d_set * np.sqrt(n_set / np.maximum(n_set - 1.0, 1.0))
    floor = {"added to std": final.epsilon, "inside sqrt": np.sqrt(final.epsilon),
             "variance floor": np.sqrt(final.epsilon)}.get(final.epsilon_placement, 0.0)
    d = parts.denominator
    d_low = np.maximum(d - e_s - (n_set + 5.0) * eps * d, floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        carried = np.where(d_low > 0, (e_num + A * e_s) / d_low, np.inf)
    if final.scaling.all_equal != "divide":  # a spread near 0 may or may not take the rule
        exact_zero = (parts.std == 0) & (d_set == 0)
        carried = np.where(exact_zero, e_num, np.where(parts.std <= 2 * e_s, np.inf, carried))
    return tolerance(final, x, group_ids, dtype) + carried


def _strategy(rule, weights, contiguous, dtypes):
    from hypothesis import assume
    from hypothesis import strategies as st

    value = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)
    fixed = None if weights is None else np.asarray(weights, dtype=np.float64)

    def channel(draw, size):
        kind = draw(st.sampled_from(_KINDS))
        if kind == "random":
            return draw(st.lists(value, min_size=size, max_size=size))
        if kind == "binary":
            return draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=size, max_size=size))
        if kind == "ties":
            pair = draw(st.lists(value, min_size=2, max_size=2))
            return draw(st.lists(st.sampled_from(pair), min_size=size, max_size=size))
        if kind.startswith("near_tie"):
            base, delta = draw(value), float(kind.split("_")[-1])
            return [base + k * delta for k in draw(st.lists(st.integers(0, 2), min_size=size,
                                                            max_size=size))]
        return [draw(value)] * size

    @st.composite
    def batches(draw):
        if fixed is None:
            w = np.array(draw(st.sampled_from([c for c in _WEIGHTS
                                               if len(c) >= rule.min_channels])))
        else:
            w = fixed
        n_groups = draw(st.integers(1, 4))
        low = rule.min_group_size
        sizes = ([draw(st.integers(low, 6))] * n_groups if rule.equal_group_sizes or contiguous
                 else draw(st.lists(st.integers(low, 6), min_size=n_groups, max_size=n_groups)))
        assume(sum(sizes) >= rule.min_batch_size)
        cols = [np.concatenate([channel(draw, s) for s in sizes]) for _ in w]
        dtype = draw(st.sampled_from(dtypes))
        z = np.stack(cols, axis=1).astype(dtype)  # (n, K)
        ids = draw(st.lists(st.integers(-1000, 1000), min_size=n_groups, max_size=n_groups,
                            unique=True))
        group_ids = np.repeat(np.array(ids, dtype=np.int64), sizes)
        if not contiguous:
            order = np.array(draw(st.permutations(range(z.shape[0]))), dtype=np.int64)
            z, group_ids = z[order], group_ids[order]
        return z, group_ids, w

    return batches()


def _compare(fn, rule, z, ids, w) -> ConformanceFailure | None:
    expected = rule.advantages(z, ids, w)
    given = {"rewards": z.copy(), "group_ids": ids.copy(), "weights": w.copy()}
    try:
        got = np.asarray(fn(*given.values()))
        unchanged(given, {"rewards": z, "group_ids": ids, "weights": w})
    except BadOutput as exc:
        return ConformanceFailure(z, ids, expected, None, -1, f"the function {exc}")
    except Exception as exc:  # anything raised on a valid batch does not conform
        return ConformanceFailure(z, ids, expected, None, -1,
                                  f"the function raised {type(exc).__name__}: {exc}")
    if got.shape != expected.shape or got.dtype.kind != "f":
        return ConformanceFailure(z, ids, expected, None, -1,
                                  f"the function returned shape {got.shape}, dtype {got.dtype}; "
                                  f"expected {expected.shape} floating")
    coarse = z.dtype if np.finfo(z.dtype).eps >= np.finfo(got.dtype).eps else got.dtype
    tol = multichannel_tolerance(rule, z, ids, w, coarse)
    diff = np.abs(got.astype(np.float64) - expected)
    bad = ~(diff <= tol)  # NaN counts as a failure
    if not np.any(bad):
        return None
    i = int(np.argmax(np.where(bad, np.where(np.isfinite(diff), diff / np.maximum(tol, 1e-300),
                                             np.inf), -1.0)))
    return ConformanceFailure(z, ids, expected, got, i,
                              f"sample {i}: got {float(got[i])!r}, expected {float(expected[i])!r} "
                              f"(|difference| {diff[i]:.3g} > tolerance {tol[i]:.3g})")


def check_multichannel_conformance(fn: Callable, estimator, *, weights=None,
                                   contiguous: bool = False,
                                   search: Search | None = None) -> ConformanceReport:
    """Property-test ``fn(rewards (n, K), group_ids (n,), weights (K,)) -> (n,)`` against a
    multi-channel rule (docs/conventions.md).

    Parameters
    ----------
    fn : callable
    estimator : str or MultiChannelRule
    weights : array_like, optional
        Fix the weights (and so ``K``); by default they are drawn with ``K`` from 1 to 3.
    contiguous : bool
        Draw equal, contiguous groups (for an implementation that reshapes into ``(-1, G)``).
    search : Search, optional
        The search's settings, as for :func:`~ustat_rl.conformance.kit.check_conformance`
        (default ``Search()``).

    Returns
    -------
    ConformanceReport
    """
    estimator = get_multichannel_rule(estimator)
    search = Search.of(search)
    if weights is not None:
        weights = check_kit_weights(estimator, weights)
    strategy = _strategy(estimator, weights, contiguous, [_DTYPES[d] for d in search.dtypes])
    passed, count, seconds, failures, n_shrink = run_search(
        strategy, lambda *batch: _compare(fn, estimator, *batch), search)
    failure = failures[-1] if (failures and not passed) else None
    signature = "multichannel-contiguous" if contiguous else "multichannel"
    return ConformanceReport(estimator.name, signature, passed, count, seconds, TOLERANCE_FORMULA,
                             failure, n_shrink)


def check_kit_weights(estimator, weights) -> np.ndarray:
    """Fixed ``weights`` checked for the kit: the rule's own checks, at least
    ``rule.min_channels`` channels, and one nonzero weight (with every weight 0 every
    advantage is 0 whatever the rewards, so no implementation could be told apart)."""
    w = estimator.check_weights(weights, np.size(weights))
    if w.size < estimator.min_channels:
        raise ValueError(f"`weights`: {estimator.name} needs at least "
                         f"{estimator.min_channels} reward "
                         f"channels, got {w.size} weight{'s' if w.size != 1 else ''}")
    if not np.any(w != 0.0):
        raise ValueError("`weights`: every weight is 0, so every advantage is 0 whatever the "
                         "rewards and no implementation can be told apart; give a nonzero "
                         "weight")
    return w


def multichannel_probe(fn: Callable, estimator, weights=None) -> str | None:
    """Why ``fn`` cannot be tested (``None`` if it can): called once on two groups of four
    samples with distinct rewards in every channel; an exception is a usage error."""
    estimator = get_multichannel_rule(estimator)
    K = max(estimator.min_channels, 1) if weights is None else np.size(weights)
    w = np.ones(K) if weights is None else np.asarray(weights, dtype=np.float64)
    z = (np.arange(8, dtype=np.float64)[:, None] * (1.0 + np.arange(K))[None, :]) % 5.0 \
        + np.arange(K)[None, :] * 0.25  # (8, K)
    ids = np.repeat(np.arange(2, dtype=np.int64), 4)
    return probe_call(fn, (z, ids, w), "fn(rewards (n, K), group_ids, weights)")


def run_multichannel_command(target: str, estimator: str, *, weights=None, contiguous: bool = False,
                             max_examples: int = 200, seed: int | None = None,
                             timeout: float = DEFAULT_TIMEOUT) -> int:
    """``ustat-rl conformance`` for a multi-reward rule: print the report; exit code 0 conforms,
    1 does not, 2 usage (one line on stderr, before any batch is drawn)."""
    spec = get_multichannel_rule(estimator)
    if weights is not None:
        try:
            weights = check_kit_weights(spec, weights)
        except (TypeError, ValueError) as exc:
            return usage(f"--weights: {str(exc).removeprefix('`weights`: ')}")
    return run_target(target, max_examples, lambda fn: check_multichannel_conformance(
        fn, spec, weights=weights, contiguous=contiguous, search=Search(max_examples, seed)),
        lambda fn: multichannel_probe(fn, spec, weights), timeout=timeout)
