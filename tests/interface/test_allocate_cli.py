"""``ustat-rl allocate``: the table, the JSON (sorted prompt ids, sizes in that order), the figure,
and one-line errors naming the parameter (docs/theory.md C40)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ustat_rl.interface.cli import main
from ustat_rl.pilot.allocation import MIN_SPLIT_GROUP, loglinear_pilot, pilot_allocation
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.policies.examples import heterogeneous_score_bandit
from ustat_rl.stats.intervals import ratio_verdict

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def pilot_file(tmp_path_factory):
    bandit, theta = heterogeneous_score_bandit()
    pilot = loglinear_pilot(bandit, theta, 32, rng=4)
    # string ids in shuffled file order: the JSON must list them sorted
    names = np.array(["q-%d" % (5 - int(i)) for i in pilot.prompt_id])
    order = np.random.default_rng(0).permutation(names.size)
    shuffled = Rollouts(names[order], pilot.reward[order], pilot.score[order])
    path = tmp_path_factory.mktemp("allocate") / "pilot.npz"
    shuffled.save(path)
    return path


def test_allocate_prints_writes_json_and_plot(pilot_file, tmp_path, capsys):
    out_json, out_png = tmp_path / "a.json", tmp_path / "a.png"
    assert main(["allocate", str(pilot_file), "--budget", "60", "--json", str(out_json),
                 "--plot", str(out_png)]) == 0
    text = capsys.readouterr().out
    assert "optimal" in text and "sgpo" in text and "cross-fitted ratio" in text
    data = json.loads(out_json.read_text())
    assert data["prompt_ids"] == sorted(data["prompt_ids"]) == [f"q-{i}" for i in range(6)]
    assert set(data["group_sizes"]) == {"optimal", "uniform", "neyman", "vip", "sgpo"}
    for sizes in data["group_sizes"].values():
        assert len(sizes) == 6 and sum(sizes) == 60 and min(sizes) >= 2
    assert data["predicted_mse"]["optimal"] <= min(data["predicted_mse"].values())
    for ratio in data["ratio_to_uniform"].values():
        assert ratio["low"] <= ratio["estimate"] <= ratio["high"]
        assert ratio["within_noise"] == (ratio["low"] <= 1.0 <= ratio["high"])
        assert ratio["verdict"] == ratio_verdict(ratio["estimate"], ratio["low"], ratio["high"])
    assert out_png.stat().st_size > 1000


@pytest.mark.parametrize("argv, message", [
    (["--budget", "11"], "`--budget` must be >= P * min_group = 6 * 2 = 12"),
    (["--budget", "60", "--estimator", "trl_batch"], "`--estimator` must be a rule"),
    (["--budget", "60", "--level", "1.5"], "`--level`"),
    (["--budget", "60", "--json", "out.txt"], "`--json` must end in"),
])
def test_allocate_bad_input_is_one_line_naming_the_parameter(pilot_file, argv, message, capsys):
    assert main(["allocate", str(pilot_file)] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_missing_rollouts_file(tmp_path, capsys):
    assert main(["allocate", str(tmp_path / "none.npz"), "--budget", "8"]) == 2
    assert "`ROLLOUTS`" in capsys.readouterr().err


def test_small_groups_give_no_interval_and_say_why():
    bandit, theta = heterogeneous_score_bandit()
    report = pilot_allocation(loglinear_pilot(bandit, theta, MIN_SPLIT_GROUP - 1, rng=0), 36)
    assert report.ratios == {} and "cross-fitting needs" in report.note
    assert report.allocations["optimal"].group_sizes.sum() == 36


def test_cross_fitted_mse_is_unbiased_and_the_in_sample_one_is_not():
    # For sizes fitted on half A, the half-B estimate of their batch MSE is unbiased (half B is
    # independent of the sizes and every term is linear in its moments); scoring half A's sizes
    # on half A itself is optimistic. 300 pilots of 8 samples x 20 prompts (C42).
    from ustat_rl.claims.beyond_allocation import cross_fit_errors

    cross, inside = cross_fit_errors(np.random.default_rng(8), 300)
    for values, unbiased in ((cross, True), (inside, False)):
        z = values.mean() / (values.std(ddof=1) / np.sqrt(values.size))
        # 4 se: two-sided false-failure rate 6.3e-5 for the unbiased route
        assert bool(abs(z) <= 4.0) == unbiased, z
