"""Smoke test of simulations/pilot_coverage.py --quick (the coverage table of docs/theory.md C32).

The statistical evidence is in tests/pilot/test_uncertainty.py and tests/pilot/test_advice.py;
this checks that the script's quick mode runs, writes both tidy CSVs with one row per cell, and
that its counts are consistent (no count above the number of pilots, the delta-method interval
for G* is computed from the same pilots).
"""

from __future__ import annotations

import pandas as pd
import pytest
from script_loader import load_script

pytestmark = pytest.mark.integration  # script: simulations/pilot_coverage.py --quick


def test_quick_mode_writes_both_tables(tmp_path, capsys):
    script = load_script("simulations/pilot_coverage.py")
    result = script.main(["--quick", "--pilots", "6", "--out", str(tmp_path)])
    coverage = pd.read_csv(tmp_path / "pilot_coverage.csv")
    advice = pd.read_csv(tmp_path / "pilot_advice.csv")
    assert len(coverage) == len(script.SIZES) * len(script.SKETCHES)
    assert list(advice["budget"]) == list(script.BUDGETS)
    counts = coverage[["c1", "c2", "c3", "gstar_fieller", "gstar_delta", *script.BOOT,
                       "unbounded"]]
    assert (counts.le(coverage["pilots"], axis=0)).all().all() and (counts >= 0).all().all()
    assert (advice["advice_within_10pct"] <= advice["pilots"]).all()
    assert result["coverage"].equals(coverage)
    text = capsys.readouterr().out
    assert "| prompts | samples | scores |" in text and "advice at notebook 05" in text
