"""TRL log histories: the reader, the 0/1 check and the report (ustat_rl.frameworks.logs*).

Synthetic histories are written the way TRL 1.16 logs a generation batch: ``reward`` the mean
of its 0/1 rewards, ``reward_std`` their pooled standard deviation with Bessel's correction and
``frac_reward_zero_std`` the share of groups whose rewards are all equal, each group's success
rate drawn from a known Beta distribution, so the all-equal fraction at every ``G`` is known
exactly (ratios of Beta functions).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.special import betaln

from ustat_rl.frameworks.logs import check_binary, read_trainer_state
from ustat_rl.frameworks.logs_report import format_logs_report, logs_report, window_slices

pytestmark = pytest.mark.fast

A, B_, G0, GROUPS = 0.6, 0.9, 8, 64


def beta_all_equal(G: int) -> float:
    return (math.exp(betaln(A + G, B_) - betaln(A, B_))
            + math.exp(betaln(A, B_ + G) - betaln(A, B_)))


def history(steps=120, seed=0, rewards=None, groups=GROUPS, extra=None):
    """A TRL-style log history; ``rewards(rng) -> (groups, G0)`` array replaces the Beta draw."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(1, steps + 1):
        if rewards is None:
            p = rng.beta(A, B_, size=groups)
            r = (rng.random((groups, G0)) < p[:, None]).astype(float)
        else:
            r = rewards(rng)
        out.append({"step": step, "loss": 0.0, "grad_norm": 0.5, "reward": float(r.mean()),
                    "reward_std": float(r.std(ddof=1)),
                    "frac_reward_zero_std": float(np.mean(r.std(axis=1) == 0)),
                    "rewards/accuracy/mean": float(r.mean()), **(extra or {})})
    out.append({"step": steps, "train_runtime": 12.0, "train_loss": 0.0})  # the final summary
    return {"global_step": steps, "logging_steps": 1, "log_history": out}


def write(tmp_path, state, name="trainer_state.json"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    return path


@pytest.fixture(scope="module")
def beta_logs(tmp_path_factory):
    return read_trainer_state(write(tmp_path_factory.mktemp("logs"), history()))


def covered(report, G: int) -> int:
    i = report.group_sizes.index(G)
    truth = beta_all_equal(G)
    return sum(w["feasible"] and w["all_equal_low"][i] <= truth <= w["all_equal_high"][i]
               for w in report.windows)


def test_reader_keeps_training_entries_in_step_order(beta_logs):
    assert beta_logs.n_steps == 120 and beta_logs.step[0] == 1 and beta_logs.step[-1] == 120
    assert beta_logs.reward_functions == ("accuracy",) and beta_logs.logging_steps == 1
    assert np.all(beta_logs.grad_norm == 0.5)


def test_bounds_at_other_group_sizes_contain_the_truth(beta_logs):
    # 12 windows of 10 steps; each window's box (mean reward, a(8)) holds at joint level >= 0.9
    # (Bonferroni of two t-intervals), and within a box the bounds are certified, so each window
    # covers a(G) with probability >= 0.9: at least 9 of 12 (P(<= 8 of 12 at 0.9) = 0.026)
    report = logs_report(beta_logs, G0, window=10, level=0.9)
    assert len(report.windows) == 12 and report.binary == "checked"
    for G in report.group_sizes:
        assert covered(report, G) >= 9, G
    # the logs bound a(G) at other G, not fix it: the far sizes stay wide
    last = report.windows[-1]
    i = report.group_sizes.index(64)
    assert last["all_equal_high"][i] - last["all_equal_low"][i] > 0.1


def test_negative_control_the_wrong_group_size_misses_the_truth(beta_logs):
    # the same logs read as if the run's G were 4: the truth at 8 falls outside almost everywhere
    report = logs_report(beta_logs, 4, window=10, level=0.9)
    assert covered(report, 8) <= 3


def test_dead_steps_and_zero_gradients(tmp_path):
    state = history(steps=12, rewards=lambda rng: np.zeros((GROUPS, G0)))
    for e in state["log_history"][3:6]:
        e["grad_norm"] = 0.0
    report = logs_report(read_trainer_state(write(tmp_path, state)), G0, window=4)
    assert report.dead_steps == list(range(1, 13)) and report.zero_grad_steps == [4, 5, 6]
    assert all(w["dead_steps"] == 4 for w in report.windows)
    text = format_logs_report(report)
    assert "dead steps (every group all-equal, zero advantages): 1, 2, 3" in text


def test_without_the_group_size_no_bounds(beta_logs):
    report = logs_report(beta_logs, None, window=10)
    assert report.binary == "not checked" and report.group_sizes == []
    assert "all_equal_low" not in report.windows[0]
    assert any("--group-size" in line for line in report.cannot)
    assert "G*" in format_logs_report(report)


def test_window_slices():
    assert window_slices(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert window_slices(9, 4) == [slice(0, 4), slice(4, 9)]  # a last block of one joins
    assert window_slices(3, 10) == [slice(0, 3)]


# --------------------------------------------------------------- the 0/1 check and its refusals
def test_partial_credit_is_refused(tmp_path):
    # rewards in {0, 1/2, 1}: the pooled variance falls below r(1 - r)
    state = history(steps=5, rewards=lambda rng: rng.integers(0, 3, (GROUPS, G0)) / 2.0)
    logs = read_trainer_state(write(tmp_path, state))
    with pytest.raises(ValueError, match=r"step 1: reward_std .* strictly between 0 and 1"):
        check_binary(logs, G0)
    with pytest.raises(ValueError, match="strictly between"):
        logs_report(logs, G0)
    # the override skips the check (an entry that averages several batches)
    assert logs_report(logs, G0, assume_binary=True).binary == "assumed"


def test_zero_one_rewards_pass_the_check(beta_logs, tmp_path):
    check_binary(beta_logs, G0)  # no error
    # and with one group per step the Bessel factor reaches its largest value G/(G - 1)
    state = history(steps=20, rewards=lambda rng: (rng.random((1, G0)) < 0.5) * 1.0)
    check_binary(read_trainer_state(write(tmp_path, state)), G0)


def test_rewards_outside_zero_one_are_refused(tmp_path):
    state = history(steps=4, rewards=lambda rng: rng.integers(0, 2, (GROUPS, G0)) * 2.0)
    with pytest.raises(ValueError, match="outside \\[0, 1\\]|above what 0/1"):
        check_binary(read_trainer_state(write(tmp_path, state)), G0)


def test_minus_one_plus_one_rewards_are_refused(tmp_path):
    # {-1, 1} rewards with a mean in [0, 1]: the spread is too large for 0/1 rewards
    state = history(steps=4, rewards=lambda rng: np.where(rng.random((GROUPS, G0)) < 0.7, 1, -1))
    with pytest.raises(ValueError, match="above what 0/1"):
        check_binary(read_trainer_state(write(tmp_path, state)), G0)


def test_several_reward_functions_are_refused(tmp_path):
    state = history(steps=4, extra={"rewards/format/mean": 0.5})
    with pytest.raises(ValueError, match="sums 2 reward functions \\(accuracy, format\\)"):
        check_binary(read_trainer_state(write(tmp_path, state)), G0)


# ------------------------------------------------------------------------------ reader errors
def test_a_folder_reads_its_latest_checkpoint(tmp_path):
    write(tmp_path, history(steps=5), "checkpoint-5/trainer_state.json")
    write(tmp_path, history(steps=12), "checkpoint-12/trainer_state.json")
    write(tmp_path, history(steps=3), "checkpoint-3/trainer_state.json")
    assert read_trainer_state(tmp_path).n_steps == 12
    assert read_trainer_state(tmp_path / "checkpoint-5").n_steps == 5


@pytest.mark.parametrize("state,match", [
    ([1, 2], "no 'log_history' list"),
    ({"log_history": [{"step": 1, "loss": 0.1}]}, "no log entry has 'frac_reward_zero_std'"),
    ({"log_history": [{"step": 3, "frac_reward_zero_std": 0.1}]},
     "step 3: the entry has no 'reward'"),
    ({"log_history": [{"step": 1, "reward": 0.5, "frac_reward_zero_std": 1.5}]},
     "step 1: 'frac_reward_zero_std' must lie in \\[0, 1\\]"),
    ({"log_history": [{"step": 1, "reward": "x", "frac_reward_zero_std": 0.5}]},
     "'reward' must be a finite number"),
    ({"log_history": [{"step": 2, "reward": 0.5, "frac_reward_zero_std": 0.5}] * 2},
     "step 2 is logged twice"),
])
def test_bad_histories_get_one_line_errors(tmp_path, state, match):
    with pytest.raises(ValueError, match=match) as info:
        read_trainer_state(write(tmp_path, state))
    assert "\n" not in str(info.value) and "trainer_state.json" in str(info.value)


def test_missing_and_empty_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_trainer_state(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match="no trainer_state.json"):
        read_trainer_state(tmp_path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not a JSON file"):
        read_trainer_state(tmp_path / "bad.json")


def test_report_arguments_are_checked(beta_logs, tmp_path):
    with pytest.raises(ValueError, match="window"):
        logs_report(beta_logs, G0, window=1)
    with pytest.raises(ValueError, match="level"):
        logs_report(beta_logs, G0, level=1.0)
    with pytest.raises(ValueError, match="group_size"):
        logs_report(beta_logs, 1)
    one = read_trainer_state(write(tmp_path, history(steps=1)))
    with pytest.raises(ValueError, match="1 logged training step"):
        logs_report(one, G0)
