"""C50, the robust advice's stated excess, with the planted bugs it catches (docs/theory.md C50).

The claim passes on the code as it is and fails with each bug planted by monkeypatch (nothing is
changed on disk): the worst case over ``rho`` replaced by the best case (the issue's bug), the
``rho`` grid without its upper end, and ``rho`` capped at 4 (the advice before C50, which took
the smallest size being best beyond ``rho = 1/2`` for the others' excess staying put).
"""

import math

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, beyond_advice, registry, run_claim
from ustat_rl.theory import group_size as owner

pytestmark = pytest.mark.integration  # whole claim C50 with planted bugs


def _run(seed=0):
    return run_claim(registry()["C50"], VerifyContext(seed=seed, quick=True))


def _failing(result):
    assert not result.error, result.error
    return [c.name for c in result.checks if c.required and not c.passed]


def test_advice_claim_passes_on_the_code_as_it_is():
    result = _run()
    assert result.verdict == "pass", (_failing(result), result.error)


def best_case_group_size(sizes, rho_low, rho_high, kappa):
    """The planted bug: the advice minimising its best-case regret (min over rho, not max)."""
    G = np.asarray(sizes, dtype=np.float64)  # (n_G,)
    lo = max(rho_low, 0.0)
    hi = min(max(rho_high, lo), 1e3)
    grid = np.unique(np.r_[lo, hi, np.geomspace(max(lo, 1e-8), max(hi, 1e-8), 256)])
    f = grid[:, None] * G[None, :] + kappa + 1.0 / (G[None, :] - 1.0)  # (n_rho, n_G)
    regret = (f / f.min(axis=1, keepdims=True)).min(axis=0)  # (n_G,) the bug: min over rho
    best = int(np.argmin(regret))
    return int(G[best]), float(regret[best] - 1.0)


def test_advice_claim_catches_the_best_case_regret(monkeypatch):
    """The issue's planted bug: a best-case regret for a worst-case one."""
    monkeypatch.setattr(owner, "robust_group_size", best_case_group_size)
    failing = _failing(_run())
    assert "the advised size's worst excess over the interval, by brute force, is the stated " \
           "one" in failing
    assert "no admissible size has a smaller worst excess than the advised one" in failing
    assert "at level 0.9: the exact excess exceeds the stated one in at most 1 - level of the " \
           "pilots" in failing


def test_advice_claim_catches_a_grid_without_its_upper_end(monkeypatch):
    original = owner._rho_grid
    monkeypatch.setattr(owner, "_rho_grid",
                        lambda low, high: (lambda g: g[:-1] if g.size > 1 else g)(
                            original(low, high)))
    assert "the advised size's worst excess over the interval, by brute force, is the stated " \
           "one" in _failing(_run())


def test_advice_claim_catches_rho_capped_at_four(monkeypatch):
    original = owner.robust_group_size
    monkeypatch.setattr(owner, "robust_group_size",
                        lambda sizes, low, high, kappa: original(sizes, min(low, 4.0),
                                                                 min(high, 4.0), kappa))
    assert "the advised size's worst excess over the interval, by brute force, is the stated " \
           "one" in _failing(_run())


def test_brute_force_takes_the_exact_excess_at_every_grid_point():
    """The claim's own route on a case worked by hand: sizes 2 and 4, kappa = 0, rho = 1/3
    (their MSEs tie at rho = 1/((2 - 1)(4 - 1)))."""
    from ustat_rl.theory import ScalingConstants

    c = ScalingConstants(1.0, 0.0, 1.0)
    # rho = 1: f(2) = 3, f(4) = 4 + 1/3, so size 4's excess is 4/9 and size 2's none
    worst = beyond_advice.brute_force_excess(c, [2, 4], 8, 1.0, 1.0)
    assert worst == pytest.approx([0.0, 4.0 / 9.0], abs=1e-15)
    # over [1/3, inf) size 4's excess grows to the limit 4/2 - 1 = 1
    worst = beyond_advice.brute_force_excess(c, [2, 4], 8, 1.0 / 3.0, math.inf)
    assert worst == pytest.approx([0.0, 1.0], abs=1e-9)
