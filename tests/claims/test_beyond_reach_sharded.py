"""C62 (ustat_rl.claims.beyond_reach.sharded): two gloo processes sketching a model sharded by
FSDP2. The claim passes on the code as it is; a bug planted in the sharded route (the processes'
rows gathered out of rank order) turns its verdict to "fail"; and where torch.distributed cannot start, its verdict is "skipped" with the
reason, never "pass". The claim spawns its processes; the planted-bug tests fork them instead
(this test process holds no other thread), so that a bug planted here is theirs too."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ustat_rl.claims import VerifyContext, registry, run_claim  # noqa: E402
from ustat_rl.claims.beyond_reach import sharded  # noqa: E402
from ustat_rl.frameworks import gather  # noqa: E402

pytestmark = [pytest.mark.integration,  # whole claim C62: two gloo processes per run
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="the planted bugs reach the processes by fork (Linux)")]

CTX = VerifyContext(seed=5, quick=True)


def _result():
    return run_claim(registry()["C62"], CTX)


def test_the_claim_passes():
    result = _result()
    if result.verdict == "skipped":
        pytest.skip(result.error)
    assert result.verdict == "pass", result.error or result.headline


def test_rows_gathered_out_of_rank_order_fail(monkeypatch):
    original = gather.gather_rows

    def reversed_ranks(rows, group=None):
        out = original(rows, group)
        half = out.shape[0] // 2
        return np.concatenate([out[half:], out[:half]])

    monkeypatch.setattr(sharded, "START_METHOD", "fork")
    monkeypatch.setattr(gather, "gather_rows", reversed_ranks)
    result = _result()
    assert result.verdict == "fail" and "gathered" in result.headline


def test_no_gloo_is_skipped_with_the_reason(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(sharded, "START_METHOD", "fork")
    monkeypatch.setattr(dist, "is_gloo_available", lambda: False)
    result = _result()
    assert result.verdict == "skipped"
    assert "cannot start" in result.error and "gloo" in result.error
