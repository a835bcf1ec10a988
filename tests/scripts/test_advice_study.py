"""Quick run of simulations/advice_study.py (docs/advice_wins.md): the graded-addition task, its
warm start and cache, the exact held-out reward, and the study's tables. Structural checks (two
training steps learn too little for a statistical claim); the statistics of the summary are
checked on planted tables, with a negative control each."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # script and TRL run: advice_study.py --quick

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def script():
    return load_script("simulations/advice_study.py", "advice_study_script")


def test_quick_run_trains_writes_every_output_and_a_rerun_skips_finished_runs(tmp_path, script):
    table, per_cell, verdicts = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert sorted(zip(table["G"], table["seed"])) == [(2, 0), (2, 1), (4, 0), (4, 1), (8, 0),
                                                      (8, 1)]
    rewards = table[["reward_0", "reward_10", "reward_20", "final_reward"]].to_numpy(float)
    assert ((rewards >= 0) & (rewards <= 1)).all()
    assert (table["reward_0"] == table["reward_0"].iloc[0]).all()  # one warm start for all runs
    # it trains: at the best size the mean held-out reward (exact, no sampling noise) rose
    rise = (per_cell["mean"] - per_cell["start"]).max()
    assert rise > 0
    assert (table["windows_ok"][table["G"] >= 3] > 0).any()  # the monitor ran
    pilot = pd.read_csv(tmp_path / "advice_study_pilot.csv")
    for column in ("pilot_advice", "advice_trained_mse", "advice_trained_scale_free"):
        assert pilot[column].iloc[0] in (2, 4, 8, 16, 32), column
    for suffix in (".csv", "_pilot.csv", "_cells.csv", "_verdicts.csv", "_table.md", ".png",
                   "_costs.json"):
        assert (tmp_path / f"advice_study{suffix}").exists(), suffix
    assert len(list((tmp_path / "warm_start").glob("advice_task-*.pt"))) == 1
    costs = json.loads((tmp_path / "advice_study_costs.json").read_text())
    assert costs["warm_start_seconds"] > 0
    assert costs["held_out_mean"] == pytest.approx(table["reward_0"].iloc[0])
    assert 0 <= costs["held_out_under_0_05"] + costs["held_out_over_0_9"] <= 1
    again, _, _ = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    pd.testing.assert_frame_equal(again, table, check_dtype=False)
    # the rerun reads the warm start from the cache and keeps the cost of its training
    assert json.loads((tmp_path / "advice_study_costs.json").read_text())[
        "warm_start_seconds"] == costs["warm_start_seconds"]
    again, _, _ = script.main(["--quick", "--out", str(tmp_path), "--summarise-only"])
    pd.testing.assert_frame_equal(again, table, check_dtype=False)


def test_seeds_are_explicit(script):
    assert script.parse_seeds("100-103") == (100, 101, 102, 103)
    assert script.parse_seeds("0,1,5") == (0, 1, 5)
    assert script.parse_seeds("0-2,7") == (0, 1, 2, 7)
    assert script.parse_seeds("4") == (4,)
    for bad in ("5-2", "a", "1,1", "-3", ""):
        with pytest.raises(ValueError, match="`--seeds`"):
            script.parse_seeds(bad)


def test_a_degenerate_setting_is_refused_not_an_argmax_over_ties(script):
    from ustat_rl.pilot.rollouts import Rollouts

    # planted: every run ends at reward 0 (a warm start that solves nothing)
    zeros = _planted({2: 0.0, 4: 0.0, 8: 0.0}, 0.0, 3)
    pilot = pd.DataFrame(columns=["N", "pilot_advice", "note"])
    with pytest.raises(ValueError, match="same final reward .0.: the runs cannot tell group "
                                         "sizes apart, so no best G is named"):
        script.summarise(zeros, pilot)
    # negative control: the same table with one run above 0 is summarised
    zeros.loc[0, "final_reward"] = 0.01
    assert len(script.summarise(zeros, pilot)[1]) == 1
    # planted: a pilot whose rewards are all 0 gets no advice, with the report's reason
    rng = np.random.default_rng(0)
    silent = Rollouts(prompt_id=np.repeat(np.arange(6), 4), reward=np.zeros(24),
                      score=rng.normal(size=(24, 5)))
    with pytest.raises(ValueError, match="all rewards are equal"):
        script.advice_rows(silent, [16])


def test_the_protocol_driver_writes_each_run_and_a_rerun_skips_it(tmp_path, script,
                                                                   monkeypatch):
    from ustat_rl.runs.sweeps import LocalExecutor

    tiny = script.Condition("tiny", 0, 20, (1,), held_out=12)
    monkeypatch.setattr(script, "CANDIDATES", (tiny,))
    monkeypatch.setattr(script, "PROTOCOL", dict(
        budgets=(8,), sizes=(2, 4, 3), steps=2, every=1, train_prompts=16, held_out=12,
        pilot_prompts=6, hidden=16, learning_rate=5e-4, learning_rates=(5e-4, 1e-3),
        lr_budget=8))
    monkeypatch.setattr(script, "PROTOCOL_CONDITIONS", ())
    with pytest.raises(ValueError, match="PROTOCOL_CONDITIONS is empty"):
        script.run_protocol(tmp_path, "exploration", (0,), LocalExecutor(1), False)
    monkeypatch.setattr(script, "PROTOCOL_CONDITIONS", ("tiny",))
    table = script.run_protocol(tmp_path, "exploration", (0,), LocalExecutor(1), False)
    # G = 3 does not divide N = 8; both rates at the rate budget
    assert sorted(zip(table["G"], table["learning_rate"])) == [(2, 5e-4), (2, 1e-3), (4, 5e-4),
                                                               (4, 1e-3)]
    assert set(table["phase"]) == {"exploration"} and set(table["condition"]) == {"tiny"}
    written = pd.read_csv(tmp_path / "advice_protocol.csv")
    assert len(written) == 4
    again = script.run_protocol(tmp_path, "exploration", (0,), LocalExecutor(1), False)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), written, check_dtype=False)


def _planted(means: dict, sd: float, seeds: int, N: int = 64) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for G, mean in means.items():
        for s, noise in enumerate(rng.standard_normal(seeds)):
            value = mean + sd * noise
            rows.append(dict(N=N, G=G, seed=s, reward_0=0.3, final_reward=value,
                             windows_ok=0))
    return pd.DataFrame(rows)


def test_the_best_set_excludes_a_planted_poor_size_and_keeps_a_tied_one(script):
    # G = 2 planted 0.10 below the others (sd 0.01, 6 seeds: about 20 standard errors)
    pilot = pd.DataFrame([dict(N=64, pilot_gstar=7.0, pilot_low=5.0, pilot_high=9.0,
                               pilot_advice=8, pilot_reward=0.3, note="")])
    per_cell, verdicts = script.summarise(_planted({2: 0.4, 4: 0.5, 8: 0.5}, 0.01, 6), pilot)
    assert per_cell.set_index("G")["in_best_set"].to_dict() == {2: False, 4: True, 8: True}
    v = verdicts.iloc[0]
    assert v["worst_G"] == 2 and v["worst_significant"]
    assert v["advice_grid_G"] == 8 and v["advice_in_best_set"]
    assert abs(v["gain_over_default"]) < 1e-12  # the advice is the default here
    # the detectable difference: (z_{1 - 0.05/2} + z_{0.8}) sd sqrt(2/6) with the pooled sd
    assert v["detectable_difference"] == pytest.approx(
        (1.959964 + 0.841621) * v["pooled_sd"] * math.sqrt(2 / 6), rel=1e-5)


def _excluded_share(script, alphas, replicates: int = 200) -> list[float]:
    """Per level in ``alphas``, how often the set drops G = 4, planted best-equal among five
    sizes of equal means: ``replicates`` tables of 6 seeds, summarised in one call (the
    replicate is the table's N)."""
    pilot = pd.DataFrame(columns=["N", "pilot_advice", "note"])
    rng = np.random.default_rng(1)
    rows = [dict(N=r, G=G, seed=s, reward_0=0.3, final_reward=0.5 + 0.01 * rng.normal(),
                 windows_ok=0) for r in range(replicates) for G in (2, 4, 8, 16, 32)
            for s in range(6)]
    shares = []
    for alpha in alphas:
        per_cell, _ = script.summarise(pd.DataFrame(rows), pilot, alpha)
        shares.append(float(1 - per_cell[per_cell["G"] == 4]["in_best_set"].mean()))
    return shares


def test_the_best_set_holds_a_best_size_at_its_stated_level(script):
    # all five means equal: each is a best size, so the 95% set may drop G = 4 in at most 5% of
    # tables; 200 tables: 18 drops or more has probability < 0.001 at 5% (binomial)
    bonferroni, unadjusted = _excluded_share(script, (0.05, 0.2))
    assert bonferroni < 18 / 200
    # negative control: without the Bonferroni split (each test at 5%, alpha = 0.2 over 4
    # tests), the same tables exceed the bound
    assert unadjusted >= 18 / 200


def test_no_advice_from_a_degenerate_pilot(script):
    pilot = pd.DataFrame([dict(N=64, pilot_gstar=math.nan, pilot_low=math.nan,
                               pilot_high=math.nan, pilot_advice=math.nan, pilot_reward=0.0,
                               note="degenerate")])
    _, verdicts = script.summarise(_planted({2: 0.4, 4: 0.5}, 0.01, 6), pilot)
    assert "advice_grid_G" not in verdicts and verdicts.iloc[0]["best_G"] == 4


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("USTAT_RL_RAY_STUDY"),
                    reason="about 3 minutes on 2 loaded cores (each Ray worker imports torch and "
                           "trl): set USTAT_RL_RAY_STUDY=1 to run it")
def test_ray_and_local_workers_give_the_same_rows(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from script_loader import ROOT

    # the Ray workers import the script by its name: simulations/ on their path and on ours
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{ROOT / 'simulations'}")
    monkeypatch.syspath_prepend(str(ROOT / "simulations"))
    module = load_script("simulations/advice_study.py", "advice_study")
    local, _, _ = module.main(["--quick", "--out", str(tmp_path / "local"), "--no-progress"])
    ray, _, _ = module.main(["--quick", "--out", str(tmp_path / "ray"), "--no-progress",
                             "--ray-address", "local"])
    key = ["N", "G", "seed"]
    left = local.drop(columns="seconds").sort_values(key).reset_index(drop=True)
    right = ray.drop(columns="seconds").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_dtype=False)
