"""Log-linear bandit: exact J, gradient, Hessian, noise covariance and optimum by two routes."""

import itertools

import numpy as np
import pytest

from ustat_rl.policies.examples import conflicting_prompts_bandit, realisable_kl_bandit
from ustat_rl.policies.loglinear import LogLinearBandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast

FD_STEP = 1e-6
FD_TOL = 1e-7  # central differences: error O(h^2) ~ 1e-12 plus rounding O(eps/h) ~ 1e-10


@pytest.fixture(scope="module")
def kl():
    return realisable_kl_bandit()


def _fd(fun, theta):
    eye = np.eye(theta.size)
    return np.array([(fun(theta + FD_STEP * e) - fun(theta - FD_STEP * e)) / (2 * FD_STEP)
                     for e in eye])


@pytest.mark.parametrize("tau", [0.0, 0.7])
def test_gradient_and_hessian_match_finite_differences(tau):
    bandit = conflicting_prompts_bandit(kl_weight=tau)
    theta = np.random.default_rng(0).normal(size=bandit.dim)
    np.testing.assert_allclose(_fd(bandit.objective, theta), bandit.grad(theta), atol=FD_TOL)
    np.testing.assert_allclose(_fd(bandit.grad, theta), bandit.hessian(theta), atol=FD_TOL)
    # negative control: the Hessian without the KL curvature term differs when tau > 0
    if tau:
        plain = conflicting_prompts_bandit(kl_weight=0.0)
        assert np.abs(plain.hessian(theta) - bandit.hessian(theta)).max() > 100 * FD_TOL


def test_tabular_case_equals_softmax_bandit():
    reward = [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]]
    tab = LogLinearBandit.tabular(reward, [0.3, 0.7])
    theta = np.random.default_rng(1).normal(size=6)
    ref = SoftmaxBandit(theta.reshape(2, 3), reward, [0.3, 0.7])
    np.testing.assert_allclose(tab.grad(theta), ref.grad, atol=1e-15)
    np.testing.assert_allclose(tab.objective(theta), ref.prompt_prob @ ref.value, rtol=1e-14)
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        for g, b in ((2, 1), (5, 3)):
            np.testing.assert_allclose(tab.exact_mse(theta, est, g, b), ref.exact_mse(est, g, b),
                                       rtol=1e-12)
    cov = tab.prompt_covariance(theta, "oracle", 1)
    for x in range(2):
        block = cov[x][x * 3:(x + 1) * 3, x * 3:(x + 1) * 3]
        np.testing.assert_allclose(block, ref.sigma_oracle[x], atol=1e-15)
    mine, theirs = tab.scaling_constants(theta), ref.scaling_constants()
    np.testing.assert_allclose([mine.c1, mine.c2, mine.c3], [theirs.c1, theirs.c2, theirs.c3],
                               rtol=1e-12)


@pytest.mark.parametrize("estimator", ["vanilla", "grpo", "oracle", "fullmean", "baseline"])
def test_prompt_covariance_equals_enumeration(estimator):
    # every (action, reward) outcome of a group of G = 3 at each prompt: an independent route
    bandit = conflicting_prompts_bandit(kl_weight=0.3)
    theta = np.random.default_rng(2).normal(0, 0.5, size=bandit.dim)
    group = 3
    baseline = 0.2 if estimator == "baseline" else None
    formula = bandit.prompt_covariance(theta, estimator, group, baseline=baseline)
    m = bandit.state(theta)
    lo, hi = bandit.reward_values
    enumerated = np.zeros_like(formula)
    for x in range(bandit.n_prompts):
        outcomes = [(a, z, m.policy[x, a] * (p if z == hi else 1 - p))
                    for a in range(bandit.n_actions)
                    for z, p in ((lo, bandit.reward_prob[x, a]), (hi, bandit.reward_prob[x, a]))]
        mean, second = 0.0, 0.0
        for combo in itertools.product(outcomes, repeat=group):
            prob = np.prod([c[2] for c in combo])
            w = np.array([m.score[x, c[0]] for c in combo])  # (G, d)
            z = np.array([c[1] - bandit.kl_weight * np.log(m.policy[x, c[0]])
                          + bandit.kl_weight * bandit.ref_log_policy[x, c[0]] for c in combo])
            base = {"vanilla": 0.0, "oracle": m.value[x], "baseline": 0.2,
                    "grpo": (z.sum() - z) / (group - 1), "fullmean": z.mean()}[estimator]
            est = w.T @ (z - base) / group
            mean = mean + prob * est
            second = second + prob * np.outer(est, est)
        enumerated[x] = second - np.outer(mean, mean)
    np.testing.assert_allclose(enumerated, formula, atol=1e-13)
    # negative control: at G = 3 the GRPO covariance is not the oracle's Sigma/G
    if estimator == "grpo":
        assert np.abs(enumerated - bandit.prompt_covariance(theta, "oracle", group)).max() > 1e-4


def test_realisable_optimum_closed_form(kl):
    bandit, theta_star = kl
    opt = bandit.optimum()
    np.testing.assert_allclose(opt.theta, theta_star, atol=1e-12)
    tau = bandit.kl_weight
    free_energy = tau * bandit.prompt_prob @ np.log(np.sum(np.exp(
        bandit.ref_log_policy + bandit.reward_mean / tau), axis=1))
    assert opt.value == pytest.approx(free_energy, rel=1e-13)
    # -H* = tau * Fisher information on the identifiable directions
    m = bandit.state(theta_star)
    fisher = np.einsum("p,pk,pkd,pke->de", bandit.prompt_prob, m.policy, m.score, m.score)
    np.testing.assert_allclose(-opt.hessian, tau * opt.basis.T @ fisher @ opt.basis, atol=1e-13)
    # per-prompt gradients vanish at a realisable optimum
    np.testing.assert_allclose(m.grad_per_prompt, 0.0, atol=1e-14)


def test_maximisers_form_an_affine_set(kl):
    bandit, theta_star = kl
    rng = np.random.default_rng(3)
    shift = bandit.null_basis @ rng.normal(size=bandit.null_basis.shape[1])
    assert bandit.objective(theta_star + shift) == pytest.approx(bandit.objective(theta_star),
                                                                 abs=1e-14)
    other = bandit.optimum(theta_init=theta_star + shift + 0.3 * bandit.identifiable_basis[:, 0])
    np.testing.assert_allclose(other.theta, theta_star + shift, atol=1e-10)
    assert other.distance(theta_star + 2 * shift) == pytest.approx(0.0, abs=1e-10)
    # a non-null move lowers J
    assert bandit.objective(theta_star + 0.1 * bandit.identifiable_basis[:, 0]) < other.value


@pytest.mark.parametrize("estimator", ["vanilla", "grpo", "oracle", "fullmean"])
def test_sampler_matches_exact_moments(kl, estimator):
    bandit, _ = kl
    rng = np.random.default_rng(4)
    theta = bandit.ref_theta + rng.normal(0, 0.3, size=bandit.dim)
    reps, group, batch = 40_000, 4, 2
    u = rng.random((reps, bandit.draws_per_step(estimator, group, batch)))
    est = bandit.sample_gradient(np.tile(theta, (reps, 1)), u, estimator, group, batch)
    shrink = (group - 1) / group if estimator == "fullmean" else 1.0
    mean = shrink * bandit.grad(theta)
    cov = bandit.noise_covariance(theta, estimator, group, batch)
    q = bandit.identifiable_basis  # the estimate has no component along the null space
    np.testing.assert_allclose(est @ bandit.null_basis, 0.0, atol=1e-12)
    z = (est - mean) @ q @ np.linalg.inv(np.linalg.cholesky(q.T @ cov @ q)).T  # whitened
    assert np.all(np.abs(z.mean(axis=0)) <= Z_TEST / np.sqrt(reps))
    sq = np.sum((est - mean) ** 2, axis=1)
    se = sq.std(ddof=1) / np.sqrt(reps)
    assert abs(sq.mean() - np.trace(cov)) <= Z_TEST * se
    # negative control: dropping the prompt-variance term c1/B (Proposition 3) is rejected
    m = bandit.state(theta)
    c1 = bandit.prompt_prob @ np.sum(m.grad_per_prompt**2, axis=1) - m.grad @ m.grad
    assert abs(sq.mean() - (np.trace(cov) - shrink**2 * c1 / batch)) > Z_TEST * se


def test_bad_input_is_rejected(kl):
    bandit, _ = kl
    with pytest.raises(ValueError, match="theta"):
        bandit.grad(np.zeros(bandit.dim + 1))
    with pytest.raises(ValueError, match="estimator"):
        bandit.noise_covariance(bandit.ref_theta, "ppo", 4)
    with pytest.raises(ValueError, match="group_size"):
        bandit.noise_covariance(bandit.ref_theta, "grpo", 1)
    with pytest.raises(ValueError, match="baseline"):
        bandit.noise_covariance(bandit.ref_theta, "baseline", 4)
    with pytest.raises(ValueError, match="kl_weight"):
        LogLinearBandit(np.zeros((1, 2, 1)), [[0.5, 0.5]], kl_weight=-1.0)
    with pytest.raises(ValueError, match="reward_prob"):
        LogLinearBandit(np.zeros((1, 2, 1)), [[0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match="kl_weight > 0"):
        conflicting_prompts_bandit(kl_weight=0.0).optimum()


@pytest.mark.parametrize("batch", [3, 8, 10])
def test_finite_prompt_set_sampler_matches_exact_covariance(batch):
    bandit = conflicting_prompts_bandit(strength=3.0, prompt_sampling="stratified")
    rng = np.random.default_rng(5)
    theta = rng.normal(0, 2.0, size=bandit.dim)
    reps, group = 20_000, 16  # large G: the prompt term dominates the noise
    u = rng.random((reps, bandit.draws_per_step("oracle", group, batch)))
    est = bandit.sample_gradient(np.tile(theta, (reps, 1)), u, "oracle", group, batch)
    sq = np.sum((est - bandit.grad(theta)) ** 2, axis=1)
    se = sq.std(ddof=1) / np.sqrt(reps)
    exact = np.trace(bandit.noise_covariance(theta, "oracle", group, batch))
    assert abs(sq.mean() - exact) <= Z_TEST * se
    # negative control: the i.i.d. formula (no finite-population correction) is rejected
    iid = conflicting_prompts_bandit(strength=3.0)
    assert abs(sq.mean() - np.trace(iid.noise_covariance(theta, "oracle", group, batch))) > (
        Z_TEST * se)
    assert bandit.prompt_variance_factor(16) == 0.0
