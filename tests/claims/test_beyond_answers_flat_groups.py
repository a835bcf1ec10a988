"""C66 (ustat_rl.claims.beyond_answers.flat_groups): the claim passes on the code as it is, and
bugs planted in the flat-group report turn its verdict to "fail": the plug-in estimate in place
of the U-statistic, and the trainer's two marks read the wrong way round."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers.flat_groups import exact_flat_share
from ustat_rl.frameworks import flat_groups as module
from ustat_rl.pilot.report import all_equal_probability

pytestmark = pytest.mark.fast

CTX = VerifyContext(seed=6, quick=True)


def _result():
    return run_claim(registry()["C66"], CTX)


def test_the_claim_passes():
    result = _result()
    assert result.verdict == "pass", result.error or result.headline


def test_plug_in_estimate_fails(monkeypatch):
    def plug_in(successes, group_size, sizes):
        p = np.asarray(successes, float) / np.asarray(group_size, float)
        out = np.column_stack([all_equal_probability(p, int(g)) for g in sizes])
        return out, np.ones(out.shape, dtype=bool)

    monkeypatch.setattr(module, "all_equal_by_prompt", plug_in)
    assert _result().verdict == "fail"


def test_marks_swapped_fail(monkeypatch):
    original = module.flat_group_reasons
    monkeypatch.setattr(module, "flat_group_reasons",
                        lambda r, i, n, truncated=None, errored=None: original(
                            r, i, n, truncated=errored, errored=truncated))
    result = _result()
    assert result.verdict == "fail" and "planted" in result.headline


def test_exact_share_on_known_values():
    assert exact_flat_share([1])[0] == pytest.approx(1.0)
    assert exact_flat_share([2])[0] == pytest.approx(
        np.mean([p * p + (1 - p) ** 2 for p in (0.05, 0.3, 0.6, 0.95)]))
