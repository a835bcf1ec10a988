"""Bad input to ``ustat-rl gstar`` and the pilot report (issue: one line naming the parameter).

Each case exits 2 with a single line on stderr that names the parameter, no traceback, and, for
the budget, before the pilot is read; the Python API raises ``ValueError`` with the same text.
Degenerate pilots (equal rewards, zero scores, two i.i.d. prompts) and budgets with a single
admissible group size get one message each instead of a contradictory report.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.interface.cli import main
from ustat_rl.pilot.report import gstar_report
from ustat_rl.pilot.rollouts import Rollouts, load_rollouts
from ustat_rl.theory import ScalingConstants, admissible_group_sizes

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def pilot(interior_pilot):
    return interior_pilot(16, 4, 20260303, 1)


def _one_line_error(capsys, name):
    err = capsys.readouterr().err
    assert f"`{name}`" in err and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_empty_and_truncated_npz(tmp_path, pilot, capsys):
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    assert main(["gstar", str(empty), "--budget", "64"]) == 2
    assert "is empty" in _one_line_error(capsys, "ROLLOUTS")
    whole = pilot.save(tmp_path / "whole.npz").read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(whole[: len(whole) // 2])
    assert main(["gstar", str(cut), "--budget", "64"]) == 2
    assert "not a readable .npz" in _one_line_error(capsys, "ROLLOUTS")
    with pytest.raises(ValueError, match="`path`"):
        load_rollouts(cut)


def test_huge_budget_is_rejected_before_the_pilot_is_read(tmp_path, pilot, capsys, monkeypatch):
    path = pilot.save(tmp_path / "pilot.npz")
    import ustat_rl.pilot.rollouts as rollouts

    monkeypatch.setattr(rollouts, "load_rollouts", lambda *a: pytest.fail("pilot was read"))
    assert main(["gstar", str(path), "--budget", "999999999999"]) == 2
    _one_line_error(capsys, "--budget")
    with pytest.raises(ValueError, match="`budget` must be <="):
        admissible_group_sizes(999999999999)


def test_prime_budget_has_one_message(tmp_path, pilot, capsys, monkeypatch):
    path = pilot.save(tmp_path / "pilot.npz")
    import ustat_rl.pilot.rollouts as rollouts

    monkeypatch.setattr(rollouts, "load_rollouts", lambda *a: pytest.fail("pilot was read"))
    assert main(["gstar", str(path), "--budget", "257"]) == 2
    err = _one_line_error(capsys, "--budget")
    assert "256 or 258" in err
    assert admissible_group_sizes(256).size > 1  # control: a composite budget is accepted
    assert gstar_report(pilot, 256).budget == 256
    with pytest.raises(ValueError, match="`budget` 257 admits one group size"):
        gstar_report(pilot, 257)


def _rollouts(reward, score, n_prompts):
    reward = np.asarray(reward, dtype=float)
    return Rollouts(prompt_id=np.repeat(np.arange(n_prompts), reward.size // n_prompts),
                    reward=reward, score=np.asarray(score, dtype=float))


@pytest.mark.parametrize("case, match", [
    ("equal", "every reward equals 1"),
    ("zero", "every score is 0"),
    ("two", ">= 3 i.i.d. prompts"),
])
def test_degenerate_pilots_get_one_message(tmp_path, capsys, case, match):
    rng = np.random.default_rng(0)
    score = rng.normal(size=(24, 3))
    reward = rng.integers(0, 2, size=24)
    if case == "equal":
        r = _rollouts(np.ones(24), score, 6)
    elif case == "zero":
        r = _rollouts(reward, np.zeros((24, 3)), 6)
    else:
        r = _rollouts(reward, score, 2)
    with pytest.raises(ValueError, match=match):
        gstar_report(r, 64)
    path = r.save(tmp_path / "pilot.npz")
    assert main(["gstar", str(path), "--budget", "64"]) == 2
    assert match in _one_line_error(capsys, "rollouts")


def test_scaling_constants_reject_nan_and_inf():
    for args, name in (((np.nan, 1.0, 1.0), "c1"), ((1.0, np.inf, 1.0), "c2"),
                       ((1.0, 1.0, np.nan), "c3")):
        with pytest.raises(ValueError, match=f"`{name}` must be finite"):
            ScalingConstants(*args)
    with pytest.raises(TypeError, match="`c1`"):
        ScalingConstants("1", 1.0, 1.0)
    assert ScalingConstants(1.0, 2.0, 16.0).optimal_group_size() == 5.0
    assert ScalingConstants(0.0, 2.0, 16.0).optimal_group_size() == np.inf  # c1 = 0 stays legal
