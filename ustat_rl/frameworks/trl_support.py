"""Which TRL releases and which loss settings the TRL monitor supports, refused in one line.

:data:`TRL_VERSIONS` is the ``trl`` extra's requirement (pyproject.toml); CI runs the monitor's
tests on the newest release it admits (constraints.txt) and the oldest
(constraints-trl-oldest.txt). Nothing here imports ``trl``.
"""

from __future__ import annotations

__all__ = ["TRL_VERSIONS", "check_trl_version", "check_loss_masks"]

#: The TRL releases the monitor supports, as the ``trl`` extra requires them: from 0.19 (the
#: oldest release CI runs the monitor on) through the 1.x line. 0.22.0 and 0.22.1 are left
#: out: there ``scale_rewards="group"`` does not divide by the group's std and ``"batch"`` and
#: ``"none"`` do, so the rule the config names is not the one the trainer runs (fixed in
#: 0.22.2). CI runs the monitor's tests on the oldest (``constraints-trl-oldest.txt``) and the
#: newest (``constraints.txt``).
TRL_VERSIONS = ">=0.19,!=0.22.0,!=0.22.1,<2"

def check_trl_version(version: str) -> str:
    """``version`` when the monitor supports that TRL (:data:`TRL_VERSIONS`), else an
    ``ImportError`` in one line naming it and the supported range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        ok = SpecifierSet(TRL_VERSIONS).contains(Version(str(version)), prereleases=True)
    except InvalidVersion:
        ok = False
    if not ok:
        raise ImportError(f"GroupSizeMonitor supports trl{TRL_VERSIONS}, and trl {version} is "
                          f"installed: pip install 'ustat-rl[trl]'")
    return str(version)


def check_loss_masks(args) -> None:
    """Refuse, in one line naming the setting, a loss mask the monitor cannot reproduce at the
    parameters that sampled the batch (:mod:`ustat_rl.frameworks.trl_monitor`, "Tokens")."""
    quantile = getattr(args, "top_entropy_quantile", 1.0)
    if quantile is not None and quantile < 1.0:
        raise ValueError(f"`trainer.args.top_entropy_quantile` is {quantile}: TRL's loss then "
                         f"keeps the tokens above an entropy quantile of each micro-batch, which "
                         f"GroupSizeMonitor cannot reproduce; it supports 1.0 (TRL's default)")
    threshold = getattr(args, "off_policy_mask_threshold", None)
    if threshold is not None and (getattr(args, "use_vllm", False) or threshold < 0):
        raise ValueError(f"`trainer.args.off_policy_mask_threshold` is {threshold} with "
                         f"use_vllm={getattr(args, 'use_vllm', False)}: the off-policy mask "
                         f"then drops sequences at the sampling parameters, which "
                         f"GroupSizeMonitor cannot reproduce; it supports None, or >= 0 "
                         f"without vLLM")
