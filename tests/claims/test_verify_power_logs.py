"""C56 in ``verify`` (ustat_rl.claims.beyond_frameworks.logs): a planted boundary bug of the group
sizes the logs admit turns the whole claim (its other checks: tests/claims/test_group_filters_claims.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim

pytestmark = pytest.mark.integration  # whole claim C56 with a planted bug (about 4 s)


def test_c56_fails_when_the_admitted_sizes_stop_short_of_the_batch(monkeypatch):
    """A planted boundary bug: the range of sizes stops one short of the whole batch."""
    import ustat_rl.frameworks.logs as logs

    def short(history):
        n, k = logs.batch_counts(history)
        read = np.flatnonzero(n)
        largest = int(n[read].min()) if read.size else 0
        return [G for G in range(2, largest)
                if all(logs._entry_problem(int(n[i]), int(k[i]), float(history.all_equal[i]), G)
                       is None for i in read)]

    monkeypatch.setattr(logs, "consistent_group_sizes", short)
    result = run_claim(registry()["C56"], VerifyContext())
    assert result.verdict == "fail"
    assert result.headline.startswith("logs of one group of 6")
