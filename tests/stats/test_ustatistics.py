import numpy as np
import pytest
from scipy import stats

from ustat_rl import estimate_zetas, hoeffding_parts, run_monte_carlo, u_statistic, ustat_variance
from ustat_rl.policies.examples import small_bandit
from ustat_rl.tolerances import Z_TEST

pytestmark = pytest.mark.fast


def _kernel(a, b):
    return 0.5 * (a[..., :-1] - b[..., :-1]) * (a[..., -1:] - b[..., -1:])


def _data(bandit, x, g, rng):
    s = bandit.sample_groups(g, 1, rng, prompt=x)
    return np.column_stack([bandit.scores(s.prompt, s.action)[0], s.reward[0]])


def test_u_statistic_of_variance_kernel_is_unbiased_sample_variance():
    x = np.random.default_rng(0).normal(size=(7, 1))
    np.testing.assert_allclose(u_statistic(lambda a, b: 0.5 * (a - b) ** 2, x)[0], np.var(x, ddof=1))


def test_hoeffding_parts_identity_and_orthogonality():
    bandit = small_bandit()
    comp = bandit.hoeffding(0)

    def h1(d):
        return 0.5 * (d[:, :-1] * (d[:, -1:] - bandit.value[0]) + comp.h0)

    def statistic(rng, n):
        out = np.empty((n, 1))
        for i in range(n):
            p = hoeffding_parts(_kernel, _data(bandit, 0, 6, rng), comp.h0, h1)
            np.testing.assert_allclose(p.u, p.h0 + p.linear + p.degenerate, atol=1e-14)
            out[i] = p.linear @ p.degenerate
        return out

    est = run_monte_carlo(statistic, 4000, seed=5)
    assert abs(est.mean[0]) <= Z_TEST * est.std_error[0]


def test_zeta_estimates_are_unbiased_and_variance_formula_holds():
    bandit = small_bandit()
    comp = bandit.hoeffding(1)
    g = 6

    def statistic(rng, n):
        out = np.empty((n, 4))
        for i in range(n):
            d = _data(bandit, 1, g, rng)
            z = estimate_zetas(_kernel, d)
            u = u_statistic(_kernel, d)
            # last column: the naive mean of ||h_ij||^2, which forgets to subtract ||h0||^2
            out[i] = z.zeta1, z.zeta2, np.sum((u - comp.h0) ** 2), z.zeta2 + z.h0_sq
        return out

    est = run_monte_carlo(statistic, 6000, seed=6)
    truth = [comp.zeta1, comp.zeta2, ustat_variance(comp.zeta1, comp.zeta2, g)]
    assert np.all(np.abs(est.mean[:3] - truth) <= Z_TEST * est.std_error[:3])
    # negative control: the naive estimate is rejected by the same tolerance
    assert abs(est.mean[3] - comp.zeta2) > Z_TEST * est.std_error[3]


def test_bad_input():
    # messages open with the parameter they are about (anchored: a decorated name fails)
    with pytest.raises(ValueError, match=r"^`sample` needs at least 4 observations"):
        estimate_zetas(_kernel, np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"^`n` must be an integer >= 2, got 1$"):
        ustat_variance(0.1, 0.2, 1)
    with pytest.raises(ValueError, match=r"^`zeta1` must be >= 0.0, got -0.1$"):
        ustat_variance(-0.1, 0.2, 5)
    with pytest.raises(ValueError, match=r"^`zeta2` must be >= 0.0, got -0.2$"):
        ustat_variance(0.1, -0.2, 5)
    with pytest.raises(ValueError, match=r"^`kernel` returned non-finite values$"):
        u_statistic(lambda a, b: np.full(np.broadcast(a, b).shape, np.nan), np.ones((3, 1)))
    with pytest.raises(ValueError, match=r"^`kernel` must broadcast to \(3, 3, \.\.\.\), "
                                         r"got \(3,\)$"):
        u_statistic(lambda a, b: np.zeros(3), np.ones((3, 1)))


def _variance_kernel(x, y):
    return 0.5 * (x - y) ** 2


def test_smallest_samples_and_scalar_kernels():
    # a 1-D sample with a scalar kernel: the unbiased sample variance of (1, 2, 4) is 7/3
    np.testing.assert_allclose(u_statistic(_variance_kernel, [1.0, 2.0, 4.0]), [7.0 / 3.0])
    # two observations are enough for an order-2 U-statistic: the one pair's kernel value
    np.testing.assert_allclose(u_statistic(_variance_kernel, [1.0, 3.0]), [2.0])
    for sample, shape in (([5.0], r"\(1,\)"), (5.0, r"\(\)")):
        with pytest.raises(ValueError, match=rf"^`sample` needs at least 2 observations, got "
                                             rf"shape {shape}$"):
            u_statistic(_variance_kernel, sample)


@pytest.mark.parametrize("group_size", [2, 3, 4])
def test_projected_grpo_cumulants_match_enumeration(group_size):
    from ustat_rl.policies.enumeration import enumerate_prompt_estimates
    from ustat_rl.theory.edgeworth import projected_grpo_cumulants

    bandit, x = small_bandit(), 1
    u = bandit.grad_per_prompt[x] / np.linalg.norm(bandit.grad_per_prompt[x])
    values, prob = enumerate_prompt_estimates(bandit, x, group_size, "grpo")
    t = values @ u
    c = t - prob @ t
    central = [prob @ c**j for j in (2, 3, 4)]
    enum = [prob @ t, central[0], central[1], central[2] - 3 * central[0] ** 2]
    got = projected_grpo_cumulants(bandit.policy[x], bandit.reward_prob[x],
                                   bandit.score_table[x] @ u, bandit.reward_values, group_size)
    np.testing.assert_allclose(got, enum, rtol=1e-9, atol=1e-15)


def test_projected_grpo_cumulants_variance_is_lemma1_and_input_errors():
    from ustat_rl.policies.examples import arithmetic_bandit
    from ustat_rl.theory.edgeworth import edgeworth_cdf, projected_grpo_cumulants

    bandit, x, g = arithmetic_bandit(2.8), 3, 256
    u = bandit.grad_per_prompt[x] / np.linalg.norm(bandit.grad_per_prompt[x])
    comp = bandit.hoeffding(x)
    h1c, hc = (comp.h1 - comp.h0) @ u, (comp.kernel - comp.h0) @ u
    zeta1 = comp.outcome_prob @ h1c**2
    zeta2 = comp.outcome_prob @ hc**2 @ comp.outcome_prob
    args = (bandit.policy[x], bandit.reward_prob[x], bandit.score_table[x] @ u,
            bandit.reward_values)
    kappa = projected_grpo_cumulants(*args, g)
    np.testing.assert_allclose(kappa[:2], [np.linalg.norm(bandit.grad_per_prompt[x]),
                                           ustat_variance(zeta1, zeta2, g)], rtol=1e-10)
    grid = np.linspace(-4, 4, 9)
    np.testing.assert_allclose(edgeworth_cdf(grid, 0.0, 0.0), stats.norm.cdf(grid))
    with pytest.raises(ValueError, match="group_size"):
        projected_grpo_cumulants(*args, 1)
    with pytest.raises(ValueError, match="reward_prob"):
        projected_grpo_cumulants(args[0], np.zeros_like(args[1]), args[2], args[3], g)
