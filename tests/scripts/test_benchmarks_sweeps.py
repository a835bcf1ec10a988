"""Smoke test of benchmarks/bench_sweeps.py in quick mode (its figures are not asserted).

The cell counts are checked against the full configurations counted by hand: optimal_group_size
has 2 variants x 7 divisors G of each N in {128, 256, 512} = 42 cells; transformer_group_size
has 3 budgets x 7 divisors x 5 seeds = 105; gradient_mse has 2 families x 3 policies = 6.
"""

from __future__ import annotations

import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # script: benchmarks/bench_sweeps.py


def test_quick_benchmark_counts_the_full_cells_and_writes_its_section(tmp_path):
    bench = load_script("benchmarks/bench_sweeps.py", "bench_sweeps_script")
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    costs = bench.main(["--quick", "--scripts", "gradient_mse", "optimal_group_size",
                        "transformer_group_size", "--readme", str(readme)])
    assert {c.script: c.n_cells for c in costs} == {
        "gradient_mse": 6, "optimal_group_size": 42, "transformer_group_size": 105}
    assert all(len(c.cell_seconds) == c.n_cells and c.longest > 0 for c in costs)
    text = readme.read_text()
    assert "## Another section\n\nkept" in text and bench.SECTION in text
    assert "projection, not a measurement" in text and "`uptime` at the start" in text
    bench.main(["--quick", "--scripts", "limit_law", "--readme", str(readme)])
    assert readme.read_text().count(bench.SECTION) == 1  # the section is replaced, not repeated
