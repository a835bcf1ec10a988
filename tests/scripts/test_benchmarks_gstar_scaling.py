"""Smoke test of benchmarks/bench_gstar_scaling.py --quick (no timing or memory bound is asserted:
both depend on the machine's load; the figures are in benchmarks/README.md).

The quick run writes its CSV with one row per pilot size and estimator, every child ran
``ustat-rl gstar`` to completion, and the memory it reports grew from the smaller pilot to the
larger one (the measurement sees the pilot at all).
"""

from __future__ import annotations

import csv

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # a benchmark script's quick run: 8 ustat-rl gstar children


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_gstar_scaling.py", "bench_gstar_scaling_script")


def test_quick_run_writes_its_table(bench, tmp_path, capsys):
    out = tmp_path / "gstar_scaling.csv"
    rows = bench.main(["--quick", "--out", str(out)])
    assert [(r["prompts"], r["estimator"]) for r in rows] == [
        (n, e) for n in bench.QUICK_SIZES for e in bench.ESTIMATORS]
    with open(out) as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)
    assert all(r["peak_mib"] > r["baseline_mib"] > 0 and r["wall_s"] > 0 for r in rows)
    small, large = rows[0]["peak_mib"], rows[2]["peak_mib"]  # grpo at 2,500 and 5,000
    assert large > small
    assert "KiB/prompt" in capsys.readouterr().out


def test_a_failing_command_raises(bench):
    with pytest.raises(RuntimeError, match="failed"):
        bench.measure(["gstar", "no-such-pilot.npz", "--budget", "256"])
