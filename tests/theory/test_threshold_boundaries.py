"""Threshold rules at their boundary: each case puts the two compared values exactly equal, so a
comparison whose strictness is flipped (``>`` for ``>=``, ``<`` for ``<=``) changes the answer
and fails here. Each case pins the documented side of the boundary and checks one step either
side of it, so a test passes only with the strictness the docstring states."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ustat_rl.frameworks.logs import BINARY_RTOL, LogHistory, check_binary
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory.group_size import gstar_or_nan, law_at_gstar

pytestmark = pytest.mark.fast


def test_gstar_is_undefined_at_c1_zero_with_c3_zero():
    # c3' = 0 with c1 <= 0: no G* (documented); c1 just above 0: G* = 1 + sqrt(0/c1) = 1
    assert math.isnan(gstar_or_nan(0.0, 0.0))
    assert gstar_or_nan(5e-324, 0.0) == 1.0
    assert math.isnan(gstar_or_nan(-5e-324, 0.0))


def test_the_law_at_gstar_is_undefined_where_gstar_is_exactly_one():
    # c3' = 0, c1 > 0 gives G* = 1, not above 1: GRPO needs G >= 2, the law's least value is nan
    assert gstar_or_nan(0.3, 0.0) == 1.0
    assert math.isnan(law_at_gstar(0.3, 0.5, 0.0, 8))
    # just above 1 the law is finite: G* = 1 + sqrt(c3'/c1)
    assert math.isfinite(law_at_gstar(0.3, 0.5, 1e-12, 8))


def _history(reward: float, reward_std: float) -> LogHistory:
    one = np.ones(1)
    return LogHistory(source="planted", step=np.array([1]), reward=reward * one,
                      reward_std=reward_std * one, all_equal=np.zeros(1),
                      grad_norm=np.full(1, np.nan), reward_functions=("r",), logging_steps=1)


def test_check_binary_accepts_a_std_exactly_at_its_lower_tolerance(monkeypatch):
    # the lower side refuses s^2/(r(1 - r)) < 1 - tol. With r = 1/2, s = 1/4 the ratio is 1/4
    # exactly; a planted tolerance of 3/4 puts 1 - tol on it (all four numbers are exact in
    # binary): on the boundary the entry passes, one ulp of s lower it is refused
    import ustat_rl.frameworks.logs as logs

    monkeypatch.setattr(logs, "BINARY_RTOL", 0.75)
    r, s, G = 0.5, 0.25, 8
    assert s**2 / (r * (1 - r)) == 1.0 - logs.BINARY_RTOL
    check_binary(_history(r, s), G)  # on the boundary: accepted
    with pytest.raises(ValueError, match="below what 0/1 rewards give"):
        check_binary(_history(r, np.nextafter(s, 0.0)), G)
    # and at the shipped tolerance, a ratio well inside [1 - tol, G/(G - 1)] passes
    monkeypatch.setattr(logs, "BINARY_RTOL", BINARY_RTOL)
    check_binary(_history(r, 0.5), G)


class _Uniforms(np.random.Generator):
    """A Generator whose ``random`` returns a planted array (the bandit's sampler draws its
    actions, then its rewards, from ``random``)."""

    def __init__(self, *draws):
        super().__init__(np.random.PCG64(0))
        self._draws = list(draws)

    def random(self, size=None, dtype=np.float64, out=None):
        return np.broadcast_to(np.asarray(self._draws.pop(0), float), size).copy()


def test_a_reward_probability_equal_to_the_uniform_draw_is_a_failure():
    # success is u < p: a uniform equal to p (here p = 0.25, u = 0.25) is a failure, one ulp
    # below p a success; with p = 0 no draw, even u = 0, succeeds
    bandit = SoftmaxBandit(np.zeros((1, 2)), np.array([[0.25, 0.0]]))
    at = bandit.sample_groups(3, 1, _Uniforms(0.0, 0.25), prompt=np.zeros(1, int))
    assert (at.action == 0).all() and (at.reward == 0.0).all()
    below = bandit.sample_groups(3, 1, _Uniforms(0.0, np.nextafter(0.25, 0.0)),
                                 prompt=np.zeros(1, int))
    assert (below.reward == 1.0).all()
    never = bandit.sample_groups(3, 1, _Uniforms(0.99, 0.0), prompt=np.zeros(1, int))
    assert (never.action == 1).all() and (never.reward == 0.0).all()
