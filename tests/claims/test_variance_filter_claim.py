"""C55.variance (ustat_rl.claims.beyond_frameworks.variance_filter): the claim passes on the code
as it is and fails on each planted bug: the population variance where the sample variance is
asked, and the top_p prefix cut one group late.
"""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.theory.variance_filter as vf_module
from ustat_rl.claims import VerifyContext, registry, run_claim

pytestmark = pytest.mark.integration  # the whole claim, three times (about 20 s each)

CTX = VerifyContext(seed=0, quick=True)


def _failed(result) -> list:
    return [c.name for c in result.checks if not c.passed]


def test_c55_variance_passes():
    result = run_claim(registry()["C55.variance"], CTX)
    assert result.verdict == "pass", _failed(result)


def test_c55_variance_fails_with_the_population_variance(monkeypatch):
    real = vf_module.group_variances
    monkeypatch.setattr(vf_module, "group_variances", lambda r, g, ddof=1: real(r, g, 0))
    result = run_claim(registry()["C55.variance"], CTX)
    assert result.verdict == "fail"
    assert any("literally" in name for name in _failed(result))


def test_c55_variance_fails_with_the_prefix_one_group_late(monkeypatch):
    real = vf_module._prefix_length
    monkeypatch.setattr(vf_module, "_prefix_length",
                        lambda mass, p: np.minimum(real(mass, p) + 1, mass.shape[-1]))
    result = run_claim(registry()["C55.variance"], CTX)
    assert result.verdict == "fail"
    assert any("literally" in name for name in _failed(result))
