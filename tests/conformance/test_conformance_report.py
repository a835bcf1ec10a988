"""The conformance kit's result types (ustat_rl/conformance/report.py, re-exported by kit.py): frozen records, a
report without a failure by default, and the summary's first line in words."""

import dataclasses

import numpy as np
import pytest

from ustat_rl.conformance.kit import ConformanceFailure, ConformanceReport

pytestmark = pytest.mark.fast


def _report(passed, failure=None):
    return ConformanceReport("trl_group", "plain", passed, 12, 0.25, "4 ulp", failure)


def test_summary_first_line_says_whether_it_conforms():
    assert _report(True).summary().splitlines()[0] == (
        "CONFORMS to 'trl_group' (plain signature): 12 batches in 0.2 s.")
    failure = ConformanceFailure(np.array([1.0, 0.0]), np.array([0, 0]), np.array([0.7, -0.7]),
                                 None, 0, "raised ValueError")
    text = _report(False, failure).summary()
    assert text.splitlines()[0].startswith("DOES NOT CONFORM to 'trl_group' (plain signature)")
    assert "smallest failing batch: raised ValueError" in text


def test_a_report_has_no_failure_by_default_and_both_records_are_frozen():
    report = ConformanceReport("trl_group", "plain", True, 1, 0.0, "4 ulp")
    assert report.failure is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.passed = False
    failure = ConformanceFailure(np.zeros(1), np.zeros(1), np.zeros(1), None, -1, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        failure.index = 0


def test_summary_second_line_states_the_tolerance():
    assert _report(True).summary().splitlines()[1] == "tolerance: 4 ulp"
