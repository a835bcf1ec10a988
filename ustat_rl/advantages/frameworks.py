"""Framework options as rules: the conformance kit's words for a convention, made an AdvantageRule.

The table of framework options (TRL, verl, OpenRLHF, NeMo-RL, each pinned to a commit) is
:mod:`ustat_rl.advantages.conventions`; :func:`convention_rule` turns each row into an
:class:`~ustat_rl.advantages.rule.AdvantageRule` of the one registry.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable

from .registry import GROUP_MEAN, LEAVE_ONE_OUT, NO_CENTRING
from .rule import AdvantageRule, Centring, Provenance, Scaling

__all__ = ["KitWords", "convention_rule", "framework_provenance"]

_BASELINES = {"mean": GROUP_MEAN, "leave_one_out": LEAVE_ONE_OUT, "none": NO_CENTRING}
_SCALES = {"none": "none", "group": "group std", "leave_one_out": "others std",
           "batch": "batch std", "whiten": "batch whitening", "statistic": "group statistic",
           "nonzero": "batch nonzero fraction"}
_SINGLETON_NUMERATORS = ("0", "z")


@dataclass(frozen=True)
class KitWords:
    """A framework option's centring and scaling in the conformance kit's words.

    ``baseline`` in ``{"mean", "leave_one_out", "none"}`` or a :class:`Centring` (a group
    function), ``scale`` in ``{"none", "group", "leave_one_out", "batch", "whiten",
    "statistic", "nonzero"}`` (``"statistic"`` divides by ``statistic(rows (M, n)) -> (M,)``),
    ``zero_std`` in ``{"divide", "keep numerator", "zero"}`` and ``singleton_numerator`` in
    ``{"0", "z"}`` (docs/conventions.md); ``epsilon``, ``epsilon_placement``, ``bessel``,
    ``singleton_divisor``, ``count_epsilon`` and ``statistic`` are :class:`Scaling`'s.
    """

    baseline: str | Centring = "mean"
    scale: str = "none"
    epsilon: float = 0.0
    epsilon_placement: str = "none"
    bessel: bool | None = None
    zero_std: str = "divide"
    singleton_numerator: str = "0"
    singleton_divisor: float = 1.0
    count_epsilon: float = 0.0
    statistic: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.baseline, Centring) and self.baseline not in _BASELINES:
            raise ValueError(f"`baseline` must be one of {tuple(_BASELINES)} or a Centring, got "
                             f"{self.baseline!r}")
        if self.scale not in _SCALES:
            raise ValueError(f"`scale` must be one of {tuple(_SCALES)}, got {self.scale!r}")
        if self.singleton_numerator not in _SINGLETON_NUMERATORS:
            raise ValueError(f"`singleton_numerator` must be one of {_SINGLETON_NUMERATORS}, "
                             f"got {self.singleton_numerator!r}")

    @classmethod
    def split(cls, settings: dict) -> tuple[KitWords, dict]:
        """``(KitWords of the kit's words in settings, the other settings)``."""
        own = {f.name for f in fields(cls)}
        return (cls(**{k: v for k, v in settings.items() if k in own}),
                {k: v for k, v in settings.items() if k not in own})

    def centring(self) -> Centring:
        base = self.baseline if isinstance(self.baseline, Centring) else _BASELINES[self.baseline]
        return replace(base, singleton="reward" if self.singleton_numerator == "z" else "zero")

    def scaling(self) -> Scaling:
        return Scaling(_SCALES[self.scale], bessel=self.bessel, epsilon=self.epsilon,
                       epsilon_placement=self.epsilon_placement, all_equal=self.zero_std,
                       singleton_divisor=self.singleton_divisor,
                       count_epsilon=self.count_epsilon, statistic=self.statistic)


def framework_provenance(framework: str, option: str, repository: str, path: str, commit: str,
                         commit_date: str) -> Provenance:
    """The :class:`Provenance` of a framework option read at ``commit`` of ``repository``."""
    source = f"{path} ({repository} {commit[:8]})" if repository else path
    return Provenance(framework, option, source, repository, path, commit, commit_date)


def convention_rule(name: str, provenance: Provenance, formula: str,
                    words: KitWords = KitWords(), **fields) -> AdvantageRule:
    """An :class:`AdvantageRule` from a framework option stated in the conformance kit's words.

    ``provenance`` says where the option was read (:func:`framework_provenance`), ``words``
    its centring and scaling (:class:`KitWords`); the other keyword arguments are
    :class:`AdvantageRule` fields.
    """
    if not isinstance(words, KitWords):
        raise TypeError(f"`words` must be a KitWords, got {type(words).__name__}")
    return AdvantageRule(name, words.centring(), words.scaling(), provenance, formula, **fields)
