"""The theory-contract refactoring changed no result: verify before and after agree.

``data/verify_quick_seed0_before_contract.json`` is ``ustat-rl verify --quick --seed 0 --json``
from the commit before the moments contract (d64fd06). The fast claims are rerun here and
compared with :func:`ustat_rl.interface.claims_compare.compare_runs`: the same verdicts and sub-check
outcomes, every prediction equal to 1e-12 relative. A deliberate change of a check's name,
prediction, outcome or verdict must update the reference (rerun the command above at the new
commit) and say why in the commit message.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ustat_rl.interface.claims_compare import compare_runs, load_run

pytestmark = pytest.mark.integration  # whole claims: verify --quick in a subprocess against a stored reference run (verdicts and predictions to 1e-12)

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "verify_quick_seed0_before_contract.json"
#: C18 is left out since its decision rule changed on purpose after the reference was taken (a
#: common G inside every cell's simultaneous bootstrap interval instead of identical point
#: argmins); the new rule has its own tests in test_limit_law.py. C28 is left out for the same
#: reason: its normality test now compares with the Edgeworth-corrected finite-G law (the plain
#: normal at G = 256 failed at 5.8e-3 against a stated 1e-4), tested in test_ustatistics.py.
#: C17 is left out since the run's false-failure budget gave it 1.27x the Monte Carlo replicates
#: at 4.5 standard errors (docs/calibration.md, "Rate allocation"), which changes the names of
#: its sub-checks (they state the measured margin in standard errors); tested in
#: test_rate_allocation.py.
FAST_CLAIMS = ("C1", "C2", "C6", "C7", "C8", "C9", "C10", "C11", "C12", "C12.num", "C13",
               "C13.num", "C14", "C16", "C16.num", "C17.train", "C21", "C21.num",
               "C22", "C23", "C26", "C30")


@pytest.fixture(scope="module")
def rerun(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "after.json"
    subprocess.run([sys.executable, "-m", "ustat_rl.interface.cli", "verify", "--quick", "--seed", "0",
                    "--only", ",".join(FAST_CLAIMS), "--json", str(out)],
                   check=False, capture_output=True, text=True, timeout=600)
    return load_run(out)


def test_fast_claims_unchanged_since_the_reference(rerun):
    result = compare_runs(load_run(REFERENCE), rerun, rtol=1e-12, claims=FAST_CLAIMS)
    assert result.ok, "\n".join(result.mismatches)
    assert result.n_values > 100  # sub-checks were really compared


def test_a_changed_prediction_or_verdict_is_flagged():
    before = load_run(REFERENCE)
    after = copy.deepcopy(before)
    check = next(c for r in after["results"] if r["claim_id"] == "C5" for c in r["checks"])
    check["predicted"] = float(check["predicted"]) * (1 + 1e-9)
    next(r for r in after["results"] if r["claim_id"] == "C8")["verdict"] = "fail"
    result = compare_runs(before, after)
    assert not result.ok
    assert any(line.startswith("C5: predicted") for line in result.mismatches)
    assert any(line.startswith("C8: verdict") for line in result.mismatches)
    assert compare_runs(before, copy.deepcopy(before)).ok


def test_a_missing_claim_and_a_bad_file_are_reported(tmp_path):
    before = load_run(REFERENCE)
    after = dict(before, results=before["results"][1:])
    assert any("only in before" in line for line in compare_runs(before, after).mismatches)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"no": "results"}))
    with pytest.raises(ValueError, match="not a `ustat-rl verify --json` file"):
        load_run(bad)


def test_rounding_noise_is_equal_and_a_small_real_change_is_not():
    from ustat_rl.interface.claims_compare import ROUNDING_FLOOR, _same

    assert _same(3.469446951953614e-18, 6.938893903907228e-18, 1e-12)  # two runs' rounding
    assert _same(0.0, ROUNDING_FLOOR, 1e-12)
    assert not _same(1e-14, 2e-14, 1e-12)  # above the floor: compared relatively
    assert not _same(1.0, 1.0 + 1e-9, 1e-12)
