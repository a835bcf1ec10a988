"""verl's ``opo`` with response lengths under a stated length model
(ustat_rl.montecarlo.opo_lengths).

* ``opo_advantages`` equals verl's own ``compute_opo_outcome_advantage`` (tests/data) on
  ragged lengths (rtol 1e-12), and the registered ``verl_opo`` at equal lengths; negative
  control: the full mean misses verl's ragged result;
* on the small bandit at G = 2, B = 2, 20,000 batches, ``Z_CHECK`` = 4 standard errors (6.3e-5
  false failures per comparison): the full mean sampled on the same batches matches its exact
  MSE (the route's positive control); with i.i.d. lengths opo's mean factor is the full mean's
  ``(G - 1)/G`` and its MSE exceeds the full mean's exact MSE (measured 0.0211 against 0.0190
  over 20,000 batches); with action-dependent lengths (1, 4, 9 for actions 0, 1, 2) the mean
  factor moves off ``(G - 1)/G`` (measured 0.443 against 0.5). Over 30 seeds at 8,000 batches
  the two rejections stood at 7.4 and 4.6 se at their smallest, so 20,000 batches are drawn
  (about 1.6 times those margins).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from script_loader import load_data

from ustat_rl.advantages.conventions import advantages
from ustat_rl.montecarlo.opo_lengths import (
    action_lengths,
    iid_lengths,
    opo_advantages,
    opo_monte_carlo,
)
from ustat_rl.policies.examples import small_bandit
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast

G, B, REPS = 2, 2, 20_000


def test_opo_advantages_are_verls_own():
    verl = load_data("verl_opo_remax_1dda039b")
    rng = np.random.default_rng(395)
    z = rng.normal(size=(3, 4))
    T = rng.integers(1, 6, size=(3, 4))
    mask = (np.arange(6)[None, :] < T.reshape(-1)[:, None]).astype(np.float64)
    token = np.zeros((12, 6))
    token[np.arange(12), T.reshape(-1) - 1] = z.reshape(-1)
    theirs, _ = verl.compute_opo_outcome_advantage(torch.as_tensor(token), torch.as_tensor(mask),
                                                   np.repeat(np.arange(3), 4))
    ours = opo_advantages(z, T).reshape(-1)
    np.testing.assert_allclose(ours, theirs.numpy()[:, 0], rtol=1e-12, atol=1e-14)
    full = advantages("verl_opo", z.reshape(-1), np.repeat(np.arange(3), 4))
    np.testing.assert_allclose(opo_advantages(z, np.full(z.shape, 3)).reshape(-1), full,
                               rtol=1e-12, atol=1e-14)
    assert not np.allclose(full, theirs.numpy()[:, 0], rtol=1e-6)  # negative control
    with pytest.raises(ValueError, match="lengths"):
        opo_advantages(z, T[:, :2])


def test_length_models_move_the_mse_or_the_mean():
    bandit = small_bandit()
    exact = bandit.exact_mse("fullmean", G, B)
    iid = opo_monte_carlo(bandit, G, B, REPS, np.random.default_rng(396), iid_lengths(1, 8))
    assert abs(iid.full_mean.mse - exact) <= Z_CHECK * iid.full_mean.mse_se
    assert abs(iid.opo.mean_factor - (G - 1) / G) <= Z_CHECK * iid.opo.mean_factor_se
    assert iid.opo.mse - exact > Z_CHECK * iid.opo.mse_se
    by_action = opo_monte_carlo(bandit, G, B, REPS, np.random.default_rng(397),
                                action_lengths([1, 4, 9]))
    assert abs(by_action.opo.mean_factor - (G - 1) / G) > Z_CHECK * by_action.opo.mean_factor_se
