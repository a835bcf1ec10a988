"""The moments contract and the theory on it: validation, routes that must agree, sharp edges."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ustat_rl import theory
from ustat_rl.policies.examples import conflicting_prompts_bandit, small_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory import PromptMoments, ScalingConstants

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def moments():
    return small_bandit().moments(matrices=True)


def _fields(m: PromptMoments) -> dict:
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


@pytest.mark.parametrize("field, value, message", [
    ("reward_var", lambda m: m.reward_var - 1.0, "reward_var"),
    ("score_sq_centred", lambda m: m.grad_sq * 0.5, "score_sq_centred"),
    ("prompt_prob", lambda m: m.prompt_prob * 2, "must sum to 1"),
    ("value", lambda m: np.append(m.value, 0.0), "shape"),
    ("grad_sq", lambda m: np.full_like(m.grad_sq, np.nan), "finite"),
    ("grad_gram", lambda m: m.grad_gram + np.triu(np.ones_like(m.grad_gram), 1), "symmetric"),
    ("score_sq_reward", lambda m: m.score_sq_reward * 100, "Cauchy-Schwarz|E\\[\\|\\|W\\|\\|\\^2 Z\\]"),
    ("kind", lambda m: "guessed", "kind"),
])
def test_validation_names_the_field(moments, field, value, message):
    kwargs = _fields(moments)
    kwargs[field] = value(moments)
    kwargs["score_sq_reward_var"] = None
    kwargs["grad_norm_sq"] = None
    with pytest.raises(ValueError, match=field):
        PromptMoments(**kwargs)


def test_estimated_moments_skip_only_the_inequalities(moments):
    kwargs = _fields(moments)
    kwargs.update(kind="estimated", score_sq_centred=moments.grad_sq * 0.5)  # noisy, allowed
    PromptMoments(**kwargs)
    kwargs["value"] = np.full(3, 0.5)  # a wrong shape is never allowed
    with pytest.raises(ValueError, match="value"):
        PromptMoments(**kwargs)


def test_matrix_and_trace_forms_agree(moments):
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        for g in (2, 3, 8):
            cov = theory.per_prompt_covariance(moments, est, g)
            trace = np.einsum("pkk->p", cov)
            if est == "fullmean":
                trace = trace + (1 / g) ** 2 * moments.grad_sq
            np.testing.assert_allclose(trace, theory.per_prompt_mse(moments, est, g), rtol=1e-12)
            total = np.trace(theory.minibatch_covariance(moments, est, g, 3))
            if est == "fullmean":
                total += (1 / g) ** 2 * moments.grad_norm_sq
            assert total == pytest.approx(theory.minibatch_mse(moments, est, g, 3), rel=1e-12)


def test_lemma1_variance_is_theorem2(moments):
    z = theory.kernel_zetas(moments)
    for g in (2, 5, 40):
        lemma1 = (4 * (g - 2) * z.zeta1 + 2 * z.zeta2) / (g * (g - 1))
        np.testing.assert_allclose(lemma1, theory.per_prompt_mse(moments, "grpo", g), rtol=1e-12)
    # negative control: the first-order term alone misses the 1/(G(G-1)) part
    g = 5
    assert not np.allclose(4 * z.zeta1 / g, theory.per_prompt_mse(moments, "grpo", g), rtol=1e-3)


def test_loglinear_moments_match_its_tables():
    bandit = conflicting_prompts_bandit(kl_weight=0.3)
    theta = np.random.default_rng(0).normal(0, 0.5, bandit.dim)
    m = bandit.moments(theta)
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        assert theory.minibatch_mse(m, est, 4, 2, prompt_variance_factor=0.5) == pytest.approx(
            bandit.exact_mse(theta, est, 4, 2), rel=1e-12)
    assert m.grad_norm_sq == pytest.approx(bandit.grad(theta) @ bandit.grad(theta), rel=1e-12)


@pytest.mark.parametrize("bandit", [
    SoftmaxBandit([[0.3, -0.2, 0.5]], [[0.9, 0.2, 0.5]]),           # one prompt: c1 = 0
    SoftmaxBandit([[0.3, -0.2], [1.0, 0.0]], [[0.4, 0.4], [0.7, 0.7]]),  # zero gradient
    SoftmaxBandit([[0.3, -0.2, 0.1], [1.0, 0.0, 0.5]], [[0.2, 0.2, 0.2], [0.9, 0.9, 0.9]],
                  reward_values=(-3.0, 5.0)),  # zero gradient, shifted rewards
])
def test_g_star_is_inf_when_c1_vanishes(bandit):
    c = bandit.scaling_constants()
    assert c.c1 == 0.0
    assert bandit.optimal_group_size() == math.inf
    assert c.optimal_group_size(exact=False) == math.inf


def test_g_star_stays_finite_just_above_the_tolerance():
    c = ScalingConstants(1e-6, 1.0, 4.0)
    assert c.optimal_group_size() == pytest.approx(1 + 2000.0)
    assert c.best_group_size(60) in (30, 60)


def test_fixed_budget_curve_has_its_minimum_at_g_star():
    c = small_bandit().scaling_constants()
    grid = np.linspace(1.05, 60, 200_000)
    assert grid[np.argmin(c.fixed_budget_mse(grid, 64))] == pytest.approx(
        c.optimal_group_size(), abs=1e-3)
    assert c.fixed_budget_minimum(64) == pytest.approx(c.fixed_budget_mse(
        c.optimal_group_size(), 64), rel=1e-12)
    with pytest.raises(ValueError, match="group_size"):
        c.fixed_budget_mse(1.0, 64)
    with pytest.raises(ValueError, match="budget"):
        theory.admissible_group_sizes(1)


def test_reversal_condition_matches_the_mse_sign_under_assumption2():
    from ustat_rl.policies.examples import reversal_bandit

    for p in (0.1, 0.3, 0.7):
        m = reversal_bandit(p).moments()
        sizes = np.arange(2, 40)
        exact = theory.grpo_vanilla_margin(m, sizes)[0] > 0
        np.testing.assert_array_equal(exact, theory.reversal_condition(m, sizes)[0])


def test_bad_arguments_name_the_parameter(moments):
    with pytest.raises(ValueError, match="estimator"):
        theory.per_prompt_mse(moments, "rloo", 4)
    with pytest.raises(ValueError, match="group_size"):
        theory.per_prompt_mse(moments, "grpo", 1)
    with pytest.raises(ValueError, match="baseline"):
        theory.per_prompt_mse(moments, "baseline", 4)
    with pytest.raises(TypeError, match="moments"):
        theory.scaling_constants({"c1": 1})


def _two_prompts(grad_sq, grad_norm_sq, noise=2.0):
    # estimated moments, so only c1's two thresholds act: c1 = mean grad_sq - grad_norm_sq
    g = np.full(2, grad_sq)
    return PromptMoments(prompt_prob=np.full(2, 0.5), value=np.full(2, 0.5),
                         reward_var=np.full(2, 0.25), score_sq=np.ones(2),
                         score_sq_reward=np.full(2, 0.5), score_sq_reward_sq=np.full(2, noise),
                         score_sq_centred=0.25 + g, grad_sq=g, grad_gram=np.diag(g),
                         kind="estimated", grad_norm_sq=grad_norm_sq)


@pytest.mark.parametrize("grad_sq, grad_norm_sq, kept", [
    # documented threshold C1_RTOL = 1e-10 of E||g(X)||^2 (= 1 here): 1.5e-10 is kept, 0.5e-10
    # is cancellation and becomes 0 (rounding in c1 is ~1e-16, far below either distance)
    (1.0, 1.0 - 1.5e-10, True),
    (1.0, 1.0 - 0.5e-10, False),
    # documented C1_NOISE_RTOL = 1e-24 of E||WZ||^2 (= 2 here), gradients at rounding level
    (3e-24, 0.0, True),
    (1e-24, 0.0, False),
])
def test_c1_is_zeroed_exactly_below_its_documented_thresholds(grad_sq, grad_norm_sq, kept):
    c = theory.scaling_constants(_two_prompts(grad_sq, grad_norm_sq))
    if kept:
        assert c.c1 == pytest.approx(grad_sq - grad_norm_sq, rel=1e-5)
        assert math.isfinite(c.optimal_group_size())
    else:
        assert c.c1 == 0.0 and c.optimal_group_size() == math.inf


def test_results_are_frozen():
    c = ScalingConstants(1.0, 2.0, 16.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.c1 = 2.0
    zetas = theory.kernel_zetas(small_bandit().moments())
    with pytest.raises(dataclasses.FrozenInstanceError):
        zetas.zeta1 = zetas.zeta2


def test_fixed_budget_arguments_smallest_legal_and_messages():
    c = ScalingConstants(1.0, 2.0, 16.0)
    # N = 2 is the smallest budget (one group of two draws) and is accepted by both forms
    assert c.fixed_budget_mse(2, 2) == pytest.approx((2.0 + 2.0 + 16.0) / 2)
    assert c.fixed_budget_minimum(2) == pytest.approx((1.0 + 2.0 + 8.0) / 2)
    for call in (lambda: c.fixed_budget_mse(2, 1), lambda: c.fixed_budget_minimum(1)):
        # the one budget check of ustat_rl.theory.group_size, with its reason
        with pytest.raises(ValueError, match=r"^`budget` must be an integer >= 2 \(a budget needs "
                                             r"at least one group of 2\), got 1$"):
            call()
    with pytest.raises(ValueError, match=r"^`group_size` must contain only finite"):
        c.fixed_budget_mse(np.nan, 64)
    with pytest.raises(ValueError, match=r"^`group_size` must be > 1 \(the leave-one-out "
                                         r"baseline needs two samples\), got 1$"):
        c.fixed_budget_mse([1.0, 3.0], 64)
    with pytest.raises(TypeError, match=r"^`moments` must be a PromptMoments, got dict$"):
        theory.kernel_zetas({"c1": 1})


def test_prompt_baseline_route_agrees_with_oracle_and_scalars_broadcast(moments):
    sizes = np.array([2, 5])
    # second route: the prompt-only baseline b(x) = V(x) is the oracle estimator
    np.testing.assert_allclose(theory.per_prompt_mse(moments, "baseline", sizes,
                                                     baseline=moments.value),
                               theory.per_prompt_mse(moments, "oracle", sizes), rtol=1e-12)
    # a scalar baseline is the same as that value at every prompt
    n_prompts = moments.value.size
    np.testing.assert_allclose(theory.per_prompt_mse(moments, "baseline", 4, baseline=0.3),
                               theory.per_prompt_mse(moments, "baseline", 4,
                                                     baseline=np.full(n_prompts, 0.3)))


def test_single_draw_mse_for_estimators_without_leave_one_out(moments):
    # i.i.d. mean of G draws: the per-prompt MSE of vanilla and oracle scales as 1/G, down to G = 1
    for est in ("vanilla", "oracle"):
        np.testing.assert_allclose(theory.per_prompt_mse(moments, est, 1),
                                   2.0 * theory.per_prompt_mse(moments, est, 2), rtol=1e-12)


def test_fullmean_at_one_sample_is_zero_with_mse_the_squared_gradient(moments):
    # z - m_g vanishes for a group of one, so the estimate is 0 and its MSE is ||g(x)||^2
    np.testing.assert_allclose(theory.per_prompt_mse(moments, "fullmean", 1), moments.grad_sq,
                               rtol=1e-12)


def test_mse_argument_messages_are_exact(moments):
    n_prompts = moments.value.size
    cases = [
        (("grpo", 1), {}, r"^`group_size` must be an integer >= 2 for the leave-one-out "
                          r"baseline, got 1$"),
        (("vanilla", 0), {}, r"^`group_size` must be an integer >= 1, got 0$"),
        (("grpo", np.full((2, 2), 4)), {}, r"^`group_size` must be an integer or a 1-D array of "
                                           r"integers, got shape \(2, 2\)$"),
        (("rloo", 4), {}, r"^`estimator` must be one of the \d+ registered advantage rules"),
        (("baseline", 4), {}, r"^`baseline` is required when `estimator` is 'baseline'$"),
        (("baseline", 4), {"baseline": np.zeros(n_prompts + 1)},
         rf"^`baseline` must be a scalar or shape \({n_prompts},\), got \({n_prompts + 1},\)$"),
        (("baseline", 4), {"baseline": np.zeros((1, n_prompts))}, r"^`baseline` must have "),
        (("baseline", 4), {"baseline": np.nan}, r"^`baseline` must contain only finite"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            theory.per_prompt_mse(moments, *args, **kwargs)
    with pytest.raises(TypeError, match=r"^`group_size` must be an integer, got 2.0 of type float$"):
        theory.per_prompt_mse(moments, "grpo", np.array([2.0]))
    with pytest.raises(TypeError, match=r"^`moments` must be a PromptMoments, got dict$"):
        theory.per_prompt_mse({"c1": 1}, "grpo", 4)


def test_shrink_factor_links_the_full_mean_and_leave_one_out_estimators():
    # second route: the estimators themselves (C2), on one random group of G = 5
    from ustat_rl import fullmean_gradient, grpo_gradient

    rng = np.random.default_rng(7)
    score, reward = rng.normal(size=(5, 3)), rng.normal(size=5)
    np.testing.assert_allclose(fullmean_gradient(score, reward),
                               theory.shrink_factor(5) * grpo_gradient(score, reward), rtol=1e-12)


def test_baseline_argument_only_with_the_baseline_estimator(moments):
    with pytest.raises(ValueError, match=r"^`baseline` is only used with `estimator='baseline'`$"):
        theory.per_prompt_mse(moments, "grpo", 4, baseline=0.3)
