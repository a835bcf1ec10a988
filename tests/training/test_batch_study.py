"""Batch-level advantage rules and all-equal groups dropped or refilled (docs/theory.md section 7).

Monte Carlo comparisons allow ``Z_TEST = 4.5`` standard errors (6.8e-6 false failures each,
two-sided); each has a negative control that the same comparison rejects.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory import advantage_moments, dynamic_sampling_mse, minibatch_advantage_mse
from ustat_rl.theory.advantage import all_equal_probability
from ustat_rl.tolerances import Z_TEST
from ustat_rl.training.batch_study import batch_monte_carlo

pytestmark = pytest.mark.fast

N_REPS = 8000
B = 4


def _along(moments, convention, G, scale=1.0):
    """Predicted ``<E g_hat_B, g>/||g||^2 = alpha' Gamma f / f' Gamma f``, ``alpha = scale f c``."""
    f, gram = moments.prompt_prob, moments.grad_gram
    alpha = scale * f * advantage_moments(moments, convention, G).mean_factor
    return float(alpha @ gram @ f / (f @ gram @ f))


def _close(value, se, predicted):
    return abs(value - predicted) <= Z_TEST * se


@pytest.fixture(scope="module")
def bandit():
    return small_bandit()


@pytest.mark.parametrize("G", [2, 4])
def test_keep_and_resample_against_exact(bandit, G):
    m = bandit.moments()
    rng = np.random.default_rng(31 + G)
    keep = batch_monte_carlo(bandit, "trl_group", G, B, N_REPS, rng, "keep")
    assert _close(keep.mse, keep.mse_se, minibatch_advantage_mse(m, "trl_group", G, B))
    assert _close(keep.mean_factor, keep.mean_factor_se, _along(m, "trl_group", G))
    scale, mse = dynamic_sampling_mse(m, "trl_group", G, B)
    res = batch_monte_carlo(bandit, "trl_group", G, B, N_REPS, rng, "resample")
    assert _close(res.mse, res.mse_se, mse)
    assert _close(res.mean_factor, res.mean_factor_se, _along(m, "trl_group", G, scale))
    q = float(m.prompt_prob @ all_equal_probability(m.value, G))
    assert abs(res.kept - (1 - q)) < 0.01  # many more draws than N_REPS * B; binomial se < 0.003
    # negative control: refilling is not zeroing; the keep prediction is rejected
    assert not _close(res.mean_factor, res.mean_factor_se, _along(m, "trl_group", G))


def test_drop_differs_from_keep_and_from_resample(bandit):
    """Dropping without refilling divides by a random count: neither exact rule describes it."""
    m = bandit.moments()
    G = 2
    drop = batch_monte_carlo(bandit, "trl_group", G, B, N_REPS, np.random.default_rng(40), "drop")
    scale, _ = dynamic_sampling_mse(m, "trl_group", G, B)
    assert not _close(drop.mean_factor, drop.mean_factor_se, _along(m, "trl_group", G))
    assert not _close(drop.mean_factor, drop.mean_factor_se, _along(m, "trl_group", G, scale))


def test_batch_std_is_group_std_for_one_group_only(bandit):
    """TRL ``scale_rewards="batch"`` with B = 1 is the group rule, whose exact moments apply;
    with B = 4 the batch std couples the groups and the per-group prediction is rejected."""
    m = bandit.moments()
    G = 2
    one = batch_monte_carlo(bandit, "trl_batch", G, 1, N_REPS, np.random.default_rng(41))
    assert _close(one.mse, one.mse_se, minibatch_advantage_mse(m, "trl_group", G, 1))
    four = batch_monte_carlo(bandit, "trl_batch", G, B, N_REPS, np.random.default_rng(42))
    assert not _close(four.mean_factor, four.mean_factor_se, _along(m, "trl_group", G))


def test_dynamic_sampling_needs_zeroed_groups(bandit):
    with pytest.raises(ValueError, match="all-equal"):
        dynamic_sampling_mse(bandit.moments(), lambda z, k, G: z - 0.5, 4, 2)
    with pytest.raises(ValueError, match="all_equal"):
        batch_monte_carlo(bandit, "trl_group", 2, 2, 10, 0, "skip")
