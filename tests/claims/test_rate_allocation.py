"""The false-failure budget of ``ustat-rl verify`` (ustat_rl/tolerances.py, docs/calibration.md).

Claims whose comparisons at ``Z_CHECK`` would state more than ``CLAIM_BUDGET`` compare at
``Z_STRICT`` with ``strict_reps`` replicates. Checked here: the arithmetic (the half-width
``z se`` a comparison detects does not grow, the stated rates are the normal tails), that the
fast changed claims pass and state at most their share, and negative controls: each changed
comparison still rejects a planted error of the size it rejected before (a Monte Carlo
statistic 3% too large, a law with its weights 8% too large).
"""

import math

import numpy as np
import pytest
from scipy.stats import norm
from script_loader import load_script

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.stats.nonnegative import SquaredErrorMoments
from ustat_rl.tolerances import (
    CLAIM_BUDGET,
    FALSE_FAILURE_STRICT_ONE_SIDED,
    FALSE_FAILURE_STRICT_TWO_SIDED,
    RUN_BUDGET,
    Z_CHECK,
    Z_STRICT,
    strict_reps,
)
from ustat_rl.weighted_chi2 import WeightedChiSquare

pytestmark = pytest.mark.integration  # whole claims: each one's stated false-failure share, and statistics planted 3% too large

calibration = load_script("benchmarks/calibration.py", "calibration_script_rates")
CTX = VerifyContext(seed=123, quick=True)


def test_strict_threshold_keeps_the_detectable_deviation():
    assert math.isclose(FALSE_FAILURE_STRICT_TWO_SIDED, 2 * norm.sf(Z_STRICT), rel_tol=0.01)
    assert math.isclose(FALSE_FAILURE_STRICT_ONE_SIDED, norm.sf(Z_STRICT), rel_tol=0.01)
    assert FALSE_FAILURE_STRICT_TWO_SIDED < (2 * norm.sf(Z_CHECK)) / 9
    assert CLAIM_BUDGET < RUN_BUDGET
    for n in (1, 30, 300, 4000, 20_000, 300_000):
        m = strict_reps(n)
        # half-width at the strict threshold, in units of the per-replicate sd, is not wider
        assert Z_STRICT / math.sqrt(m) <= Z_CHECK / math.sqrt(n)
        assert m < 1.27 * n + 1  # and costs no more than needed
    assert strict_reps(30_000) == 37_969


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_strict_reps_rejects_bad_input(bad):
    with pytest.raises((ValueError, TypeError), match=r"`n`|not supported|'<'"):
        strict_reps(bad)


def test_strict_reps_error_names_the_parameter():
    with pytest.raises(ValueError, match=r"^`n` must be an integer >= 1, got 0$"):
        strict_reps(0)


def test_heavy_tailed_note_states_its_two_sided_rate_once():
    from ustat_rl.claims.paper_ustatistic.mse import _heavy_tailed_check

    strata = [SquaredErrorMoments(1.0, 3.0)] * 3
    check = _heavy_tailed_check("x", 1.0, 1.0, 0.1, strata, 38)
    assert check.passed
    assert calibration.stated_rate(check.note, check.evidence) == pytest.approx(6.8e-6)
    # negative control: a prediction far above the measured mean is rejected by Maurer's side
    assert not _heavy_tailed_check("x", 3.0, 1.0, 0.1, strata, 38).passed
    assert not _heavy_tailed_check("x", 0.5, 1.0, 0.1, strata, 38).passed  # the normal side


@pytest.mark.parametrize("claim_id", ["C6", "C6.torch", "C11", "C17", "C20.dist"])
def test_changed_claims_pass_within_their_share(claim_id):
    result = run_claim(registry()[claim_id], CTX)
    required = [c for c in result.checks if c.required and not c.refutes]
    assert all(c.passed for c in required), [c.name for c in required if not c.passed]
    rates = np.array([calibration.stated_rate(c.note, c.evidence) for c in required])
    # power checks state no rate (NaN): they are counted apart, as in the calibration tables
    assert 0 < np.nansum(rates) <= CLAIM_BUDGET, np.nansum(rates)


def _inflate(func, factor=1.03):
    def planted(*args, **kwargs):
        stat, labels = func(*args, **kwargs)
        return (lambda rng, n: factor * stat(rng, n)), labels

    return planted


@pytest.mark.parametrize("claim_id", ["C5", "C6", "C11"])
def test_a_statistic_three_percent_too_large_fails_the_claim(claim_id, monkeypatch):
    from ustat_rl.claims import _common

    monkeypatch.setattr(_common, "bandit_statistics", _inflate(_common.bandit_statistics))
    result = run_claim(registry()[claim_id], CTX)
    assert result.verdict == "fail", result.error
    failed = [c for c in result.checks if c.required and not c.passed]
    assert any(c.evidence == "monte-carlo" and "<= 4.5 se" in c.note for c in failed)


def test_c17_rejects_a_statistic_three_percent_too_large(monkeypatch):
    from ustat_rl.claims import paper_group_size

    monkeypatch.setattr(paper_group_size, "bandit_squared_errors",
                        _inflate(paper_group_size.bandit_squared_errors))
    result = run_claim(registry()["C17"], CTX)
    assert result.verdict == "fail"
    assert any("MC MSE == exact" in c.name for c in result.checks if not c.passed)


def test_c20_dist_sample_checks_reject_weights_eight_percent_too_large():
    from ustat_rl.claims.paper_limit_law import P_MIN, PANELS_QUICK, sample_checks

    assert P_MIN == 1e-5
    weights = PANELS_QUICK[0]
    n = strict_reps(4000)
    right = sample_checks(weights, WeightedChiSquare(weights), n, np.random.default_rng(7))
    assert all(c.passed for c in right)
    # weights 8% too large: each of KS, CvM, AD rejects at 1e-5 with 5063 draws (at the former
    # 1e-4 with 4000 draws, on the same seed, KS did not)
    wrong = sample_checks(weights, WeightedChiSquare(1.08 * weights), n,
                          np.random.default_rng(7))
    assert not any(c.passed for c in wrong[:3])
    assert not wrong[3].passed  # and so does the mean
