"""benchmarks/bench_sketch.py --fsdp, without launching it (a launch of two processes takes tens
of seconds on the shared 2-core machine; the sketch under FSDP2 itself is checked exactly by
tests/scores/test_factored_fsdp.py): its per-process summary and README section built from
rows. No timing is asserted.
"""

from __future__ import annotations

import pytest
from script_loader import load_script

pytestmark = pytest.mark.fast

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_sketch.py", "bench_sketch_fsdp_script")


def _rows(sketch_seconds):
    """Two processes, two runs of each route; process 1's sketch takes ``sketch_seconds``."""
    rows = []
    for rank in (0, 1):
        for seconds, route in ((2.0, "plain"), (2.2, "plain"), (2.4, "sketch"), (2.6, "sketch")):
            if rank == 1 and route == "sketch":
                seconds = sketch_seconds
            rows.append(dict(route=route, rank=rank, seconds=seconds, n=16, k=256,
                             peak_mib=100.0 if route == "plain" else 110.0, memory="RSS",
                             model="qwen2-100m", device="cpu"))
    return rows


def test_summary_is_per_process_medians_and_ratios(bench):
    summary = bench._fsdp_summary(_rows(5.0))
    sketch = {r["rank"]: r for r in summary if r["route"] == "sketch"}
    assert sketch[0]["time_ratio"] == pytest.approx(2.5 / 2.1)  # medians of two runs each
    assert sketch[0]["memory_ratio"] == pytest.approx(1.1)
    assert sketch[1]["time_ratio"] == pytest.approx(5.0 / 2.1)  # its own process's plain pass
    assert sketch[1]["spread"] == (5.0, 5.0) and sketch[1]["repeats"] == 2


def test_section_states_the_goal_both_ways_and_replaces_only_its_own(bench, tmp_path):
    res = dict(summary=bench._fsdp_summary(_rows(5.0)), repeats=2, threads=1, seconds=60.0,
               load=(1.0, 1.0, 1.0), quick=False)
    section = bench.render_fsdp(res)
    assert section.startswith(bench.FSDP_SECTION) and "on CPU" in section
    assert "GPU: not measured" in section
    assert "- process 0: time 1.19x plain, memory 1.10x plain (goal 1.3x: time met, memory " \
           "met)." in section
    assert "- process 1: time 2.38x plain" in section and "time NOT met" in section
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    bench.replace_markdown_section(readme, bench.FSDP_SECTION, section)
    text = readme.read_text()
    assert "## Other\n\nkept\n" in text and text.count(bench.FSDP_SECTION) == 1
