"""The framework rules added for project issue 29 (ustat_rl.advantages.conventions).

verl's ``grpo_passk`` (both ``norm_adv_by_std_in_grpo`` settings), ``gpg`` and
``reinforce_plus_plus``, OpenRLHF's ``reinforce`` and prime-rl's MaxRL (docs/conventions.md).
Each is checked by independent routes:

* provenance: a full commit and its date, and a row of docs/conventions.md naming them;
* a literal implementation written here in the frameworks' style (torch, a loop over groups) in
  float64 equals the registry's advantages to 1e-12;
* the group rules' exact finite-G mean and MSE (docs/theory.md section 7) equal brute-force
  enumeration of every group, G = 2..6, to 1e-12, and closed forms derived by hand;
* Monte Carlo on both bandit backends within ``Z_CHECK`` standard errors (false failures 6.3e-5
  per comparison), and a wrong prediction outside them;
* the batch rules, which the per-group theory cannot describe, by enumerating whole batches and
  by ``batch_monte_carlo`` within ``Z_CHECK`` standard errors, with a negative control;
* the conformance kit rejects a planted bug in float32 and float64 batches, and passes the
  frameworks' own functions extracted to tests/data at the commits cited there; as ordinary
  conventions, the kit's run on the reference and on framework-style implementations computing
  in float32 and in float64 is tests/conformance/test_conformance.py's, over every convention.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from rule_checks import (
    check_batch_rule_monte_carlo,
    check_group_rules_monte_carlo,
    check_provenance,
)
from script_loader import ROOT, load_data

from ustat_rl import theory
from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import advantages
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search
from ustat_rl.policies.enumeration import enumerate_prompt_estimates
from ustat_rl.policies.examples import small_bandit

pytestmark = pytest.mark.integration  # conformance runs: each framework rule against its copied source

RTOL, ATOL = 1e-12, 1e-14  # two float64 routes through the same arithmetic, to rounding

GROUP_RULES = ("verl_grpo_passk", "verl_grpo_passk_nostd", "prime_rl_max_rl")
BATCH_RULES = ("verl_gpg", "verl_reinforce_pp", "openrlhf_reinforce")
NEW_RULES = GROUP_RULES + BATCH_RULES


# ---------------------------------------------------------------- provenance
def test_every_further_rule_is_registered_with_checked_provenance():
    # ordinary conventions: every test over CONVENTION_NAMES (test_conventions' literal
    # formulas, test_conformance's reference and float32/float64 implementations) covers them
    check_provenance(NEW_RULES, (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8"))
    assert {r.statistics for r in map(get_rule, GROUP_RULES)} == {"group"}
    assert {r.statistics for r in map(get_rule, BATCH_RULES)} == {"batch"}


# ---------------------------------------------------------------- literal implementations
def _group_advantage(name, r):
    """One group's advantages, ``r`` a 1-D tensor in the working dtype (frameworks' style)."""
    n = r.numel()
    if name.startswith("verl_grpo_passk"):
        out = torch.zeros_like(r)
        top, where = torch.topk(r, 2)
        gap = top[0] - top[1]
        out[where[0]] = gap / (r.std() + 1e-6) if name == "verl_grpo_passk" else gap
        return out
    if name == "prime_rl_max_rl":
        mean = r.mean()
        return torch.zeros_like(r) if mean <= 0 else (r - mean) / mean
    if name == "verl_gpg":  # alpha is applied over the batch below
        return r - (r.mean() if n > 1 else 0.0)
    return r.clone()  # REINFORCE++ and OpenRLHF's reinforce: no group baseline


def literal(name, work, bug=None):
    """``plain(rewards, group_ids)`` for rule ``name``, computing in ``work``; ``bug`` plants a
    named slip."""
    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards)).to(work)
        members = defaultdict(list)
        for i, g in enumerate(np.asarray(group_ids).tolist()):
            members[g].append(i)
        out = torch.empty_like(z)
        for idx in members.values():
            r = z[idx]
            if bug == "population std":
                out[idx] = _group_advantage("verl_grpo_passk_nostd", r) / (r.std(correction=0)
                                                                            + 1e-6)
            elif bug == "max minus min":
                a = torch.zeros_like(r)
                a[torch.argmax(r)] = r.max() - r.min()
                out[idx] = a
            elif bug == "only a zero mean is zeroed":
                mean = r.mean()
                out[idx] = torch.zeros_like(r) if mean == 0 else (r - mean) / mean
            elif bug == "group baseline":
                out[idx] = r - r.mean()
            else:
                out[idx] = _group_advantage(name, r)
        if name == "verl_gpg":  # alpha = N / max(#nonzero, 1), exact as a Python float
            count = int(torch.count_nonzero(out if bug == "centred count" else z))
            out = out * (z.numel() / max(count, 1))
        elif name == "verl_reinforce_pp":
            if bug == "population variance":
                centred = out - out.mean()
                out = centred * (centred**2).mean().clamp(min=1e-8).rsqrt()
            else:
                count = out.numel() + 1e-8
                centred = out - out.sum() / count
                var = (centred**2).sum() / count * (out.numel() / (out.numel() - 1))
                out = centred * torch.rsqrt(var + 1e-8)
        elif name == "openrlhf_reinforce":
            centred = out - out.mean()
            out = centred * (centred**2).mean().clamp(min=1e-8).rsqrt()
        return out.numpy()
    return fn


def _batch(rule, rng):
    sizes = [4, 4, 4] if rule.equal_group_sizes else [2, 5, 3, 4]
    ids = np.repeat(np.array([7, -3, 12, 40])[:len(sizes)], sizes)
    z = rng.normal(size=ids.size)
    z[ids == -3] = 0.25  # an all-equal group
    z[ids == 12] = np.abs(z[ids == 12])  # a group of positive mean, for MaxRL
    order = rng.permutation(ids.size)
    return z[order], ids[order]


@pytest.mark.parametrize("name", NEW_RULES)
def test_rule_matches_the_literal_framework_formula(name):
    rule = get_rule(name)
    for seed in range(3):
        z, ids = _batch(rule, np.random.default_rng(seed))
        np.testing.assert_allclose(advantages(name, z, ids), literal(name, torch.float64)(z, ids),
                                   rtol=RTOL, atol=ATOL)


def test_hand_computed_values():
    ids = np.repeat([0, 1, 2], 3)
    z = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    # Pass@k: one success in three, Bessel std 1/sqrt(3); ties at the top give 0
    np.testing.assert_allclose(advantages("verl_grpo_passk", z, ids),
                               [1 / (3 ** -0.5 + 1e-6)] + [0.0] * 8, rtol=1e-15)
    # GPG: N = 9 responses, 4 nonzero rewards, so alpha = 9/4; centred 2/3 and -1/3
    np.testing.assert_allclose(advantages("verl_gpg", z, ids),
                               [1.5, -0.75, -0.75] + [0.0] * 6, rtol=1e-15)
    # MaxRL: (1 - 1/3)/(1/3) = 2 and -1; the all-ones group 0; the all-zero group 0, not NaN
    with np.errstate(all="raise"):
        got = advantages("prime_rl_max_rl", z, ids)
    np.testing.assert_allclose(got, [2.0, -1.0, -1.0] + [0.0] * 6, rtol=1e-15)
    assert np.all(advantages("prime_rl_max_rl", [-1.0, 0.5, 0.0], [0, 0, 0]) == 0.0)  # mean < 0
    assert np.all(advantages("prime_rl_max_rl", [3.0], [0]) == 0.0)  # singleton: (z - z)/z
    with pytest.raises(ValueError, match="at least 2"):
        advantages("verl_grpo_passk", [1.0, 0.0, 1.0], [0, 0, 1])


# ---------------------------------------------------------------- exact theory (group rules)
def _enumerated(bandit, name, G):
    """``(E g_hat(x) (P, K), E||g_hat(x) - g(x)||^2 (P,))`` by enumerating every group."""
    means, mses = [], []
    for x in range(bandit.n_prompts):
        values, prob = enumerate_prompt_estimates(bandit, x, G, name)
        means.append(prob @ values)
        mses.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
    return np.array(means), np.array(mses)


def _closed_form_mean_factor(name, V, G):
    """Derived by hand from a(z, m): only m = 1 moves Pass@k; MaxRL's is the order-G
    truncation sum_{k<G} (1 - V)^k of the maximum-likelihood gradient's 1/V."""
    if name == "prime_rl_max_rl":
        return (1 - (1 - V) ** (G - 1)) / V
    best = 1 / (G ** -0.5 + 1e-6) if name == "verl_grpo_passk" else 1.0
    return (1 - V) ** (G - 1) * best


@pytest.mark.parametrize("name", GROUP_RULES)
def test_exact_moments_equal_enumeration(name):
    bandit = small_bandit()
    moments = bandit.moments()
    for G in range(2, 7):
        out = theory.advantage_moments(moments, name, G)
        mean, mse = _enumerated(bandit, name, G)
        np.testing.assert_allclose(out.mean_factor[:, None] * bandit.grad_per_prompt, mean,
                                   rtol=RTOL, atol=ATOL, err_msg=f"{name}, G={G}")
        np.testing.assert_allclose(out.mse_grad, mse, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}, G={G}")
        np.testing.assert_allclose(theory.per_prompt_mse(moments, name, G), mse, rtol=RTOL,
                                   atol=ATOL)
        np.testing.assert_allclose(out.mean_factor,
                                   _closed_form_mean_factor(name, bandit.value, G), rtol=RTOL)
        # negative control: the same comparison rejects the full-mean rule's MSE
        assert not np.allclose(theory.per_prompt_mse(moments, "fullmean", G), mse, rtol=1e-6)


def test_maxrl_is_unbiased_for_the_truncated_likelihood_and_passk_only_moves_single_successes():
    V = np.array([0.05, 0.3, 0.9])
    for G in (2, 4, 8):
        t = theory.advantage_table("prime_rl_max_rl", G)
        m = np.arange(1, G + 1)
        np.testing.assert_allclose(t.success[1:], (G - m) / m, rtol=1e-15)
        np.testing.assert_allclose(t.failure[1:G], -1.0, rtol=1e-15)
        assert t.failure[0] == 0.0  # the all-zero group: 0, not 0/0
        p = theory.advantage_table("verl_grpo_passk_nostd", G)
        assert p.success[1] == 1.0 and np.all(p.success[2:] == 0) and np.all(p.failure == 0)
    assert np.all(np.diff(_closed_form_mean_factor("prime_rl_max_rl", V, 64)) < 0)
    # at G = 2 MaxRL is the leave-one-out rule (a(1, 1) = 1, a(0, 1) = -1), unbiased
    t, loo = theory.advantage_table("prime_rl_max_rl", 2), theory.advantage_table("grpo", 2)
    np.testing.assert_array_equal(t.success, loo.success)
    np.testing.assert_array_equal(t.failure, loo.failure)


# ---------------------------------------------------------------- Monte Carlo (group rules)
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_group_rules_monte_carlo_matches_exact(backend):
    # negative control fullmean (not grpo: at G = 2 MaxRL's a(z, m) is leave-one-out's exactly)
    check_group_rules_monte_carlo(GROUP_RULES, lambda name: "fullmean", backend, seed=29)


# ---------------------------------------------------------------- batch rules
@pytest.mark.parametrize("name", BATCH_RULES)
def test_batch_rules_monte_carlo_matches_batch_enumeration(name):
    check_batch_rule_monte_carlo(name, ((2, 2, 31), (3, 1, 32)))


# ---------------------------------------------------------------- conformance kit
PLANTED = [  # (rule, bug): each a slip an implementation could make
    ("verl_grpo_passk", "population std"),
    ("verl_grpo_passk_nostd", "max minus min"),
    ("verl_gpg", "centred count"),
    ("verl_reinforce_pp", "population variance"),
    ("openrlhf_reinforce", "group baseline"),
    ("prime_rl_max_rl", "only a zero mean is zeroed"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,bug", PLANTED, ids=[f"{n}-{b}" for n, b in PLANTED])
def test_planted_bug_is_rejected_in_either_dtype(name, bug, dtype):
    report = check_conformance(literal(name, torch.float64, bug), name,
                               search=Search(dtypes=(dtype,), shrink=False))
    assert not report.passed
    assert report.failure is not None and report.failure.rewards.dtype == np.dtype(dtype)


def _verl():
    verl = load_data("verl_core_algos_1dda039b")
    algo = {"norm_adv_by_std_in_grpo": True}
    return {
        "verl_grpo_passk": lambda t, m, i: verl.compute_grpo_passk_outcome_advantage(
            t, m, i, config=algo),
        "verl_grpo_passk_nostd": lambda t, m, i: verl.compute_grpo_passk_outcome_advantage(
            t, m, i, config={"norm_adv_by_std_in_grpo": False}),
        "verl_gpg": lambda t, m, i: verl.compute_gpg_outcome_advantage(t, m, i),
        "verl_reinforce_pp": lambda t, m, i: verl.compute_reinforce_plus_plus_outcome_advantage(
            t, m, index=i, config=SimpleNamespace(gamma=1.0)),  # algorithm.gamma's default
    }


@pytest.mark.parametrize("index", ["uid", "int"])
def test_frameworks_own_functions_conform(index):
    for name, fn in _verl().items():
        report = check_conformance(fn, name, signature="verl", tensors="torch", index=index)
        assert report.passed, report.summary()
    openrlhf = load_data("openrlhf_experience_maker_3c3be623")
    report = check_conformance(openrlhf.reinforce, "openrlhf_reinforce", signature="trl",
                               tensors="torch")
    assert report.passed, report.summary()
    prime = load_data("prime_rl_max_rl_559b4477")
    report = check_conformance(prime.max_rl, "prime_rl_max_rl")
    assert report.passed, report.summary()


def test_frameworks_own_functions_are_told_apart():
    """Negative control of the runs above: each framework function fails a neighbouring rule."""
    verl = _verl()
    openrlhf = load_data("openrlhf_experience_maker_3c3be623")
    for fn, other, signature in ((verl["verl_grpo_passk"], "verl_grpo_passk_nostd", "verl"),
                                 (verl["verl_gpg"], "verl_grpo_nostd", "verl"),
                                 (verl["verl_reinforce_pp"], "verl_reinforce_pp_baseline", "verl"),
                                 (openrlhf.reinforce, "verl_reinforce_pp", "trl")):
        report = check_conformance(fn, other, signature=signature, tensors="torch",
                                   search=Search(max_examples=100, shrink=False))
        assert not report.passed, other
