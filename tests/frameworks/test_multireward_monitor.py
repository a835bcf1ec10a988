"""Multi-channel moments from rollouts and the monitor's window for several reward functions.

``estimate_channel_moments`` is unbiased for every entry of the exact
:class:`~ustat_rl.theory.multichannel.ChannelMoments`: over 20,000 pilots of one prompt the mean
estimate is within ``Z_TEST`` standard errors (6.8e-6 per comparison) of the exact value, and the
same comparison rejects the estimate that keeps the ``i = j`` pairs (the negative control). The
window's record for a multi-reward rule carries that rule's MSE and variance at the run's G,
estimated from the rule's own advantages of each batch (equal to their pairwise definitions,
``ustat_rl.pilot.run_noise_definition``), and falls back to the GRPO rule, saying why, when the
per-function rewards were not captured.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ustat_rl.frameworks.config import EstimatorConfig, LossWeighting, MonitorConfig
from ustat_rl.frameworks.window import Batch, window_record
from ustat_rl.pilot.channels import estimate_channel_moments
from ustat_rl.pilot.run_noise_definition import window_noise_by_definition as window_reference
from ustat_rl.policies.multichannel import multireward_bandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast

W = [1.0, 0.5]


def _pilot(bandit, rng, n_prompts, group_size, prompt=None):
    x, action, outcome = bandit.sample(group_size, n_prompts, rng, prompt)
    ids = np.repeat(np.arange(n_prompts), group_size)
    score = bandit.scores(x, action).reshape(n_prompts * group_size, -1)
    return ids, bandit.rewards(outcome).reshape(-1, bandit.n_channels), score


def test_estimates_are_unbiased_at_one_prompt():
    bandit = multireward_bandit()
    exact = bandit.channel_moments()
    rng = np.random.default_rng(52)
    x, n, reps = 1, 5, 20_000
    est, naive = [], []
    for _ in range(reps):
        ids, z, score = _pilot(bandit, rng, 1, n, prompt=x)
        m = estimate_channel_moments(ids, z, score)
        est.append(np.concatenate([m.outcome_prob[0], m.score_sq[0],
                                   m.mean_gram[0, :, 0, :].ravel()]))
        S = np.eye(4)[(z @ [1, 2]).astype(int)].T @ score / n  # (O, d) means with i = j kept
        naive.append((S @ S.T).ravel())
    est, naive = np.array(est), np.array(naive)
    want = np.concatenate([exact.outcome_prob[x], exact.score_sq[x],
                           exact.mean_gram[x, :, x, :].ravel()])
    se = est.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - want) <= Z_TEST * se + 1e-15)
    gram_se = naive.std(axis=0, ddof=1) / math.sqrt(reps)
    off = np.abs(naive.mean(axis=0) - want[8:]) > Z_TEST * gram_se
    assert off.reshape(4, 4).diagonal().all()  # the i = j terms bias every diagonal entry


def test_cross_prompt_terms_are_inner_products_of_the_prompts_outcome_means():
    """Across prompts the estimate is <S_o(x)/n_x, S_o'(y)/n_y> (a sum over coordinates of
    products, not a product of coordinate sums): the one-prompt test above never reaches it."""
    rng = np.random.default_rng(5)
    ids = np.array([3, 3, 3, 8, 8, 8, 8])
    z = np.array([[0, 1], [1, 1], [0, 1], [1, 0], [0, 0], [1, 0], [0, 1]], dtype=float)
    score = rng.normal(size=(7, 3))
    m = estimate_channel_moments(ids, z, score)
    outcome = (z @ [1, 2]).astype(int)
    means = [np.eye(4)[outcome[ids == x]].T @ score[ids == x] / np.sum(ids == x)
             for x in (3, 8)]  # (O, d) each, prompts in order of first draw
    np.testing.assert_allclose(m.mean_gram[0, :, 1, :], means[0] @ means[1].T, rtol=1e-12)
    np.testing.assert_allclose(m.mean_gram[1, :, 0, :], means[1] @ means[0].T, rtol=1e-12)


def test_bad_rollouts_name_the_parameter():
    with pytest.raises(ValueError, match="`channels` must be binary"):
        estimate_channel_moments([0, 0], [[0.5, 1.0], [0.0, 1.0]], np.ones((2, 3)))
    with pytest.raises(ValueError, match="at least 2 draws"):
        estimate_channel_moments([0, 1], [[0.0, 1.0], [0.0, 1.0]], np.ones((2, 3)))
    with pytest.raises(ValueError, match="must share n"):
        estimate_channel_moments([0, 0], [[0.0, 1.0]], np.ones((2, 3)))


def _batches(bandit, rng, channels=True, n_batches=2, groups=6, G=4):
    out = []
    for b in range(n_batches):
        ids, z, score = _pilot(bandit, rng, groups, G)
        out.append(Batch(10 * b, G, z @ W, score, b * groups, z if channels else None))
    return out


@pytest.mark.parametrize("rule", ["trl_normalize_then_sum", "trl_sum_then_normalize"])
def test_window_reports_the_multi_reward_rule(rule):
    bandit = multireward_bandit()
    batches = _batches(bandit, np.random.default_rng(3))
    meta = dict(sketch_kind="none", param_dim=int(bandit.dim), model_name="multireward_bandit")
    record, _ = window_record(batches, meta, 24, MonitorConfig(
        estimator=EstimatorConfig(rule, "check"), loss=LossWeighting(reward_weights=W)))
    var, mse = window_reference(batches, rule, W)
    assert record.var_run.estimate == pytest.approx(var, rel=1e-10)
    assert record.mse_run.estimate == pytest.approx(mse, rel=1e-10)
    assert record.var_run.low <= var <= record.var_run.high
    assert record.run_method.startswith(f"{rule} at the run's G = 4")
    # the GRPO rule's on the same batches differ: the rule's advantages were used
    assert record.mse_run.estimate != pytest.approx(window_reference(batches, None)[1])
    # G* and the constants stay the GRPO rule's on the combined reward
    plain, _ = window_record(batches, meta, 24, MonitorConfig(estimator=EstimatorConfig(
        source="check")))
    assert record.gstar == plain.gstar and record.c1 == plain.c1


def test_window_without_channels_says_why():
    bandit = multireward_bandit()
    batches = _batches(bandit, np.random.default_rng(4), channels=False)
    meta = dict(sketch_kind="none", param_dim=int(bandit.dim), model_name="multireward_bandit")
    record, _ = window_record(batches, meta, 24, MonitorConfig(
        estimator=EstimatorConfig("trl_normalize_then_sum", "check"),
        loss=LossWeighting(reward_weights=W)))
    assert "not captured" in record.run_method
    plain, _ = window_record(batches, meta, 24, MonitorConfig(estimator=EstimatorConfig(
        source="check")))
    assert record.mse_run == plain.mse_run
