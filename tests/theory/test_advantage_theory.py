"""Exact finite-G moments of group-relative advantages, binary rewards (docs/theory.md section 7).

Three routes: the O(G) formula of ``ustat_rl.theory.advantage``; brute-force enumeration of every
group outcome of a small ``SoftmaxBandit`` (``(2K)^G`` outcomes: at most 4^6 = 4096 for K = 2,
6^4 = 1296 for K = 3, 8^3 = 512 for K = 4); and Monte Carlo, with ``|MC - exact| <= Z_TEST se``
(``Z_TEST = 4.5``: 6.8e-6 false failures per comparison, about 1e-3 over this file's ~100
comparisons by the union bound). Seeds are fixed, never chosen.
"""

import doctest

import numpy as np
import pytest

from ustat_rl import theory
from ustat_rl.advantages.conventions import get_convention
from ustat_rl.policies.examples import small_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory import advantage as advantage_module
from ustat_rl.theory.advantage import (
    advantage_moments,
    advantage_table,
    all_equal_probability,
    arcsin_weight,
    minibatch_advantage_mse,
    per_prompt_advantage_mse,
)
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast

STD_CONVENTIONS = ("trl_group", "verl_grpo", "openrlhf_group_norm", "paper_algorithm2")
EXACT = dict(rtol=1e-10, atol=1e-13)


def _population_std(z, m, G):
    """A deliberately wrong rule: full-mean numerator over the population (not Bessel) std."""
    s = np.sqrt(m * (G - m)) / G
    return np.where(s > 0, (z - m / G) / np.where(s > 0, s, 1.0), 0.0)


def _bandits():
    return {
        "small": small_bandit(),
        "K4": SoftmaxBandit([[0.5, -0.3, 0.1, 0.9]], [[0.8, 0.1, 0.4, 0.0]]),
        "K2": SoftmaxBandit([[0.2, -0.4]], [[0.7, 0.15]]),
        "edge": SoftmaxBandit([[0.0, 1.0], [0.3, 0.3]], [[0.0, 0.0], [1.0, 1.0]]),  # V = 0 and 1
    }


@pytest.mark.parametrize("name", ["small", "K4", "K2", "edge"])
@pytest.mark.parametrize("G", [2, 3, 7, 40])
def test_leave_one_out_and_full_mean_reproduce_theorem2(name, G):
    m = _bandits()[name].moments()
    np.testing.assert_allclose(per_prompt_advantage_mse(m, "grpo", G),
                               theory.per_prompt_mse(m, "grpo", G), **EXACT)
    np.testing.assert_allclose(per_prompt_advantage_mse(m, "fullmean", G),
                               theory.per_prompt_mse(m, "fullmean", G), **EXACT)
    for B in (1, 3):
        for est in ("grpo", "fullmean"):
            np.testing.assert_allclose(minibatch_advantage_mse(m, est, G, B),
                                       theory.minibatch_mse(m, est, G, B), **EXACT)
    interior = (m.value > 0) & (m.value < 1)  # c(x) is arbitrary where g(x) = 0
    np.testing.assert_allclose(advantage_moments(m, "grpo", G).mean_factor[interior], 1.0,
                               rtol=1e-12)
    # negative control: the same comparison rejects full mean as if it were leave-one-out
    if m.grad_sq.max() > 0:
        assert not np.allclose(per_prompt_advantage_mse(m, "fullmean", G),
                               theory.per_prompt_mse(m, "grpo", G), **EXACT)


def _enumerated(bandit, prompt, G, rule):
    """MSEs against g(x) and the arcsin gradient by summing over all (2K)^G outcomes."""
    action, reward, prob = bandit.enumerate_groups(prompt, G)
    if callable(rule):
        m = reward.sum(axis=1, keepdims=True)
        adv = rule(reward, m, G)
    else:
        adv = get_convention(rule).grouped(reward)  # (M, G)
    score = bandit.scores(np.full(len(prob), prompt), action)  # (M, G, K)
    g_hat = np.einsum("mg,mgk->mk", adv, score) / G
    g = bandit.grad_per_prompt[prompt]
    t = g * arcsin_weight(bandit.value[prompt])
    return (prob @ np.sum((g_hat - g) ** 2, axis=1), prob @ np.sum((g_hat - t) ** 2, axis=1),
            prob @ g_hat)


@pytest.mark.parametrize("name,sizes", [("small", (2, 3, 4)), ("K4", (2, 3)),
                                        ("K2", (2, 4, 6)), ("edge", (2, 3))])
@pytest.mark.parametrize("rule", STD_CONVENTIONS + ("grpo",))
def test_formula_equals_enumeration(name, sizes, rule):
    bandit = _bandits()[name]
    m = bandit.moments()
    for G in sizes:
        exact = advantage_moments(m, rule, G)
        for x in range(bandit.n_prompts):
            mse_g, mse_t, mean = _enumerated(bandit, x, G, rule)
            np.testing.assert_allclose(exact.mse_grad[x], mse_g, **EXACT)
            np.testing.assert_allclose(exact.mse_arcsin[x], mse_t, **EXACT)
            np.testing.assert_allclose(exact.mean_factor[x] * bandit.grad_per_prompt[x], mean,
                                       **EXACT)


def test_enumeration_rejects_a_wrong_table():
    """Negative control: population std in place of Bessel std changes the MSE at every G."""
    bandit = _bandits()["small"]
    m = bandit.moments()
    for G in (2, 3, 4):
        wrong = advantage_moments(m, advantage_table(_population_std, G)).mse_grad
        right = [_enumerated(bandit, x, G, "trl_group")[0] for x in range(bandit.n_prompts)]
        assert not np.allclose(wrong, right, **EXACT)
        # and the callable route itself agrees with enumeration of the same wrong rule
        same = [_enumerated(bandit, x, G, _population_std)[0] for x in range(bandit.n_prompts)]
        np.testing.assert_allclose(wrong, same, **EXACT)


MC_SIZES = (2, 3, 4, 8, 16, 64)


def _monte_carlo(bandit, prompt, G, rule, n, rng):
    """Per-group squared errors against both targets: means and standard errors."""
    sample = bandit.sample_groups(G, n, rng, prompt=prompt)
    adv = get_convention(rule).grouped(sample.reward)  # (n, G)
    score = bandit.scores(sample.prompt, sample.action)  # (n, G, K)
    g_hat = np.einsum("ng,ngk->nk", adv, score) / G
    g = bandit.grad_per_prompt[prompt]
    t = g * arcsin_weight(bandit.value[prompt])
    out = {}
    for key, values in (("grad", np.sum((g_hat - g) ** 2, axis=1)),
                        ("arcsin", np.sum((g_hat - t) ** 2, axis=1)),
                        ("proj", g_hat @ g)):
        out[key] = (values.mean(), values.std(ddof=1) / np.sqrt(n))
    return out


@pytest.mark.parametrize("name,prompt", [("small", 0), ("K4", 0)])
def test_formula_matches_monte_carlo(name, prompt):
    bandit = _bandits()[name]
    m = bandit.moments()
    rng = np.random.default_rng(20260301)
    rejected_wrong = 0
    for G in MC_SIZES:
        exact = advantage_moments(m, "trl_group", G)
        wrong = advantage_moments(m, advantage_table(_population_std, G))
        mc = _monte_carlo(bandit, prompt, G, "trl_group", 40_000 if G < 16 else 10_000, rng)
        for key, predicted, alt in (("grad", exact.mse_grad, wrong.mse_grad),
                                    ("arcsin", exact.mse_arcsin, wrong.mse_arcsin),
                                    ("proj", exact.mean_factor * m.grad_sq,
                                     wrong.mean_factor * m.grad_sq)):
            mean, se = mc[key]
            assert abs(mean - predicted[prompt]) <= Z_TEST * se, (G, key, mean, predicted[prompt])
            rejected_wrong += abs(mean - alt[prompt]) > Z_TEST * se
    # negative control: the population-std rule is rejected by the same check at small G
    assert rejected_wrong >= 3


def test_minibatch_formula_matches_monte_carlo():
    """B = 3 prompts drawn from f, full P*K-dimensional scores: checks the Gram-matrix terms."""
    bandit = small_bandit()
    m = bandit.moments()
    rng = np.random.default_rng(7)
    G, B, n = 4, 3, 30_000
    prompts = bandit.sample_prompts(n * B, rng)
    sample = bandit.sample_groups(G, n * B, rng, prompt=prompts)
    adv = get_convention("trl_group").grouped(sample.reward)
    score = bandit.scores(sample.prompt, sample.action, full=True)  # (nB, G, PK)
    g_hat = (np.einsum("ng,ngk->nk", adv, score) / G).reshape(n, B, -1).mean(axis=1)
    w = arcsin_weight(bandit.value)
    targets = {"grad": bandit.grad,
               "arcsin": (bandit.prompt_prob[:, None] * bandit.grad_per_prompt * w[:, None]).ravel()}
    for target, t in targets.items():
        err = np.sum((g_hat - t) ** 2, axis=1)
        mean, se = err.mean(), err.std(ddof=1) / np.sqrt(n)
        exact = minibatch_advantage_mse(m, "trl_group", G, B, target=target)
        assert abs(mean - exact) <= Z_TEST * se
        # negative control: dropping the cross-prompt term (treating B as 1) is rejected
        assert abs(mean - minibatch_advantage_mse(m, "trl_group", G, 1, target=target)) > Z_TEST * se


def test_all_equal_probability_and_validation():
    np.testing.assert_allclose(all_equal_probability([0.5, 0.1], 3), [0.25, 0.001 + 0.729])
    with pytest.raises(ValueError, match="binary"):
        advantage_moments(SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]],
                                        reward_values=(0.0, 3.0)).moments(), "grpo", 3)
    with pytest.raises(ValueError, match="batch statistics"):
        advantage_table("trl_batch", 4)
    with pytest.raises(ValueError, match="target"):
        per_prompt_advantage_mse(small_bandit().moments(), "grpo", 3, target="value")
    with pytest.raises(ValueError, match=">= 2"):
        advantage_table("grpo", 1)


def test_doctests():
    result = doctest.testmod(advantage_module)
    assert result.attempted > 0 and result.failed == 0


def test_kl_penalty_gradient_matches_the_bandit():
    """Two routes to -tau grad KL: the vectorised formula and J's gradient with and without tau."""
    from ustat_rl.policies.examples import arcsin_conflict_bandit, conflicting_prompts_bandit
    from ustat_rl.training.std import _binary_part, kl_penalty_gradient

    for bandit in (arcsin_conflict_bandit(), conflicting_prompts_bandit()):
        rng = np.random.default_rng(3)
        thetas = rng.normal(size=(3, bandit.dim))
        expected = [bandit.grad(t) - _binary_part(bandit).grad(t) for t in thetas]
        np.testing.assert_allclose(kl_penalty_gradient(bandit, thetas), expected, rtol=1e-10,
                                   atol=1e-13)
