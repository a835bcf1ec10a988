"""``ustat-rl logs`` (ustat_rl.interface.logs): options checked before work, the table, the JSON,
one-line refusals (a real TRL run: tests/interface/test_logs_cli_trl.py)."""

from __future__ import annotations

import json

import pytest
from script_loader import load_script

from ustat_rl.interface.cli import main

pytestmark = pytest.mark.fast

_histories = load_script("tests/frameworks/test_logs.py", "logs_histories")
G0, history, write = _histories.G0, _histories.history, _histories.write


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table_and_json(tmp_path, capsys):
    path = write(tmp_path, history(steps=30))
    code, out, err = _run(capsys, "logs", path, "--group-size", G0, "--window", 10,
                          "--json", tmp_path / "out.json")
    assert code == 0, err
    assert "0/1 rewards: checked" in out and "rollouts per kept group" in out
    assert "what these logs cannot decide" in out and "G* = 1 + sqrt(c3'/c1)" in out
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["run_group_size"] == G0 and len(data["windows"]) == 3
    assert data["group_sizes"] == [2, 4, 8, 16, 32, 64]
    low, high = data["windows"][0]["all_equal_low"], data["windows"][0]["all_equal_high"]
    assert all(lo <= hi for lo, hi in zip(low, high))


def test_a_folder_and_no_group_size(tmp_path, capsys):
    write(tmp_path, history(steps=12), "checkpoint-12/trainer_state.json")
    code, out, _ = _run(capsys, "logs", tmp_path)
    assert code == 0 and "run's G: not given" in out and "a(2)" not in out


@pytest.mark.parametrize("argv,words", [
    (["--group-size", "1"], "`--group-size` must be an integer >= 2"),
    (["--window", "1"], "`--window` must be an integer >= 2"),
    (["--level", "1.5"], "`--level` must lie strictly between 0 and 1"),
    (["--json", "out.txt"], "`--json` must end in"),
    (["--assume-binary"], "give --group-size too"),
])
def test_bad_options_are_refused_before_the_file_is_read(tmp_path, capsys, argv, words):
    # the file is not even JSON: an option error must come first
    (tmp_path / "trainer_state.json").write_text("not json")
    code, out, err = _run(capsys, "logs", tmp_path / "trainer_state.json", *argv)
    assert code == 2 and out == "" and words in err and err.count("\n") == 1


def test_non_binary_rewards_are_refused_in_one_line(tmp_path, capsys):
    state = history(steps=5, rewards=lambda rng: rng.integers(0, 3, (64, G0)) / 2.0)
    code, out, err = _run(capsys, "logs", write(tmp_path, state), "--group-size", G0)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("ustat-rl logs: error:") and "strictly between 0 and 1" in err
    # the same file without --group-size: no bounds, so nothing to refuse
    code, out, _ = _run(capsys, "logs", write(tmp_path, state))
    assert code == 0


def test_missing_path(tmp_path, capsys):
    code, _, err = _run(capsys, "logs", tmp_path / "nope")
    assert code == 2 and "does not exist" in err


def test_help_says_what_the_logs_cannot_decide(capsys):
    with pytest.raises(SystemExit):
        main(["logs", "--help"])
    text = capsys.readouterr().out
    assert "bounds, not values" in text and "score norms" in text and "scale_rewards" in text
