"""The monitor's settings (ustat_rl.frameworks.config): one frozen object, checked when made.

Each bad field is refused when its part is made, in one line naming the field; the parts are
frozen; an adapter refuses a config that sets what it reads from the trainer. A scan of the
public signatures of the monitor's and the sketch's packages finds none over 8 parameters but
the ones listed with the reason they are left (a planted module shows the scan flags one).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib

import pytest

pytest.importorskip("torch")

from ustat_rl.frameworks.config import (  # noqa: E402
    EstimatorConfig,
    LossWeighting,
    MonitorConfig,
    Outputs,
    Schedule,
    trainer_read,
)
from ustat_rl.scores.spec import SketchSpec  # noqa: E402

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "ustat_rl"
SCANNED = ("frameworks", "scores", "claims/beyond_monitor")
MAX_PARAMETERS = 8

#: ``module:qualname`` -> why it still takes more than 8 parameters (none is left).
OVER: dict[str, str] = {}


@pytest.mark.parametrize("make, field", [
    (lambda: Schedule(every=0), "every"), (lambda: Schedule(pool=0), "pool"),
    (lambda: Schedule(chunk_size=1.5), "chunk_size"),
    (lambda: EstimatorConfig("nope"), "estimator"),
    (lambda: EstimatorConfig(keep_rule="rol"), "keep_rule"),
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


def over_limit(root: pathlib.Path, folders=None) -> set[str]:
    """``module:qualname`` of every public function, method and class ``__init__`` under ``folders`` of ``root`` taking more than :data:`MAX_PARAMETERS`
    parameters (``self`` and ``cls`` not counted)."""
    found = set()
    paths = [p for folder in (folders or ("",)) for p in sorted((root / folder).rglob("*.py"))]
    for path in paths:
        module = path.relative_to(root).as_posix()

        def visit(node, prefix: str, private: bool, module: str = module):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.", private or child.name.startswith("_"),
                          module)
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    public = not private and (not child.name.startswith("_")
                                              or (child.name == "__init__" and prefix))
                    args = child.args
                    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                             if a.arg not in ("self", "cls")]
                    if public and len(names) > MAX_PARAMETERS:
                        name = prefix[:-1] if child.name == "__init__" else prefix + child.name
                        found.add(f"{module}:{name}")

        visit(ast.parse(path.read_text(encoding="utf-8")), "", False)
    return found


def test_no_public_signature_of_the_monitor_or_the_sketch_takes_more_than_8_parameters():
    found = over_limit(PACKAGE, SCANNED)
    assert found - set(OVER) == set(), "group the settings into a config object"
    assert set(OVER) - found == set(), "an entry of OVER no longer applies: drop it"


def test_the_scan_flags_a_planted_module(tmp_path):
    (tmp_path / "planted.py").write_text(
        "def wide(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "def narrow(a, b, c, d, e, f, g, h):\n    pass\n"
        "def _private(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "class Monitor:\n    def __init__(self, a, b, c, d, e, f, g, h, *, i=None):\n"
        "        pass\n")
    assert over_limit(tmp_path) == {"planted.py:wide", "planted.py:Monitor"}
