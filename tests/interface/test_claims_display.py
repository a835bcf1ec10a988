"""Readable verdict rows: the headline that decides a verdict, conditions shown in words."""

import io
import json

import pytest

from ustat_rl.claims import VerifyContext, run_claim
from ustat_rl.claims.registry import Check, Claim, check_exact, check_true
from ustat_rl.interface.claims_display import headline_check, is_condition, row_cells
from ustat_rl.interface.cli import _print_table

pytestmark = pytest.mark.fast


def _claim(checks):
    return Claim("C0", "a test claim", "test", "test", lambda ctx: checks)


def test_headline_is_the_check_that_decides_the_verdict():
    first = check_exact("identity", 0.0, 0.0)
    pattern = check_true("pattern reproduces", False, measured=0.5, required=False,
                         note="min ratio shown")
    result = run_claim(_claim([first, pattern]), VerifyContext())
    assert result.verdict == "differs" and result.headline == "pattern reproduces"
    assert result.measured == 0.5  # headline numbers are those of the deciding check
    failing = check_exact("broken identity", 0.0, 1.0)
    result = run_claim(_claim([first, pattern, failing]), VerifyContext())
    assert result.verdict == "fail" and result.headline == "broken identity"
    result = run_claim(_claim([first]), VerifyContext())
    assert result.verdict == "pass" and result.headline == "identity"


def test_condition_rows_say_holds_or_fails_and_name_the_value():
    flag = check_true("argmin stable across N and n: [16, 32]", False, measured=1.0,
                      note="measured: spread of log2 argmin")
    cells = row_cells(run_claim(_claim([flag]), VerifyContext()).to_dict())
    assert (cells.predicted, cells.measured, cells.interval) == ("holds", "fails", "-")
    assert cells.compared == "argmin stable across N and n: [16, 32] (value 1: spread of log2 argmin)"


def test_comparison_rows_keep_their_numbers():
    check = Check("slope of MSE_oracle", -1.0, -0.98, -1.02, -0.94, True, "monte-carlo")
    assert not is_condition(json.loads(json.dumps(run_claim(_claim([check]),
                                                            VerifyContext()).to_dict()))["checks"][0])
    cells = row_cells(run_claim(_claim([check]), VerifyContext()).to_dict())
    assert (cells.predicted, cells.measured, cells.interval) == ("-1", "-0.98", "[-1.02, -0.94]")
    assert cells.compared == "slope of MSE_oracle"


def test_files_without_a_headline_field_still_read():
    old = {"claim_id": "C11", "verdict": "differs",
           "checks": [{"name": "ordering", "predicted": 1.0, "measured": None, "ci_low": None,
                       "ci_high": None, "passed": True},
                      {"name": "vanilla falls", "predicted": 1.0, "measured": None,
                       "ci_low": None, "ci_high": None, "passed": False, "required": False}]}
    assert headline_check(old)["name"] == "vanilla falls"
    assert row_cells(old).measured == "fails"
    assert row_cells({"claim_id": "C1", "verdict": "error", "checks": []}).compared.startswith(
        "no comparison")


def test_table_prints_what_was_compared_and_details_mark_the_headline():
    flag = check_true("bound holds at every n", True, measured=0.44, note="max ratio shown")
    other = check_exact("identity", 0.0, 0.0)
    result = run_claim(_claim([flag, other]), VerifyContext())
    out = io.StringIO()
    _print_table([result], details=False, stream=out)
    lines = out.getvalue().splitlines()
    assert "holds" in lines[2] and " 1 " not in lines[2]
    assert lines[3].strip() == "compared: bound holds at every n (value 0.44: max ratio shown)"
    out = io.StringIO()
    _print_table([result], details=True, stream=out)
    assert "*ok  bound holds at every n" in out.getvalue()
    assert "    ok  identity" in out.getvalue()
