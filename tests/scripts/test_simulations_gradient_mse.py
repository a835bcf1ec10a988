"""Smoke and accuracy test of simulations/gradient_mse.py (docs/theory.md C5, C11).

The quick run (200 replicates per prompt, 40 prompts, 6 cells, 144 rows) must agree with the
exact theory of Theorem 2 row by row, and the same check must reject two wrong formulas.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from script_loader import load_script

from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.integration  # script: simulations/gradient_mse.py --quick

Z = Z_CHECK  # per-row two-sided false-failure rate 2*(1 - Phi(4)) = 6.3e-5
MAX_OUTSIDE = 0.05  # at most 5% of rows beyond Z se
# With n = 144 rows, "more than 5% outside" means at least k = 8 rows with |z| > Z. By Markov's
# inequality on that count (valid whatever the correlation between rows, which common random
# numbers across G and estimators create), P(count >= 8) <= 144 * 6.3e-5 / 8 = 1.1e-3.
Z_ALL = 6.0  # every row: union bound 144 * 2*(1 - Phi(6)) = 2.8e-7


@pytest.fixture(scope="module")
def script():
    return load_script("simulations/gradient_mse.py", "gradient_mse_script")


@pytest.fixture(scope="module")
def quick_run(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("gradient_mse")
    summary = script.main(["--quick", "--out", str(out), "--no-progress"])
    return out, summary


def agrees_with_theory(table: pd.DataFrame, exact: pd.Series) -> bool:
    """Row-wise check of Monte Carlo against a predicted MSE (see Z, MAX_OUTSIDE, Z_ALL)."""
    z = (table["mse_mc"] - exact) / table["se"]
    outside = float(np.mean(np.abs(z) > Z))
    return outside <= MAX_OUTSIDE and bool(np.all(np.abs(z) <= Z_ALL))


def test_false_failure_rates_stated():
    assert 2 * norm.sf(Z) == pytest.approx(6.3e-5, rel=0.01)
    assert 144 * 2 * norm.sf(Z) / 8 < 1.2e-3
    assert 144 * 2 * norm.sf(Z_ALL) < 3e-7


def test_quick_csv_columns_and_values(script, quick_run):
    out, summary = quick_run
    table = pd.read_csv(out / script.CSV_NAME)
    assert list(table.columns) == script.COLUMNS
    assert len(summary.computed) == 6 and summary.skipped == ()
    # 2 families x 3 policies x 3 estimators x 8 group sizes
    assert len(table) == 2 * 3 * 3 * 8
    assert set(table["group_size"]) == {2, 4, 8, 16, 32, 64, 128, 256}
    assert set(table["estimator"]) == {"vanilla", "grpo", "oracle"}
    numeric = table[["mse_mc", "se", "ci_low", "ci_high", "mse_exact", "mean_success"]]
    assert np.all(np.isfinite(numeric.to_numpy()))
    assert np.all(table["se"] > 0) and np.all(table["mse_exact"] > 0)
    assert np.all(table["ci_low"] < table["mse_mc"]) and np.all(table["mse_mc"] < table["ci_high"])
    assert np.all(table["n_reps"] == script.QUICK_REPS)


def test_quick_monte_carlo_matches_exact_theory(script, quick_run):
    out, _ = quick_run
    table = pd.read_csv(out / script.CSV_NAME)
    assert agrees_with_theory(table, table["mse_exact"])


def test_check_rejects_wrong_rate_exponent(script, quick_run):
    # negative control: MSE falling like G^-1.1 instead of G^-1 (same value at G = 2)
    out, _ = quick_run
    table = pd.read_csv(out / script.CSV_NAME)
    wrong = table["mse_exact"] * (2.0 / table["group_size"]) ** 0.1
    assert not agrees_with_theory(table, wrong)


def test_check_rejects_asymptotic_grpo_formula(script, quick_run):
    # negative control: GRPO MSE without its 1/(G(G-1)) term, i.e. the oracle formula tr Sigma/G
    out, _ = quick_run
    table = pd.read_csv(out / script.CSV_NAME)
    oracle = table[table["estimator"] == "oracle"].set_index(["family", "policy", "group_size"])
    key = pd.MultiIndex.from_frame(table[["family", "policy", "group_size"]])
    wrong = table["mse_exact"].to_numpy().copy()
    is_grpo = (table["estimator"] == "grpo").to_numpy()
    wrong[is_grpo] = oracle.loc[key[is_grpo], "mse_exact"].to_numpy()
    assert not agrees_with_theory(table, pd.Series(wrong, index=table.index))


def test_quick_pattern_of_fig4(script, quick_run):
    # C11 on the arithmetic family at G = 16..64: vanilla above GRPO above oracle (exact values)
    out, _ = quick_run
    table = pd.read_csv(out / script.CSV_NAME)
    arith = table[(table["family"] == "arithmetic") & table["group_size"].between(16, 64)]
    wide = arith.pivot_table(index=["policy", "group_size"], columns="estimator",
                             values="mse_exact")
    assert np.all(wide["vanilla"] > wide["grpo"]) and np.all(wide["grpo"] > wide["oracle"])


def test_figures_written(script, quick_run):
    out, summary = quick_run
    for suffix in (".png", ".pdf"):
        path = out / (script.FIGURE_STEM + suffix)
        assert path in summary.figures
        assert path.stat().st_size > 1000
    assert (out / "gradient_mse.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "gradient_mse.pdf").read_bytes()[:5] == b"%PDF-"


def test_resume_skips_finished_cells(script, quick_run, tmp_path):
    out, first = quick_run
    shutil.copy(out / script.CSV_NAME, tmp_path / script.CSV_NAME)
    csv = tmp_path / script.CSV_NAME
    before = csv.read_bytes()
    second = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert second.computed == ()
    assert set(second.skipped) == set(first.computed)
    assert csv.read_bytes() == before

    # an interrupted run: drop one cell, rerun, only that cell is redone, with the same numbers
    table = pd.read_csv(csv)
    dropped = (table["family"] == "one_answer") & (table["policy"] == "instruct")
    table[~dropped].to_csv(csv, index=False)
    third = script.main(["--quick", "--out", str(tmp_path), "--no-progress"])
    assert third.computed == (("one_answer", "instruct"),)
    redone = pd.read_csv(csv).sort_values(["family", "policy", "estimator", "group_size"])
    original = table.sort_values(["family", "policy", "estimator", "group_size"])
    np.testing.assert_allclose(redone["mse_mc"].to_numpy(), original["mse_mc"].to_numpy(),
                               rtol=1e-12)


def test_refuses_to_mix_configurations(script, quick_run):
    out, _ = quick_run
    before = (out / script.CSV_NAME).read_bytes()
    with pytest.raises(SystemExit):
        script.main(["--quick", "--reps", "300", "--out", str(out), "--no-progress"])
    assert (out / script.CSV_NAME).read_bytes() == before


def test_prompt_weights_of_simulate_cell(script):
    # small_bandit has f = (0.3, 0.7): the stratified combination must give f @ MSE(x), and the
    # same check must reject the unweighted mean of the prompts (negative control)
    from ustat_rl.policies.examples import small_bandit

    bandit = small_bandit()
    config = script.Config(n_reps=4000, seed=11, estimators=("vanilla", "grpo"),
                           group_sizes=(2, 8, 32))
    mean, cov, labels = script.simulate_cell(bandit, config, (0, 0))
    se = np.sqrt(np.diag(cov))
    exact = np.array([bandit.prompt_averaged_mse(e, g) for e, g in labels])
    unweighted = np.array([bandit.exact_mse_per_prompt(e, g).mean() for e, g in labels])
    assert np.all(np.abs(mean - exact) <= Z * se)  # union over 6 values: 3.8e-4
    assert np.any(np.abs(mean - unweighted) > Z * se)
