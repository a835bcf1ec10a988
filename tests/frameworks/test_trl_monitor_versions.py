"""The TRL releases the monitor supports: one range, refused in one line outside it.

The range (``trl_monitor.TRL_VERSIONS``) is the ``trl`` extra's requirement, and the oldest
release it admits is the one ``constraints-trl-oldest.txt`` pins, on which CI runs the monitor's
tests a second time. A trainer of a TRL outside it, or a loss mask the monitor cannot reproduce,
is refused when the monitor is made, in one line naming the version or the setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs  # noqa: E402
from ustat_rl.frameworks.demo import demo_trainer  # noqa: E402
from ustat_rl.frameworks.trl_support import TRL_VERSIONS, check_trl_version  # noqa: E402

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["0.19.0", "0.21.0", "0.22.2", "0.24.0", "1.0.0", "1.16.0",
                                     "1.17.0.dev0", "1.99.1"])
def test_supported_versions_pass(version):
    assert check_trl_version(version) == version


@pytest.mark.parametrize("version", ["0.18.2", "0.22.0", "0.22.1", "2.0.0", "2.0.0.dev0",
                                     "not-a-version"])
def test_other_versions_are_refused_in_one_line(version):
    with pytest.raises(ImportError) as caught:
        check_trl_version(version)
    message = str(caught.value)
    assert f"trl {version} is installed" in message and TRL_VERSIONS in message
    assert "\n" not in message


def test_the_monitor_refuses_an_unsupported_trl(tmp_path, monkeypatch):
    trainer = demo_trainer(tmp_path / "out", 4, 2, 1)
    monkeypatch.setattr(trl, "__version__", "0.18.2")
    with pytest.raises(ImportError, match=r"trl 0\.18\.2 is installed"):
        GroupSizeMonitor(trainer, MonitorConfig(outputs=Outputs(tmp_path / "t.jsonl")))
    monkeypatch.setattr(trl, "__version__", "1.16.0")  # negative control: the same trainer
    GroupSizeMonitor(trainer, MonitorConfig(outputs=Outputs(tmp_path / "t.jsonl")))


@pytest.mark.parametrize("setting, value, match", [
    ("top_entropy_quantile", 0.2, "top_entropy_quantile` is 0.2"),
    ("off_policy_mask_threshold", -0.1, "off_policy_mask_threshold` is -0.1")])
def test_a_loss_mask_the_monitor_cannot_follow_is_refused(tmp_path, setting, value, match):
    trainer = demo_trainer(tmp_path / "out", 4, 2, 1)
    setattr(trainer.args, setting, value)
    with pytest.raises(ValueError, match=match) as caught:
        GroupSizeMonitor(trainer, MonitorConfig(outputs=Outputs(tmp_path / "t.jsonl")))
    assert "\n" not in str(caught.value)


def test_the_off_policy_mask_is_refused_under_vllm_alone(tmp_path):
    """Without vLLM the mask keeps every sequence at the sampling parameters (KL 0), so a
    threshold >= 0 is accepted; with vLLM the sampler's log-probabilities differ, and it is
    refused."""
    trainer = demo_trainer(tmp_path / "out", 4, 2, 1)
    trainer.args.off_policy_mask_threshold = 0.5
    GroupSizeMonitor(trainer, MonitorConfig(outputs=Outputs(tmp_path / "t.jsonl")))
    trainer.args.use_vllm = True
    with pytest.raises(ValueError, match="use_vllm=True"):
        GroupSizeMonitor(trainer, MonitorConfig(outputs=Outputs(tmp_path / "t.jsonl")))


def test_the_extra_and_the_oldest_constraints_follow_the_range():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    trl_extra = [Requirement(r) for r in extras["trl"] if Requirement(r).name == "trl"]
    assert len(trl_extra) == 1 and trl_extra[0].specifier == SpecifierSet(TRL_VERSIONS)
    pins = {}
    for line in (ROOT / "constraints-trl-oldest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            pins[requirement.name] = str(requirement.specifier)
    oldest = next(s.version for s in SpecifierSet(TRL_VERSIONS) if s.operator == ">=")
    assert Version(pins["trl"].lstrip("=")) == Version(oldest) and pins["torch"] == "==2.13.0"
    # dev (what CI installs first) keeps the newest: constraints.txt pins it inside the range
    newest = {Requirement(line).name: Requirement(line).specifier for line in
              (ROOT / "constraints.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}["trl"]
    assert SpecifierSet(TRL_VERSIONS).contains(next(iter(newest)).version)
