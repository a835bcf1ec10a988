"""The advantage-rule registry (ustat_rl/advantages; docs/theory.md section 2, C5, C6).

A rule defined in this file only (leave-one-out divided by the group's mean absolute deviation)
is registered and, with no edit to the library, reaches the exact theory, both bandit Monte Carlo
backends, the conformance kit and ``ustat-rl gstar --estimator``. Every statistical check states
its tolerance: Monte Carlo against exact within 4 standard errors (two-sided normal false-failure
rate 6.3e-5 per comparison), each with a negative control the same check rejects.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest

from ustat_rl import theory
from ustat_rl.advantages import (
    RULES,
    AdvantageRule,
    Centring,
    Provenance,
    Scaling,
    get_rule,
    register_rule,
    rule_gradient,
    unregister_rule,
)
from ustat_rl.advantages.registry import GROUP_MEAN, LEAVE_ONE_OUT
from ustat_rl.montecarlo import Backend, bandit_squared_errors, run_monte_carlo
from ustat_rl.montecarlo.bandit import kernel_tables
from ustat_rl.policies.enumeration import enumerate_prompt_estimates
from ustat_rl.policies.examples import small_bandit
from ustat_rl.policies.softmax import SoftmaxBandit

pytestmark = pytest.mark.fast

Z = 4.0  # Monte Carlo vs exact: 4 standard errors


def _mean_absolute_deviation(rows):
    return np.mean(np.abs(rows - rows.mean(axis=1, keepdims=True)), axis=1)


MAD_RULE = AdvantageRule(
    "test_loo_mad", LEAVE_ONE_OUT,
    Scaling("group statistic", all_equal="zero", statistic=_mean_absolute_deviation),
    Provenance("tests", "leave-one-out over the mean absolute deviation", __file__),
    formula="(z - (sum_g z - z)/(n_g - 1)) / MAD_g, 0 when MAD_g = 0")

#: An affine rule none of the paper's formulas covers alone: mean, leave-one-out and value mixed.
MIXED_RULE = AdvantageRule("test_mixed", Centring("value", mean=0.5, leave_one_out=0.3,
                                                  reference=0.2))


@pytest.fixture
def registered():
    for rule in (MAD_RULE, MIXED_RULE):
        register_rule(rule)
    yield
    for rule in (MAD_RULE, MIXED_RULE):
        unregister_rule(rule.name)


def _exact_by_enumeration(bandit, rule, G):
    """``E||g_hat(x) - g(x)||^2`` per prompt, by enumerating every group (the second route)."""
    out = []
    for x in range(bandit.n_prompts):
        values, prob = enumerate_prompt_estimates(bandit, x, G, rule)
        out.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
    return np.array(out)


# ---------------------------------------------------------------------------- the registry
def test_unknown_rule_names_the_parameter():
    with pytest.raises(ValueError, match=r"^`estimator` must be one of the \d+ registered "
                                         r"advantage rules, got 'rloo' \(did you mean .*"
                                         r"'trl_rloo'.*\?\); `ustat-rl list --estimators` "
                                         r"lists them$"):
        get_rule("rloo")
    with pytest.raises(ValueError, match=r"^`estimator` must be one of "):
        theory.advantage_table("nope", 4)


def test_every_rule_has_provenance_and_a_minimum_group_size():
    for rule in RULES.values():
        assert rule.provenance.framework and rule.provenance.source, rule.name
        assert rule.min_group_size >= (2 if rule.centring.min_group_size == 2 else 1)
    assert get_rule("grpo").min_group_size == 2 and get_rule("vanilla").min_group_size == 1


def test_kernel_data_reproduce_the_per_sample_function():
    # what the kernels read (a two-point table over m, and the weight of -w V(x)) equals the
    # rule's own per-sample function on two-point groups, for every group rule, at rewards
    # that are not 0 and 1
    rng = np.random.default_rng(3)
    low, high = -0.5, 2.0
    for rule in RULES.values():
        if rule.statistics != "group":
            continue
        for G in range(max(1, rule.min_group_size), 6):
            table, reference = kernel_tables([rule], [G], low, high)
            z = np.where(rng.random((40, G)) < 0.5, high, low)
            value = rng.normal(size=40)
            m = np.sum(z == high, axis=1)[:, None]
            kernel = (np.where(z == high, table[0, 0, 0][m], table[0, 0, 1][m])
                      - reference[0, 0] * value[:, None])
            np.testing.assert_allclose(kernel, rule.grouped(z, value), rtol=1e-12, atol=1e-12,
                                       err_msg=f"{rule.name}, G={G}")


# ---------------------------------------------------------------------------- exact theory
def test_new_rules_exact_theory_matches_enumeration(registered):
    bandit = small_bandit()
    for name in ("test_loo_mad", "test_mixed"):
        for G in (2, 3):
            np.testing.assert_allclose(theory.per_prompt_mse(bandit.moments(), name, G),
                                       _exact_by_enumeration(bandit, get_rule(name), G),
                                       rtol=1e-10, err_msg=f"{name}, G={G}")


def test_enumeration_tells_the_new_rule_from_plain_grpo(registered):
    # negative control of the comparison above: a different rule's MSE is rejected at 1e-10
    bandit = small_bandit()
    exact = theory.per_prompt_mse(bandit.moments(), "grpo", 3)
    assert not np.allclose(exact, _exact_by_enumeration(bandit, MAD_RULE, 3), rtol=1e-10)


def test_affine_rule_on_two_point_rewards_other_than_zero_one(registered):
    # the affine closed form holds for any rewards: rewards -1 and 2 are not binary
    bandit = SoftmaxBandit([[0.3, -0.2, 0.5], [1.0, 0.0, -1.0]],
                           [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]], [0.3, 0.7], reward_values=(-1.0, 2.0))
    np.testing.assert_allclose(theory.per_prompt_mse(bandit.moments(), "test_mixed", 3),
                               _exact_by_enumeration(bandit, MIXED_RULE, 3), rtol=1e-10)


# ---------------------------------------------------------------------------- Monte Carlo
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_new_rules_monte_carlo_matches_exact(registered, backend):
    bandit = small_bandit()
    sizes, B = (2, 5), 2
    names = ("test_loo_mad", "test_mixed")
    stat, labels = bandit_squared_errors(bandit, names, sizes, B, backend=Backend(backend, "cpu"))
    est = run_monte_carlo(stat, 40_000, seed=16, labels=labels)
    for i, (name, G) in enumerate(labels):
        exact = bandit.exact_mse(name, G, B)
        assert abs(est.mean[i] - exact) < Z * est.std_error[i], (name, G, backend)
        # negative control: the same check rejects plain GRPO's exact MSE for this estimate
        wrong = bandit.exact_mse("grpo", G, B)
        assert abs(est.mean[i] - wrong) > Z * est.std_error[i], (name, G, backend)


def test_framework_group_rules_run_in_the_kernel():
    # scaled framework rules (group std, the others' std) through the numba kernel's table
    bandit = small_bandit()
    sizes, B = (3, 5), 2
    names = ("trl_group", "nemo_rl_grpo")
    stat, labels = bandit_squared_errors(bandit, names, sizes, B)
    est = run_monte_carlo(stat, 40_000, seed=21, labels=labels)
    for i, (name, G) in enumerate(labels):
        assert abs(est.mean[i] - bandit.exact_mse(name, G, B)) < Z * est.std_error[i], (name, G)
        assert abs(est.mean[i] - bandit.exact_mse("grpo", G, B)) > Z * est.std_error[i], (name, G)


def test_rules_with_batch_statistics_or_a_baseline_are_refused_by_the_kernels():
    with pytest.raises(ValueError, match=r"^`estimators` entry 'trl_batch' needs a batch"):
        bandit_squared_errors(small_bandit(), "trl_batch", (4,))


def test_gradient_of_a_registered_rule(registered):
    score = np.array([[1.0], [-1.0], [0.5]])
    reward = np.array([1.0, 0.0, 0.0])
    mad = _mean_absolute_deviation(reward[None])[0]
    np.testing.assert_allclose(rule_gradient("test_loo_mad", score, reward),
                               rule_gradient("grpo", score, reward) / mad, rtol=1e-14)


# ---------------------------------------------------------------------------- conformance kit
def test_conformance_kit_takes_the_new_rule(registered):
    from ustat_rl.conformance.kit import check_conformance
    from ustat_rl.conformance.search import Search

    def reference(rewards, group_ids):
        return MAD_RULE.advantages(rewards, group_ids)

    def perturbed(rewards, group_ids):
        # a plausible slip: the full group mean in the numerator instead of leave-one-out
        return replace(MAD_RULE, centring=GROUP_MEAN).advantages(rewards, group_ids)

    assert check_conformance(reference, "test_loo_mad",
                             search=Search(max_examples=60, seed=0)).passed
    assert not check_conformance(perturbed, "test_loo_mad",
                                 search=Search(max_examples=60, seed=0, shrink=False)).passed


# ---------------------------------------------------------------------------- command line
def test_gstar_reports_the_new_rule(registered, tmp_path, capsys, interior_pilot):
    from ustat_rl.interface.cli import main

    pilot = interior_pilot(24, 8, 20260301, 1)
    path = pilot.save(tmp_path / "pilot.npz")
    out = tmp_path / "report.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert main(["gstar", str(path), "--budget", "96", "--estimator", "test_loo_mad",
                     "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["estimator"] == "test_loo_mad"
    assert "test_loo_mad" in report["mse"] and "grpo" in report["mse"]
    capsys.readouterr()
    assert main(["gstar", str(path), "--budget", "96", "--estimator", "nope"]) == 2
    assert "`--estimator` must be one of the" in capsys.readouterr().err


def test_a_registered_name_cannot_be_taken_twice(registered):
    with pytest.raises(ValueError, match="already registered"):
        register_rule(replace(MAD_RULE))
