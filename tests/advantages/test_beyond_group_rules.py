"""The rules read for the issue "Beyond the group" (ustat_rl.advantages.conventions).

The group rules prime-rl's default ``grpo``, TRL's experimental asynchronous GRPO, SkyRL's
``maxrl`` and slime's default ``grpo``, and the batch rule NeMo-RL's ``reinforce_plus_plus``
(docs/conventions.md). Each is checked by independent routes:

* provenance: a full commit and its date, and a row of docs/conventions.md naming them;
* hand-computed values at the edge cases each framework treats its own way;
* the exact finite-G mean and MSE (docs/theory.md section 7) equal brute-force enumeration of
  every group, G = 2..6, to 1e-12, and each two-point table equals the closed form derived by
  hand from the framework's formula;
* Monte Carlo on both bandit backends within ``Z_CHECK`` standard errors (false failures 6.3e-5
  per comparison), and a wrong rule's exact MSE outside them; the batch rule, which the
  per-group theory cannot describe, by enumerating whole batches against ``batch_monte_carlo``;
* the conformance kit rejects a planted bug in float32 and in float64 batches, passes each
  framework's own function extracted to tests/data at the commit cited there, and tells each
  from a neighbouring rule. As ordinary conventions, the kit's run on the reference and on
  framework-style implementations in float32 and float64 is tests/conformance/test_conformance.py's,
  the pinned tolerance tests/conformance/test_kit_tolerance_pinned.py's, and the literal formula
  in float64 tests/advantages/test_conventions.py's, over every convention.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from rule_checks import check_batch_rule_monte_carlo, check_group_rules_monte_carlo
from script_loader import ROOT, load_data

from ustat_rl import theory
from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import CONVENTION_NAMES, CONVENTIONS, advantages
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search
from ustat_rl.policies.enumeration import enumerate_prompt_estimates
from ustat_rl.policies.examples import small_bandit

pytestmark = pytest.mark.integration  # conformance runs: each further group rule against its copied source

RTOL, ATOL = 1e-12, 1e-14  # two float64 routes through the same arithmetic, to rounding

RULES = ("prime_rl_grpo", "trl_async_grpo", "skyrl_maxrl", "slime_grpo")
#: A rule each one must not be mistaken for, in the Monte Carlo and kit negative controls:
#: prime-rl's grpo is the full mean itself, and SkyRL's MaxRL at G = 2 is leave-one-out's
#: advantage up to 1e-6, so each takes a rule that differs from it at every group size.
NEIGHBOUR = {"prime_rl_grpo": "grpo", "trl_async_grpo": "fullmean", "skyrl_maxrl": "fullmean",
             "slime_grpo": "fullmean", "nemo_rl_reinforce_pp": "verl_reinforce_pp_baseline"}
BATCH_RULE = "nemo_rl_reinforce_pp"


# ---------------------------------------------------------------- provenance
def test_rules_are_registered_with_checked_provenance():
    page = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    assert set(RULES) <= set(CONVENTION_NAMES)
    assert CONVENTIONS[BATCH_RULE].statistics == "batch"
    for name in RULES + (BATCH_RULE,):
        rule = CONVENTIONS[name]
        assert get_rule(name) is rule, name
        assert rule.statistics == ("batch" if name == BATCH_RULE else "group"), name
        assert re.fullmatch(r"[0-9a-f]{40}", rule.commit), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rule.commit_date), name
        assert f"`{name}`" in page and f"{rule.commit[:8]} ({rule.commit_date})" in page, name
        assert rule.repository in page, name
        assert all(f"`{p.strip()}`" in page for p in rule.path.split(",")), name


# ---------------------------------------------------------------- hand-computed values
def test_hand_computed_values():
    ids = np.repeat([0, 1, 2], 3)
    z = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    # one success in three: m = 1/3, population std sqrt(2)/3, Bessel std 1/sqrt(3)
    np.testing.assert_allclose(advantages("prime_rl_grpo", z, ids),
                               [2 / 3, -1 / 3, -1 / 3] + [0.0] * 6, rtol=1e-15)
    pop = 2 ** 0.5 / 3
    np.testing.assert_allclose(advantages("trl_async_grpo", z, ids),
                               [(2 / 3) / (pop + 1e-8), (-1 / 3) / (pop + 1e-8),
                                (-1 / 3) / (pop + 1e-8)] + [0.0] * 6, rtol=1e-15)
    np.testing.assert_allclose(advantages("slime_grpo", z, ids),
                               [(2 / 3) / (3 ** -0.5 + 1e-6), (-1 / 3) / (3 ** -0.5 + 1e-6),
                                (-1 / 3) / (3 ** -0.5 + 1e-6)] + [0.0] * 6, rtol=1e-15)
    # MaxRL with an epsilon: 2/3 over 1/3 + 1e-6; the all-zero group 0/1e-6 = 0, not NaN
    with np.errstate(all="raise"):
        got = advantages("skyrl_maxrl", z, ids)
    np.testing.assert_allclose(got, [(2 / 3) / (1 / 3 + 1e-6), (-1 / 3) / (1 / 3 + 1e-6),
                                     (-1 / 3) / (1 / 3 + 1e-6)] + [0.0] * 6, rtol=1e-15)
    # singletons: prime-rl 0, TRL's (z - z)/1e-8 = 0, SkyRL keeps z undivided, slime undefined
    assert advantages("prime_rl_grpo", [0.7], [0])[0] == 0.0
    assert advantages("trl_async_grpo", [0.7], [0])[0] == 0.0
    assert advantages("skyrl_maxrl", [0.7, 1.0, 0.0], [5, 1, 1])[0] == 0.7
    with pytest.raises(ValueError, match="at least 2"):
        advantages("slime_grpo", [0.7], [0])
    # SkyRL divides where prime-rl's MaxRL gives 0: a group of negative mean
    r = np.array([-1.0, 0.5, 0.0])
    np.testing.assert_allclose(advantages("skyrl_maxrl", r, [0, 0, 0]),
                               (r - r.mean()) / (r.mean() + 1e-6), rtol=1e-15)
    assert np.all(advantages("prime_rl_max_rl", r, [0, 0, 0]) == 0.0)


# ---------------------------------------------------------------- exact theory
def _enumerated(bandit, name, G):
    """``(E g_hat(x) (P, K), E||g_hat(x) - g(x)||^2 (P,))`` by enumerating every group."""
    means, mses = [], []
    for x in range(bandit.n_prompts):
        values, prob = enumerate_prompt_estimates(bandit, x, G, name)
        means.append(prob @ values)
        mses.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
    return np.array(means), np.array(mses)


def _hand_table(name, G):
    """``(a(1, m), a(0, m))``, ``m = 0..G``, derived by hand from each framework's formula for
    rewards in {0, 1} (``p = m/G``; impossible entries 0)."""
    m = np.arange(G + 1.0)
    p = m / G
    pop, bessel = np.sqrt(p * (1 - p)), np.sqrt(p * (1 - p) * G / (G - 1))
    divisor = {"prime_rl_grpo": np.ones(G + 1), "trl_async_grpo": pop + 1e-8,
               "skyrl_maxrl": p + 1e-6, "slime_grpo": bessel + 1e-6}[name]
    success, failure = (1 - p) / divisor, -p / divisor
    return np.where(m > 0, success, 0.0), np.where(m < G, failure, 0.0)


@pytest.mark.parametrize("name", RULES)
def test_exact_moments_equal_enumeration_and_the_hand_table(name):
    bandit = small_bandit()
    moments = bandit.moments()
    for G in range(2, 7):
        t = theory.advantage_table(name, G)
        success, failure = _hand_table(name, G)
        np.testing.assert_allclose(t.success, success, rtol=RTOL, atol=ATOL, err_msg=f"G={G}")
        np.testing.assert_allclose(t.failure, failure, rtol=RTOL, atol=ATOL, err_msg=f"G={G}")
        out = theory.advantage_moments(moments, name, G)
        mean, mse = _enumerated(bandit, name, G)
        np.testing.assert_allclose(out.mean_factor[:, None] * bandit.grad_per_prompt, mean,
                                   rtol=RTOL, atol=ATOL, err_msg=f"{name}, G={G}")
        np.testing.assert_allclose(out.mse_grad, mse, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}, G={G}")
        # negative control: the same comparison rejects the neighbouring rule's MSE
        wrong = theory.per_prompt_mse(moments, NEIGHBOUR[name], G)
        assert not np.allclose(wrong, mse, rtol=1e-6), (name, G)


def test_prime_rl_grpo_is_the_full_mean_and_skyrl_maxrl_tends_to_prime_rls():
    for G in (2, 4, 8):
        a, b = theory.advantage_table("prime_rl_grpo", G), theory.advantage_table("fullmean", G)
        np.testing.assert_array_equal(a.success, b.success)
        np.testing.assert_array_equal(a.failure, b.failure)
        sky, prime = (theory.advantage_table(n, G) for n in ("skyrl_maxrl", "prime_rl_max_rl"))
        # (G - m)/(m + G 1e-6) against (G - m)/m: relative gap G 1e-6/m, at most 8e-6 here
        np.testing.assert_allclose(sky.success, prime.success, rtol=G * 1e-6 + 1e-12)
        assert np.all(np.abs(sky.success[1:G]) < np.abs(prime.success[1:G]))


# ---------------------------------------------------------------- Monte Carlo
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_monte_carlo_matches_exact_on_both_backends(backend):
    check_group_rules_monte_carlo(RULES, NEIGHBOUR.__getitem__, backend, seed=36)


# ---------------------------------------------------------------- conformance kit
def _buggy(name):
    """``plain(rewards, group_ids)``: the rule with one slip an implementation could make."""
    def group(r):
        n, mean = r.numel(), r.mean()
        if name == "prime_rl_grpo":  # verl's singleton rule: a one-sample group keeps z
            return r.clone() if n == 1 else r - mean
        if name == "trl_async_grpo":  # torch's default std (Bessel) for numpy's (ddof 0)
            return (r - mean) / ((r.std() if n > 1 else 0.0) + 1e-8)
        if name == "skyrl_maxrl":  # prime-rl's zero rule where the mean is not positive
            return r.clone() if n == 1 else (
                torch.zeros_like(r) if mean <= 0 else (r - mean) / (mean + 1e-6))
        if name == "slime_grpo":  # the epsilon inside the square root
            return (r - mean) / (r.std() ** 2 + 1e-6).sqrt()
        return torch.zeros_like(r) if n == 1 else r - mean  # NeMo-RL's, whitened below

    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards, dtype=np.float64))
        ids = np.asarray(group_ids)
        out = torch.empty_like(z)
        for g in np.unique(ids):
            idx = torch.as_tensor(np.flatnonzero(ids == g))
            out[idx] = group(z[idx])
        if name == BATCH_RULE:  # Bessel's variance where NeMo-RL takes the population's
            centred = out - out.mean()
            out = centred * (centred.var() if out.numel() > 1 else out.new_zeros(())).clamp(
                min=1e-8).rsqrt()
        return out.numpy()
    return fn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", RULES + (BATCH_RULE,))
def test_planted_bug_is_rejected_in_either_dtype(name, dtype):
    report = check_conformance(_buggy(name), name, search=Search(dtypes=(dtype,), shrink=False))
    assert not report.passed
    assert report.failure is not None and report.failure.rewards.dtype == np.dtype(dtype)


def _frameworks():
    """Each framework's own function (tests/data), with the kit's signature that calls it."""
    prime = load_data("prime_rl_grpo_559b4477")
    trl = load_data("trl_async_rollout_worker_f2cd5771")
    skyrl = load_data("skyrl_ppo_utils_a9564572")
    slime = load_data("slime_rollout_624b824a")
    nemo = load_data("nemo_rl_reinforce_pp_7ea279ab")
    nemo.calculate_baseline_and_std_per_prompt = load_data(
        "nemo_rl_gdpo_7ea279ab").calculate_baseline_and_std_per_prompt
    estimator = nemo.ReinforcePlusPlusAdvantageEstimator(
        SimpleNamespace(minus_baseline=True),  # the defaults of AdvEstimatorConfig and the
        SimpleNamespace(use_kl_in_reward=False, reference_policy_kl_penalty=0.0,  # loss
                        reference_policy_kl_type="k3"))

    def nemo_rl(rewards, group_ids):  # float32 rewards, as NeMo-RL holds them (its baseline's
        r = torch.as_tensor(np.asarray(rewards, dtype=np.float32))  # float32 matmul needs it)
        prompts = torch.as_tensor(np.asarray(group_ids))[:, None]  # (b, s) prompt ids
        return estimator.compute_advantage(prompts, r, torch.ones(r.shape[0], 1))[:, 0].numpy()

    return {"prime_rl_grpo": (prime.grpo, "plain", {}),
            "nemo_rl_reinforce_pp": (nemo_rl, "plain", {}),
            "trl_async_grpo": (trl.async_grpo, "plain", {}),
            "skyrl_maxrl": (lambda t, m, i: skyrl.compute_maxrl_advantage(t, m, i)[0], "verl",
                            {"tensors": "torch"}),
            "slime_grpo": (slime.slime_grpo, "trl", {})}


@pytest.mark.parametrize("name", RULES + (BATCH_RULE,))
def test_frameworks_own_functions_conform_and_are_told_apart(name):
    fn, signature, options = _frameworks()[name]
    report = check_conformance(fn, name, signature=signature, **options)
    assert report.passed, report.summary()
    # negative control: the same function fails the neighbouring rule
    report = check_conformance(fn, NEIGHBOUR[name], signature=signature,
                               search=Search(max_examples=100, shrink=False), **options)
    assert not report.passed, name


def test_slime_takes_the_whole_batch_as_one_group_when_its_size_is_unexpected():
    """The quirk the rule leaves out (docs/conventions.md): a batch that is not
    n_samples_per_prompt x rollout_batch_size rewards is normalised as one group."""
    slime = load_data("slime_rollout_624b824a")
    z = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    expected = advantages("slime_grpo", z, np.repeat([0, 1], 3))
    np.testing.assert_allclose(slime.post_process_rewards(z.tolist(), 3, 2), expected, rtol=1e-6)
    one_group = slime.post_process_rewards(z.tolist(), 3, 5)  # 6 rewards, 15 expected
    np.testing.assert_allclose(one_group, advantages("slime_grpo", z, np.zeros(6, int)),
                               rtol=1e-6)
    assert not np.allclose(one_group, expected, rtol=1e-3)


# ---------------------------------------------------------------- the batch rule
def test_nemo_rl_reinforce_pp_by_hand():
    # groups [1, 0] and [2, 2] and a singleton [5]: c = [0.5, -0.5, 0, 0, 0] (the singleton's
    # baseline is its reward), batch mean 0, population variance 0.1
    got = advantages(BATCH_RULE, [1.0, 0.0, 2.0, 2.0, 5.0], [0, 0, 1, 1, 2])
    np.testing.assert_allclose(got, np.array([0.5, -0.5, 0, 0, 0]) / np.sqrt(0.1), rtol=1e-14)
    # all c = 0: the variance is clamped at 1e-8, so 0, not NaN
    assert np.all(advantages(BATCH_RULE, [3.0, 3.0, 1.0], [0, 0, 1]) == 0.0)


def test_nemo_rl_reinforce_pp_monte_carlo_matches_batch_enumeration():
    check_batch_rule_monte_carlo(BATCH_RULE, ((2, 2, 36), (3, 1, 37)))
