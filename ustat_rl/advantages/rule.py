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

For two-point rewards a group rule's advantage depends only on a draw's reward and its group's
success count ``m``: the kernels read that table (:meth:`AdvantageRule.two_point_table`), built
from the coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .evaluate import Parts, evaluate
from .parts import CENTRING_KINDS, SCALING_KINDS, Centring, Provenance, Scaling

__all__ = ["CENTRING_KINDS", "SCALING_KINDS", "Centring", "Scaling", "Provenance",
           "AdvantageRule", "MAX_TABLE_ENTRIES"]

_SCALE_WORDS = {"none": "none", "group std": "group", "others std": "leave_one_out",
                "group statistic": "statistic", "batch std": "batch", "batch whitening": "whiten",
                "batch nonzero fraction": "nonzero"}

#: Largest ``(G + 1) * G`` array of representative groups built for a two-point table.
MAX_TABLE_ENTRIES = 20_000_000


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
    working_precision: str = "the rewards' dtype"

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
    zero_std = property(lambda self: self.scaling.all_equal, doc="The rule where the std is 0.")
    count_epsilon = property(lambda self: self.scaling.count_epsilon,
                             doc="Added to the whitening's sample count.")
    repository = property(lambda self: self.provenance.repository, doc="owner/name on GitHub.")
    path = property(lambda self: self.provenance.path, doc="The file(s) the rule was read from.")
    commit = property(lambda self: self.provenance.commit, doc="The commit it was read at.")
    commit_date = property(lambda self: self.provenance.commit_date, doc="That commit's date.")

    @property
    def baseline(self) -> str:
        """The numerator in the conformance kit's words: ``"mean"``, ``"leave_one_out"``, or the
        centring's kind for the other rules."""
        return {"group mean": "mean", "leave-one-out": "leave_one_out"}.get(self.centring.kind,
                                                                              self.centring.kind)

    @property
    def scale(self) -> str:
        """The divisor in the conformance kit's words (``"none"``, ``"group"``,
        ``"leave_one_out"``, ``"batch"``, ``"whiten"``, ``"statistic"``, ``"nonzero"``)."""
        return _SCALE_WORDS[self.scaling.kind]

    @property
    def singleton_numerator(self) -> str:
        """``"z"`` when a one-sample group keeps its reward, else ``"0"``."""
        return "z" if self.centring.singleton == "reward" else "0"

    @property
    def singleton_divisor(self) -> float:
        """What divides a one-sample group's numerator under a group spread."""
        return self.scaling.singleton_divisor

    @property
    def function(self) -> Callable:
        """``(z (n,), inverse (n,), counts (k,)) -> (n,)``: :meth:`apply` without a reference."""
        return self.apply

    @property
    def is_affine(self) -> bool:
        """An affine centring and no scaling: the exact MSE has a closed form for any rewards
        (:mod:`ustat_rl.theory.mse`)."""
        return self.scaling.kind == "none" and self.centring.is_affine

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

    def two_point_table(self, group_size: int, low: float = 0.0, high: float = 1.0):
        r"""``(a_high, a_low)``, each ``(G + 1,)``: the advantage of a reward ``high`` (``low``)
        in a group of ``G`` with ``m`` rewards ``high``, ``m = 0..G``, without the reference term
        ``-w r(x)`` (impossible entries set to 0). What the Monte Carlo kernels read.

        Affine rules and the group std of an affine centring come from the coefficients in
        ``O(G)``; other group spreads and a group-function centring from ``G + 1``
        representative groups.

        .. math::

            a(z, m) = \frac{\text{own}\, z + \text{dev}\,(z - \bar z_m)}{d(s_m)}, \qquad
            \bar z_m = \text{low} + (\text{high} - \text{low})\frac{m}{G}
        """
        G = int(group_size)
        if self.statistics != "group":
            raise ValueError(f"rule {self.name!r} uses batch statistics, so groups are not "
                             "independent; its Monte Carlo needs the whole batch")
        if self.centring.reference_source is not None and not self.is_affine:
            raise ValueError(f"rule {self.name!r} scales a centring that subtracts r(x); no "
                             "two-point table describes it")
        m = np.arange(G + 1, dtype=np.float64)
        low, high = float(low), float(high)
        if self.centring.is_affine and (self.is_affine or self.scaling.kind == "group std"):
            own, dev, _ = (float(v) for v in self.centring.kernel_coefficients(float(G)))
            centre = low + (high - low) * m / G
            a_high, a_low = own * high + dev * (high - centre), own * low + dev * (low - centre)
            if not self.is_affine:
                sc = self.scaling
                squares = m * (high - centre) ** 2 + (G - m) * (low - centre) ** 2
                s = np.sqrt(squares / max(G - 1 if sc.bessel else G, 1)) if G > 1 else 0.0 * m
                d = sc.divisor(s) if G > 1 else np.full(G + 1, sc.singleton_divisor)
                if sc.all_equal != "divide":
                    keep = 1.0 if sc.all_equal == "keep numerator" else 0.0
                    a_high = np.where(s > 0, a_high / np.where(s > 0, d, 1.0), keep * a_high)
                    a_low = np.where(s > 0, a_low / np.where(s > 0, d, 1.0), keep * a_low)
                else:
                    a_high, a_low = a_high / d, a_low / d
        else:
            if (G + 1) * G > MAX_TABLE_ENTRIES:
                raise ValueError(f"`group_size` {G} needs a ({G + 1}, {G}) array of "
                                 f"representative groups for rule {self.name!r}")
            rows = np.where(np.arange(G)[None, :] < m[:, None], high, low)  # row m: m highs
            adv = self.grouped(rows)
            a_high, a_low = adv[:, 0], adv[:, -1]
        return np.where(m > 0, a_high, 0.0), np.where(m < G, a_low, 0.0)

    def binary_table(self, group_size: int):
        """``(a(1, m), a(0, m))`` for rewards in ``{0, 1}``: :meth:`two_point_table` at 0 and 1."""
        if self.centring.reference_source is not None:
            raise ValueError(f"rule {self.name!r} subtracts {self.centring.reference_source} "
                             "r(x), so its advantage is not a function of (z, m) alone")
        return self.two_point_table(group_size, 0.0, 1.0)

    # ------------------------------------------------------------------ the per-sample function
    def parts(self, z, inverse, counts, reference=None) -> Parts:
        """Numerator, denominator, spread and advantage of validated float rewards ``z (n,)``
        in groups ``inverse`` of sizes ``counts`` (:func:`~ustat_rl.advantages.evaluate.evaluate`)."""
        return evaluate(self, z, inverse, counts, reference)

    def apply(self, z, inverse, counts, reference=None) -> np.ndarray:
        """Advantages ``(n,)`` of validated float rewards (see :meth:`parts`)."""
        return evaluate(self, z, inverse, counts, reference).advantage

    def grouped(self, rewards, reference=None) -> np.ndarray:
        """Advantages of ``M`` equal groups at once: ``rewards (M, G) -> (M, G)``, no validation.

        ``reference`` is ``r(x)`` per group, shape ``(M,)`` (or a scalar).
        """
        rows = np.asarray(rewards, dtype=np.float64)
        M, G = rows.shape
        ref = None if reference is None else np.repeat(
            np.broadcast_to(np.asarray(reference, dtype=np.float64), (M,)), G)
        out = evaluate(self, rows.reshape(-1), np.repeat(np.arange(M), G), np.full(M, G), ref,
                       rows=rows)
        return out.advantage.reshape(M, G)

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
