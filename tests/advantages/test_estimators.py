import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ustat_rl import (
    ESTIMATORS,
    baseline_gradient,
    fullmean_gradient,
    grpo_gradient,
    grpo_gradient_pairwise,
    grpo_kernel,
    leave_one_out_baseline,
    oracle_gradient,
    vanilla_gradient,
)

pytestmark = pytest.mark.fast

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


@st.composite
def groups(draw, min_g=2):
    g = draw(st.integers(min_g, 9))
    d = draw(st.integers(1, 4))
    score = draw(arrays(np.float64, (g, d), elements=finite))
    reward = draw(arrays(np.float64, (g,), elements=finite))
    return score, reward


@settings(max_examples=40, deadline=None)
@given(groups())
def test_leave_one_out_equals_pairwise_u_statistic(group):
    score, reward = group
    np.testing.assert_allclose(grpo_gradient(score, reward), grpo_gradient_pairwise(score, reward),
                               rtol=1e-10, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(groups())
def test_fullmean_is_shrunk_leave_one_out(group):
    score, reward = group
    g = len(reward)
    np.testing.assert_allclose(fullmean_gradient(score, reward),
                               (g - 1) / g * grpo_gradient(score, reward), rtol=1e-10, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_permutation_invariance(group, random):
    score, reward = group
    perm = np.array(random.sample(range(len(reward)), len(reward)))
    np.testing.assert_allclose(grpo_gradient(score[perm], reward[perm]), grpo_gradient(score, reward),
                               rtol=1e-10, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(groups(), groups())
def test_kernel_symmetry(a, b):
    (s1, r1), (s2, r2) = a, b
    d = min(s1.shape[1], s2.shape[1])
    w1, w2 = s1[0, :d], s2[0, :d]
    np.testing.assert_array_equal(grpo_kernel(w1, r1[0], w2, r2[0]), grpo_kernel(w2, r2[0], w1, r1[0]))


def test_literal_loop_matches_every_estimator():
    rng = np.random.default_rng(0)
    score, reward = rng.normal(size=(5, 3)), rng.normal(size=5)
    g = len(reward)
    loo = np.array([(reward.sum() - reward[i]) / (g - 1) for i in range(g)])
    np.testing.assert_allclose(leave_one_out_baseline(reward), loo)
    manual = {
        "vanilla": sum(score[i] * reward[i] for i in range(g)) / g,
        "grpo": sum(score[i] * (reward[i] - loo[i]) for i in range(g)) / g,
        "oracle": sum(score[i] * (reward[i] - 0.3) for i in range(g)) / g,
        "fullmean": sum(score[i] * (reward[i] - reward.mean()) for i in range(g)) / g,
    }
    np.testing.assert_allclose(vanilla_gradient(score, reward), manual["vanilla"])
    np.testing.assert_allclose(grpo_gradient(score, reward), manual["grpo"])
    np.testing.assert_allclose(oracle_gradient(score, reward, 0.3), manual["oracle"])
    np.testing.assert_allclose(fullmean_gradient(score, reward), manual["fullmean"])


def test_minibatch_shapes_and_mean():
    rng = np.random.default_rng(1)
    score, reward = rng.normal(size=(4, 6, 3)), rng.normal(size=(4, 6))
    per = grpo_gradient(score, reward, per_prompt=True)
    assert per.shape == (4, 3)
    np.testing.assert_allclose(grpo_gradient(score, reward), per.mean(axis=0))
    values = np.arange(4.0)
    np.testing.assert_allclose(
        baseline_gradient(score, reward, values, per_prompt=True)[2],
        baseline_gradient(score[2], reward[2], values[2]))


@pytest.mark.parametrize("func", [grpo_gradient, grpo_gradient_pairwise])
def test_group_size_one_rejected_for_leave_one_out(func):
    with pytest.raises(ValueError, match=r"^`group_size` must be an integer >= 2 for the "
                                         r"leave-one-out baseline, got 1$"):
        func(np.ones((1, 2)), np.ones(1))


@pytest.mark.parametrize("score, reward, match", [
    (np.ones((3, 2)), np.ones(4), "^`score` of shape .* needs `reward`"),
    (np.ones((3,)), np.ones(3), "^`score`"),
    (np.ones((3, 2)), np.array([1.0, np.nan, 0.0]), "^`reward`"),
    (np.array([[1.0, np.inf]] * 3), np.ones(3), "^`score`"),
    (np.ones((0, 2)), np.ones(0), "^`score`"),
])
def test_bad_input_names_parameter(score, reward, match):
    # the message opens with the parameter's name (anchored, so a decorated name would fail)
    with pytest.raises(ValueError, match=match):
        vanilla_gradient(score, reward)


def test_shape_mismatch_message_gives_both_shapes():
    with pytest.raises(ValueError, match=r"^`score` of shape \(2, 3, 4\) needs `reward` of shape "
                                         r"\(2, 3\), got \(3,\)$"):
        grpo_gradient(np.ones((2, 3, 4)), np.ones(3))


def test_single_draw_is_allowed_without_a_leave_one_out_baseline():
    # G = 1 is legal for the estimators with no leave-one-out mean: the estimate is W Z
    score, reward = np.array([[2.0, -1.0]]), np.array([3.0])
    np.testing.assert_array_equal(vanilla_gradient(score, reward), [6.0, -3.0])
    np.testing.assert_array_equal(baseline_gradient(score, reward, 1.0), [4.0, -2.0])
    np.testing.assert_array_equal(fullmean_gradient(score, reward), [0.0, 0.0])


def test_every_estimator_name_has_its_function():
    # ESTIMATORS is what callers choose by name; each name is a `<name>_gradient` of the module
    import ustat_rl.advantages.gradients as module

    for name in ESTIMATORS:
        assert callable(getattr(module, f"{name}_gradient")), name


def test_bad_baseline_shape_and_type():
    with pytest.raises(ValueError, match="baseline"):
        baseline_gradient(np.ones((2, 3, 1)), np.ones((2, 3)), np.ones(3))
    with pytest.raises(TypeError, match="reward"):
        vanilla_gradient(np.ones((2, 1)), ["a", "b"])
