"""The trajectory file and the universality verdict on it (ustat_rl/frameworks/trajectory.py,
universality.py; docs/theory.md C17, C18, C32): a round trip with inf and NaN, bad files named by
file and line, G*'s interval rebuilt from the stored errors, the verdict on a constant and on a
moving G* (negative control), and the ``gstar --trajectory`` command end to end. The verdict's
false-alarm rate against the stated simultaneous level is C49's simulation, tested in
tests/claims/test_beyond_monitor_window.py."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from ustat_rl.frameworks.synthetic import SyntheticErrors, SyntheticWindow, synthetic_record
from ustat_rl.frameworks.trajectory import (
    ADDED_IN_5,
    GSTAR_ERROR_FIELDS,
    TRAJECTORY_FIELDS,
    TRAJECTORY_VERSION,
    RecordInterval,
    WindowRecord,
    append_record,
    gstar_errors_of,
    read_trajectory,
)
from ustat_rl.frameworks.universality import format_universality, gstar_universality
from ustat_rl.interface.cli import main
from ustat_rl.pilot.uncertainty import (
    RatioErrors,
    fieller_gstar,
    pilot_intervals,
    student_interval,
)
from ustat_rl.scores.spec import SketchSpec

pytestmark = pytest.mark.fast


def _write(path, records):
    for record in records:
        append_record(path, record)
    return path


def _constant_run(steps=(50, 100, 150, 200, 250, 300), with_errors=True, **window):
    """Windows whose estimates all sit at G* = 1 + sqrt(49/1) = 8."""
    return [synthetic_record(s, 1.0, 2.0, 49.0, SyntheticErrors(0.08, 3.0, stored=with_errors),
                             window=SyntheticWindow(**window)) for s in steps]


# ------------------------------------------------------------------------------------ the file
#: A trajectory file in version 2's layout, written by the writer of release 0.1 (its
#: ``synthetic_record``, ``skipped_record`` and ``window_record``): a synthetic window, a skipped
#: one and a monitored window whose run rule (``trl_batch``) is not the rule of its
#: ``mse_best`` (``grpo``).
VERSION_2_FILE = Path(__file__).parent / "data" / "trajectory_v2.jsonl"


def test_round_trip_keeps_inf_nan_and_the_optional_field(tmp_path):
    unbounded = synthetic_record(10, 0.05, 2.0, 49.0, SyntheticErrors(0.05, 2.0),
                                 window=SyntheticWindow(all_equal=(math.nan, 0.25)))
    assert unbounded.gstar.high == math.inf
    old = synthetic_record(20, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0, stored=False))
    skipped = synthetic_record(30, 0, 0, 0, SyntheticErrors(0, 0), reason="a reward is NaN")
    path = _write(tmp_path / "run.jsonl", [unbounded, skipped])
    line = old.to_dict()
    del line["gstar_errors"]  # a writer that predates the optional field
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    back = read_trajectory(path)
    assert [r.step for r in back] == [10, 30, 20]
    assert all(isinstance(r, WindowRecord) for r in back)
    assert back[0].gstar.high == math.inf and math.isnan(back[0].all_equal_predicted)
    assert back[0].gstar_errors == unbounded.gstar_errors
    assert back[0].c1 == unbounded.c1 and back[0].all_equal_observed == 0.25
    assert back[2].gstar_errors is None
    assert not back[1].ok and back[1].reason == "a reward is NaN" and back[1].gstar is None
    assert '"inf"' in path.read_text() and ": NaN" not in path.read_text()  # JSON has no NaN
    assert all(json.loads(line)["version"] == TRAJECTORY_VERSION
               for line in path.read_text().splitlines()[:2])


def test_a_record_is_frozen_and_checked_when_made():
    record = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.step = 11
    with pytest.raises(ValueError, match="`status`"):
        dataclasses.replace(record, status="done")
    with pytest.raises(ValueError, match="`gstar` is reversed"):
        dataclasses.replace(record, gstar=RecordInterval(8.0, 9.0, 7.0))
    with pytest.raises(ValueError, match="`gstar_errors`"):
        dataclasses.replace(record, gstar_errors={"c3_se": 1.0})
    with pytest.raises(ValueError, match="`c1` of a window with status 'ok'"):
        dataclasses.replace(record, c1=None)
    assert not dataclasses.replace(record, status="skipped", c1=None).ok  # a skipped window


def test_append_takes_a_record_only(tmp_path):
    record = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0))
    with pytest.raises(TypeError, match="`record` must be a WindowRecord, got dict"):
        append_record(tmp_path / "a.jsonl", record.to_dict())
    assert not (tmp_path / "a.jsonl").exists()


def test_the_line_holds_every_field_once_in_order():
    line = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0)).to_dict()
    assert list(line) == ["version", *TRAJECTORY_FIELDS]
    assert len(TRAJECTORY_FIELDS) == len(set(TRAJECTORY_FIELDS))
    # one word a field: the run's advantage rule is `estimator`; no field is named `rule`
    assert "rule" not in TRAJECTORY_FIELDS and "estimator" in TRAJECTORY_FIELDS


def test_a_version_2_file_reads_into_the_renamed_fields(tmp_path):
    old = read_trajectory(VERSION_2_FILE)
    assert [(r.step, r.status) for r in old] == [(0, "ok"), (5, "skipped"), (10, "ok")]
    raw = [json.loads(line) for line in VERSION_2_FILE.read_text().splitlines()]
    assert all(line["version"] == 2 and "rule" in line for line in raw)  # the old layout
    window = old[2]
    assert (window.estimator, window.mse_best_estimator) == ("trl_batch", "grpo")
    assert (window.estimator, window.mse_best_estimator) == (raw[2]["rule"], raw[2]["estimator"])
    assert window.estimator_source == raw[2]["rule_source"]
    assert window.run_method == raw[2]["run_estimator"]
    assert window.gstar.high == math.inf and window.gstar.low == raw[2]["gstar"]["low"]
    assert old[1].estimator == "trl_group" and old[1].mse_best_estimator is None
    # written again it is a version 5 file, read back to the same records
    path = _write(tmp_path / "again.jsonl", old)
    assert {json.loads(line)["version"] for line in path.read_text().splitlines()} == {5}
    again = read_trajectory(path)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in old]
    # the verdict on the old file is the verdict on the new one
    assert gstar_universality(old).to_dict() == gstar_universality(again).to_dict()


def test_older_layouts_are_read(tmp_path):
    line = json.loads(VERSION_2_FILE.read_text().splitlines()[2])
    without = {k: v for k, v in line.items() if k != "version"}
    version_1 = dict(line, version=1, var_run=0.125)  # a plug-in number, no interval
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (without, version_1)))
    first, second = read_trajectory(path)
    assert first.estimator == "trl_batch" and first.var_run.estimate == line["var_run"]["estimate"]
    assert second.var_run.estimate == 0.125 and math.isnan(second.var_run.low)


@pytest.mark.parametrize("version", [6, 0, "5", True, 2.5])
def test_an_unknown_version_is_refused_in_one_line(tmp_path, version):
    good = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0)).to_dict()
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(dict(good, version=version)) + "\n")
    with pytest.raises(ValueError) as info:
        read_trajectory(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 1: `version` {version!r} is not a trajectory layout")
    assert "\n" not in message
    path.write_text(json.dumps(good) + "\n")  # control: the same line at version 5 is read
    assert read_trajectory(path)[0].step == 10


def test_a_version_3_line_reads_its_group_filter_into_the_renamed_field(tmp_path):
    line = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0)).to_dict()
    line = {("ds_keep_rule" if k == "ds_group_filter" else k): v for k, v in line.items()
            if k not in ADDED_IN_5}  # version 3 had none of version 5's fields
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(dict(line, version=3, ds_keep_rule="roll")) + "\n")
    assert read_trajectory(path)[0].ds_group_filter == "roll"
    # control: version 4 wrote the new name only, so the old one there is an unknown field
    path.write_text(json.dumps(dict(line, version=4, ds_keep_rule="roll")) + "\n")
    with pytest.raises(ValueError, match="unknown \\['ds_keep_rule'\\]"):
        read_trajectory(path)


def test_a_version_4_line_reads_without_the_fields_version_5_added(tmp_path):
    record = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.05, 2.0))
    line = {k: v for k, v in record.to_dict().items() if k not in ADDED_IN_5}
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(dict(line, version=4)) + "\n")
    old = read_trajectory(path)[0]
    assert old == record and all(getattr(old, name) is None for name in ADDED_IN_5)
    # control: a version 4 line holding a field only version 5 writes is refused
    path.write_text(json.dumps(dict(line, version=4, run_rule_advice_mse=8)) + "\n")
    with pytest.raises(ValueError, match="unknown \\['run_rule_advice_mse'\\]"):
        read_trajectory(path)
    path.write_text(json.dumps(dict(line, version=5, run_rule_advice_mse=8)) + "\n")
    assert read_trajectory(path)[0].run_rule_advice_mse == 8


def test_a_version_3_line_with_version_2_names_is_refused(tmp_path):
    line = dict(json.loads(VERSION_2_FILE.read_text().splitlines()[2]), version=3)
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match="unknown \\['rule', 'rule_source', 'run_estimator'\\]"):
        read_trajectory(path)


def test_an_interrupted_last_line_is_ignored(tmp_path):
    path = _write(tmp_path / "run.jsonl", _constant_run((10, 20)))
    whole = path.read_text()
    path.write_text(whole + whole.splitlines()[0][:57])  # a write cut short
    assert [r.step for r in read_trajectory(path)] == [10, 20]


def _line(record) -> str:
    from ustat_rl.formatting import json_ready

    return json.dumps(json_ready(record.to_dict() if isinstance(record, WindowRecord)
                                 else record))


@pytest.mark.parametrize("edit, words", [
    (lambda r: "{not json", "not JSON"),
    (lambda r: _line({"step": 3}), "not a trajectory record"),
    (lambda r: _line(dict(r.to_dict(), status="done")), "`status`"),
    (lambda r: _line(dict(r.to_dict(), step="ten")), "`step`"),
    (lambda r: _line(dict(r.to_dict(), level=1.5)), "`level`"),
    (lambda r: _line(dict(r.to_dict(), gstar=8.0)), "`gstar`"),
    (lambda r: _line(dict(r.to_dict(), c1=None)), "`c1`"),
    (lambda r: _line(dict(r.to_dict(), gstar_errors={"c3_se": 1.0})), "`gstar_errors`"),
    (lambda r: _line(dict(r.to_dict(), version=9)), "`version`"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, edit, words):
    good = _constant_run((10, 30))
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([_line(good[0]), edit(good[0]), _line(good[1])]) + "\n")
    with pytest.raises(ValueError) as info:
        read_trajectory(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 2: ") and words in message and "\n" not in message


# ------------------------------------------------------------------ G*'s interval, rebuilt
@pytest.fixture(scope="module")
def pilot(interior_pilot):
    # R's seed is the one this pilot's stream drew before pilots took a SketchSpec
    return interior_pilot(48, 8, 20260301, 5, sketch=SketchSpec(8, seed=2031305888))


@pytest.fixture(scope="module")
def intervals(pilot):
    return pilot_intervals(pilot, 0.9)


def test_stored_errors_rebuild_the_pilots_interval(pilot, intervals):
    from ustat_rl.pilot.report import gstar_report

    errors = gstar_errors_of(intervals)
    assert set(errors) == set(GSTAR_ERROR_FIELDS) and errors["sketch_units"] == 8
    _, rebuilt = fieller_gstar(intervals.c1.estimate, intervals.c3.estimate,
                               RatioErrors(**errors), intervals.n_prompts, 0.9)
    g = intervals.optimal_group_size
    assert rebuilt == pytest.approx((g.low, g.high), rel=1e-12)
    # the report `ustat-rl gstar` computes carries the same errors, and they rebuild its interval
    report = gstar_report(pilot, 96, level=0.9)
    assert gstar_errors_of(report) == errors
    c = report.constants
    _, again = fieller_gstar(c["c1"]["estimate"], c["c3"]["estimate"], RatioErrors(**errors),
                             report.n_prompts, report.level)
    assert again == pytest.approx((report.gstar["low"], report.gstar["high"]), rel=1e-12)
    with pytest.raises(TypeError, match="`estimates`"):
        gstar_errors_of({"c1": 1.0})


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99, 0.9999, 0.999999])
def test_rebuilt_interval_nests_and_is_unbounded_exactly_when_c1_reaches_zero(intervals, level):
    low, high = intervals.gstar_at(level)
    base_low, base_high = intervals.gstar_at(0.5)
    assert low <= base_low + 1e-12 and high >= base_high - 1e-12
    # an independent route to unboundedness: c1's own Student interval at the same level
    c1 = intervals.c1
    c1_at = student_interval(c1.estimate, c1.prompt_std_error, c1.sketch_std_error, level,
                             intervals.n_prompts, intervals.sketch_units)
    assert math.isinf(high) == (c1_at.low <= 0.0)


# ---------------------------------------------------------------------------- the verdict
def test_a_constant_gstar_fits_every_window():
    result = gstar_universality(_constant_run(windows_pooled=2), 0.9)
    assert result.consistent and result.common == (8, 8) and result.group_size_inside
    assert result.window_level == pytest.approx(1 - 0.1 / 6)
    assert result.simultaneous_level == pytest.approx(0.9)
    assert all(w.rebuilt and w.low < 8 < w.high for w in result.windows)
    text = format_universality(result)
    assert "G in 8..8" in text and "at >= 90% (Bonferroni)" in text
    assert "pooling up to 2 generation batches" in text


def test_a_moving_gstar_fits_no_single_g():
    # negative control: G* = 5 for the first half of the run, 11 for the second
    records = [synthetic_record(s, 1.0, 2.0, 16.0 if s < 200 else 100.0, SyntheticErrors(0.08, 3.0))
               for s in (50, 100, 150, 200, 250, 300)]
    result = gstar_universality(records, 0.9)
    assert not result.consistent and result.common is None
    text = format_universality(result)
    assert "no single G lies inside every window's interval" in text
    assert "the run's G = 8 is outside some interval" in text


def test_intervals_that_meet_between_integers():
    records = [synthetic_record(s, 1.0, 2.0, 7.4**2,
                                SyntheticErrors(0.002, 0.02)) for s in (10, 20)]
    result = gstar_universality(records, 0.9)
    assert result.consistent and result.common is None
    assert 8.0 < result.overlap_low < result.overlap_high < 9.0
    assert "no integer G >= 2 lies inside all of them" in format_universality(result)


def test_unbounded_intervals_hold_every_g_above_their_low():
    # c1's interval reaches 0 in the first window: G* has no upper bound there
    records = [synthetic_record(10, 0.5, 2.0, 49.0,
                                SyntheticErrors(0.5, 2.0))] + _constant_run((20, 30))
    result = gstar_universality(records, 0.9)
    assert math.isinf(result.windows[0].high) and result.windows[0].covers(8)
    assert result.common == (8, 8)
    alone = gstar_universality(records[:1], 0.9)
    assert alone.common[1] == math.inf and "G >= " in format_universality(alone)


def test_skipped_windows_are_listed_and_left_out_of_the_family():
    records = _constant_run((10, 20, 30)) + [
        synthetic_record(40, 0, 0, 0, SyntheticErrors(0, 0), reason="groups are not contiguous")]
    result = gstar_universality(records, 0.9)
    assert len(result.windows) == 3 and result.skipped == ((40, "groups are not contiguous"),)
    assert result.window_level == pytest.approx(1 - 0.1 / 3)
    assert "40 skipped: groups are not contiguous" in format_universality(result)
    empty = gstar_universality(records[3:], 0.9)
    assert not empty.consistent and "no window was estimated" in format_universality(empty)


def test_without_stored_errors_the_bonferroni_level_of_the_records_is_stated():
    few = gstar_universality(_constant_run((10, 20), level=0.99, with_errors=False), 0.9)
    assert not any(w.rebuilt for w in few.windows)
    assert few.simultaneous_level == pytest.approx(0.98)
    assert "= 98%" in format_universality(few)
    many = gstar_universality(_constant_run(range(10, 210, 10), with_errors=False), 0.9)
    assert many.simultaneous_level == pytest.approx(-1.0)
    assert "no guarantee" in format_universality(many)
    # two windows rebuilt at 1 - 0.1/3 each, one kept at its record's 99%
    mixed = gstar_universality(_constant_run((10, 20)) + _constant_run(
        (30,), level=0.99, with_errors=False), 0.9)
    assert [w.rebuilt for w in mixed.windows] == [True, True, False]
    assert mixed.simultaneous_level == pytest.approx(1 - 2 * 0.1 / 3 - 0.01)
    assert "1 of 3 windows carry no standard errors" in format_universality(mixed)


# ---------------------------------------------------------------------------- the command
def test_cli_writes_text_json_and_plot(tmp_path, capsys):
    records = _constant_run(all_equal=(0.2, 0.22)) + [
        synthetic_record(10, 0.5, 2.0, 49.0, SyntheticErrors(0.5, 2.0)),
        synthetic_record(400, 0, 0, 0, SyntheticErrors(0, 0), reason="a reward is NaN")]
    path = _write(tmp_path / "run.jsonl", records)
    out_json, out_png = tmp_path / "run.json", tmp_path / "run.png"
    assert main(["gstar", "--trajectory", str(path), "--json", str(out_json),
                 "--plot", str(out_png)]) == 0
    text = capsys.readouterr().out
    assert "one G lies inside every window's interval: G in 8..8" in text
    assert "400 skipped: a reward is NaN" in text
    payload = json.loads(out_json.read_text())
    assert payload["consistent"] and payload["common"] == [8, 8] and len(payload["windows"]) == 7
    assert payload["windows"][0]["high"] == "inf" and payload["skipped"] == [[400, "a reward is NaN"]]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, words", [
    (["gstar"], "give a pilot rollouts file, or --trajectory"),
    (["gstar", "pilot.npz", "--trajectory", "run.jsonl"], "not both"),
    (["gstar", "--trajectory", "run.jsonl", "--budget", "64"], "`--budget`"),
    (["gstar", "--trajectory", "run.jsonl", "--estimator", "grpo"], "`--estimator`"),
    (["gstar", "--trajectory", "run.jsonl", "--level", "1.5"], "`--level`"),
    (["gstar", "--trajectory", "run.jsonl", "--plot", "run.bmp"], "`--plot`"),
    (["gstar", "--trajectory", "absent.jsonl"], "absent.jsonl does not exist"),
    (["gstar", "--trajectory", "bad.jsonl", "--json", "out.json"], "bad.jsonl, line 1"),
    (["gstar", "--trajectory", "skipped.jsonl", "--plot", "run.png"], "no estimated window"),
    (["gstar", "pilot.npz"], "`--budget` is required"),
])
def test_cli_bad_arguments_are_one_line_and_write_nothing(tmp_path, monkeypatch, capsys, args,
                                                          words):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "run.jsonl", _constant_run((10, 20)))
    _write(tmp_path / "skipped.jsonl", [synthetic_record(10, 0, 0, 0, SyntheticErrors(0, 0),
                                                         reason="no groups")])
    (tmp_path / "bad.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_trajectory_plotting_does_not_load_pyplot():
    import subprocess
    import sys

    code = ("import sys, ustat_rl.interface.plotting_trajectory; "
            "print('matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
