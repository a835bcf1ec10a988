"""The tests' monitor settings as one flat set of keywords, turned into a MonitorConfig.

The tests vary one setting at a time over a shared dict; this maps each flat name to the field
of :class:`~ustat_rl.frameworks.config.MonitorConfig` that holds it, and refuses a name it does
not know (so a mistyped setting fails the test instead of being ignored).
"""

from __future__ import annotations

from ustat_rl.frameworks.config import (
    EstimatorConfig,
    LossWeighting,
    MonitorConfig,
    Outputs,
    Schedule,
)
from ustat_rl.scores.spec import SketchSpec

_PARTS = {
    "schedule": (Schedule, {"every": "every", "pool": "pool", "chunk_size": "chunk_size"}),
    "sketch": (SketchSpec, {"sketch_dim": "dimension", "sketch_blocks": "blocks", "seed": "seed",
                            "kind": "kind", "dtype": "dtype", "temperature": "temperature"}),
    "estimator": (EstimatorConfig, {"estimator": "name", "estimator_source": "source",
                                    "group_filter": "group_filter"}),
    "loss": (LossWeighting, {"loss_type": "loss_type", "reward_weights": "reward_weights",
                             "max_completion_length": "max_completion_length",
                             "epsilon_high": "epsilon_high", "units": "units"}),
    "outputs": (Outputs, {"trajectory": "trajectory", "save_rollouts": "save_rollouts",
                          "name": "name"}),
}
_TOP = ("group_size", "level", "pad_token_id")


def monitor_config(**settings) -> MonitorConfig:
    """The :class:`MonitorConfig` of flat ``settings`` (``sketch_dim=16, every=2, ...``)."""
    top = {name: settings.pop(name) for name in _TOP if name in settings}
    parts = {}
    for part, (cls, names) in _PARTS.items():
        given = {field: settings.pop(flat) for flat, field in names.items() if flat in settings}
        if part == "sketch":
            given.setdefault("dimension", 256)
        if given:
            parts[part] = cls(**given)
    if settings:
        raise TypeError(f"unknown monitor settings {sorted(settings)}")
    return MonitorConfig(**top, **parts)
