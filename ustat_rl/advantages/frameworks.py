"""Framework options as rules: the conformance kit's words for a convention, made an AdvantageRule.

The table of framework options (TRL, verl, OpenRLHF, NeMo-RL, each pinned to a commit) is
:mod:`ustat_rl.advantages.conventions`; :func:`convention_rule` turns each row into an
:class:`~ustat_rl.advantages.rule.AdvantageRule` of the one registry.
"""

from __future__ import annotations

from dataclasses import replace

from .registry import GROUP_MEAN, LEAVE_ONE_OUT, NO_CENTRING
from .rule import AdvantageRule, Centring, Provenance, Scaling

__all__ = ["convention_rule"]

_BASELINES = {"mean": GROUP_MEAN, "leave_one_out": LEAVE_ONE_OUT, "none": NO_CENTRING}
_SCALES = {"none": "none", "group": "group std", "leave_one_out": "others std",
           "batch": "batch std", "whiten": "batch whitening", "statistic": "group statistic",
           "nonzero": "batch nonzero fraction"}


def convention_rule(name, framework, option, repository, path, commit, commit_date, formula, *,
                    baseline="mean", scale="none", epsilon=0.0, epsilon_placement="none",
                    bessel=None, zero_std="divide", singleton_numerator="0",
                    singleton_divisor=1.0, count_epsilon=0.0, statistic=None,
                    **fields) -> AdvantageRule:
    """An :class:`AdvantageRule` from a framework option stated in the conformance kit's words.

    ``baseline`` in ``{"mean", "leave_one_out", "none"}`` or a :class:`Centring` (a group
    function), ``scale`` in ``{"none", "group", "leave_one_out", "batch", "whiten",
    "statistic", "nonzero"}`` (``"statistic"`` divides by ``statistic(rows (M, n)) -> (M,)``),
    ``zero_std`` in ``{"divide", "keep numerator", "zero"}`` and ``singleton_numerator`` in
    ``{"0", "z"}`` (docs/conventions.md); the other keyword arguments are
    :class:`AdvantageRule` fields.
    """
    if not isinstance(baseline, Centring) and baseline not in _BASELINES:
        raise ValueError(f"`baseline` must be one of {tuple(_BASELINES)} or a Centring, got "
                         f"{baseline!r}")
    if scale not in _SCALES:
        raise ValueError(f"`scale` must be one of {tuple(_SCALES)}, got {scale!r}")
    singleton = "reward" if singleton_numerator == "z" else "zero"
    base = baseline if isinstance(baseline, Centring) else _BASELINES[baseline]
    centring = replace(base, singleton=singleton)
    scaling = Scaling(_SCALES[scale], bessel=bessel, epsilon=epsilon,
                      epsilon_placement=epsilon_placement, all_equal=zero_std,
                      singleton_divisor=singleton_divisor, count_epsilon=count_epsilon,
                      statistic=statistic)
    source = f"{path} ({repository} {commit[:8]})" if repository else path
    provenance = Provenance(framework, option, source, repository, path, commit, commit_date)
    return AdvantageRule(name, centring, scaling, provenance, formula, **fields)
