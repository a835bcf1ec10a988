import numpy as np
import pytest

from ustat_rl import SoftmaxBandit, grpo_gradient, run_monte_carlo
from ustat_rl.policies.examples import assumption2_bandit, small_bandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast


@pytest.fixture
def bandit():
    return small_bandit()


def test_enumerated_moments_match_closed_forms(bandit):
    for x in range(bandit.n_prompts):
        action, reward, prob = bandit.enumerate_groups(x, 1)
        w = bandit.scores(np.full(len(prob), x), action)[:, 0]  # (M, K)
        z = reward[:, 0]
        np.testing.assert_allclose(prob.sum(), 1.0)
        np.testing.assert_allclose(prob @ z, bandit.value[x])
        np.testing.assert_allclose(prob @ (w * z[:, None]), bandit.grad_per_prompt[x])
        np.testing.assert_allclose(prob @ np.sum(w**2, axis=1), bandit.score_sq_norm[x])
        resid = w * (z - bandit.value[x])[:, None]
        cov = (resid * prob[:, None]).T @ resid - np.outer(bandit.grad_per_prompt[x],
                                                           bandit.grad_per_prompt[x])
        np.testing.assert_allclose(cov, bandit.sigma_oracle[x], atol=1e-14)
        np.testing.assert_allclose(np.trace(cov), bandit.trace_sigma_oracle[x])


def test_gradient_matches_finite_difference_of_objective(bandit):
    def objective(logits):
        b = SoftmaxBandit(logits, bandit.reward_prob, bandit.prompt_prob)
        return b.prompt_prob @ b.value

    eps = 1e-6
    fd = np.zeros(bandit.dim)
    for j in range(bandit.dim):
        step = np.zeros(bandit.dim)
        step[j] = eps
        up = objective((bandit.logits.ravel() + step).reshape(bandit.logits.shape))
        down = objective((bandit.logits.ravel() - step).reshape(bandit.logits.shape))
        fd[j] = (up - down) / (2 * eps)
    np.testing.assert_allclose(bandit.grad, fd, atol=1e-9)


def test_exact_mse_matches_enumeration_for_every_estimator(bandit):
    for g in (2, 3):
        for x in range(bandit.n_prompts):
            action, reward, prob = bandit.enumerate_groups(x, g)
            w = bandit.scores(np.full(len(prob), x), action)
            est = grpo_gradient(w, reward, per_prompt=True)
            mse = prob @ np.sum((est - bandit.grad_per_prompt[x]) ** 2, axis=1)
            np.testing.assert_allclose(bandit.exact_mse_per_prompt("grpo", g)[x], mse)


def test_scaling_constants_reassemble_minibatch_mse(bandit):
    c = bandit.scaling_constants()
    for g, b in ((2, 1), (5, 3)):
        np.testing.assert_allclose(bandit.exact_mse("grpo", g, b),
                                   (c.c1 + c.c2 / g + c.c3 / (g * (g - 1))) / b)
    assert bandit.optimal_group_size() == pytest.approx(1 + np.sqrt(c.c3 / c.c1))
    assert bandit.optimal_group_size(exact=False) == pytest.approx(np.sqrt(c.c3 / c.c1))


def test_scaling_constants_at_other_prompt_weights_equal_reweighted_moments():
    """``prompt_prob=`` is ``moments.reweight`` without new moments (bootstrap over prompts)."""
    from ustat_rl import theory

    m = SoftmaxBandit([[0.3, -0.2, 0.5], [1.0, 0.0, -1.0], [0.0, 0.4, 0.1]],
                      [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3], [0.5, 0.5, 0.9]]).moments()
    for w in ([0.5, 0.0, 0.5], [0.2, 0.3, 0.5]):
        fast = theory.scaling_constants(m, prompt_prob=w)
        slow = theory.scaling_constants(m.reweight(np.array(w)))
        np.testing.assert_allclose([fast.c1, fast.c2, fast.c3], [slow.c1, slow.c2, slow.c3],
                                   rtol=1e-13)
    # negative control: other weights give other constants
    assert theory.scaling_constants(m, prompt_prob=[0.5, 0.0, 0.5]).c1 != pytest.approx(
        theory.scaling_constants(m).c1, rel=1e-3)
    with pytest.raises(ValueError, match="prompt_prob"):
        theory.scaling_constants(m, prompt_prob=[0.5, 0.5])
    with pytest.raises(ValueError, match="prompt_prob"):
        theory.scaling_constants(m, prompt_prob=[1.5, -0.5, 0.0])


def test_single_prompt_has_infinite_optimal_group_size():
    b = SoftmaxBandit([[0.0, 1.0]], [[0.2, 0.7]])
    assert b.scaling_constants().c1 == pytest.approx(0.0, abs=1e-15)
    assert b.optimal_group_size() == np.inf


def test_sampler_law_matches_policy_and_rewards(bandit):
    # Frequencies of (action, reward) at prompt 1 against exact probabilities, z = Z_TEST.
    comp = bandit.hoeffding(1)

    def statistic(rng, n):
        s = bandit.sample_groups(1, n, rng, prompt=1)
        outcome = 2 * s.action[:, 0] + (s.reward[:, 0] > 0.5)
        return np.eye(2 * bandit.n_actions)[outcome]

    est = run_monte_carlo(statistic, 50_000, seed=3)
    assert np.all(np.abs(est.mean - comp.outcome_prob) <= Z_TEST * est.std_error + 1e-12)


def test_assumption2_bandit_has_zero_covariance():
    np.testing.assert_allclose(assumption2_bandit().score_reward_covariance, 0.0, atol=1e-14)


def test_full_scores_embed_blocks(bandit):
    s = bandit.sample_groups(3, 4, np.random.default_rng(0))
    full = bandit.scores(s.prompt, s.action, full=True)
    within = bandit.scores(s.prompt, s.action)
    k = bandit.n_actions
    for i, x in enumerate(s.prompt):
        np.testing.assert_array_equal(full[i][:, x * k:(x + 1) * k], within[i])
        assert np.count_nonzero(np.delete(full[i], np.s_[x * k:(x + 1) * k], axis=1)) == 0


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(logits=[[0.0, np.nan]], reward_prob=[[0.5, 0.5]]), ValueError, "logits"),
    (dict(logits=[[0.0, np.inf]], reward_prob=[[0.5, 0.5]]), ValueError, "logits"),
    (dict(logits=[[0.0, 1.0]], reward_prob=[[1.5, 0.5]]), ValueError, "reward_prob"),
    (dict(logits=[[0.0, 1.0]], reward_prob=[[-0.1, 0.5]]), ValueError, "reward_prob"),
    (dict(logits=[[0.0, 1.0]], reward_prob=[[0.5, 0.5, 0.1]]), ValueError, "reward_prob"),
    (dict(logits=[[0.0, 1.0]], reward_prob=[[0.5, 0.5]], prompt_prob=[0.5]), ValueError,
     "prompt_prob"),
    (dict(logits=[[0.0, 1.0], [0.0, 1.0]], reward_prob=[[0.5, 0.5]] * 2, prompt_prob=[0.5, 0.6]),
     ValueError, "prompt_prob"),
    (dict(logits=np.zeros((0, 2)), reward_prob=np.zeros((0, 2))), ValueError, "logits"),
    (dict(logits=[[0.0]], reward_prob=[[0.5]]), ValueError, "logits"),
    (dict(logits=[[0.0, 1.0]], reward_prob=[[0.5, 0.5]], reward_values=(0.0, np.nan)), ValueError,
     "reward_values"),
])
def test_bad_construction(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SoftmaxBandit(**kwargs)


def test_bad_method_arguments(bandit):
    with pytest.raises(ValueError, match="group_size"):
        bandit.exact_mse("grpo", 1)
    with pytest.raises(TypeError, match="group_size"):
        bandit.exact_mse("grpo", 4.0)
    with pytest.raises(TypeError, match="batch_size"):
        bandit.exact_mse("oracle", 4, batch_size=1.5)
    with pytest.raises(ValueError, match="estimator"):
        bandit.exact_mse("ppo", 4)
    with pytest.raises(ValueError, match="prompt"):
        bandit.hoeffding(5)
    with pytest.raises(ValueError, match="group_size"):
        bandit.enumerate_groups(0, 20)
    with pytest.raises(TypeError, match="prompt"):
        bandit.sample_groups(2, 3, 0, prompt=0.5)
