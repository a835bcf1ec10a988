"""The fixed-budget MSE's one home, the report's single grid, and a pilot's O(P k) Gram matrix."""

import numpy as np
import pytest

from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.pilot.replicates import pilot_summary
from ustat_rl.pilot.report import gstar_report
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.theory import ScalingConstants, minibatch_mse
from ustat_rl.theory import fixed_budget as fb
from ustat_rl.theory.gram import FactoredGram

pytestmark = pytest.mark.fast

# agreement of two evaluations of one formula in another order: rounding only
RTOL = 1e-10


@pytest.fixture(scope="module")
def pilot():
    return bandit_pilot(interior_optimum_bandit(), 40, 6, rng=3)


def test_fixed_budget_mse_is_the_minibatch_mse_at_b_equal_n_over_g(pilot):
    m = estimate_moments(pilot)
    for rule in ("vanilla", "grpo", "oracle", "fullmean", "verl_rloo"):
        curve = fb.fixed_budget_mse(m, rule, 48)
        sizes = fb.admissible_group_sizes(48)
        loop = np.array([minibatch_mse(m, rule, int(g), 48 // int(g)) for g in sizes])
        np.testing.assert_allclose(curve, loop, rtol=RTOL, atol=0.0)
    # negative control: B held at 1 instead of N/G gives another curve
    assert not np.allclose(fb.fixed_budget_mse(m, "grpo", 48),
                           [minibatch_mse(m, "grpo", int(g), 1) for g in sizes], rtol=1e-3)


def test_fixed_budget_mse_grpo_is_the_constants_law():
    from ustat_rl.policies.examples import small_bandit
    from ustat_rl.theory import scaling_constants

    m = small_bandit().moments()
    c = scaling_constants(m)
    np.testing.assert_allclose(fb.fixed_budget_mse(m, "grpo", 60),
                               c.fixed_budget_mse(fb.admissible_group_sizes(60), 60), rtol=1e-9)


@pytest.mark.parametrize("bad, match", [
    (dict(budget=1), "`budget`"), (dict(budget=2**30), "`budget`"),
    (dict(group_size=[5]), "`group_size` must divide"), (dict(group_size=[[2]]), "`group_size`"),
    (dict(estimator="nope"), "`estimator`"), (dict(estimator="baseline"), "baseline"),
])
def test_fixed_budget_mse_names_the_bad_parameter(pilot, bad, match):
    args = dict(moments=estimate_moments(pilot), estimator="grpo", budget=48) | bad
    with pytest.raises(ValueError, match=match):
        fb.fixed_budget_mse(**args)


def test_best_integer_size_agrees_with_the_full_grid():
    rng = np.random.default_rng(0)
    for _ in range(400):
        c1, c2, c3 = rng.normal(size=3) * 10.0 ** rng.uniform(-3, 3, size=3)
        budget = int(rng.integers(2, 3000))
        grid = fb.group_size_grid(budget, divisors_only=False)
        brute = int(grid[np.argmin(fb.grpo_law(c1, c2, c3, budget, grid))])
        assert fb.best_law_group_size(c1, c2, c3, budget) == brute, (c1, c2, c3, budget)
        constants = ScalingConstants(c1, c2, c3, estimated=True)
        assert constants.best_group_size(budget, divisors_only=False) == brute
    # negative control: a candidate set without G* misses an interior minimum
    law = fb.grpo_law(1.0, 0.0, 100.0, 1000, np.array([2, 1000]))
    assert int(np.array([2, 1000])[np.argmin(law)]) != fb.best_law_group_size(1.0, 0.0, 100.0, 1000)


def test_the_report_builds_its_grid_once(pilot, monkeypatch):
    calls = []
    original = fb.group_size_grid

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(fb, "group_size_grid", counting)
    for estimator in ("grpo", "verl_rloo"):
        calls.clear()
        gstar_report(pilot, 48, estimator)
        assert len(calls) == 1, calls
    # the counter sees a second build: the negative control of the count
    calls.clear()
    fb.budget_and_grid(48)
    fb.budget_and_grid(48)
    assert len(calls) == 2


def test_extra_estimators_add_a_curve_and_change_nothing_else(pilot):
    plain = gstar_report(pilot, 48, "grpo").to_dict()
    both = gstar_report(pilot, 48, "grpo", extra_estimators=("verl_rloo",)).to_dict()
    own = gstar_report(pilot, 48, "verl_rloo").to_dict()
    assert both["mse"].pop("verl_rloo") == own["mse"]["verl_rloo"]
    assert both == plain


def test_factored_gram_is_the_dense_gram(pilot):
    stats = pilot_statistics(pilot)
    gram = estimate_moments(stats).grad_gram
    assert isinstance(gram, FactoredGram)
    dense = stats.grad_mean @ stats.grad_mean.T
    np.fill_diagonal(dense, stats.columns["grad_sq"].sum(axis=1))
    np.testing.assert_allclose(np.asarray(gram), dense, rtol=RTOL, atol=1e-14)
    x = np.random.default_rng(1).normal(size=(stats.n_prompts, 3))
    np.testing.assert_allclose(gram @ x, dense @ x, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(x[:, 0] @ gram @ x[:, 1], x[:, 0] @ dense @ x[:, 1], rtol=RTOL)
    np.testing.assert_allclose(x.T @ gram, x.T @ dense, rtol=RTOL, atol=1e-14)
    np.testing.assert_allclose(gram - np.eye(stats.n_prompts), dense - np.eye(stats.n_prompts))
    np.testing.assert_allclose(np.asarray(gram.restrict([0, 2])), dense[np.ix_([0, 2], [0, 2])])
    # negative control: the plain product F F^T (diagonal not replaced) differs
    assert not np.allclose(stats.grad_mean @ stats.grad_mean.T, np.asarray(gram))


def test_prompt_jackknife_replicates_equal_a_delete_one_loop(pilot):
    """The O(P k) leave-one-prompt-out summaries (totals less one row) equal recomputing each
    summary from the other P - 1 prompts, to 1e-10."""
    stats = pilot_statistics(pilot)
    full, reps, _ = pilot_summary(stats)
    P = stats.n_prompts
    for a in range(P):
        keep = np.delete(np.arange(P), a)
        per = np.column_stack([stats.value, stats.reward_var]
                              + [stats.columns[n].sum(axis=1) for n in
                                 ("score_sq", "score_sq_reward", "score_sq_reward_sq",
                                  "score_sq_centred", "grad_sq", "score_sq_reward_var")])[keep]
        gm = stats.grad_mean[keep]
        cross = (gm.sum(axis=0) @ gm.sum(axis=0) - np.sum(gm * gm)) / ((P - 1) * (P - 2))
        np.testing.assert_allclose(reps[a], np.r_[per.mean(axis=0), cross], rtol=1e-10,
                                   atol=1e-12)
    # negative control: the full-sample summary is not a delete-one replicate
    assert not np.allclose(reps[0], full, rtol=1e-10, atol=1e-12)
