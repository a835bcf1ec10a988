"""The conformance target for a framework's reward-variance filter (beyond the paper).

A framework's filter is a function ``fn(rewards (N,), group_ids (N,)) -> keep mask (N,)``; it is
checked against the reference (:func:`~ustat_rl.theory.variance_filter.variance_filter_mask`)
with the options it claims (:class:`~ustat_rl.theory.variance_filter.VarianceFilter`) on a fixed
list of batches and on random ones (ragged groups, binary and three-level rewards, ties), smallest
batches first, so the first disagreement found is a smallest failing batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int
from .variance_filter import get_variance_filter, variance_filter_mask

__all__ = ["FilterVerdict", "filter_cases", "check_variance_filter"]

#: Hand-made batches: ties, a flat batch, a singleton, ragged groups where ``ddof`` changes the
#: order, and a prefix that ends exactly on the target.
_FIXED = (
    ([1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1]),
    ([1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1]),
    ([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], [0, 0, 1, 1, 2, 2]),
    ([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0], [0, 0, 1, 1, 1, 2, 2, 2]),
    ([1.0, 0.0, 1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1, 1, 1]),
    ([0.0, 1.0, 0.5, 0.5, 0.0, 1.0, 1.0], [0, 0, 1, 1, 2, 2, 3]),
)


@dataclass(frozen=True)
class FilterVerdict:
    """The verdict on one filter.

    Attributes
    ----------
    passed : bool
    n_cases : int
        Batches compared.
    rewards, group_ids, expected, got : ndarray or None
        A smallest failing batch and the two masks (``None`` when it passed).
    """

    passed: bool
    n_cases: int
    rewards: np.ndarray | None = None
    group_ids: np.ndarray | None = None
    expected: np.ndarray | None = None
    got: np.ndarray | None = None

    def summary(self) -> str:
        """One line a user reads."""
        if self.passed:
            return f"agrees with the reference on all {self.n_cases} batches"
        return (f"differs from the reference: rewards {self.rewards.tolist()}, groups "
                f"{self.group_ids.tolist()}: reference keeps {self.expected.astype(int).tolist()}, "
                f"the filter keeps {self.got.astype(int).tolist()}")


def filter_cases(n_random: int = 300, seed: int = 0) -> list:
    """The fixed batches and ``n_random`` random ones, ordered by size (samples, then groups)."""
    n = as_int(n_random, "n_random", 0)
    rng = np.random.default_rng(seed)
    cases = [(np.array(r), np.array(g)) for r, g in _FIXED]
    for _ in range(n):
        B = int(rng.integers(1, 7))
        sizes = rng.integers(1, 6, size=B)
        levels = (0.0, 1.0) if rng.random() < 0.6 else (0.0, 0.5, 1.0)
        rewards = rng.choice(levels, size=int(sizes.sum()))
        cases.append((rewards, np.repeat(np.arange(B), sizes)))
    cases.sort(key=lambda c: (len(c[0]), len(np.unique(c[1]))))
    return cases


def check_variance_filter(fn, spec, n_random: int = 300, seed: int = 0) -> FilterVerdict:
    """Compare ``fn(rewards, group_ids) -> keep mask`` with the reference under ``spec``.

    Examples
    --------
    >>> from ustat_rl.theory.variance_filter import VarianceFilter
    >>> spec = VarianceFilter("top_p", 0.9)
    >>> check_variance_filter(lambda r, g: variance_filter_mask(r, g, spec), spec).passed
    True
    >>> check_variance_filter(lambda r, g: np.ones(len(r), bool), spec).summary()[:28]
    'differs from the reference: '
    """
    spec = get_variance_filter(spec)
    if not callable(fn):
        raise TypeError(f"`fn` must be callable, got {type(fn).__name__}")
    cases = filter_cases(n_random, seed)
    for rewards, ids in cases:
        want = variance_filter_mask(rewards, ids, spec)
        got = np.asarray(fn(rewards.copy(), ids.copy()))
        if got.shape != want.shape or not np.array_equal(got.astype(bool), want):
            return FilterVerdict(False, len(cases), rewards, ids, want,
                                 got if got.shape == want.shape else np.zeros_like(want))
    return FilterVerdict(True, len(cases))
