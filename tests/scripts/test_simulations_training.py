"""Smoke, resume and accuracy tests of the training scripts and benchmark (C18, C20).

The quick runs must write their CSVs and figures, resume without redoing finished cells (and
give the same numbers when chunked differently), and agree with theory where the quick sizes
allow a statistical statement.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from script_loader import load_script

from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.integration  # scripts: limit_law, optimal_group_size, bench_training


def test_limit_law_quick_resumes_and_does_not_depend_on_chunking(tmp_path):
    script = load_script("simulations/limit_law.py", "limit_law_script")
    out = tmp_path / "a"
    summary = script.main(["--quick", "--runs", "60", "--chunk", "25", "--out", str(out),
                           "--no-progress"])
    runs = pd.read_csv(out / script.RUNS_CSV)
    assert (out / "limit_law.png").exists() and len(runs) == 60 * 3
    # a second call finds every chunk done and recomputes nothing
    before = (out / script.RUNS_CSV).stat().st_mtime_ns
    script.main(["--quick", "--runs", "60", "--chunk", "25", "--out", str(out), "--no-progress",
                 "--no-figure"])
    assert (out / script.RUNS_CSV).stat().st_mtime_ns == before
    # other chunking, same per-run numbers (seeds per run)
    other = tmp_path / "b"
    script.main(["--quick", "--runs", "60", "--chunk", "60", "--out", str(other), "--no-progress",
                 "--no-figure"])
    pd.testing.assert_frame_equal(runs.reset_index(drop=True),
                                  pd.read_csv(other / script.RUNS_CSV).reset_index(drop=True))
    # at n = 300 the mean of n Delta_n is near sum w and the printed weights' mean is rejected
    row = summary[(summary["n"] == 300) & (summary["omega"] == "corrected")].iloc[0]
    assert abs(row["mean"] - row["mean_theory"]) <= Z_TEST * row["mean_se"] + 0.1 * row["mean_theory"]
    printed = summary[(summary["n"] == 300) & (summary["omega"] == "printed")].iloc[0]
    assert abs(row["mean"] - printed["mean_theory"]) > Z_TEST * row["mean_se"]


def test_limit_law_refuses_a_foreign_csv(tmp_path):
    script = load_script("simulations/limit_law.py", "limit_law_script2")
    script.main(["--quick", "--runs", "10", "--out", str(tmp_path), "--no-progress",
                 "--no-figure"])
    with pytest.raises(SystemExit):
        script.main(["--quick", "--runs", "10", "--seed", "1", "--out", str(tmp_path),
                     "--no-progress", "--no-figure"])


def test_optimal_group_size_quick_and_resume(tmp_path):
    script = load_script("simulations/optimal_group_size.py", "group_size_script")
    argmins = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    runs = pd.read_csv(tmp_path / "group_size_runs.csv")
    assert len(runs) == 2 * 3 * 20 * 2  # variants x sizes x runs x n
    assert set(argmins["linearised_argmin"]) == {16}
    assert (tmp_path / "group_size.png").exists()
    assert np.all(argmins["g_star_optimum"].between(8, 64))
    # resume: drop one cell from the CSV and rerun; only that cell is recomputed, identically
    keep = runs[~((runs["variant"] == "iid") & (runs["group_size"] == 64))]
    keep.to_csv(tmp_path / "group_size_runs.csv", index=False)
    script.main(["--quick", "--out", str(tmp_path), "--no-progress", "--no-figure"])
    again = pd.read_csv(tmp_path / "group_size_runs.csv")
    key = ["variant", "budget", "group_size", "n", "run"]
    pd.testing.assert_frame_equal(runs.sort_values(key).reset_index(drop=True),
                                  again.sort_values(key).reset_index(drop=True))


def test_training_benchmark_quick():
    bench = load_script("benchmarks/bench_training.py", "bench_training_script")
    res = bench.main(["--quick"])
    assert res["identical"]
    assert res["ratio"] > 1.0  # vectorising over runs must at least beat the loop
