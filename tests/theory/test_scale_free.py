"""The scale-free error, the advice's second target (docs/theory.md, "What a step's progress
depends on"): its closed form from a bandit's exact moments against the enumeration of every
group outcome, with planted wrong formulas that the same comparison rejects."""

import numpy as np
import pytest

from ustat_rl.advantages.gradients import rule_gradient
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory import group_size as owner

pytestmark = pytest.mark.fast

# the closed form and the enumeration are both exact: they differ by rounding alone
RTOL = 1e-9
# a planted formula must miss the enumeration by far more than rounding: at least this much
PLANTED_GAP = 1e-3

RULES = ("vanilla", "grpo", "fullmean", "trl_group", "paper_algorithm2", "verl_grpo")


@pytest.fixture(scope="module")
def bandit():
    # three prompts, uneven rewards and logits: the std-scaled rules' mean leaves g's direction
    return SoftmaxBandit([[0.0, 0.3], [0.5, 0.0], [-0.4, 0.2]],
                         [[0.9, 0.1], [0.2, 0.6], [0.5, 0.3]], prompt_prob=[0.5, 0.3, 0.2])


def enumerated_moments(bandit, rule, group_size, batch_size):
    """``(E g_B, E||g_B||^2)`` by enumerating every outcome of one group at each prompt, then
    composing ``B`` i.i.d. prompts: ``E||g_B||^2 = E_X E||g(X)||^2 / B + (1 - 1/B)||E g||^2``."""
    mean = np.zeros(bandit.dim)
    second = 0.0
    for x, weight in enumerate(bandit.prompt_prob):
        action, reward, prob = bandit.enumerate_groups(x, group_size)  # (M, G), (M, G), (M,)
        score = bandit.scores(np.full(len(prob), x), action, full=True)  # (M, G, P K)
        ghat = rule_gradient(rule, score, reward, per_prompt=True)  # (M, P K)
        mean += weight * (prob @ ghat)
        second += weight * float(prob @ np.sum(ghat**2, axis=1))
    return mean, second / batch_size + (1.0 - 1.0 / batch_size) * float(mean @ mean)


def enumerated_scale_free(bandit, rule, budget, group_size):
    g = bandit.target_gradient()
    mean, second = enumerated_moments(bandit, rule, group_size, budget // group_size)
    return 1.0 - float(g @ mean) ** 2 / (float(g @ g) * second)


@pytest.mark.parametrize("rule", RULES)
def test_scale_free_error_matches_the_enumeration_of_every_group(bandit, rule):
    budget, sizes = 12, [2, 3, 4]
    closed = owner.scale_free_error(bandit.moments(), rule, budget, sizes)
    enumerated = [enumerated_scale_free(bandit, rule, budget, G) for G in sizes]
    np.testing.assert_allclose(closed, enumerated, rtol=RTOL)


def test_the_enumeration_is_the_best_rescaling_it_claims(bandit):
    # a second route to the definition: min over c of E||c g_B - g||^2 / ||g||^2 on a fine grid
    g = bandit.target_gradient()
    mean, second = enumerated_moments(bandit, "trl_group", 4, 3)
    c = np.linspace(0.0, 3.0, 300_001)
    direct = np.min(c**2 * second - 2.0 * c * float(g @ mean) + float(g @ g)) / float(g @ g)
    # the grid's step 1e-5 leaves at most second * step^2 / 4 above the minimum
    assert direct == pytest.approx(enumerated_scale_free(bandit, "trl_group", 12, 4),
                                   abs=second * 1e-10 / float(g @ g))


def test_planted_wrong_formulas_are_rejected_by_the_same_comparison(bandit):
    m, budget, sizes = bandit.moments(), 12, np.array([2, 3, 4])
    enumerated = np.array([enumerated_scale_free(bandit, "trl_group", budget, G) for G in sizes])
    norm = float(m.grad_norm_sq)
    # planted 1: the MSE relative to ||g||^2 without the rescaling
    unscaled = owner.fixed_budget_mse(m, "trl_group", budget, sizes) / norm
    # planted 2: the cross-prompt term (1 - 1/B)||E g_B||^2 dropped from the second moment
    dropped = []
    for G in sizes:
        mean, _ = enumerated_moments(bandit, "trl_group", G, 1)
        g = bandit.target_gradient()
        one = enumerated_moments(bandit, "trl_group", G, 1)[1]
        dropped.append(1.0 - float(g @ mean) ** 2 / (norm * one / (budget // G)))
    for planted in (unscaled, np.array(dropped)):
        assert np.max(np.abs(planted - enumerated) / np.abs(enumerated)) > PLANTED_GAP
    np.testing.assert_allclose(owner.scale_free_error(m, "trl_group", budget, sizes),
                               enumerated, rtol=RTOL)


def test_grpo_keeps_its_argmin_and_the_full_mean_loses_its_shrink(bandit):
    m, budget = bandit.moments(), 48
    sizes = owner.admissible_group_sizes(budget)
    mse = owner.fixed_budget_mse(m, "grpo", budget, sizes)
    free = owner.scale_free_error(m, "grpo", budget, sizes)
    norm = float(m.grad_norm_sq)
    np.testing.assert_allclose(free, mse / (mse + norm), rtol=RTOL)  # k = 1: MSE/(MSE + ||g||^2)
    assert sizes[np.argmin(free)] == sizes[np.argmin(mse)]
    np.testing.assert_allclose(owner.scale_free_error(m, "fullmean", budget, sizes), free,
                               rtol=RTOL)
    # the MSE charges the full mean's (G - 1)/G shrink, most at G = 2: the targets differ there
    assert owner.fixed_budget_mse(m, "fullmean", budget, 2) != pytest.approx(mse[0], rel=1e-3)


def test_bad_input_is_refused_with_the_parameter_named(bandit):
    m = bandit.moments()
    with pytest.raises(ValueError, match="`target` must be one of"):
        owner.check_advice_target("snr")
    with pytest.raises(ValueError, match="`group_size` must divide `budget`"):
        owner.scale_free_error(m, "grpo", 12, 5)
    flat = SoftmaxBandit([[0.0, 0.0]], [[0.5, 0.5]]).moments()  # g = 0: no direction
    with pytest.raises(ValueError, match=r"needs \|\|g\|\|\^2 > 0"):
        owner.scale_free_error(flat, "grpo", 12)
