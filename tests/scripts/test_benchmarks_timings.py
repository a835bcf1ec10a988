"""benchmarks/timings.py: what it reads from a command's output, the record it writes, and the
table written from the record alone; a command that fails records nothing."""

from __future__ import annotations

import json
import sys

import pytest
from script_loader import load_script

pytestmark = pytest.mark.fast  # runs two tiny commands in place of the measured ones

timings = load_script("benchmarks/timings.py", "timings_under_test")


def test_pytest_counts_read_the_last_summary_line():
    out = "....\n= 2 failed, 1789 passed, 24 skipped, 1 error in 152.31s (0:02:32) =\n"
    assert timings.pytest_counts(out) == {"failed": 2, "passed": 1789, "skipped": 24,
                                          "error": 1}
    with pytest.raises(ValueError, match="no summary line"):
        timings.pytest_counts("collected 0 items\n")


def test_duration_is_read_as_the_pages_read_it():
    assert timings.duration(94.63) == "94.6 s"
    assert timings.duration(726) == "12 min 6 s"


def _fake(monkeypatch, tmp_path, code: str, counts: str):
    script = tmp_path / "fake.py"
    script.write_text(code)
    fake = timings.Measurement("a fake job", (sys.executable, str(script)), counts)
    monkeypatch.setitem(timings.MEASUREMENTS, "fast-tier", fake)


def test_a_measurement_records_counts_machine_and_load(monkeypatch, tmp_path):
    # the fake sleeps so that its wall time, recorded to 0.1 s, cannot round to 0
    _fake(monkeypatch, tmp_path, "import time; time.sleep(0.2); print('3 passed, 1 skipped in 0.1s')",
          "pytest")
    out = tmp_path / "measured"
    assert timings.main(["--only", "fast-tier", "--out", str(out)]) == 0
    record = json.loads((out / "timings.json").read_text())["fast-tier"]
    assert record["counts"] == {"passed": 3, "skipped": 1}
    assert record["wall_seconds"] > 0 and record["peak_memory_gib"] > 0
    low, high = record["load_average"]
    assert 0 <= low <= high
    assert {"cpu", "cores", "memory_gib", "gpu"} <= set(record["machine"])
    table = (out / "timings.md").read_text()
    assert table == timings.render({"fast-tier": record})
    assert "3 passed, 1 skipped" in table and "not measured yet" in table.lower()


def test_control_a_failing_command_records_nothing(monkeypatch, tmp_path):
    _fake(monkeypatch, tmp_path, "import sys; print('1 failed in 0.1s'); sys.exit(1)",
          "pytest")
    out = tmp_path / "measured"
    assert timings.main(["--only", "fast-tier", "--out", str(out)]) == 1
    assert not (out / "timings.json").exists()


def test_verify_counts_read_the_verify_json(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"summary": {"pass": 2, "refuted": 1, "differs": 0, "fail": 0,
                                            "error": 0, "skipped": 0},
                                "results": [{}, {}, {}], "seconds": 12.345}))
    counts = timings.verify_counts(path)
    assert counts["claims"] == 3 and counts["seconds_of_checks"] == 12.3
    assert timings.result_text(counts) == ("3 claims: 2 pass, 1 refuted, 0 differs, 0 fail, "
                                           "0 error, 0 skipped")


def test_an_unknown_measurement_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        timings.main(["--only", "verify-quick,fast", "--out", str(tmp_path / "m")])
    assert stop.value.code == 2
    assert "--only must name measurements of" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
