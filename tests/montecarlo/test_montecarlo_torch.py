"""The torch backend of the bandit Monte Carlo against the exact theory and the numba backend.

Every Monte Carlo comparison is ``|difference| <= Z_TEST * se`` with ``Z_TEST = 4.5`` from
ustat_rl.tolerances (6.8e-6 false failures per comparison; the 168 comparisons that run on CPU fail
spuriously in fewer than 1.2e-3 of runs, union bound). ``se`` is the estimate's standard error,
or ``hypot(se_1, se_2)`` for two independent estimates. Negative controls (a wrong reward law,
a wrong batch factor, wrong weights) must be rejected by the same comparison. Seeds are fixed for
reproducibility, not chosen to pass.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl import (
    ESTIMATORS,
    SoftmaxBandit,
    bandit_squared_errors,
    bandit_statistics,
    prompt_averaged_squared_errors,
    run_monte_carlo,
)
from ustat_rl.montecarlo import Backend
from ustat_rl.montecarlo.torch_backend import TorchBanditStatistic, _generator, resolve_device
from ustat_rl.policies.examples import small_bandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# increments 2 and 3 are drawn sample by sample (<= 2K = 6 for K = 3), 59 and 960 by binomials
SIZES = (2, 5, 64, 1024)


def wrong_law(bandit: SoftmaxBandit) -> SoftmaxBandit:
    """The bandit with every success probability raised by 0.1: a mis-specified reward law."""
    return SoftmaxBandit(bandit.logits, np.clip(bandit.reward_prob + 0.1, 0.0, 1.0),
                         bandit.prompt_prob)


def within(value, reference, se) -> bool:
    return abs(value - reference) <= Z_TEST * se


def minibatch_mse(bandit, backend, n_reps, seed, device=None):
    stat, labels = bandit_squared_errors(bandit, ESTIMATORS, SIZES, batch_size=3,
                                         backend=Backend(backend, device))
    return run_monte_carlo(stat, n_reps, seed, labels=labels)


@pytest.fixture(scope="module")
def minibatch_runs():
    bandit = small_bandit()
    return (minibatch_mse(bandit, "torch", 40_000, 21, "cpu"),
            minibatch_mse(bandit, "numba", 40_000, 22),
            minibatch_mse(wrong_law(bandit), "torch", 40_000, 23, "cpu"))


def multinomial_moments_accepted(cells: np.ndarray, n_trials: int, q: np.ndarray) -> bool:
    """Means and all second moments of ``cells (n, C)`` against ``Multinomial(n_trials, q)``."""
    n = cells.shape[0]
    mean = n_trials * q
    second = n_trials * (np.diag(q) - np.outer(q, q)) + np.outer(mean, mean)
    products = (cells[:, :, None] * cells[:, None, :]).reshape(n, -1)
    ok_mean = within(cells.mean(0), mean, cells.std(0, ddof=1) / np.sqrt(n))
    ok_second = within(products.mean(0), second.ravel(), products.std(0, ddof=1) / np.sqrt(n))
    return bool(np.all(ok_mean) and np.all(ok_second))


def test_increments_have_the_multinomial_law():
    # (counts, successes) of one increment are Multinomial(inc, q) over the 2K cells
    # q = (pi_a (1 - r_a), pi_a r_a), for both sampling routes
    bandit = small_bandit()
    x, n_groups = 1, 20_000
    stat, _ = bandit_statistics(bandit, ("grpo",), (2,), prompt=x, backend=Backend("torch", "cpu"))
    pi, r = bandit.policy[x], bandit.reward_prob[x]
    r_wrong = np.clip(r + 0.1, 0.0, 1.0)
    gen = _generator(np.random.SeedSequence(5), torch.device("cpu"))
    prompts = torch.full((n_groups,), x, dtype=torch.long)
    for inc in (3, 40):  # sample by sample (3 <= 2K), then the binomial chain
        counts, successes = stat._increment(gen, prompts, inc)
        cells = torch.stack([counts - successes, successes], dim=2).reshape(n_groups, -1).numpy()
        q = np.stack([pi * (1 - r), pi * r], axis=1).ravel()
        assert multinomial_moments_accepted(cells, inc, q), inc
        # negative control: the same check rejects the wrong success probability
        q_wrong = np.stack([pi * (1 - r_wrong), pi * r_wrong], axis=1).ravel()
        assert not multinomial_moments_accepted(cells, inc, q_wrong), inc


def test_minibatch_mse_matches_exact_and_numba(minibatch_runs):
    bandit = small_bandit()  # prompts drawn from f = (0.3, 0.7), B = 3, every estimator
    torch_est, numba_est, _ = minibatch_runs
    assert torch_est.labels == numba_est.labels
    for i, (name, g) in enumerate(torch_est.labels):
        exact = bandit.exact_mse(name, g, 3)
        assert within(torch_est.mean[i], exact, torch_est.std_error[i]), (name, g)
        assert within(numba_est.mean[i], exact, numba_est.std_error[i]), (name, g)
        assert within(torch_est.mean[i], numba_est.mean[i],
                      np.hypot(torch_est.std_error[i], numba_est.std_error[i])), (name, g)


def test_wrong_reward_law_is_rejected(minibatch_runs):
    # the same comparisons reject groups drawn with r + 0.1 (exact MSEs differ by 27-30 se)
    bandit = small_bandit()
    _, numba_est, wrong = minibatch_runs
    for label in (("vanilla", 2), ("vanilla", 5)):
        m, se = wrong.get(label)
        assert not within(m, bandit.exact_mse(label[0], label[1], 3), se), label
        m_numba, se_numba = numba_est.get(label)
        assert not within(m, m_numba, np.hypot(se, se_numba)), label


def test_per_prompt_mse_matches_exact():
    bandit = small_bandit()
    x = 1
    stat, labels = bandit_squared_errors(bandit, ESTIMATORS, (2, 8, 1024), prompt=x,
                                         backend=Backend("torch", "cpu"))
    est = run_monte_carlo(stat, 30_000, 31, labels=labels)
    for i, (name, g) in enumerate(labels):
        exact = bandit.exact_mse_per_prompt(name, g)[x]
        assert within(est.mean[i], exact, est.std_error[i]), (name, g)


def test_general_rewards_two_actions_and_single_samples():
    # rewards (lo, hi) = (-1, 2), K = 2 (a one-binomial chain), G = 1 (no baseline needed),
    # three prompts with B = 5, so that several groups of a replicate share a prompt
    bandit = SoftmaxBandit([[0.2, -0.4], [0.0, 1.0], [0.5, 0.5]],
                           [[0.3, 0.8], [0.5, 0.1], [0.9, 0.6]], [0.5, 0.2, 0.3],
                           reward_values=(-1.0, 2.0))
    stat, labels = bandit_squared_errors(bandit, ("vanilla", "oracle"), (1, 3, 40), batch_size=5,
                                         backend=Backend("torch", "cpu"))
    est = run_monte_carlo(stat, 40_000, 35, labels=labels)
    for i, (name, g) in enumerate(labels):
        assert within(est.mean[i], bandit.exact_mse(name, g, 5), est.std_error[i]), (name, g)
    # negative control: the MSE of 0/1 rewards at the same policy and success probabilities
    binary = SoftmaxBandit(bandit.logits, bandit.reward_prob, bandit.prompt_prob)
    m, se = est.get(("vanilla", 3))
    assert not within(m, binary.exact_mse("vanilla", 3, 5), se)


def test_prompt_averaged_matches_exact_and_rejects_unweighted_average():
    bandit = small_bandit()
    est = prompt_averaged_squared_errors(bandit, ESTIMATORS, (4, 64), 30_000, seed=41,
                                         backend=Backend("torch", "cpu"))
    for i, (name, g) in enumerate(est.labels):
        assert within(est.mean[i], bandit.prompt_averaged_mse(name, g), est.std_error[i])
    unweighted = bandit.exact_mse_per_prompt("grpo", 4).mean()
    m, se = est.get(("grpo", 4))
    assert not within(m, unweighted, se)


def test_projection_and_degenerate_columns_with_minibatches():
    # prompts from f, B = 4: E<g_hat, g> = ||g||^2 for the unbiased estimators and c ||g||^2
    # for the full mean (c = (G-1)/G); E||g_grpo - g_oracle||^2 = MSE_grpo - MSE_oracle (C4)
    bandit = small_bandit()
    b = 4
    stat, labels = bandit_statistics(bandit, ESTIMATORS, (3, 16), batch_size=b,
                                     direction=bandit.grad, degenerate=True,
                                     backend=Backend("torch", "cpu"))
    est = run_monte_carlo(stat, 30_000, 51, labels=labels)
    g_sq = bandit.grad @ bandit.grad
    for name in ESTIMATORS:
        for g in (3, 16):
            m, se = est.get(("proj", name, g))
            assert within(m, g_sq * ((g - 1) / g if name == "fullmean" else 1.0), se), (name, g)
    for g in (3, 16):
        m, se = est.get(("degenerate", g))
        exact = bandit.exact_mse("grpo", g, b) - bandit.exact_mse("oracle", g, b)
        assert within(m, exact, se), g
        # negative control: the gap of single-prompt batches (B = 1) is 4 times too large
        wrong = bandit.exact_mse("grpo", g, 1) - bandit.exact_mse("oracle", g, 1)
        assert not within(m, wrong, se), g


def test_same_seed_same_result_for_any_block_size_and_workers():
    bandit = small_bandit()
    stat, labels = bandit_squared_errors(bandit, ("grpo", "oracle"), (2, 9), batch_size=3,
                                         backend=Backend("torch", "cpu"))
    stat.sub_block_size = 200  # so that 2500 replicates span 13 sub-blocks, the last partial
    runs = [run_monte_carlo(stat, 2500, 61, block_size=bs, n_jobs=jobs, labels=labels)
            for bs, jobs in ((4096, 1), (1000, 1), (7, 2), (333, 2))]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].mean, other.mean)
        np.testing.assert_array_equal(runs[0].cov, other.cov)
    again = run_monte_carlo(stat, 2500, 61, labels=labels)
    np.testing.assert_array_equal(runs[0].cov, again.cov)
    assert not np.array_equal(runs[0].mean, run_monte_carlo(stat, 2500, 62, labels=labels).mean)
    # the statistic called directly: (n, m) rows, reproducible from the numpy generator
    rows = stat(np.random.default_rng(3), 450)
    assert rows.shape == (450, len(labels))
    np.testing.assert_array_equal(rows, stat(np.random.default_rng(3), 450))
    assert not np.array_equal(rows[:200], rows[200:400])  # sub-blocks draw distinct streams


def test_replicates_do_not_depend_on_the_thread_count():
    stat, _ = bandit_squared_errors(small_bandit(), ESTIMATORS, (2, 64), batch_size=3,
                                    backend=Backend("torch", "cpu"))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = stat(np.random.default_rng(8), 3000)
        torch.set_num_threads(2)
        two = stat(np.random.default_rng(8), 3000)
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(one, two)


def test_cpu_generator_gets_the_whole_seed_sequence_state():
    # manual_seed keeps 32 bits on CPU; the sub-block generator takes 624 words instead
    seq = np.random.SeedSequence(7, spawn_key=(3,))
    state = _generator(seq, torch.device("cpu")).get_state().numpy()
    words = state[24:24 + 8 * 624].view(np.uint64)
    np.testing.assert_array_equal(words, seq.generate_state(624, dtype=np.uint32))


def test_backend_and_device_validation():
    bandit = small_bandit()
    with pytest.raises(ValueError, match="`backend`"):
        bandit_statistics(bandit, ("grpo",), (4,), backend="jax")
    with pytest.raises(ValueError, match="`device`"):
        bandit_statistics(bandit, ("grpo",), (4,), backend=Backend("torch", "tpu"))
    with pytest.raises(ValueError, match="`device`"):
        bandit_statistics(bandit, ("grpo",), (4,), backend=Backend("torch", 3))
    with pytest.raises(ValueError, match="`device`.*numba"):
        bandit_squared_errors(bandit, ("grpo",), (4,), backend=Backend("numba", "cuda"))
    with pytest.raises(ValueError, match="`backend`"):
        prompt_averaged_squared_errors(bandit, ("grpo",), (4,), 10, backend="cupy")
    stat, _ = bandit_statistics(bandit, ("grpo",), (4,), backend="torch")
    assert isinstance(stat, TorchBanditStatistic)
    assert stat.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_requested_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="needs CUDA.*is_available"):
        bandit_statistics(small_bandit(), ("grpo",), (4,), backend=Backend("torch", "cuda"))


@CUDA
def test_cuda_matches_exact_cpu_and_is_reproducible():
    bandit = small_bandit()
    cuda_est = minibatch_mse(bandit, "torch", 200_000, 71, "cuda")
    cpu_est = minibatch_mse(bandit, "torch", 40_000, 72, "cpu")
    for i, (name, g) in enumerate(cuda_est.labels):
        assert within(cuda_est.mean[i], bandit.exact_mse(name, g, 3), cuda_est.std_error[i])
        assert within(cuda_est.mean[i], cpu_est.mean[i],
                      np.hypot(cuda_est.std_error[i], cpu_est.std_error[i]))
    stat, labels = bandit_squared_errors(bandit, ESTIMATORS, SIZES, batch_size=3,
                                         backend=Backend("torch", "cuda"))
    one = run_monte_carlo(stat, 200_000, 71, block_size=999, n_jobs=2, labels=labels)
    np.testing.assert_array_equal(one.mean, cuda_est.mean)
    np.testing.assert_array_equal(one.cov, cuda_est.cov)
    wrong = minibatch_mse(wrong_law(bandit), "torch", 200_000, 73, "cuda")
    m, se = wrong.get(("vanilla", 2))
    assert not within(m, bandit.exact_mse("vanilla", 2, 3), se)
