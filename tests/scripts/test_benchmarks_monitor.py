"""Smoke test of benchmarks/bench_monitor.py (no timing is asserted: it depends on the load).

One short run with the monitor every step, in this process, and the README section built from
rows: the run completes, every window is estimated, and the section states the baseline, the
ratios and that no GPU was measured, and replaces only its own section.
"""

from __future__ import annotations

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # TRL run: benchmarks/bench_monitor.py, monitored runs

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_monitor.py", "bench_monitor_script")


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_one_monitored_run(bench, family):
    row = bench.one_run(1, 3, family)
    assert row["windows"] == 3 and row["windows_ok"] == 3
    assert row["median_step_s"] > 0 and row["wall_s"] > 0


def test_section_and_readme(bench, tmp_path):
    rows = [{"every": e, "steps": 10, "median_step_s": t, "wall_s": 10 * t, "windows": w,
             "windows_ok": w} for e, t, w in ((None, 0.2, 0), (1, 0.5, 10), (10, 0.25, 1))]
    text = bench.section(rows, "load average 1.0")
    assert "| none | 0.200 | 1.00x |" in text and "| every 1 steps | 0.500 | 2.50x |" in text
    assert "not measured: no GPU" in text
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    from ustat_rl.runs.records import replace_markdown_section

    replace_markdown_section(readme, bench.HEADING, text)
    out = readme.read_text()
    assert "kept" in out and bench.HEADING in out
