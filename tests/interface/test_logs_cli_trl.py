"""``ustat-rl logs`` (ustat_rl.interface.logs) on a real TRL run's trainer_state.json; the
command's options, table and refusals on written histories are tests/interface/test_logs_cli.py's."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from ustat_rl.interface.cli import main

pytestmark = pytest.mark.integration  # TRL run: GRPOTrainer, then `ustat-rl logs` on its checkpoint


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_real_trl_run(tmp_path, capsys):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    from ustat_rl.frameworks.demo import demo_trainer

    G, B, steps = 4, 8, 6
    trainer = demo_trainer(tmp_path / "out", G, B, steps, learning_rate=1e-3, save_strategy="steps",
                           save_steps=steps, save_only_model=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    state_file = tmp_path / "out" / f"checkpoint-{steps}" / "trainer_state.json"
    assert state_file.is_file()
    logged = [h for h in trainer.state.log_history if "frac_reward_zero_std" in h]
    assert len(logged) == steps
    code, out, err = _run(capsys, "logs", tmp_path / "out", "--group-size", G, "--window", 3,
                          "--json", tmp_path / "logs.json")
    assert code == 0, err
    data = json.loads((tmp_path / "logs.json").read_text())
    assert data["n_steps"] == steps and data["binary"] == "checked"
    # the windows' averages are the logged values' averages
    frac = np.array([h["frac_reward_zero_std"] for h in logged])
    assert data["windows"][0]["all_equal"]["mean"] == pytest.approx(frac[:3].mean(), abs=1e-12)
    assert data["dead_steps"] == [h["step"] for h in logged if h["frac_reward_zero_std"] == 1.0]
    assert "rollouts per kept group" in out or "no fit" in out
