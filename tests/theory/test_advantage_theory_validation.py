"""Argument checking and edge entries of the exact advantage moments (ustat_rl/theory/advantage.py).

A convention given as a function ``a(z, m, G)``: its table at ``G = 1``, its unused entries set
to 0 even where the function is undefined, and its shape checked on each reward separately;
the size limit for rules whose spread is a group statistic and the messages for named rules; the binary-reward tolerance on
both sides of ``BINARY_RTOL``; frozen results.
"""

import dataclasses
import re

import numpy as np
import pytest

from ustat_rl.advantages.parts import Scaling
from ustat_rl.advantages.registry import get_rule
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.advantage import (
    BINARY_RTOL,
    advantage_moments,
    advantage_table,
    all_equal_probability,
    arcsin_weight,
    binary_projection,
)

pytestmark = pytest.mark.fast


def _loo(z, m, G):
    """GRPO's leave-one-out advantage written as a(z, m, G); 0/0 at m = 0 for z = 1."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(z == 1, (G - m) / (G - 1.0) * (m / m), -m / (G - 1.0))


def test_a_function_convention_gives_the_registered_table_and_zeros_where_unused():
    G = 5
    table = advantage_table(_loo, G)
    named = advantage_table("grpo", G)
    np.testing.assert_allclose(table.success[1:], named.success[1:], rtol=1e-14)
    np.testing.assert_allclose(table.failure[:-1], named.failure[:-1], rtol=1e-14)
    # a(1, 0) and a(0, G) never occur; they are set to 0, also where the function gives NaN
    assert table.success[0] == 0.0 and table.failure[G] == 0.0
    assert table.group_size == G


def test_a_function_convention_at_group_size_one():
    table = advantage_table(lambda z, m, G: z - m / G, 1)  # one sample: vanilla less its mean
    np.testing.assert_array_equal(table.success, [0.0, 0.0])
    np.testing.assert_array_equal(table.failure, [0.0, 0.0])


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_group_size_is_named_in_the_error(bad):
    with pytest.raises((ValueError, TypeError), match=r"^`group_size` must be"):
        advantage_table(_loo, bad)


@pytest.mark.parametrize("which", ["success", "failure"])
def test_a_function_returning_the_wrong_shape_for_one_reward_is_rejected(which):
    def convention(z, m, G):
        out = np.where(z == 1, 1.0, 0.0) * np.ones_like(m, dtype=float)
        wrong = (which == "success") == bool(z[0] == 1)
        return out[:-1] if wrong else out

    with pytest.raises(ValueError,
                       match=r"^`estimator` must return shape \(4,\) for m = 0\.\.G$"):
        advantage_table(convention, 3)


def _statistic_rule():
    base = get_rule("trl_group", "convention")
    return dataclasses.replace(base, name="group-range", scaling=Scaling(
        kind="group statistic", statistic=lambda r: r.max(axis=1) - r.min(axis=1)))


def test_group_statistic_rules_are_limited_to_tables_that_fit():
    rule = _statistic_rule()
    small = advantage_table(rule, 4)  # ranges 1 except the all-equal groups
    assert small.success.shape == (5,) and np.all(np.isfinite(small.success))
    # (G + 1) G = 4473 * 4472 = 20,003,256 > 20,000,000: refused before any array is built, with
    # the way out (the rule's own check says the same without it)
    with pytest.raises(ValueError, match=r"^`group_size` 4472 needs a \(4473, 4472\) array of "
                                         r"representative groups; pass the rule as a function "
                                         r"a\(z, m, G\) for groups this large$"):
        advantage_table(rule, 4472)


def test_named_conventions_errors_name_the_parameter_and_the_rule():
    with pytest.raises(ValueError, match=r"^`estimator` must be one of"):
        advantage_table("no-such-rule", 3)
    with pytest.raises(ValueError, match=r"^convention 'trl_batch' uses batch statistics, so "
                                         r"groups are not independent and the per-group formula "
                                         r"does not apply; use Monte Carlo$"):
        advantage_table("trl_batch", 4)
    with pytest.raises(ValueError, match=r"^`group_size` must be an integer >= 2 for convention "
                                         r"'grpo', got 1$"):
        advantage_table("grpo", 1)


def _moments_with_value_offset(offset):
    m = small_bandit().moments()
    V = m.value.copy()
    V[0] = 1.0 + offset
    return dataclasses.replace(m, value=V)


def test_binary_tolerance_on_both_sides_of_its_value():
    inside = binary_projection(_moments_with_value_offset(0.5 * BINARY_RTOL))
    assert inside.value[0] == 1.0 + 0.5 * BINARY_RTOL
    with pytest.raises(ValueError, match=r"^`moments` has values V\(x\) outside \[0, 1\]"):
        binary_projection(_moments_with_value_offset(1.5 * BINARY_RTOL))
    m = small_bandit().moments()
    off = dataclasses.replace(m, reward_var=m.reward_var + 1.5 * BINARY_RTOL)
    with pytest.raises(ValueError, match=r"^`moments` must describe binary rewards"):
        advantage_moments(off, "grpo", 3)
    near = dataclasses.replace(m, reward_var=m.reward_var * (1 + 0.2 * BINARY_RTOL))
    assert np.all(np.isfinite(advantage_moments(near, "grpo", 3).mse_grad))


def test_results_are_frozen():
    table = advantage_table("grpo", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.group_size = 4
    moments = advantage_moments(small_bandit().moments(), "grpo", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        moments.mse_grad = None


def _binary(value=None, score_sq=None, offset=0.0):
    """The small bandit's moments with ``value`` and ``score_sq`` replaced, ``Var Z = V(1 - V)``
    (0 outside [0, 1], where a variance cannot follow it), and ``E||WZ||^2`` moved by ``offset``
    from ``E[||W||^2 Z]``."""
    m = small_bandit().moments()
    V = m.value if value is None else np.full(m.value.shape, value, dtype=float)
    s = m.score_sq if score_sq is None else np.full(m.value.shape, score_sq, dtype=float)
    return dataclasses.replace(m, value=V, reward_var=np.maximum(V * (1 - V), 0.0), score_sq=s,
                               score_sq_reward_sq=m.score_sq_reward + offset)


def test_binary_band_of_values_on_both_ends():
    for V in (0.0, 1.0):
        assert np.all(np.isfinite(advantage_moments(_binary(V), "grpo", 3).mse_grad))
    for V in (0.0, 1.0):  # just outside, V(1 - V) < 0 is no variance (PromptMoments refuses it)
        assert np.all(binary_projection(_binary(V)).value == V)
    for V in (-3 * BINARY_RTOL, 1.5):
        with pytest.raises(ValueError, match=r"^`moments` must describe binary rewards"):
            advantage_moments(_binary(V), "grpo", 3)
        with pytest.raises(ValueError, match=r"^`moments` has values V\(x\) outside \[0, 1\]"):
            binary_projection(_binary(V))


def test_score_identity_tolerance_scales_with_the_largest_score_norm():
    m = small_bandit().moments()
    # score norms below 1: the absolute slack is BINARY_RTOL itself
    gap = 1.5 * BINARY_RTOL + BINARY_RTOL * np.abs(m.score_sq_reward)
    with pytest.raises(ValueError, match=re.escape(
            "`moments` must describe binary rewards Z in {0, 1} (Var Z = V(1-V) and "
            "E||WZ||^2 = E[||W||^2 Z]); the exact advantage moments need them")):
        advantage_moments(_binary(score_sq=0.5, offset=gap), "grpo", 3)
    # norms of 100: the slack grows to 100 BINARY_RTOL
    assert np.all(np.isfinite(advantage_moments(_binary(score_sq=100.0, offset=50 * BINARY_RTOL),
                                                "grpo", 3).mse_grad))


def test_binary_projection_imposes_the_binary_identities():
    m = small_bandit().moments()
    out = binary_projection(dataclasses.replace(m, reward_var=m.reward_var + 0.01,
                                                score_sq_reward_sq=m.score_sq_reward_sq + 0.1))
    np.testing.assert_array_equal(out.reward_var, m.value * (1.0 - m.value))
    np.testing.assert_array_equal(out.score_sq_reward_sq, m.score_sq_reward)


@pytest.mark.parametrize("func", [lambda x: advantage_moments(x, "grpo", 3), binary_projection])
def test_moments_of_the_wrong_type_are_named(func):
    with pytest.raises(TypeError, match=r"^`moments` must be a PromptMoments, got str$"):
        func("moments")


def test_arcsin_weight_and_all_equal_probability_at_their_edges():
    np.testing.assert_array_equal(arcsin_weight([0.0, 1.0, 0.5]), [0.0, 0.0, 2.0])
    np.testing.assert_allclose(all_equal_probability([0.3, 0.0], 1), [1.0, 1.0])
    with pytest.raises(ValueError, match=r"^`group_size` must be"):
        all_equal_probability(0.5, 0)


def _always_succeeds(offset):
    """small_bandit with prompt 0 made certain to succeed (V = 1 + offset, no variance, no
    gradient), a value the binary check accepts for offsets below BINARY_RTOL."""
    m = small_bandit().moments()
    V, rv = m.value.copy(), m.reward_var.copy()
    V[0], rv[0] = 1.0 + offset, 0.0
    s, s2, c = m.score_sq_reward.copy(), m.score_sq_reward_sq.copy(), m.score_sq_centred.copy()
    s[0] = s2[0] = m.score_sq[0]
    c[0] = 0.0
    gram, sq = m.grad_gram.copy(), m.grad_sq.copy()
    gram[0, :] = gram[:, 0] = sq[0] = 0.0
    return dataclasses.replace(m, value=V, reward_var=rv, score_sq_reward=s,
                               score_sq_reward_sq=s2, score_sq_centred=c, grad_gram=gram,
                               grad_sq=sq)


def test_a_value_a_rounding_above_one_gives_the_moments_at_one():
    """V is clipped to [0, 1] before the binomial weights: a V that rounding put just above 1
    (accepted by the binary check) must give the moments at V = 1, not NaN."""
    exact = advantage_moments(_always_succeeds(0.0), "grpo", 3)
    above = advantage_moments(_always_succeeds(0.5 * BINARY_RTOL), "grpo", 3)
    for name in ("mean_factor", "second_moment", "mse_grad"):
        np.testing.assert_array_equal(getattr(above, name), getattr(exact, name))
