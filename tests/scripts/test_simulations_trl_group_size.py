"""Quick run of simulations/trl_group_size.py: fixed-budget TRL runs across num_generations with
the monitor attached (G in {4, 8}, 2 seeds, 6 steps). Structural checks (a smoke test: six
training steps learn too little for a statistical claim): the table, the figure, the monitor's
G* interval read from every monitored run, the verdicts in words, and a resumed run."""

from __future__ import annotations

import math

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # script and TRL run: trl_group_size.py --quick

pytest.importorskip("trl")


def test_quick_run_writes_the_table_figure_and_verdicts(tmp_path):
    script = load_script("simulations/trl_group_size.py", "trl_group_size_script")
    table, verdict = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert sorted(zip(table["G"], table["seed"])) == [(4, 0), (4, 1), (8, 0), (8, 1)]
    assert table["final_reward"].between(0.0, 1.0).all()
    assert (table["windows_ok"] > 0).all()  # every run (G >= 3) was monitored
    assert (table["gstar_low"] <= table["gstar"]).all()
    assert (tmp_path / "trl_group_size.png").exists() and (tmp_path / "trl_group_size.csv").exists()
    assert verdict["best_G"] in (4, 8) and verdict["best_G"] in verdict["within_2se_of_best"]
    assert math.isfinite(verdict["gstar_low"]) and verdict["best_inside_interval"] is not None
    assert verdict["advice_verdict"].startswith("the advice")
    again, _ = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert again.equals(table)
