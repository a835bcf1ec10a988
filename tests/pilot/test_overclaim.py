"""Answers that never overclaim (``allocate``, ``rewards``, ``gstar --trajectory``): a verdict says
no more than its interval shows, an interval is never printed reversed, a negative or undefined
quantity is never shown as a finite meaningful value, and malformed input is an error (exit 2,
one line naming the file and what is wrong), never a success.

Each test fails on the code before these rules: it printed a negative plug-in MSE and the
reversed interval ``[2.787, -3.345]`` as "gain shown" for a pilot of equal rewards, called an
interval above 1 "gain within the noise", exited 0 on a trajectory file that is not JSON, and
gave VIP's whole spare budget to one prompt when no prompt's rewards vary.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest

from ustat_rl.frameworks.synthetic import SyntheticErrors, synthetic_record
from ustat_rl.frameworks.trajectory import append_record
from ustat_rl.interface.cli import main
from ustat_rl.pilot.allocation import (
    RatioInterval,
    format_pilot_allocation,
    loglinear_pilot,
    pilot_allocation,
)
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.policies.examples import heterogeneous_score_bandit
from ustat_rl.stats.intervals import ratio_verdict
from ustat_rl.theory.allocation_baselines import baseline_group_sizes

pytestmark = pytest.mark.fast

#: ``[low, high]`` as the allocate table prints an interval.
INTERVAL = re.compile(r"\[(-?[0-9.]+), (-?[0-9.]+)\]")

#: The message every degenerate pilot gets from ``allocate``.
EQUAL_REWARDS = ("ustat-rl allocate: error: `rollouts`: all rewards are equal (every reward "
                 "equals 1), so the pilot carries no gradient signal and there is nothing to "
                 "allocate (every group size gives the same zero gradient); pilot prompts whose "
                 "rewards vary are needed\n")


def _pilot(group_size: int, seed: int, equal_prompts=(), all_equal: bool = False) -> Rollouts:
    """A log-linear bandit pilot (6 prompts); ``equal_prompts`` all-solved (even ids 0, 4) or
    all-failed (id 2), as a pilot with half its prompts solved or failed by every sample."""
    bandit, theta = heterogeneous_score_bandit()
    pilot = loglinear_pilot(bandit, theta, group_size, rng=seed)
    reward = pilot.reward.copy()
    if all_equal:
        reward[:] = 1.0
    for x in equal_prompts:
        reward[pilot.prompt_id == x] = float(x % 4 == 0)
    return Rollouts(pilot.prompt_id, reward, pilot.score)


def _allocate(tmp_path, capsys, pilot, *extra):
    path = pilot.save(tmp_path / "pilot.npz")
    code = main(["allocate", str(path), "--budget", "60", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _row(text: str, name: str) -> str:
    (row,) = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    return row


# --------------------------------------------------------------------------- the verdict rule
@pytest.mark.parametrize("estimate, low, high, verdict", [
    (0.6, 0.5, 0.7, "gain shown"),
    (2.41, 1.27, 3.55, "worse than uniform"),  # issue 28's case: above 1 is a loss, shown
    (0.9, 0.7, 1.0, "within the noise"),  # an end at 1 shows nothing
    (1.1, 1.0, 1.3, "within the noise"),
    (1.09, 0.665, 1.515, "within the noise"),  # above 1 but not shown: no "gain" in the words
    (-0.279, 2.787, -3.345, "undefined"),  # issue 28's reversed interval of a negative ratio
    (-0.1, -0.5, 0.3, "undefined"),  # a negative estimate, even with a proper interval below 1
    (0.0, 0.0, 0.0, "undefined"),
    (0.5, 0.7, 0.6, "undefined"),  # reversed ends with a positive estimate
    (math.nan, 0.1, 0.2, "undefined"),
    (0.5, math.nan, 0.9, "undefined"),
    (math.inf, 2.0, math.inf, "undefined"),
])
def test_ratio_verdict_claims_no_more_than_the_interval(estimate, low, high, verdict):
    assert ratio_verdict(estimate, low, high) == verdict


def test_ratio_verdict_names_the_reference():
    assert ratio_verdict(3.0, 2.0, 4.0, "vanilla") == "worse than vanilla"


# ------------------------------------------------------------------------------- allocate
def test_allocate_on_equal_rewards_says_nothing_to_allocate(tmp_path, capsys):
    code, out, err = _allocate(tmp_path, capsys, _pilot(32, 4, all_equal=True))
    assert code == 2 and err == EQUAL_REWARDS and out == ""


def test_allocate_on_zero_scores_says_nothing_to_allocate(tmp_path, capsys):
    pilot = _pilot(8, 0)
    code, _, err = _allocate(tmp_path, capsys, Rollouts(pilot.prompt_id, pilot.reward,
                                                        np.zeros_like(pilot.score)))
    assert code == 2 and err == (
        "ustat-rl allocate: error: `rollouts`: every score is 0, so the pilot carries no gradient "
        "signal and there is nothing to allocate (every group size gives the same zero "
        "gradient); check that the scores were recorded\n")


def test_an_interval_above_one_is_worse_than_uniform(tmp_path, capsys):
    # the words of an interval above 1, on a report built around one
    report = pilot_allocation(_pilot(6, 6), 60)
    worse = replace(report, ratios={"optimal": RatioInterval(2.4, 0.3, 1.3, 3.5)})
    text = format_pilot_allocation(worse)
    row = _row(text, "optimal")
    assert row.endswith("2.400 [1.300, 3.500]  worse than uniform") and "gain" not in row
    assert text.splitlines()[-1] == (
        "the optimal sizes fitted on half the pilot are worse than uniform on the other half: "
        "keep uniform (the pilot's moments are too noisy to allocate by), or collect more "
        "samples per prompt")
    # this pilot's verdict was "worse than uniform" from 5 degrees of freedom, while one prompt
    # of 6 has rewards that vary in the scoring half: its interval now cannot tell
    out_json = tmp_path / "a.json"
    code, out, _ = _allocate(tmp_path, capsys, _pilot(6, 6, equal_prompts=(0, 2, 4)),
                             "--json", str(out_json))
    assert code == 0 and _row(out, "optimal").endswith("[0.000, inf]  within the noise")
    assert "1 of 6 prompts have rewards that vary" in out
    ratio = json.loads(out_json.read_text())["ratio_to_uniform"]["optimal"]
    assert ratio["verdict"] == "within the noise" and ratio["high"] == "inf"


def test_a_ratio_on_a_non_positive_mse_is_undefined_never_a_gain(tmp_path, capsys):
    out_json = tmp_path / "a.json"
    code, out, _ = _allocate(tmp_path, capsys, _pilot(6, 9, equal_prompts=(0, 2, 4)),
                             "--json", str(out_json))
    assert code == 0 and "gain shown" not in out
    assert _row(out, "optimal") == ("optimal             <= 0         -   undefined: a "
                                    "cross-fitted MSE estimate is not positive")
    assert ("<= 0: the unbiased estimate of that MSE is not positive (the MSE is below what the "
            "pilot resolves); '/uniform' is shown only where both are positive") in out
    assert out.splitlines()[-2] == (
        "the pilot cannot compare the optimal sizes with uniform (a cross-fitted MSE estimate is "
        "not positive): keep uniform, or collect more samples per prompt")

    def no_nan(token):
        raise AssertionError(f"the JSON holds {token}")

    ratio = json.loads(out_json.read_text(), parse_constant=no_nan)["ratio_to_uniform"]["optimal"]
    assert ratio == {"estimate": None, "std_error": None, "low": None, "high": None,
                     "within_noise": False, "verdict": "undefined"}


@pytest.mark.parametrize("group_size, seed", [(6, 0), (6, 5), (6, 9), (8, 9), (6, 6)])
def test_no_interval_is_reversed_or_below_zero(group_size, seed, tmp_path, capsys):
    # before, these pilots printed a lower end below 0 ((6, 0): -1.518, (6, 6): -0.218) or a
    # reversed interval from a negative uniform term sum ((6, 5): [1.906, 1.859], (6, 9):
    # [2.306, -0.734]; (8, 9): reversed by rounding alone, printed as [1.875, 1.875])
    pilot = _pilot(group_size, seed, equal_prompts=(0, 2, 4))
    code, out, _ = _allocate(tmp_path, capsys, pilot)
    assert code == 0
    for low, high in INTERVAL.findall(out):
        assert 0.0 <= float(low) <= float(high)
    for r in pilot_allocation(pilot, 60).ratios.values():  # NaN (undefined) compares False
        assert not r.low > r.high and not r.low < 0.0


def test_a_ratio_above_one_within_the_noise_is_not_called_a_gain(tmp_path, capsys):
    # notebook 08's pilot: neyman's 1.090 [0.665, 1.515] was "gain within the noise", sGPO's
    # 4.133 [1.451, 6.814] too
    bandit, theta = heterogeneous_score_bandit()
    path = loglinear_pilot(bandit, theta, 64, rng=0).save(tmp_path / "pilot.npz")
    assert main(["allocate", str(path), "--budget", "48"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "neyman").endswith("1.090 [0.665, 1.515]  within the noise")
    assert _row(out, "sgpo").endswith("4.133 [1.451, 6.814]  worse than uniform")
    assert "gain within the noise" not in out


# -------------------------------------------------------------------------------- rewards
def test_vip_with_no_reward_variance_splits_uniformly(tmp_path, capsys):
    ids = np.repeat(np.arange(8), 4)  # 8 groups of 4, every reward 1
    Rollouts(ids, np.ones(32), np.ones((32, 1))).save(tmp_path / "equal.npz")
    assert main(["rewards", str(tmp_path / "equal.npz"), "--budget", "32"]) == 0
    out = capsys.readouterr().out
    assert "  vip      4/4/4" in out  # it was 2/2/18: all of the spare budget on one prompt

    class Moments:  # no prompt's rewards vary; the first prompt's success rate differs
        prompt_prob = np.full(4, 0.25)
        value = np.array([0.0, 1.0, 1.0, 1.0])
        reward_var = np.zeros(4)
        n_prompts = 4

    assert baseline_group_sizes(Moments, "vip", 10, 2)[0].tolist() == [3, 3, 2, 2]


# ---------------------------------------------------------------------- gstar --trajectory
def _trajectory_error(tmp_path, capsys, name: str, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    code = main(["gstar", "--trajectory", str(path)])
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    return out.err.removeprefix(f"ustat-rl gstar: error: {path}").rstrip("\n")


HINT = "a trajectory file holds one JSON record a line"


@pytest.mark.parametrize("name, content, message", [
    ("run.jsonl", "hello world\n", f", line 1: not JSON (Expecting value); {HINT}"),
    ("run.csv", "step,gstar\n", f", line 1: not JSON (Expecting value); {HINT}"),
    ("run.txt", "no newline at the end", f", line 1: not JSON (Expecting value); {HINT}"),
    ("run.jsonl", '{"version": 1, "st', f", line 1: its only line is cut short; {HINT}"),
    ("run.jsonl", "", f": not a trajectory file (it is empty; {HINT})"),
    ("run.jsonl", "\n\n", f": not a trajectory file (it is empty; {HINT})"),
    ("run.npz", b"PK\x03\x04\x14\x00\x00\x00\x08\x00\xff\xfe", ": not a trajectory file (byte 10 "
     f"is not UTF-8 text; {HINT})"),
])
def test_a_malformed_trajectory_file_is_an_error(tmp_path, capsys, name, content, message):
    assert _trajectory_error(tmp_path, capsys, name, content) == message


def _one_record_file(record: dict) -> str:
    from ustat_rl.formatting import json_ready

    return json.dumps(json_ready(record)) + "\n"


@pytest.mark.parametrize("edit, message", [
    (lambda r: dict(r, gstar={"estimate": 8.0, "low": 9.0, "high": 7.0}),
     ", line 1: `gstar` is reversed: low 9 > high 7"),
    (lambda r: dict(r, c1=dict(r["c1"], estimate="abc")),
     ", line 1: `c1.estimate` must be a number, null or 'inf', got 'abc'"),
    (lambda r: dict(r, all_equal_observed=True),
     ", line 1: `all_equal_observed` must be a number, null or 'inf', got True"),
])
def test_a_malformed_trajectory_record_is_an_error(tmp_path, capsys, edit, message):
    record = edit(synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0)).to_dict())
    assert _trajectory_error(tmp_path, capsys, "run.jsonl", _one_record_file(record)) == message


def test_a_record_cut_short_after_whole_ones_is_still_ignored(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    for step in (10, 20):
        append_record(path, synthetic_record(step, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0)))
    path.write_text(path.read_text() + '{"version": 1, "st')
    assert main(["gstar", "--trajectory", str(path)]) == 0
    assert "one G lies inside every window's interval" in capsys.readouterr().out
    # the same bytes with a newline after them are a complete line, and not JSON
    path.write_text(path.read_text() + "\n")
    assert main(["gstar", "--trajectory", str(path)]) == 2
    assert f"{path}, line 3: not JSON" in capsys.readouterr().err
