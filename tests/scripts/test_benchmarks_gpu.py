"""Smoke test of benchmarks/bench_gpu.py.

Without CUDA the script must say that nothing was measured and exit 0. Its ``--dry-run-cpu``
mode runs every part on the CPU with small sizes, so the script's own checks (66 comparisons at
4.5 se, 4.5e-4 false failures in all, and a negative control that must be rejected) are
exercised here even without a GPU; its throughput figures are not asserted.
"""

from __future__ import annotations

import json

import pytest
import torch
from script_loader import load_script

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/bench_gpu.py", "bench_gpu_script")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_without_cuda_nothing_is_measured(bench, capsys):
    assert bench.main([]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [bench.NO_CUDA, bench.NO_CUDA_SKETCH]


def test_dry_run_on_cpu_passes_its_checks(bench, tmp_path, capsys):
    assert bench.main(["--dry-run-cpu", "--json", str(tmp_path / "gpu.json")]) == 0
    out = capsys.readouterr().out
    assert "66 comparisons, 0 failed checks" in out
    assert "negative control" in out and "FAIL" not in out
    data = json.loads((tmp_path / "gpu.json").read_text())
    assert data["device"] == "cpu" and data["failed"] == []
    assert {r["group_size"] for r in data["throughput"]} == set(bench.THROUGHPUT_SIZES)
    assert [r["route"] for r in data["sketch"]["rows"]] == ["plain"] + ["factored"] * 3 + ["jvp"]
