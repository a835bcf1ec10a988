"""Argument checking and edge entries of the exact advantage moments (ustat_rl/theory/advantage.py).

A convention given as a function ``a(z, m, G)``: its table at ``G = 1``, its unused entries set
to 0 even where the function is undefined, and its shape checked on each reward separately;
the size limit for rules whose spread is a group statistic and the messages for named rules; the binary-reward tolerance on
both sides of ``BINARY_RTOL``; frozen results.
"""

import dataclasses

import numpy as np
import pytest

from ustat_rl.advantages.parts import Scaling
from ustat_rl.advantages.registry import get_rule
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.advantage import (
    BINARY_RTOL,
    advantage_moments,
    advantage_table,
    binary_projection,
)


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
                       match=r"^`convention` must return shape \(4,\) for m = 0\.\.G$"):
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
    with pytest.raises(ValueError, match=r"^`convention` must be one of"):
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
