"""``block_factors`` of the factored sketch (ustat_rl/scores/factored.py): the split of a block's
dimension into ``k_o x k_i`` at its smallest legal value and its argument check."""

import math

import pytest

from ustat_rl.scores.factored import block_factors

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("k, expected", [(1, (1, 1)), (2, (1, 2)), (7, (1, 7)), (8, (2, 4)),
                                         (10, (2, 5)), (18, (3, 6)),
                                         (12, (3, 4)), (16, (4, 4)), (30, (5, 6))])
def test_block_factors_split_into_the_most_square_divisor_pair(k, expected):
    k_out, k_in = block_factors(k)
    assert (k_out, k_in) == expected and k_out * k_in == k and k_out <= math.isqrt(k)


@pytest.mark.parametrize("bad", [0, -4])
def test_block_factors_names_its_parameter(bad):
    with pytest.raises(ValueError, match=r"^`block_dim` must be"):
        block_factors(bad)
