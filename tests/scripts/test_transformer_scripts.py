"""Smoke tests of the transformer simulations and benchmark (quick modes, resume, CSV schema)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # scripts: the transformer simulations and benchmark --quick


def test_gradient_mse_quick_and_resume(tmp_path):
    script = load_script("simulations/transformer_gradient_mse.py")
    first = script.main(["--quick", "--policies", "strong", "--out", str(tmp_path), "--device", "cpu"])
    assert first["computed"] == [("strong", "moderate")]
    table = pd.read_csv(tmp_path / "transformer_gradient_mse.csv")
    assert set(table["device"]) == {"cpu"}
    assert set(table["estimator"]) == {"vanilla", "grpo", "oracle", "grpo-oracle"}
    assert np.all(table["ci_low"] < table["mse_mc"]) and np.all(table["mse_mc"] < table["ci_high"])
    constants = pd.read_csv(tmp_path / "transformer_scaling_constants.csv")
    row = constants.iloc[0]
    assert row["g_star"] == pytest.approx(1 + np.sqrt(row["c3"] / row["c1"]))
    assert all(p.exists() for p in first["figures"])
    again = script.main(["--quick", "--policies", "strong", "--out", str(tmp_path), "--device", "cpu"])
    assert again["computed"] == []
    assert len(pd.read_csv(tmp_path / "transformer_gradient_mse.csv")) == len(table)


def test_group_size_quick_and_resume(tmp_path):
    script = load_script("simulations/transformer_group_size.py")
    args = ["--quick", "--budgets", "16", "--groups", "2", "8", "--seeds", "2", "--iters", "2",
            "--out", str(tmp_path), "--device", "cpu"]
    first = script.main(args)
    assert first["computed"] == 4
    table = pd.read_csv(tmp_path / "transformer_group_size.csv")
    assert set(table["n_iter"]) == {0, 2} and set(table["device"]) == {"cpu"}
    assert set(zip(table["group_size"], table["batch_size"])) == {(2, 8), (8, 2)}
    assert script.main(args)["computed"] == 0
    with pytest.raises(SystemExit):
        script.main(args[:4] + ["1", "2"] + args[6:])  # group size 1 is rejected


def test_benchmark_quick(tmp_path):
    bench = load_script("benchmarks/bench_transformer.py")
    result = bench.main(["--quick", "--n", "16", "--no-rss", "--readme", str(tmp_path / "R.md")])
    assert result["max_abs_diff"] < 1e-4  # float32 rounding between vmap and the loop
    text = (tmp_path / "R.md").read_text()
    assert "## Transformer per-sample gradients" in text and "loop" in text


def test_aggregation_bias_script(tmp_path):
    script = load_script("simulations/transformer_aggregation_bias.py")
    table = script.main(["--policies", "strong", "--prompts", "1", "--out", str(tmp_path)])
    saved = pd.read_csv(tmp_path / "transformer_aggregation_bias.csv")
    assert len(saved) == len(table) == 2 * 2 * 4  # conventions x G x reductions
    loo_sum = saved[(saved.convention == "grpo") & (saved.aggregation == "seq-mean-token-sum")]
    assert np.all(loo_sum.rel_bias < 1e-9)  # the paper's estimator: unbiased
    norm = saved[(saved.convention == "grpo") & (saved.aggregation == "seq-mean-token-sum-norm")]
    np.testing.assert_allclose(norm.scale, norm.group_size / 3, rtol=1e-9)  # verl: G/L times g
