"""Smoke test of benchmarks/bench_montecarlo.py.

Throughput targets are not asserted (they depend on the machine and its load); what is asserted
is that the run completes, reports consistent ratios and memory, that every engine and backend
estimates the same exact MSE (so the comparisons are like for like), that a missing GPU is
written as "not measured: no GPU", and that the README sections are replaced without touching
other sections.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from scipy.stats import norm
from script_loader import load_script

pytestmark = pytest.mark.integration  # script: benchmarks/bench_montecarlo.py --quick

Z = 4.5  # two-sided 6.8e-6 per comparison; union over 3 engines + 12 CPU backend rows: 1.0e-4


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_montecarlo.py", "bench_montecarlo_script")


@pytest.fixture(scope="module")
def quick(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    results = bench.main(["--quick", "--readme", str(out / "README.md"),
                          "--json", str(out / "bench.json")])
    return out, results


def test_false_failure_rate_stated():
    assert (3 + 12) * 2 * norm.sf(Z) < 1.1e-4


def test_quick_reports_every_engine(bench, quick):
    out, (results, _) = quick
    assert [r.engine for r in results] == list(bench.ENGINES)
    data = json.loads((out / "bench.json").read_text())
    assert len(data["results"]) == 3
    base = next(r for r in results if r.engine == bench.BASELINE)
    assert base.ratio_to_baseline == pytest.approx(1.0)
    for r in results:
        assert math.isfinite(r.best_groups_per_s) and r.best_groups_per_s > 0
        assert r.median_groups_per_s <= r.best_groups_per_s
        assert math.isfinite(r.ratio_to_baseline) and r.ratio_to_baseline > 0
        assert r.block_peak_bytes > 0
    # the per-sample route materialises (block, G, K) scores; the engine does not
    engine = next(r for r in results if r.engine == "engine n_jobs=1")
    assert engine.block_peak_bytes < base.block_peak_bytes


def _agrees(results, exact):
    return all(abs(r.mse - exact) <= Z * r.std_error for r in results)


def test_engines_estimate_the_exact_mse(bench, quick):
    _, (results, _) = quick
    exact = float(bench.benchmark_bandit().exact_mse_per_prompt("grpo", bench.GROUP_SIZE)[0])
    assert _agrees(results, exact)
    # negative control: the exact MSE of another group size is rejected by the same check
    wrong = float(bench.benchmark_bandit().exact_mse_per_prompt("grpo", bench.GROUP_SIZE // 2)[0])
    assert not _agrees(results, wrong)


def test_backends_reported_and_estimate_the_exact_mse(bench, quick):
    out, (_, backends) = quick
    data = json.loads((out / "bench.json").read_text())
    assert len(data["backends"]) == len(backends)
    expected = [(e, g) for g in bench.BACKEND_SIZES for e in bench.CPU_BACKENDS]
    assert [(r.engine, r.group_size) for r in backends if r.engine != bench.CUDA_BACKEND] == expected
    for r in backends:
        assert math.isfinite(r.best_groups_per_s) and r.best_groups_per_s > 0
        assert r.median_groups_per_s <= r.best_groups_per_s
        assert r.exact_mse == pytest.approx(
            float(bench.benchmark_bandit().exact_mse_per_prompt("grpo", r.group_size)[0]))
        assert abs(r.mse - r.exact_mse) <= Z * r.std_error, (r.engine, r.group_size)
        if r.engine == bench.NUMBA_1:
            assert r.ratio_to_numba_1 == pytest.approx(1.0)
    # negative control: the exact MSE at half the group size is rejected by the same check
    for r in backends:
        half = float(bench.benchmark_bandit().exact_mse_per_prompt("grpo", r.group_size // 2)[0])
        assert abs(r.mse - half) > Z * r.std_error, (r.engine, r.group_size)


def test_backend_section_written(bench, quick):
    out, _ = quick
    text = (out / "README.md").read_text()
    assert text.count(f"## {bench.BACKEND_SECTION}") == 1
    assert text.index("## Monte Carlo engine") < text.index(f"## {bench.BACKEND_SECTION}")
    assert "load average (1, 5, 15 min)" in text
    for engine in bench.CPU_BACKENDS:
        assert f"| {engine} | 64 |" in text
    if not torch.cuda.is_available():
        assert text.count(f"| {bench.CUDA_BACKEND} |") == len(bench.BACKEND_SIZES)
        assert "G = 64: not measured: no GPU." in text


def test_readme_section_written(bench, quick):
    out, _ = quick
    text = (out / "README.md").read_text()
    assert text.startswith("# Benchmarks")
    assert text.count("## Monte Carlo engine") == 1
    assert "2-core" in text and "bench_montecarlo.py --quick" in text
    for engine in bench.ENGINES:
        assert f"| {engine} |" in text


def test_update_readme_keeps_other_sections(bench, tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# Benchmarks\n\nintro\n\n## Other\n\nkeep me\n\n## Monte Carlo engine\n\n"
                    "old figures\n\n## Later\n\nkeep me too\n")
    bench.update_readme(path, "## Monte Carlo engine\n\nnew figures\n")
    text = path.read_text()
    assert "old figures" not in text and "new figures" in text
    assert "keep me\n" in text and "keep me too" in text
    assert text.index("## Other") < text.index("new figures") < text.index("## Later")
    bench.update_readme(path, "## Monte Carlo engine\n\nnewer\n")
    assert path.read_text().count("## Monte Carlo engine") == 1


def test_backend_section_goes_after_the_engine_section(bench, tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# Benchmarks\n\n## Monte Carlo engine\n\nengine\n\n## Later\n\nlater\n")
    title = bench.BACKEND_SECTION
    bench.update_readme(path, f"## {title}\n\nfirst\n", title, after=bench.SECTION)
    text = path.read_text()
    assert text.index("engine\n") < text.index("first") < text.index("## Later")
    bench.update_readme(path, f"## {title}\n\nsecond\n", title, after=bench.SECTION)
    text = path.read_text()
    assert "first" not in text and text.count(f"## {title}") == 1
    assert "later" in text and "engine\n" in text


def test_backend_flags_exclude_each_other(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--no-backends", "--backends-only"])
