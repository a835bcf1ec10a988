"""The fixed-budget MSE's one home, the report's single grid, and a pilot's O(P k) Gram matrix."""

import numpy as np
import pytest

from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.pilot.replicates import pilot_summary
from ustat_rl.pilot.report import gstar_report
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.theory import ScalingConstants, minibatch_mse
from ustat_rl.theory import group_size as fb
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
    (dict(target="arcsin"), "whole_batches=False"), (dict(whole_batches=1), "`whole_batches`"),
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
    fb.budget_grid(48)
    fb.budget_grid(48)
    assert len(calls) == 2


def test_the_gstar_walk_checks_the_budget_once_and_builds_its_grid_once(tmp_path, monkeypatch,
                                                                        capsys):
    """``ustat-rl gstar --dynamic-sampling``: the command line's check is the only one."""
    from ustat_rl.interface.cli import main
    from ustat_rl.scores.bandit import bandit_pilot as pilot_of

    path = pilot_of(interior_optimum_bandit(), 12, 8, rng=5).save(tmp_path / "pilot.npz")
    checks, grids = [], []
    check, grid = fb._checked_budget, fb.group_size_grid
    monkeypatch.setattr(fb, "_checked_budget", lambda *a: checks.append(a) or check(*a))
    monkeypatch.setattr(fb, "group_size_grid", lambda *a, **k: grids.append(a) or grid(*a, **k))
    assert main(["gstar", str(path), "--budget", "48", "--dynamic-sampling"]) == 0
    capsys.readouterr()
    assert checks == [(48, "--budget")] and grids == [(48,)], (checks, grids)
    # negative control: a plain int at the inner entries is checked again, and the counter sees it
    checks.clear()
    fb.check_budget(48)
    fb.check_budget(fb.budget_grid(48))
    assert len(checks) == 2


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


# ------------------------------------------------------------------ the one answer
def test_the_answer_agrees_with_the_constants_and_a_brute_force():
    """Two routes: the entry's G*, best divisor and best integer against ScalingConstants' own
    methods and against evaluating the law at every integer of 2..N."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        c1, c3 = 10.0 ** rng.uniform(-3, 1, size=2)
        c2 = float(rng.uniform(0, 5))
        budget = int(rng.choice([12, 48, 60, 360, 1024, 5040]))
        c = ScalingConstants(c1, c2, c3)
        out = fb.group_size_answer(budget, c)
        every = np.arange(2, budget + 1)
        law = (c1 * every + c2 + c3 / (every - 1.0)) / budget  # the law written out here
        divides = budget % every == 0
        assert out.best_group_size == int(every[divides][np.argmin(law[divides])])
        assert out.best_group_size_any == int(every[np.argmin(law)])
        assert out.best_group_size == c.best_group_size(budget)
        assert out.gstar == c.optimal_group_size()
        assert out.recommended_group_size == out.best_group_size and np.isnan(out.worst_excess)
        np.testing.assert_allclose(out.mse, law[divides], rtol=RTOL)


def test_a_point_ratio_recommends_the_best_divisor_and_a_wide_one_states_its_excess():
    c = ScalingConstants(0.02, 1.0, 1.0)
    point = fb.group_size_answer(480, c, ratio=(0.02, 0.02))
    assert point.recommended_group_size == point.best_group_size and point.worst_excess == 0.0
    wide = fb.group_size_answer(480, c, ratio=(0.0, 0.5))
    assert wide.worst_excess > 0.0
    # negative control: the regret over the interval is not the point argmin's promise
    law = c.fixed_budget_mse(wide.group_sizes.astype(float), 480)
    assert wide.recommended_group_size != int(wide.group_sizes[np.argmin(law)])


def test_the_report_reads_the_answer(pilot):
    report = gstar_report(pilot, 48, "grpo")
    answer = report.group_size
    assert isinstance(answer, fb.GroupSizeAnswer)
    assert (answer.best_group_size, answer.best_group_size_any, answer.recommended_group_size) \
        == (report.best_group_size, report.best_group_size_any, report.recommended_group_size)
    assert answer.group_sizes.tolist() == report.group_sizes
    assert answer.mse.tolist() == report.mse["grpo"]["estimate"]
    assert "group_size" not in report.to_dict()


@pytest.mark.parametrize("kwargs, match", [
    ({"budget": 7}, "admits one group size only"),
    ({"budget": 1}, "`budget`"),
    ({"budget": 2**25}, "`budget` must be <="),
    ({"constants": object()}, "`constants`"),
    ({"curve": np.ones(3)}, "`curve` must have one value"),
    ({"curve": np.full(9, np.nan)}, "`curve` must not hold NaN"),
    ({"estimator": "vanilla"}, "`curve` is required"),
    ({"estimator": "nope"}, "estimator"),
    ({"ratio": (0.5, 0.1)}, "`ratio`"),
    ({"gstar_interval": (1.0, 2.0, 3.0)}, "`gstar_interval`"),
    ({"ratio": (0.0, 1.0), "estimator": "vanilla", "curve": np.ones(9)}, "`ratio` is GRPO's"),
])
def test_the_entry_names_the_bad_parameter(kwargs, match):
    args = {"budget": 48, "constants": ScalingConstants(1.0, 2.0, 16.0), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        fb.group_size_answer(**args)


def test_one_formula_for_gstar_from_constants_and_from_a_ratio():
    for c1, c3 in [(1.0, 16.0), (0.3, 2.0), (1e-150, 1e150)]:
        assert fb.gstar_of_ratio(c1 / c3) == pytest.approx(fb.optimal_group_size(c1, c3),
                                                            rel=1e-12)
    assert fb.gstar_of_ratio(0.25) == 3.0 and fb.gstar_of_ratio(0.0) == np.inf
    assert np.isnan(fb.gstar_of_ratio(np.nan)) and np.isnan(fb.gstar_or_nan(1.0, -1.0))
    assert fb.optimal_group_size(0.0, 1.0) == np.inf
    with pytest.raises(ValueError, match="undefined"):
        fb.optimal_group_size(0.0, 0.0)
    assert fb.gstar_interval(-1.0, -0.5) == (1.0, np.inf)
    assert fb.gstar_interval(0.25, 1.0) == (2.0, 3.0)
