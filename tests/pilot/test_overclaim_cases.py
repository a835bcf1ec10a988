"""The overclaiming cases of docs/invariants.md, each with the words and the exit code it gets.

Every test here failed on the code before the invariants were enforced, where the command
printed, for the same input: ``c1 0 [0, 0]``, ``G* = inf [inf, inf]`` and advice from them (a
3 x 3 pilot); "gain shown" from a ratio ``0.027 [0.027, 0.027]`` (one informative prompt of 40)
and exit 0 on a pilot whose every group is all-equal; a best G whose MSE lay below its own
squared bias, a best G ignoring ``--max-gen-batches``, costs from the plug-in keep rate beside
the unbiased one (``--dynamic-sampling``); a traceback with hypothesis's output for a usage
error, exit 1 for a function that cannot be called, "conforms" for a function that mutates its
input or for all-zero weights, 103 batches for ``--max-examples 1``; numbers where the API's
answer is undefined; RuntimeWarnings with file paths, an internal field name, a 300-digit mean
reward and "step None"; a ``verify --json`` that created missing folders; a GRPO "wins/loses"
column with no interval; and intervals for c3' below 0.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ustat_rl.interface.cli import main
from ustat_rl.pilot.dynamic_sampling import CAP_RISK
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.policies.examples import known_value_bandit, small_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.theory import ScalingConstants, per_prompt_mse, scaling_constants

pytestmark = pytest.mark.fast

#: An interval as the commands print it.
INTERVAL = re.compile(r"\[(-?[0-9.e+-]+), (-?[0-9.e+-]+)\]")


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def _one_line_error(code, out, err, words=()):
    """A usage error: exit 2, nothing on stdout, one line on stderr, no traceback or path."""
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert "Traceback" not in err and "hypothesis" not in err.lower()
    assert "Warning" not in err and ".py:" not in err
    for w in words:
        assert w in err, err


# ------------------------------------------------------------------ gstar on a 3 x 3 pilot
def test_a_3x3_pilot_gets_no_zero_width_interval_and_no_advice_from_one(tmp_path, capsys):
    # seed 5 is the pilot that printed "c1 0 [0, 0]" and "c1's interval lies below 0 at its
    # upper end": one success in nine samples, so every within-prompt estimate of c1 is 0
    pilot = bandit_pilot(small_bandit(), 3, 3, rng=5)
    path = pilot.save(tmp_path / "p.npz")
    code, out, err = _run(capsys, "gstar", path, "--budget", 256, "--json", tmp_path / "g.json")
    assert code == 0 and err == ""
    line = next(t for t in out.splitlines() if t.startswith("  c1 "))
    low, high = map(float, INTERVAL.search(line).groups())
    assert 0.0 <= low < high, line
    assert "[inf, inf]" not in out and "lies below 0 at its upper end" not in out
    assert "cannot bound G* from above" in out and "a small pilot: 3 prompts" in out
    assert "no point estimate (c1's estimate is not above 0)" in out
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["small_pilot"] and report["grpo_verdict"] == ["cannot tell"] * 8


def test_tiny_pilots_get_a_nonzero_interval_or_a_one_line_refusal(tmp_path, capsys):
    for seed in range(40):
        pilot = bandit_pilot(small_bandit(), 3, 3, rng=seed)
        path = pilot.save(tmp_path / f"p{seed}.npz")
        code, out, err = _run(capsys, "gstar", path, "--budget", 64, "--json",
                              tmp_path / f"g{seed}.json")
        if code == 2:  # all rewards equal, or every group all-equal
            _one_line_error(code, out, err)
            continue
        assert code == 0, err
        report = json.loads((tmp_path / f"g{seed}.json").read_text())
        for name in ("c1", "c2", "c3"):
            part = report["constants"][name]
            assert 0.0 <= part["low"] <= max(part["estimate"], 0.0) <= part["high"]
        assert report["constants"]["c1"]["high"] > report["constants"]["c1"]["low"]


# ------------------------------------------------------------------------------- allocate
def test_allocate_refuses_a_pilot_whose_every_group_is_all_equal(tmp_path, capsys):
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(6), 8)
    reward = np.repeat((np.arange(6) % 2).astype(float), 8)  # some all 0, some all 1
    path = Rollouts(ids, reward, rng.normal(size=(48, 4))).save(tmp_path / "p.npz")
    _one_line_error(*_run(capsys, "allocate", path, "--budget", 48),
                    ["every group's rewards are all equal"])


def test_allocate_shows_no_gain_from_one_informative_prompt(tmp_path, capsys):
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(40), 8)
    reward = np.repeat((np.arange(40) % 2).astype(float), 8)
    reward[:8] = [0, 1, 1, 0, 1, 0, 0, 1]  # prompt 0 alone varies
    path = Rollouts(ids, reward, rng.normal(size=(320, 4))).save(tmp_path / "p.npz")
    code, out, err = _run(capsys, "allocate", path, "--budget", 320)
    assert code == 0 and err == ""
    assert "gain shown" not in out and "use the optimal sizes" not in out
    assert "1 of 40 prompts have rewards that vary" in out and "so they cannot tell" in out
    assert out.rstrip().endswith("the pilot does not show a gain over uniform at this level: "
                                 "keep uniform, or collect more samples per prompt")
    assert "[0.000, inf]  within the noise" in out
    for low, high in re.findall(r"\[([0-9.]+), ([0-9.]+|inf)\]", out):
        assert float(low) < float(high)


# -------------------------------------------------------------------- --dynamic-sampling
@pytest.fixture(scope="module")
def rare_success_pilot(tmp_path_factory):
    """p = 0.02 for every prompt: 64 prompts of 16 samples."""
    pilot = bandit_pilot(known_value_bandit([0.02] * 8), 64, 16, rng=3)
    return pilot.save(tmp_path_factory.mktemp("ds") / "p.npz")


def _table(out: str) -> list[list[str]]:
    block = out.split("kept batch at N")[1].split("\n")[2:]
    return [row.replace("<= 0", "<=0").split() for row in block
            if re.match(r"^\s+\d+\s+\d+\s", row)]


@pytest.mark.parametrize("cap", [None, 1])
def test_dynamic_sampling_claims_no_mse_below_its_bias_and_respects_the_cap(
        rare_success_pilot, tmp_path, capsys, cap):
    extra = [] if cap is None else ["--max-gen-batches", cap]
    code, out, err = _run(capsys, "gstar", rare_success_pilot, "--budget", 512,
                          "--dynamic-sampling", *extra, "--json", tmp_path / "d.json")
    assert code == 0 and err == ""
    rows = _table(out)
    assert len(rows) == 9  # the divisors 2, 4, ..., 512 of N = 512
    for G, _B, bias, var, mse, *_ in rows:
        assert var == "unresolved" or float(var) > 0.0  # a variance is positive or unresolved
        if mse != "unresolved":  # an MSE shown is at least its squared bias and its variance
            assert mse == "<=0" or (float(mse) >= float(var) and
                                    (bias == "<=0" or float(mse) >= float(bias))), (G, mse)
    ds = json.loads((tmp_path / "d.json").read_text())["dynamic_sampling"]
    for accounting, targets in ds["best"].items():
        for target, got in targets.items():
            if got is None or not got["resolved"]:
                continue
            i = ds["group_sizes"].index(got["group_size"])
            if accounting != "unfiltered":
                assert ds["resolved"][target][i]  # a best G's MSE is resolved
                assert got["cap_probability"] <= (CAP_RISK if cap else 0.0)
    best = out.split("best G at N")[1].split("note:")[0]
    if cap:
        assert "only G whose chance of hitting it is at most 0.001 per step" in best
        for value in re.findall(r"P\(cap\) ([0-9.e+-]+)", best):
            assert float(value) <= CAP_RISK
    # the cost columns use the unbiased keep rate where it exists (G <= 16 here)
    for i, unbiased in enumerate(ds["keep_prob_unbiased"]):
        assert ds["cost_uses_unbiased"][i] == (unbiased is not None)
        if unbiased is not None:
            assert ds["grpo_mean_scale"][i] == pytest.approx(1.0 / unbiased, rel=1e-12)


# ----------------------------------------------------------------------------- conformance
TARGETS = '''
import numpy as np

def zeros(rewards, group_ids, weights):
    return np.zeros(np.asarray(rewards).shape[0])

def raises(rewards, group_ids, weights=None):
    raise RuntimeError("boom")

def one_argument(rewards):
    return np.zeros(len(rewards))

def ones(rewards, group_ids):
    return np.ones(len(rewards))

def centred(rewards, group_ids):
    z = np.asarray(rewards, dtype=np.float64)
    out = np.empty_like(z)
    for g in np.unique(group_ids):
        mask = group_ids == g
        out[mask] = z[mask] - z[mask].mean()
    return out

def centred_mutating(rewards, group_ids):
    out = centred(rewards, group_ids)
    rewards[...] = 0
    return out
'''


@pytest.fixture()
def targets(tmp_path):
    path = tmp_path / "targets.py"
    path.write_text(TARGETS)
    return path


@pytest.mark.parametrize("name, argv, words", [
    ("zeros", ["--estimator", "nemo_rl_gdpo", "--weights", "1"],
     ["needs at least 2 reward channels"]),
    ("zeros", ["--estimator", "verl_gdpo", "--weights", "0,0,0"], ["every weight is 0"]),
    ("one_argument", ["--estimator", "grpo"], ["TypeError", "fn(rewards, group_ids)"]),
    ("raises", ["--estimator", "grpo"], ["RuntimeError: boom"]),
    ("raises", ["--estimator", "verl_gdpo"], ["RuntimeError: boom"]),
])
def test_conformance_usage_errors_are_one_line_exit_2(targets, capsys, name, argv, words):
    _one_line_error(*_run(capsys, "conformance", f"{targets}:{name}", *argv), words)


def test_a_mutating_function_does_not_conform(targets, capsys):
    code, out, err = _run(capsys, "conformance", f"{targets}:centred_mutating", "--estimator",
                          "fullmean")
    assert code == 1 and err == ""
    assert out.startswith("DOES NOT CONFORM") and "modified its input 'rewards' in place" in out
    code, out, _ = _run(capsys, "conformance", f"{targets}:centred", "--estimator", "fullmean")
    assert code == 0 and out.startswith("CONFORMS")  # the control: the same rule, no mutation


def test_max_examples_bounds_the_batches_drawn(targets, capsys):
    code, out, _ = _run(capsys, "conformance", f"{targets}:ones", "--estimator", "grpo",
                        "--max-examples", 1)
    assert code == 1 and "batch 1 failed" in out.splitlines()[0]
    code, out, _ = _run(capsys, "conformance", f"{targets}:centred", "--estimator", "fullmean",
                        "--max-examples", 1)
    assert code == 0 and ": 1 batch in" in out.splitlines()[0]


def test_signature_trl_is_said_for_a_multireward_rule(targets, capsys):
    code, out, _ = _run(capsys, "conformance", f"{targets}:zeros", "--estimator",
                        "trl_sum_then_normalize", "--signature", "trl")
    assert code == 1 and "contiguous equal groups as --signature trl draws them" in out


# ------------------------------------------------------------------------------ the API
def test_the_api_refuses_what_is_undefined():
    c = ScalingConstants(1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="`group_size` must be at most `budget`"):
        c.fixed_budget_mse([128], budget=64)
    with pytest.raises(ValueError, match="`c1` is -1 < 0"):
        ScalingConstants(-1.0, 1.0, 1.0).fixed_budget_mse(4, 64)
    estimate = ScalingConstants(-1.0, 1.0, 1.0, estimated=True)
    assert estimate.fixed_budget_mse(4, 64) == pytest.approx((-4.0 + 1.0 + 1.0 / 3.0) / 64)
    with pytest.raises(ValueError, match="G\\* is undefined"):
        ScalingConstants(0.0, 1.0, 0.0).optimal_group_size()
    assert ScalingConstants(0.0, 1.0, 2.0).optimal_group_size() == math.inf  # falls forever
    moments = small_bandit().moments()
    with pytest.raises(ValueError, match="`group_size` must hold at least one"):
        per_prompt_mse(moments, "grpo", [])
    assert not scaling_constants(moments).estimated


def test_a_group_size_that_does_not_divide_the_budget_is_the_documented_relaxation():
    c = ScalingConstants(1.0, 2.0, 16.0)
    assert c.fixed_budget_mse(3.0, 64) == pytest.approx((3.0 + 2.0 + 8.0) / 64)
    assert "relaxation" in ScalingConstants.fixed_budget_mse.__doc__
    assert c.best_group_size(64) in (4, 8)  # the default search takes divisors only


# --------------------------------------------------------- reward scales, paths, verdicts
def _scaled_pilot(tmp_path, scale, name):
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(8), 6)
    return Rollouts(ids, rng.normal(size=48) * scale, rng.normal(size=(48, 3))).save(
        tmp_path / name)


@pytest.mark.parametrize("command", ["gstar", "allocate", "rewards"])
@pytest.mark.parametrize("scale, words", [(1e300, "overflow float64"),
                                          (1e-200, "underflow float64")])
def test_extreme_reward_scales_are_one_line_refusals(tmp_path, capsys, command, scale, words):
    path = _scaled_pilot(tmp_path, scale, "p.npz")
    code, out, err = _run(capsys, command, path, "--budget", 64)
    _one_line_error(code, out, err, [words])
    assert "reward_var" not in err and str(tmp_path) not in err


def test_rewards_prints_large_means_in_significant_digits_and_no_step_none(tmp_path, capsys):
    path = _scaled_pilot(tmp_path, 1e100, "p.npz")
    code, out, err = _run(capsys, "rewards", path, "--budget", 6)
    assert code == 0 and err == ""
    assert not re.search(r"\d{20}", out) and "e+" in out
    assert "step None" not in out and "groups; each group needs at least 2" in out


def test_verify_json_into_a_missing_folder_is_refused(tmp_path, capsys):
    target = tmp_path / "missing" / "dir" / "x.json"
    _one_line_error(*_run(capsys, "verify", "--only", "C1", "--json", target),
                    ["--json: folder", "does not exist"])
    assert not (tmp_path / "missing").exists()


def test_grpo_verdicts_follow_the_margin_interval(tmp_path, capsys):
    from ustat_rl.pilot.report import gstar_report
    from ustat_rl.policies.examples import interior_optimum_bandit

    report = gstar_report(bandit_pilot(interior_optimum_bandit(), 256, 8, rng=1), 96)
    assert not report.small_pilot
    for verdict, low, high in zip(report.grpo_verdict, report.grpo_margin["low"],
                                  report.grpo_margin["high"]):
        assert verdict == ("wins" if low > 0 else "loses" if high < 0 else "cannot tell")
    assert "wins" in report.grpo_verdict  # the check has a case where the interval decides
