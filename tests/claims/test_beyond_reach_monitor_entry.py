"""C61 (ustat_rl.claims.beyond_reach.monitor_entry): the claim passes on the code as it is, and
bugs planted in the monitor's entry turn its verdict to "fail": the loop's loss weights dropped,
applied in reverse row order, and a window that keeps one batch more than its pool."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from ustat_rl.claims import VerifyContext, registry, run_claim  # noqa: E402
from ustat_rl.frameworks import entry  # noqa: E402

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=2, quick=True)


def _result():
    return run_claim(registry()["C61"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


@pytest.mark.parametrize("bug", [lambda w: np.ones_like(w), lambda w: w[::-1].copy()],
                         ids=["weights dropped", "weights reversed"])
def test_loss_weights_handled_wrong_fail(monkeypatch, bug):
    original = entry._column
    monkeypatch.setattr(entry, "_column", lambda value, name, rows: bug(
        original(value, name, rows)))
    result = _result()
    assert result.verdict == "fail", result.headline


def test_a_pool_one_batch_too_large_fails(monkeypatch):
    """The third window must drop its oldest batch; a window of every batch the monitor has seen
    (the slice to ``pool`` forgotten) keeps it."""
    seen = []
    original = entry.window_record

    def every_batch(batches, meta, budget, config):
        seen.append(batches[-1])
        return original(seen[-config.schedule.pool - 1:], meta, budget, config)

    monkeypatch.setattr(entry, "window_record", every_batch)
    result = _result()
    assert result.verdict == "fail", result.headline
