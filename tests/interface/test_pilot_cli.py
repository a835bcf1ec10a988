"""Tests of ``ustat-rl gstar`` and its report (ustat_rl/pilot/report.py; docs/theory.md C10,
C17, C32): identical output from .npz and Parquet, paths checked before any work, and the
all-equal fraction's estimator unbiased exactly (with the plug-in as negative control)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.special import comb
from scipy.stats import binom

from ustat_rl.interface.cli import main
from ustat_rl.pilot.estimate import estimate_constants
from ustat_rl.pilot.report import all_equal_fraction, gstar_report
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import SketchSpec
from ustat_rl.seeding import child_rng

pytestmark = pytest.mark.fast

pytest.importorskip("pyarrow", reason="the Parquet round trip needs the optional pyarrow")


@pytest.fixture(scope="module")
def pilot(interior_pilot):
    # R's seed is the one this pilot's stream drew before pilots took a SketchSpec
    return interior_pilot(24, 8, 20260301, 1, sketch=SketchSpec(6, seed=784183737))


def test_cli_output_is_identical_for_npz_and_parquet(tmp_path, pilot, capsys):
    outputs = []
    for suffix in (".npz", ".parquet"):
        path = pilot.save(tmp_path / f"pilot{suffix}")
        report = tmp_path / f"report{suffix}.json"
        assert main(["gstar", str(path), "--budget", "96", "--json", str(report),
                     "--plot", str(tmp_path / f"mse{suffix}.png")]) == 0
        text = capsys.readouterr().out
        outputs.append((text.split("wrote")[0], json.loads(report.read_text())))
        assert (tmp_path / f"mse{suffix}.png").stat().st_size > 0
    assert outputs[0] == outputs[1]
    assert "G* = 1 + sqrt(c3/c1)" in outputs[0][0]
    # the advice says what a trainer has (not) shown of it (docs/advice_wins.md)
    from ustat_rl.pilot.report_text import ADVICE_CAVEAT
    assert ADVICE_CAVEAT in outputs[0][0]


@pytest.mark.parametrize("extra, name", [
    (["--json", "out.txt"], "--json"),
    (["--json", "missing/out.json"], "--json"),
    (["--plot", "fig.bmp"], "--plot"),
    (["--level", "1.5"], "--level"),
])
def test_bad_arguments_fail_before_any_work(tmp_path, pilot, capsys, monkeypatch, extra, name):
    path = pilot.save(tmp_path / "pilot.npz")
    monkeypatch.chdir(tmp_path)
    import ustat_rl.pilot.rollouts as rollouts

    monkeypatch.setattr(rollouts, "load_rollouts", lambda *a: pytest.fail("pilot was read"))
    assert main(["gstar", str(path), "--budget", "96"] + extra) == 2
    err = capsys.readouterr().err
    assert f"`{name}`" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pilot.npz"]


def test_missing_rollouts_and_small_budget(tmp_path, capsys, pilot):
    assert main(["gstar", str(tmp_path / "absent.npz"), "--budget", "8"]) == 2
    assert "`ROLLOUTS`" in capsys.readouterr().err
    path = pilot.save(tmp_path / "pilot.npz")
    assert main(["gstar", str(path), "--budget", "1"]) == 2
    assert "`--budget`" in capsys.readouterr().err


def test_report_agrees_with_the_constants(pilot):
    report = gstar_report(pilot, 96)
    c = estimate_constants(pilot)
    assert report.gstar["estimate"] == pytest.approx(c.optimal_group_size())
    assert report.best_group_size == c.best_group_size(96)
    assert report.best_group_size_any == c.best_group_size(96, divisors_only=False)
    grpo = np.array(report.mse["grpo"]["estimate"])
    assert np.allclose(grpo, c.fixed_budget_mse(np.array(report.group_sizes), 96), rtol=1e-10)
    assert report.grpo_loses == [G for G, g, v in zip(report.group_sizes, grpo,
                                                      report.mse["vanilla"]["estimate"]) if g > v]
    assert all(lo <= e <= hi for lo, e, hi in zip(report.mse["grpo"]["low"], grpo,
                                                  report.mse["grpo"]["high"]))


def test_all_equal_estimator_is_exactly_unbiased():
    n, p = 8, 0.3
    m = np.arange(n + 1)
    sizes = np.arange(2, n + 1)
    weights = binom.pmf(m, n, p)
    expected = sum(w * all_equal_fraction([k], [n], sizes)[0] for k, w in zip(m, weights))
    assert np.allclose(expected, p**sizes + (1 - p) ** sizes, rtol=1e-12)
    # the kernel: all G of a subset succeed, averaged over subsets
    assert all_equal_fraction([5], [8], [3])[0][0] == pytest.approx(
        (comb(5, 3) + comb(3, 3)) / comb(8, 3))
    # negative control: the plug-in (m/n)^G is biased upward for G >= 2
    plug = sum(w * ((k / n) ** sizes + (1 - k / n) ** sizes) for k, w in zip(m, weights))
    assert np.all(plug > p**sizes + (1 - p) ** sizes + 1e-6)
    fraction, unbiased = all_equal_fraction([2, 3], [4, 8], np.array([4, 6]))
    assert unbiased.tolist() == [True, False] and math.isfinite(fraction[1])


def test_weighted_prompt_set_reports_points_without_intervals():
    from ustat_rl.pilot.report import format_report

    fixed = bandit_pilot(interior_optimum_bandit(), 0, 6, child_rng(20260301, 2),
                         fixed_prompts=True)
    report = gstar_report(fixed, 24)
    assert "low" not in report.constants["c1"]
    assert math.isnan(report.prompts_to_halve)
    assert "(no interval: fixed weighted prompt set)" in format_report(report)


def test_plotting_module_does_not_load_pyplot():
    import subprocess
    import sys

    code = "import sys, ustat_rl.interface.plotting_pilot; print('matplotlib.pyplot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_target_scale_free_advises_the_trained_rule_from_its_own_curve(tmp_path, capsys):
    # a pilot large enough that the two targets' curves for TRL's rule are far apart: its MSE
    # against g charges the std division's scale, which grows with G, so it advises G = 2
    pilot = bandit_pilot(interior_optimum_bandit(), 200, 8, rng=3)
    path = pilot.save(tmp_path / "pilot.npz")
    out = tmp_path / "report.json"
    assert main(["gstar", str(path), "--budget", "64", "--estimator", "trl_group",
                 "--target", "scale_free", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "argmin of its scale-free error" in text
    payload = json.loads(out.read_text())
    free = np.array(payload["scale_free"])
    assert payload["target"] == "scale_free"
    assert payload["recommended_group_size"] == payload["group_sizes"][int(np.argmin(free))]
    mse = gstar_report(pilot, 64, "trl_group")
    assert mse.target == "mse" and mse.scale_free is None
    # negative control: the MSE target, read from the same pilot, advises another size
    assert mse.recommended_group_size != payload["recommended_group_size"]
    assert main(["gstar", str(path), "--budget", "64", "--target", "snr"]) == 2
    assert "--target" in capsys.readouterr().err
