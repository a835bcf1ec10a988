"""What the conformance kit reports (:mod:`ustat_rl.conformance.kit`): the smallest failing
batch and the report of one run."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .adapters import SIGNATURE_WORDS

__all__ = ["ConformanceFailure", "ConformanceReport"]


@dataclass(frozen=True)
class ConformanceFailure:
    """The smallest failing batch found (hypothesis shrinking, then groups dropped).

    Attributes
    ----------
    rewards, group_ids : ndarray
        The batch, in the dtype it was passed (ids as drawn; :func:`adapt` says how passed).
    expected : ndarray
        The convention's advantages (float64 reference).
    got : ndarray or None
        What the function returned (``None`` when it raised or returned no valid array).
    index : int
        The worst sample (-1 when no comparison was possible).
    message : str
        What went wrong, in one line.
    reference : ndarray or None
        Each sample's reference reward (its prompt's greedy rollout's for ``verl_remax``), for a
        rule that subtracts one; ``None`` otherwise.
    """

    rewards: np.ndarray
    group_ids: np.ndarray
    expected: np.ndarray
    got: np.ndarray | None
    index: int
    message: str
    reference: np.ndarray | None = None


@dataclass(frozen=True)
class ConformanceReport:
    """Outcome of :func:`check_conformance`.

    Attributes
    ----------
    convention, signature : str
    passed : bool
    n_examples : int
        Batches drawn: all when the function conforms, else up to the first failing one.
    seconds : float
    tolerance : str
        The rule applied (see the module docstring).
    failure : ConformanceFailure or None
    n_shrink : int
        Further calls made to shrink the failing batch (0 when it conforms).
    """

    convention: str
    signature: str
    passed: bool
    n_examples: int
    seconds: float
    tolerance: str
    failure: ConformanceFailure | None = field(default=None)
    n_shrink: int = 0

    def summary(self) -> str:
        """A short human-readable report."""
        if self.passed:
            tried = f"{self.n_examples} batch{'es' if self.n_examples != 1 else ''}"
        else:
            tried = (f"batch {self.n_examples} failed"
                     + (f" ({self.n_shrink} more calls shrank it)" if self.n_shrink else ""))
        signature = SIGNATURE_WORDS.get(self.signature, f"{self.signature} signature")
        head = (f"{'CONFORMS' if self.passed else 'DOES NOT CONFORM'} to {self.convention!r} "
                f"({signature}): {tried} in {self.seconds:.1f} s.\n"
                f"tolerance: {self.tolerance}")
        if self.failure is None:
            return head
        f = self.failure
        with np.printoptions(precision=17, linewidth=100):
            lines = [head, f"smallest failing batch: {f.message}",
                     f"  rewards   = np.array({f.rewards.tolist()!r}, dtype=np.{f.rewards.dtype})",
                     f"  group_ids = np.array({f.group_ids.tolist()!r})",
                     *([f"  reference = np.array({f.reference.tolist()!r}, "
                        f"dtype=np.{f.reference.dtype})"] if f.reference is not None else []),
                     f"  expected  = {np.array2string(f.expected, separator=', ')}"]
            if f.got is not None:
                lines.append(f"  got       = {np.array2string(f.got, separator=', ')}")
        return "\n".join(lines)
