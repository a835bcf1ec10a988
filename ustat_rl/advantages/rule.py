"""What an advantage rule is: centring and scaling as data, and the per-sample function built on them.

An advantage rule turns the rewards of a group into the weights ``c_g`` of the gradient
estimate ``g_hat = (1/G) sum_g W_g c_g`` (docs/theory.md section 2). Every rule the project
knows is an :class:`AdvantageRule` made of two parts:

* a :class:`Centring`, affine in the rewards,

  .. math::

      c_g = \\alpha z_g + \\beta \\sum_k z_k - w r(x),

  where ``r(x)`` is the value ``V(x)`` or a prompt-only baseline ``b(x)``; the coefficients are
  data (:meth:`Centring.kernel_coefficients`), so the Monte Carlo kernels read them instead of
  calling back into Python;
* a :class:`Scaling` that divides the centred rewards by a spread: nothing, the group's
  standard deviation (with or without Bessel's correction), another statistic of the group, or
  a statistic of the whole batch, with its epsilon and where it goes.

For two-point rewards a group's spread depends only on its success count ``m``, so a scaled
group rule is, for the kernels, an affine rule times a table indexed by ``m``
(:meth:`AdvantageRule.scale_table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .parts import CENTRING_KINDS, SCALING_KINDS, Centring, Provenance, Scaling

__all__ = ["CENTRING_KINDS", "SCALING_KINDS", "Centring", "Scaling", "Provenance",
           "AdvantageRule", "group_mean"]

def _first_index(inverse, n_groups):
    first = np.full(n_groups, inverse.size, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(inverse.size))
    return first


def group_mean(z, inverse, counts):
    """Each group's mean, computed around its first reward (so an all-equal group has deviations
    exactly 0 whatever its offset)."""
    shift = z[_first_index(inverse, counts.size)]
    return shift + np.bincount(inverse, z - shift[inverse], minlength=counts.size) / counts


def _batch_std(x, bessel):
    mean = x[0] + np.mean(x - x[0])
    if x.size < 2:
        return mean, 0.0
    return mean, float(np.sqrt(np.sum((x - mean) ** 2) / (x.size - 1 if bessel else x.size)))


@dataclass(frozen=True)
class AdvantageRule:
    """One advantage rule: its centring, scaling, provenance and stated edge cases.

    Attributes
    ----------
    name : str
        The key in the registry (:func:`ustat_rl.advantages.get_rule`).
    centring : Centring
    scaling : Scaling
    provenance : Provenance
    formula : str
        The advantage, in the notation of docs/conventions.md.
    zero_variance, singleton : str
        What an all-equal group and a one-sample group get, in words.
    min_group_size, min_batch_size : int
        The smallest sizes for which the rule is defined (``ValueError`` below them).
    equal_group_sizes : bool
        Whether the rule (its framework) needs every group to have the same size.
    project_name : str
        The estimator of docs/theory.md section 2 this rule equals, when it equals one.
    """

    name: str
    centring: Centring
    scaling: Scaling = Scaling()
    provenance: Provenance = Provenance("ustat-rl", "", "docs/theory.md section 2")
    formula: str = ""
    zero_variance: str = "0 (the centred rewards vanish)"
    singleton: str = "undefined"
    min_group_size: int = 1
    min_batch_size: int = 1
    equal_group_sizes: bool = False
    project_name: str = ""

    def __post_init__(self):
        size = max(int(self.min_group_size), self.centring.min_group_size)
        object.__setattr__(self, "min_group_size", size)

    # ------------------------------------------------------------------ what the layers ask
    framework = property(lambda self: self.provenance.framework, doc="The framework.")
    option = property(lambda self: self.provenance.option, doc="The option that selects it.")
    source = property(lambda self: self.provenance.source, doc="Source file and version.")
    epsilon = property(lambda self: self.scaling.epsilon, doc="The scaling's epsilon.")
    epsilon_placement = property(lambda self: self.scaling.epsilon_placement,
                                 doc="Where the epsilon goes.")
    bessel = property(lambda self: self.scaling.bessel, doc="Bessel's correction, if a std.")

    @property
    def function(self) -> Callable:
        """``(z (n,), inverse (n,), counts (k,)) -> (n,)``: :meth:`apply` without a reference."""
        return self.apply

    @property
    def is_affine(self) -> bool:
        """No scaling: the exact MSE has a closed form for any rewards (:mod:`ustat_rl.theory.mse`)."""
        return self.scaling.kind == "none"

    @property
    def statistics(self) -> str:
        """``"group"`` when an advantage depends on its own group only, else ``"batch"``."""
        return "batch" if self.scaling.kind.startswith("batch") else "group"

    @property
    def min_group_reason(self) -> str:
        """Why ``min_group_size`` is what it is, for error messages."""
        if self.centring.min_group_size == 2:
            return "for the leave-one-out baseline"
        return f"for rule {self.name!r}" if self.min_group_size > 1 else ""

    def scale_table(self, group_size: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """``1/d`` (or 0) of a group with ``m`` rewards ``high`` and ``G - m`` rewards ``low``,
        ``m = 0..G``: what a kernel multiplies the affine part by, shape ``(G + 1,)``."""
        G = int(group_size)
        if self.statistics != "group":
            raise ValueError(f"rule {self.name!r} uses batch statistics, so groups are not "
                             "independent; its Monte Carlo needs the whole batch")
        if self.is_affine:
            return np.ones(G + 1)
        m = np.arange(G + 1, dtype=np.float64)
        if self.scaling.kind == "group std":  # m (high - mean)^2 + (G - m)(low - mean)^2: O(G)
            mean = low + (high - low) * m / G
            spread = self.scaling.std(m * (high - mean) ** 2 + (G - m) * (low - mean) ** 2, G)
        else:
            rows = np.where(np.arange(G)[None, :] < m[:, None], float(high), float(low))
            spread = self._group_spread(rows)  # (G + 1,) from (G + 1, G) representative groups
        return self.scaling.divide(np.ones(G + 1), spread, np.full(G + 1, float(G)))

    def binary_table(self, group_size: int):
        r"""``(a(1, m), a(0, m))`` for ``m = 0..G`` successes of rewards in ``{0, 1}``: the affine
        part times :meth:`scale_table`, in ``O(G)`` (impossible entries set to 0).

        .. math::

            a(z, m) = s_m \Big(\text{own}\, z + \text{dev}\,\big(z - \tfrac{m}{G}\big)\Big)
        """
        G = int(group_size)
        if self.centring.reference_source is not None:
            raise ValueError(f"rule {self.name!r} subtracts {self.centring.reference_source} "
                             "r(x), so its advantage is not a function of (z, m) alone")
        own, dev, _ = (float(v) for v in self.centring.kernel_coefficients(float(G)))
        m = np.arange(G + 1, dtype=np.float64)
        scale = self.scale_table(G)
        success = np.where(m > 0, scale * (own + dev * (1.0 - m / G)), 0.0)
        failure = np.where(m < G, scale * (dev * (0.0 - m / G)), 0.0)
        return success, failure

    def _group_spread(self, rows: np.ndarray) -> np.ndarray:
        if self.scaling.kind == "group statistic":
            return np.asarray(self.scaling.statistic(rows), dtype=np.float64).reshape(len(rows))
        dev = rows - (rows[:, :1] + np.mean(rows - rows[:, :1], axis=1, keepdims=True))
        return self.scaling.std(np.sum(dev * dev, axis=1), float(rows.shape[1]))

    # ------------------------------------------------------------------ the per-sample function
    def _centred(self, z, mean, n, reference):
        own, deviation, ref = self.centring.kernel_coefficients(n)
        c = own * z + deviation * (z - mean)
        if self.centring.reference_source is None:
            return c
        if reference is None:
            raise ValueError(f"rule {self.name!r} subtracts {self.centring.reference_source} "
                             "r(x): pass `reference`")
        return c - ref * np.broadcast_to(np.asarray(reference, dtype=np.float64), z.shape)

    def _batch_scaled(self, z, c):
        if self.scaling.kind == "batch std":
            return c / self.scaling.divisor(_batch_std(z.reshape(-1), self.scaling.bessel)[1])
        centre, spread = _batch_std(c.reshape(-1), self.scaling.bessel)
        return (c - centre) / self.scaling.divisor(spread)

    def apply(self, z, inverse, counts, reference=None) -> np.ndarray:
        """Advantages of validated float rewards ``z (n,)`` in groups ``inverse`` (sizes
        ``counts``); ``reference (n,)`` is ``r(x)`` per sample when the centring uses one."""
        n = counts[inverse].astype(np.float64)
        mean = group_mean(z, inverse, counts)
        c = self._centred(z, mean[inverse], n, reference)
        kind = self.scaling.kind
        if kind == "none":
            return c
        if kind.startswith("batch"):
            return self._batch_scaled(z, c)
        return self.scaling.divide(c, self._spreads(z, inverse, counts, mean)[inverse], n)

    def _spreads(self, z, inverse, counts, mean):
        """Each group's spread ``(k,)`` (its std, or the rule's statistic)."""
        if self.scaling.kind == "group std":
            dev = z - mean[inverse]
            squares = np.bincount(inverse, dev * dev, minlength=counts.size)
            return self.scaling.std(squares, counts.astype(np.float64))
        spread = np.zeros(counts.size)
        order = np.argsort(inverse, kind="stable")
        for size in np.unique(counts):
            groups = np.flatnonzero(counts == size)
            members = order[np.isin(inverse[order], groups)].reshape(groups.size, size)
            spread[groups] = self._group_spread(z[members])
        return spread

    def denominator(self, z, inverse, counts, reference=None):
        """``(d (n,), batch)``: each sample's divisor and whether a batch statistic enters.

        ``d = 1`` for an affine rule. The conformance kit's tolerance reads it.
        """
        n = counts[inverse].astype(np.float64)
        kind = self.scaling.kind
        if kind == "none":
            return np.ones(z.size), False
        mean = group_mean(z, inverse, counts)
        if kind == "batch std":
            return np.full(z.size, self.scaling.divisor(_batch_std(z, self.scaling.bessel)[1])), True
        if kind == "batch whitening":
            c = self._centred(z, mean[inverse], n, reference)
            return np.full(z.size, self.scaling.divisor(_batch_std(c, self.scaling.bessel)[1])), True
        spread = self._spreads(z, inverse, counts, mean)[inverse]
        return np.where(n > 1, self.scaling.divisor(spread), self.scaling.singleton_divisor), False

    def grouped(self, rewards, reference=None) -> np.ndarray:
        """Advantages of ``M`` equal groups at once: ``rewards (M, G) -> (M, G)``, no validation.

        ``reference`` is ``r(x)`` per group, shape ``(M,)`` (or a scalar). The same numbers as
        :meth:`apply`, computed on rows.
        """
        z = np.asarray(rewards, dtype=np.float64)
        M, G = z.shape
        shift = z[:, :1]
        mean = shift + np.mean(z - shift, axis=1, keepdims=True)  # (M, 1)
        ref = None if reference is None else np.broadcast_to(
            np.asarray(reference, dtype=np.float64).reshape(-1, 1) if np.ndim(reference) else
            np.asarray(reference, dtype=np.float64), (M, 1))
        c = self._centred(z, mean, np.full((M, 1), float(G)), ref)
        kind = self.scaling.kind
        if kind == "none":
            return c
        if kind.startswith("batch"):
            return self._batch_scaled(z, c)
        spread = self._group_spread(z)[:, None]  # (M, 1)
        return self.scaling.divide(c, spread, np.full((M, 1), float(G)))

    def check_inputs(self, rewards, group_ids):
        """``(z, inverse, counts)`` from validated rewards and group ids, or a one-line error."""
        z = np.asarray(rewards)
        if z.ndim != 1 or z.size == 0:
            raise ValueError(f"`rewards` must be a non-empty 1-D array, got shape {z.shape}")
        if not np.issubdtype(z.dtype, np.number) or np.iscomplexobj(z):
            raise TypeError(f"`rewards` must hold real numbers, got dtype {z.dtype}")
        z = z.astype(np.float64)
        if not np.all(np.isfinite(z)):
            raise ValueError("`rewards` must be finite (no NaN or inf)")
        ids = np.asarray(group_ids)
        if ids.shape != z.shape:
            raise ValueError(f"`group_ids` must have the shape of `rewards` {z.shape}, got "
                             f"{ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"`group_ids` must be integers, got dtype {ids.dtype}")
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        if counts.min() < self.min_group_size:
            raise ValueError(f"convention {self.name!r} needs groups of at least "
                             f"{self.min_group_size} samples (singletons: {self.singleton}), got "
                             f"a group of {counts.min()}")
        if z.size < self.min_batch_size:
            raise ValueError(f"convention {self.name!r} needs a batch of at least "
                             f"{self.min_batch_size} samples, got {z.size}")
        if self.equal_group_sizes and counts.min() != counts.max():
            raise ValueError(f"convention {self.name!r} reshapes rewards into (-1, G), so every "
                             f"group must have the same size; got sizes from {counts.min()} to "
                             f"{counts.max()}")
        return z, inverse.reshape(-1), counts

    def advantages(self, rewards, group_ids, reference=None) -> np.ndarray:
        """The per-sample advantages ``(n,)`` of rewards ``(n,)`` in groups ``group_ids (n,)``."""
        z, inverse, counts = self.check_inputs(rewards, group_ids)
        return self.apply(z, inverse, counts, reference)
