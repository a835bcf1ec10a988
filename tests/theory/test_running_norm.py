"""ROLL's running reward normalisation on the bandit (ustat_rl.theory.running_norm).

* the reward's population mean and sd equal a direct sum over prompts and actions, and, the
  rewards being two-point, ``sigma^2 = (mu - lo)(hi - mu)``; negative control: the
  prompt-averaged within-prompt sd is smaller;
* the state after each batch equals ROLL's own ``RunningMoments`` (tests/data, float32 state:
  rtol 1e-5) fed the same batches; negative control: not the last batch's statistics alone;
* on a fresh state the advantages are ``roll_batch``'s (rtol 1e-12);
* the fixed-statistics form's exact MSE and mean factor match a Monte Carlo of that form within
  ``Z_CHECK`` standard errors, and the unscaled constant baseline's MSE is rejected;
* the running loop's Monte Carlo: at step 1 within ``Z_CHECK`` combined se of
  ``roll_batch``'s (an independent Monte Carlo) and far from the fixed form's exact MSE; at step
  64 (256 rewards pooled) within ``Z_CHECK`` se of the fixed form's exact MSE and far from
  ``roll_batch``'s. ``Z_CHECK`` = 4: 6.3e-5 false failures per comparison; the pooled
  statistics' own bias at step 64 measured at 0.6 se of a 20,000-chain run (G = 4, B = 2).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from script_loader import load_data

from ustat_rl.advantages.conventions import advantages
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.running_norm import (
    fixed_statistics_exact,
    fresh_state,
    merge_batch,
    reward_population,
    running_norm_monte_carlo,
)
from ustat_rl.theory.shrinkage import batch_moments, draw_batches
from ustat_rl.tolerances import Z_CHECK
from ustat_rl.training.batch_study import batch_monte_carlo

pytestmark = pytest.mark.fast

G, B = 2, 2


def test_reward_population_is_the_marginal_law():
    bandit = small_bandit()
    mu, sigma = reward_population(bandit)
    lo, hi = bandit.reward_values
    logits = np.asarray(bandit.logits)
    pi = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi /= pi.sum(axis=1, keepdims=True)
    p = float(np.asarray(bandit.prompt_prob) @ np.sum(pi * np.asarray(bandit.reward_prob), axis=1))
    assert mu == pytest.approx(lo + (hi - lo) * p, rel=1e-12)
    assert sigma == pytest.approx(np.sqrt((mu - lo) * (hi - mu)), rel=1e-12)
    m = bandit.moments()
    assert sigma > float(m.prompt_prob @ np.sqrt(m.reward_var)) * 1.01  # negative control


def test_state_is_rolls_running_moments():
    roll = load_data("roll_reward_norm_8eb27cc2")
    theirs, ours = roll.RunningMoments(), fresh_state(1)
    rng = np.random.default_rng(390)
    for size in (5, 8, 3, 12):
        batch = rng.normal(2.0, 1.5, size=size)
        theirs.update(torch.as_tensor(batch))
        ours = merge_batch(ours, batch[None, :])
        np.testing.assert_allclose([ours.mean[0], ours.std[0]],
                                   [float(theirs.mean), float(theirs.std)], rtol=1e-5)
    assert not np.isclose(ours.std[0], batch.std(ddof=1), rtol=1e-3)
    with pytest.raises(ValueError, match="rewards"):
        merge_batch(ours, batch)


def test_fresh_state_is_roll_batch():
    rng = np.random.default_rng(391)
    z = rng.integers(0, 2, size=(3, 8)).astype(float)
    state = merge_batch(fresh_state(3), z)
    for row, mean, std in zip(z, state.mean, state.std):
        np.testing.assert_allclose((row - mean) / (std + 1e-6),
                                   advantages("roll_batch", row, np.repeat(np.arange(4), 2)),
                                   rtol=1e-12, atol=1e-12)


def test_fixed_form_exact_matches_its_monte_carlo():
    bandit = small_bandit()
    exact = fixed_statistics_exact(bandit, G, B)
    mu, sigma = reward_population(bandit)
    s, score, n, _, _ = draw_batches(bandit, G, B, 40_000, np.random.default_rng(392))
    for c, ok in ((1.0 / (sigma + 1e-6), True), (1.0, False)):  # c = 1: negative control
        adv = (c * (s.reward - mu)).reshape(n, B, G)
        mc = batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G))
        assert (abs(mc.mse - exact.mse) <= Z_CHECK * mc.mse_se) == ok
        if ok:
            assert abs(mc.mean_factor - exact.mean_factor) <= Z_CHECK * mc.mean_factor_se


def test_running_loop_moves_from_roll_batch_to_the_fixed_form():
    bandit = small_bandit()
    fixed = fixed_statistics_exact(bandit, G, B).mse
    run = running_norm_monte_carlo(bandit, G, B, (1, 64), 4_000, np.random.default_rng(393))
    first, late = run.moments
    roll = batch_monte_carlo(bandit, "roll_batch", G, B, 4_000, np.random.default_rng(394))
    both = np.hypot(first.mse_se, roll.mse_se)
    assert abs(first.mse - roll.mse) <= Z_CHECK * both
    assert abs(first.mse - fixed) > Z_CHECK * first.mse_se
    assert abs(late.mse - fixed) <= Z_CHECK * late.mse_se
    assert abs(late.mse - roll.mse) > Z_CHECK * np.hypot(late.mse_se, roll.mse_se)
