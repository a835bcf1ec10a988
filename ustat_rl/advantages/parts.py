r"""The two halves of an advantage rule as data: its :class:`Centring` and its :class:`Scaling`.

The Monte Carlo kernels and the exact theory read these fields; :mod:`.rule` assembles them
into an :class:`~ustat_rl.advantages.rule.AdvantageRule`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["CENTRING_KINDS", "SCALING_KINDS", "PLACEMENTS", "ALL_EQUAL_SCALINGS", "Centring", "Scaling",
           "Provenance"]

CENTRING_KINDS = ("none", "leave-one-out", "group mean", "value", "baseline", "group function")
SCALING_KINDS = ("none", "group std", "others std", "group statistic", "batch std",
                 "batch whitening", "batch nonzero fraction")
PLACEMENTS = ("none", "added to std", "inside sqrt", "variance floor")
#: What a scaling does with a group whose spread is zero (all rewards equal).
ALL_EQUAL_SCALINGS = ("divide", "zero", "keep numerator")


@dataclass(frozen=True)
class Centring:
    """``c = z - w_m m - w_l l - w_r r``: weights of the group mean ``m``, the leave-one-out mean
    ``l = (sum_k z_k - z)/(n - 1)`` and a reference ``r`` (``V(x)`` or ``b(x)``); or, for
    ``kind="group function"``, ``c = function(group's rewards)``, a numerator that is not affine
    in the rewards (verl's Pass@k gives the best sample ``r_max - r_second`` and the others 0).

    Attributes
    ----------
    kind : one of :data:`CENTRING_KINDS`
    mean, leave_one_out, reference : float
        The weights ``w_m``, ``w_l``, ``w_r`` (all 0 for a group function).
    singleton : {"formula", "zero", "reward"}
        A one-sample group gets what the weights give (``"formula"``; a leave-one-out mean is
        then undefined, so the rule needs groups of 2), 0 (``"zero"``), or keeps its raw reward
        (``"reward"``).
    function : callable, optional
        For ``kind="group function"``: ``rewards (M, n) -> numerators (M, n)``, row by row and
        equivariant under permutations of a row (a sample's numerator depends on its own reward
        and the multiset of its group's), so for two-point rewards it is a function of ``m``.
    """

    kind: str
    mean: float = 0.0
    leave_one_out: float = 0.0
    reference: float = 0.0
    singleton: str = "formula"
    function: Callable | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.kind not in CENTRING_KINDS:
            raise ValueError(f"`kind` must be one of {CENTRING_KINDS}, got {self.kind!r}")
        if self.singleton not in ("formula", "zero", "reward"):
            raise ValueError("`singleton` must be 'formula', 'zero' or 'reward', got "
                             f"{self.singleton!r}")
        if (self.kind == "group function") != (self.function is not None):
            raise ValueError("`function` is required for, and only for, kind='group function'")
        if self.function is not None and (self.mean or self.leave_one_out or self.reference):
            raise ValueError("a 'group function' centring takes no mean, leave-one-out or "
                             "reference weight")

    @property
    def is_affine(self) -> bool:
        """Whether ``c`` is affine in the rewards (every kind but ``"group function"``)."""
        return self.function is None

    @property
    def min_group_size(self) -> int:
        """2 when a leave-one-out mean enters (it needs another sample), else 1."""
        return 2 if self.leave_one_out != 0.0 and self.singleton == "formula" else 1

    @property
    def reference_source(self) -> str | None:
        """``"value"``, ``"baseline"`` or ``None``: what ``r(x)`` is."""
        if self.reference == 0.0:
            return None
        return "baseline" if self.kind == "baseline" else "value"

    def kernel_coefficients(self, n):
        """``(own, deviation, reference)`` with ``c = own z + deviation (z - m) - reference r``.

        ``n`` is the group size (scalar or array). This is where the leave-one-out formula
        lives: ``z - l = n (z - m)/(n - 1)``.

        .. math::

            c = (1 - w_m - w_l) z + \\Big(w_m + w_l \\frac{n}{n - 1}\\Big)(z - m) - w_r r
        """
        n = np.asarray(n, dtype=np.float64)
        if not self.is_affine:  # the numerator is the function's alone
            return np.zeros(n.shape), np.zeros(n.shape), np.zeros(n.shape)
        own = np.full(n.shape, 1.0 - self.mean - self.leave_one_out)
        deviation = self.mean + self.leave_one_out * (n / np.maximum(n - 1.0, 1.0))
        reference = np.full(n.shape, self.reference)
        if self.singleton != "formula":
            one, keep = n == 1, 1.0 if self.singleton == "reward" else 0.0
            own, deviation, reference = (np.where(one, keep, own), np.where(one, 0.0, deviation),
                                         np.where(one, 0.0, reference))
        return own, deviation, reference

    def moment_coefficients(self, G: float):
        """``(a, b, w)`` with ``c = a (z - V) + b (z - l) + (a V - w r)`` at group size ``G``.

        ``b (z - l)`` is the pairwise (U-statistic) part: ``z - m = ((G - 1)/G)(z - l)``, so a
        full-mean weight contributes ``w_m (G - 1)/G``. The exact theory reads these.
        """
        if not self.is_affine:
            raise ValueError("a 'group function' centring is not affine: its moments come from "
                             "its two-point table, not from coefficients")
        if G == 1 and self.singleton != "formula":
            return (1.0 if self.singleton == "reward" else 0.0), 0.0, 0.0
        own = 1.0 - self.mean - self.leave_one_out
        pairwise = (self.mean * ((G - 1.0) / G) if self.mean else 0.0) + self.leave_one_out
        return own, pairwise, self.reference


@dataclass(frozen=True)
class Scaling:
    """How the centred rewards are divided: ``a = c / d(s)`` with ``s`` a spread.

    Attributes
    ----------
    kind : one of :data:`SCALING_KINDS`
        ``"group std"``: the std of the group's rewards; ``"others std"``: the std of the *other*
        rewards of the sample's group; ``"group statistic"``: ``statistic`` of the group's
        rewards; ``"batch std"``: the std of the batch's rewards; ``"batch whitening"``: ``c``
        less its batch mean, divided by its batch std; ``"batch nonzero fraction"``: the share
        ``max(#{z != 0}, 1)/N`` of the batch's rewards that are not 0 (verl's GPG multiplies by
        its inverse).
    bessel : bool or None
        Standard deviations divide by ``n - 1`` (``None`` when none is taken).
    epsilon : float
    epsilon_placement : {"none", "added to std", "inside sqrt", "variance floor"}
        ``d(s) = s``, ``s + epsilon``, ``sqrt(s^2 + epsilon)`` or ``sqrt(max(s^2, epsilon))``.
    all_equal : {"divide", "zero", "keep numerator"}
        Where the spread is exactly 0: divide anyway (``0 / epsilon = 0`` with an epsilon), give
        0 (Algorithm 2's rule here), or keep the numerator undivided.
    singleton_divisor : float
        ``d`` of a one-sample group under a group spread (NaN: undefined, as a Bessel std of one
        sample).
    count_epsilon : float
        Added to the sample count of the whitening mean and variance (verl's ``masked_mean``).
    statistic : callable, optional
        For ``kind="group statistic"``: ``rewards (M, n) -> spread (M,)``.
    """

    kind: str = "none"
    bessel: bool | None = None
    epsilon: float = 0.0
    epsilon_placement: str = "none"
    all_equal: str = "divide"
    singleton_divisor: float = math.nan
    count_epsilon: float = 0.0
    statistic: Callable | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.kind not in SCALING_KINDS:
            raise ValueError(f"`kind` must be one of {SCALING_KINDS}, got {self.kind!r}")
        if self.epsilon_placement not in PLACEMENTS:
            raise ValueError(f"`epsilon_placement` must be one of {PLACEMENTS}, got "
                             f"{self.epsilon_placement!r}")
        if self.all_equal not in ALL_EQUAL_SCALINGS:
            raise ValueError(f"`all_equal` must be one of {ALL_EQUAL_SCALINGS}, got "
                             f"{self.all_equal!r}")
        if (self.kind == "group statistic") != (self.statistic is not None):
            raise ValueError("`statistic` is required for, and only for, kind='group statistic'")

    @property
    def per_group(self) -> bool:
        """Whether the spread is one number per group (so a function of ``m`` for two-point
        rewards)."""
        return self.kind in ("group std", "group statistic")

    def divisor(self, spread):
        """``d(s)``: the spread with its epsilon.

        .. math::

            d(s) \\in \\{s,\\ s + \\epsilon,\\ \\sqrt{s^2 + \\epsilon},\\
            \\sqrt{\\max(s^2, \\epsilon)}\\}
        """
        s = np.asarray(spread, dtype=np.float64)
        placement, eps = self.epsilon_placement, self.epsilon
        if placement == "added to std":
            return s + eps
        if placement == "inside sqrt":
            return np.sqrt(s * s + eps)
        if placement == "variance floor":
            return np.sqrt(np.maximum(s * s, eps))
        return s


@dataclass(frozen=True)
class Provenance:
    """Where a rule comes from: a framework's option read from a source file, or the paper.

    ``repository``, ``path``, ``commit`` and ``commit_date`` pin a framework rule to the code it
    was read from (docs/conventions.md); ``source`` says it in one line.
    """

    framework: str
    option: str
    source: str
    repository: str = ""
    path: str = ""
    commit: str = ""
    commit_date: str = ""
