"""The calibration harness (benchmarks/calibration.py) on a fast subset of claims and seeds.

The subset is exact and fast Monte Carlo claims over three seeds: none may fail, the rerun must
find every cell already done (resumable), and the binomial arithmetic of the summary is checked
on a table with a known number of failures (negative control: a check that fails 3 times in 20
at a stated rate of 6.3e-5 is flagged with a tail probability below 1e-8).
"""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom
from script_loader import load_script

pytestmark = pytest.mark.fast

calibration = load_script("benchmarks/calibration.py", "calibration_script")

SUBSET = ["C1.loo", "C3", "C14"]


def test_fast_subset_over_three_seeds_has_no_failures_and_resumes(tmp_path, monkeypatch):
    table = calibration.run(SUBSET, [0, 1, 2], tmp_path, progress=False)
    assert set(table["claim"]) == set(SUBSET) and set(table["seed"]) == {0, 1, 2}
    sub, claims = calibration.summarise(table)
    assert claims["failures"].sum() == 0, sub[sub["failures"] > 0]
    ran = []
    monkeypatch.setattr(calibration, "calibration_cell", lambda *a: ran.append(a) or [])
    again = calibration.run(SUBSET, [0, 1, 2], tmp_path, progress=False)
    assert ran == [] and len(again) == len(table)


def _table(failures, seeds=20, rate=6.3e-5):
    rows = [dict(claim="CX", seed=s, index=0, check="x", passed=s >= failures, required=True,
                 evidence="monte-carlo", stated_rate=rate,
                 verdict="fail" if s < failures else "pass", seconds=0.1, fingerprint="f")
            for s in range(seeds)]
    return pd.DataFrame(rows, columns=calibration.COLUMNS)


def test_binomial_arithmetic_flags_a_miscalibrated_check():
    sub, claims = calibration.summarise(_table(3))
    row = sub.iloc[0]
    assert row["failures"] == 3 and np.isclose(row["expected"], 20 * 6.3e-5)
    assert np.isclose(row["p_tail"], binom.sf(2, 20, 6.3e-5)) and row["p_tail"] < 1e-8
    assert claims.iloc[0]["upper95"] > 3 / 20
    calm, _ = calibration.summarise(_table(0))
    assert calm.iloc[0]["p_tail"] == 1.0
    fw = calibration.family_wise(_table(3), claims)
    assert fw["runs"] == 20 and fw["failed_runs"] == 3


def test_stated_rate_is_read_from_the_note():
    assert calibration.stated_rate("... two-sided false-failure rate 6.3e-05).", "monte-carlo") \
        == 6.3e-5
    assert calibration.stated_rate("", "exact-numeric") == 0.0
    assert np.isnan(calibration.stated_rate("no rate here", "monte-carlo"))
