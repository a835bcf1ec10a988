"""Quick run of simulations/critical_batch.py (docs/critical_batch.md): the constant-rate GRPO
runs from the advice study's warm start, the pilot's prediction, resumption and the summary.
Structural checks: 20 steps at N = 8 and 16 move the reward too little for a frontier; the fit
and its statistics are checked on planted tables in test_critical_batch.py."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # script and TRL runs: critical_batch.py --quick

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def cb():
    return load_script("simulations/critical_batch.py", "critical_batch_quick_script")


def test_quick_run_trains_predicts_summarises_and_a_rerun_skips_finished_runs(tmp_path, cb):
    table, summary = cb.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert sorted(zip(table["N"], table["seed"])) == [(8, 0), (8, 1), (16, 0), (16, 1)]
    rewards = table[[f"reward_{s}" for s in range(0, 21, 5)]].to_numpy(float)
    assert ((rewards >= 0) & (rewards <= 1)).all()
    assert (table["reward_0"] == table["reward_0"].iloc[0]).all()  # one warm start
    assert (table["learning_rate"] == 5e-4).all()
    # the rate is constant: the last step's is the first's (TRL's default linear decay would
    # have brought it to 5e-4/20 at the 20th step)
    assert (table["last_rate"] == 5e-4).all()
    predicted = pd.read_csv(tmp_path / "critical_batch_predictions.csv")
    row = predicted.iloc[0]
    assert row["G"] == 4 and row["level"] == cb.LEVEL
    assert 0 <= row["total_low"] <= row["total"] <= row["total_high"]
    assert row["inter"] + row["intra"] == pytest.approx(row["total"])
    # the summary follows the target rule on these runs, whichever branch they take
    rise = table.groupby(["G", "N"])["reward_20"].mean().min() - table["reward_0"].iloc[0]
    primary = summary[summary["fraction"] == 0.5].iloc[0]
    assert primary["rise_min"] == pytest.approx(rise)
    if rise < cb.MIN_RISE:
        assert primary["verdict"] == "did not rise" and math.isnan(primary["target"])
    else:
        assert primary["target"] == pytest.approx(table["reward_0"].iloc[0] + rise / 2)
        assert primary["verdict"] in ("agreement shown", "consistent", "disagreement",
                                      "not measured")
    for suffix in (".csv", "_predictions.csv", "_summary.csv", "_table.md", ".png"):
        assert (tmp_path / f"critical_batch{suffix}").exists(), suffix
    again, _ = cb.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    pd.testing.assert_frame_equal(again, table, check_dtype=False)
    again, resummary = cb.main(["--quick", "--out", str(tmp_path), "--summarise-only"])
    pd.testing.assert_frame_equal(again, table, check_dtype=False)
    pd.testing.assert_frame_equal(resummary, summary, check_dtype=False)


def test_bad_arguments_name_the_option(cb, tmp_path, capsys):
    for argv, option in ((["--budgets", "24,50"], "--budgets"), (["--every", "7"], "--every"),
                         (["--seeds", "2-1"], "--seeds")):
        with pytest.raises(SystemExit):
            cb.main([*argv, "--out", str(tmp_path)])
        assert option in capsys.readouterr().err
