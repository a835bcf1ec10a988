"""The allocation training study (simulations/allocation_training.py, docs/theory.md C40): the
quick run writes its outputs and resumes, and its gradient sampler has the exact allocated MSE."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from script_loader import load_script

from ustat_rl.claims.registry import check_close
from ustat_rl.policies.examples import heterogeneous_score_bandit
from ustat_rl.theory.allocation import allocation_mse, optimal_allocation
from ustat_rl.training.allocation import AllocatedTraining, allocated_gradient, train_allocated

pytestmark = pytest.mark.integration  # script: simulations/allocation_training.py --quick


def test_quick_study_writes_summary_and_resumes(tmp_path):
    script = load_script("simulations/allocation_training.py", "allocation_training_script")
    summary = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    runs = pd.read_csv(tmp_path / "allocation_runs.csv")
    assert (tmp_path / "allocation_training.png").exists()
    assert set(runs["allocation"]) == {"optimal", "uniform", "sgpo"} and len(runs) == 3 * 6 * 3
    assert (runs["gap"] >= 0).all()
    row = summary[summary["allocation"] == "optimal"].iloc[0]
    assert row["diff_low"] <= row["diff_to_uniform"] <= row["diff_high"]
    before = (tmp_path / "allocation_runs.csv").stat().st_mtime_ns
    script.main(["--quick", "--out", str(tmp_path), "--no-progress", "--no-figure"])
    assert (tmp_path / "allocation_runs.csv").stat().st_mtime_ns == before


def test_training_sampler_has_the_allocated_mse():
    bandit, theta = heterogeneous_score_bandit()
    m = bandit.moments(theta, matrices=False)
    sizes = optimal_allocation(m, "grpo", 36).group_sizes
    target = bandit.prompt_prob @ bandit.state(theta).grad_per_prompt
    rng = np.random.default_rng(2)
    sq = np.array([np.sum((allocated_gradient(bandit, theta, sizes, rng.random(72)) - target) ** 2)
                   for _ in range(6000)])
    se = sq.std(ddof=1) / np.sqrt(sq.size)
    assert check_close("sampler", allocation_mse(m, "grpo", sizes), sq.mean(), se).passed
    # negative control: the uniform allocation's MSE is rejected by the same comparison
    assert not check_close("uniform", allocation_mse(m, "grpo", [6] * 6), sq.mean(), se).passed


def test_runs_with_the_same_seed_repeat():
    bandit, theta = heterogeneous_score_bandit(kl_weight=1.0)
    setting = AllocatedTraining(5, "optimal", 24, 0.3)
    a = train_allocated(bandit, theta, setting, n_runs=3, seed=4)[1]
    b = train_allocated(bandit, theta, setting, n_runs=2, seed=4)[1]
    np.testing.assert_array_equal(a[:2], b)
