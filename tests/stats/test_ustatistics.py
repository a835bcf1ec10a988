import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ustat_rl import estimate_zetas, hoeffding_parts, run_monte_carlo, u_statistic, ustat_variance
from ustat_rl.policies.examples import small_bandit
from ustat_rl.stats.ustatistics import squared_mean_norm
from ustat_rl.tolerances import Z_STRICT, Z_TEST

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


# ------------------------------------------------------------------------- squared_mean_norm
def _enumerated_mean(estimator, support, prob, n):
    """``E estimator(sample)`` over every ordered sample of ``n`` draws from ``support``."""
    total = 0.0
    for idx in itertools.product(range(len(support)), repeat=n):
        total += np.prod(prob[list(idx)]) * estimator(support[list(idx)])
    return total


def test_squared_mean_norm_is_unbiased_by_enumeration():
    support = np.array([[1.0, 0.0], [-0.5, 2.0], [0.0, -1.0]])  # (3, d)
    prob = np.array([0.5, 0.3, 0.2])
    mu = prob @ support
    for n in (2, 3, 4):
        mean = _enumerated_mean(lambda s: squared_mean_norm(s)[0], support, prob, n)
        assert mean == pytest.approx(mu @ mu, rel=1e-12)
        # negative control: the squared norm of the sample mean is biased by tr(Sigma)/n
        naive = _enumerated_mean(lambda s: float(np.sum(s.mean(axis=0) ** 2)), support, prob, n)
        trace = float(prob @ np.sum((support - mu) ** 2, axis=1))
        assert naive == pytest.approx(mu @ mu + trace / n, rel=1e-12)
        assert abs(naive - mu @ mu) > 0.1


#: A three-point law of the errors with a mean far from 0 relative to its noise at these n.
SUPPORT, SUPPORT_PROB = np.array([[1.0, 0.0], [-0.5, 2.0], [0.0, -1.0]]), np.full(3, 1 / 3)


def _exact_se(n):
    mu = SUPPORT_PROB @ SUPPORT
    second = (SUPPORT * SUPPORT_PROB[:, None]).T @ SUPPORT  # (d, d) E[e e^T]
    zeta1 = float(SUPPORT_PROB @ (SUPPORT @ mu) ** 2 - (mu @ mu) ** 2)
    zeta2 = float(np.sum(second * second) - (mu @ mu) ** 2)
    return math.sqrt(ustat_variance(zeta1, zeta2, n)), float(mu @ mu)


def test_squared_mean_norm_error_is_the_exact_one_at_large_n():
    """At n = 20,000 the plug-in standard error is within 15% of the exact one (over 300 seeds
    its ratio to the exact one had mean 1.002 and sd 0.031, so 15% is about 5 sd); the error
    without the Hoeffding factor 2, sd(<e, mean e>)/sqrt(n), is rejected by the same bound."""
    n = 20_000
    exact, _ = _exact_se(n)
    sample = SUPPORT[np.random.default_rng(5).choice(3, size=n, p=SUPPORT_PROB)]
    _, se = squared_mean_norm(sample)
    assert se == pytest.approx(exact, rel=0.15)
    without_factor = float(np.std(sample @ sample.mean(axis=0), ddof=1)) / math.sqrt(n)
    assert without_factor != pytest.approx(exact, rel=0.15)


def test_squared_mean_norm_z_is_calibrated():
    """Over 400 data sets of n = 500, ``|z| > 2`` is seen about as often as for a normal z
    (4.55%, 18.2 expected, binomial sd 4.2): the count must lie within 4.5 sd of 18.2 (the
    normal approximation's two-sided 6.8e-6; at n = 500 the U-statistic is close to normal, 300
    data sets gave a z sd of 0.93). Negative control: the standard error halved, rejected."""
    n, sets = 500, 400
    _, truth = _exact_se(n)
    rng = np.random.default_rng(11)
    z = np.empty(sets)
    for k in range(sets):
        estimate, se = squared_mean_norm(SUPPORT[rng.choice(3, size=n, p=SUPPORT_PROB)])
        z[k] = (estimate - truth) / se
    expected = sets * 0.0455
    spread = Z_STRICT * math.sqrt(sets * 0.0455 * (1 - 0.0455))
    assert abs(np.sum(np.abs(z) > 2) - expected) <= spread
    assert abs(np.sum(np.abs(2 * z) > 2) - expected) > spread


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((1, 2)), np.full((3, 2), np.nan)])
def test_squared_mean_norm_names_its_parameter(bad):
    with pytest.raises(ValueError, match="`errors`"):
        squared_mean_norm(bad)
