"""The monitor's settings (ustat_rl.frameworks.config): one frozen object, checked when made.

Each bad field is refused when its part is made, in one line naming the field; the parts are
frozen; an adapter refuses a config that sets what it reads from the trainer. The package-wide
scan of public signatures (none over 8 parameters) is tests/test_signatures.py.
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.fast

from ustat_rl.frameworks.config import (  # noqa: E402
    EstimatorConfig,
    LossWeighting,
    MonitorConfig,
    Outputs,
    Schedule,
    trainer_read,
)
from ustat_rl.scores.spec import SketchSpec  # noqa: E402


@pytest.mark.parametrize("make, field", [
    (lambda: Schedule(every=0), "every"), (lambda: Schedule(pool=0), "pool"),
    (lambda: Schedule(chunk_size=1.5), "chunk_size"),
    (lambda: EstimatorConfig("nope"), "estimator"),
    (lambda: EstimatorConfig(group_filter="rol"), "group_filter"),
    (lambda: LossWeighting("mean"), "loss_type"),
    (lambda: LossWeighting("dr_grpo"), "max_completion_length"),
    (lambda: LossWeighting(reward_weights=[[1.0]]), "reward_weights"),
    (lambda: LossWeighting(epsilon_high=float("nan")), "epsilon_high"),
    (lambda: Outputs(trajectory=pathlib.Path(__file__).parent), "trajectory"),  # a folder
    (lambda: MonitorConfig(0), "group_size"), (lambda: MonitorConfig(level=0.4), "level"),
    (lambda: MonitorConfig(level=1.0), "level"), (lambda: MonitorConfig(pad_token_id=-1),
                                                  "pad_token_id"),
    (lambda: MonitorConfig(schedule=dict(every=1)), "schedule"),
    (lambda: MonitorConfig(sketch=256), "sketch"),
])
def test_a_bad_field_is_refused_in_one_line_naming_it(make, field):
    with pytest.raises((ValueError, TypeError), match=f"`{field}`") as refused:
        make()
    assert "\n" not in str(refused.value)


def test_the_parts_are_frozen_and_normalised():
    config = MonitorConfig(8, loss=LossWeighting("dapo", reward_weights=[1, 0.5]))
    assert config.loss.reward_weights == (1.0, 0.5) and config.loss.units is not None
    assert config.sketch == SketchSpec(256) and config.estimator.source == "given by the caller"
    for part, name in ((config, "level"), (config.schedule, "every"), (config.loss, "units")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, name, None)
    assert MonitorConfig(8) == MonitorConfig(8)  # control: equal settings, equal configs


def test_what_a_trainer_reads_is_refused_in_the_config():
    trainer_read(MonitorConfig(), "the trainer")  # control: the defaults pass
    for config, field in ((MonitorConfig(4), "group_size"),
                          (MonitorConfig(estimator=EstimatorConfig("grpo")), "estimator"),
                          (MonitorConfig(loss=LossWeighting("dapo")), "loss"),
                          (MonitorConfig(sketch=SketchSpec(256, temperature=0.5)),
                           "sketch.temperature"),
                          (MonitorConfig(pad_token_id=2), "pad_token_id")):
        with pytest.raises(ValueError, match=f"`config.{field}` is read from the trainer"):
            trainer_read(config, "the trainer")


def test_the_monitor_takes_at_most_four_parameters():
    import ustat_rl.frameworks as frameworks

    assert len(inspect.signature(frameworks.WindowMonitor).parameters) <= 4
