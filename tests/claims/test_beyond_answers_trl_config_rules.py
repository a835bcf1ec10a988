"""C84 (ustat_rl.claims.beyond_answers.trl_config_rules): a TRL run's configuration read as the
rule it trains. The claim passes on the code as it is; a planted wrong reading of each kind turns
it, and without ``transformers`` it is skipped, not passed."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("transformers")

import ustat_rl.frameworks.trl_monitor as trl_monitor  # noqa: E402
from ustat_rl.claims import VerifyContext, registry, run_claim  # noqa: E402

pytestmark = pytest.mark.fast


def result():
    return run_claim(registry()["C84"], VerifyContext())


def failed() -> list[str]:
    return [c.name for c in result().checks if not c.passed]


def test_the_claim_passes():
    assert failed() == []


def test_batch_read_as_group_fails(monkeypatch):
    monkeypatch.setitem(trl_monitor._SCALE_RULES, "batch", "trl_group")
    names = failed()
    assert names and all("batch" in n for n in names)


def test_true_read_as_no_scaling_fails(monkeypatch):
    monkeypatch.setitem(trl_monitor._SCALE_RULES, True, "trl_none")
    names = failed()
    assert names and all("=True" in n for n in names)


def test_several_functions_read_as_one_fails(monkeypatch):
    real = trl_monitor.run_rule
    monkeypatch.setattr(trl_monitor, "run_rule", lambda args, n_functions=1: real(args, 1))
    assert result().verdict in ("fail", "error")


def test_without_transformers_the_claim_is_skipped(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert result().verdict == "skipped"
