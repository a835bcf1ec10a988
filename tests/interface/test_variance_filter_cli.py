"""``ustat-rl gstar --group-filter reward_variance_top_p --group-filter-param X``: the pilot's kept batch.

Each number printed is the exact kept-batch moment at the pilot's moments made binary
(tests/theory/test_variance_filter.py checks those against enumeration); here the command's
numbers are checked against that function called directly, and its refusals name the option.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ustat_rl.interface.cli import main
from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.pilot.variance_filter import pilot_variance_filter
from ustat_rl.theory.advantage import binary_projection
from ustat_rl.theory.variance_filter import VarianceFilter, variance_filtered_moments

pytestmark = pytest.mark.fast

SUCCESSES, N_SAMPLES, BUDGET = (1, 3, 6, 7), 8, 32


def _pilot(seed: int = 0) -> Rollouts:
    rng = np.random.default_rng(seed)
    reward = np.concatenate([np.repeat([1.0, 0.0], [m, N_SAMPLES - m]) for m in SUCCESSES])
    ids = np.repeat(np.arange(len(SUCCESSES)), N_SAMPLES)
    score = rng.normal(size=(ids.size, 3)) + reward[:, None]
    return Rollouts(ids, reward, score)


def _run(capsys, *argv):
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_report_is_the_exact_moments_at_the_pilot():
    rollouts = _pilot()
    out = pilot_variance_filter(rollouts, BUDGET, "reward_variance_top_p", 0.5)
    moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
    for i, G in enumerate(out.group_sizes):
        if G in out.left_out:
            continue
        want = variance_filtered_moments(moments, "grpo", G, BUDGET // G,
                                         VarianceFilter("top_p", 0.5))
        assert out.mse[i] == pytest.approx(want.mse, rel=1e-12)
        assert out.keep_rate[i] == pytest.approx(want.keep_rate, rel=1e-12)
        assert out.mean_factor[i] == pytest.approx(want.mean_factor, rel=1e-12)


def test_gstar_prints_the_kept_batch(tmp_path, capsys):
    path = _pilot().save(tmp_path / "pilot.npz")
    code, text, err = _run(capsys, "gstar", str(path), "--budget", str(BUDGET), "--group-filter",
                           "reward_variance_top_p", "--group-filter-param", "0.9",
                           "--json", str(tmp_path / "g.json"))
    assert code == 0 and err == "", err
    assert "reward-variance filter (RAGEN-2's SNR-aware filtering, top_p 0.9" in text
    assert "keep rate" in text and "mean factor" in text
    payload = json.loads((tmp_path / "g.json").read_text())
    got = payload["variance_filter"]
    assert got["filter"]["top_p"] == 0.9 and len(got["mse"]) == len(got["group_sizes"])


@pytest.mark.parametrize("argv, words", [
    (["--group-filter", "reward_variance_top_p", "--group-filter-param", "1.5"],
     "`--group-filter-param` for reward_variance_top_p: top_p must be in (0, 1], got 1.5"),
    (["--group-filter", "reward_variance_top_k", "--group-filter-param", "2.5"],
     "`--group-filter-param` for reward_variance_top_k: it must be an integer"),
    (["--group-filter", "reward_variance_top_k"], "reward_variance_top_k: it must give k"),
    (["--group-filter-param", "0.5"], "`--group-filter-param` applies only"),
])
def test_bad_options_are_refused_in_one_line(tmp_path, capsys, argv, words):
    path = _pilot().save(tmp_path / "pilot.npz")
    code, text, err = _run(capsys, "gstar", str(path), "--budget", str(BUDGET), *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_rewards_points_to_gstar(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("prompt,reward\n0,1\n0,0\n1,1\n1,1\n")
    code, _, err = _run(capsys, "rewards", str(path), "--budget", "4", "--group-filter",
                        "reward_variance_top_p")
    assert code == 2 and "run ustat-rl gstar" in err


def test_non_binary_rewards_are_refused():
    r = _pilot()
    reward = np.asarray(r.reward).copy()
    reward[0] = 0.5
    with pytest.raises(ValueError, match="binary rewards"):
        pilot_variance_filter(Rollouts(r.prompt_id, reward, r.score), 32, "reward_variance_top_p")
