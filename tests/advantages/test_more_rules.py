"""The rules read for issue 38: verl's ``opo``, ROLL's reward normalisation and slime's
REINFORCE++ baseline (ustat_rl.advantages.conventions, docs/conventions.md).

``verl_opo`` is verl's ``opo`` at equal response lengths (its baseline weighs each reward by its
response's length), a group rule; ``roll_batch`` is ROLL's ``reward_norm`` with batch mean and
batch std, which its ``running`` option equals on the first step, a batch rule;
``slime_reinforce_pp_baseline`` is slime's ``reinforce_plus_plus_baseline``, the group mean
subtracted, then whitened over the batch with a one-pass, Bessel-corrected variance, a batch
rule. Checked by independent routes:

* provenance: a full commit and its date, and a row of docs/conventions.md naming them;
* ``verl_opo``'s exact finite-G mean and MSE (docs/theory.md section 7) equal brute-force
  enumeration of every group, G = 2..6, to 1e-12, and equal the full mean's (verl_grpo_nostd's);
  its Monte Carlo on both bandit backends is within ``Z_CHECK`` standard errors (false failures
  6.3e-5 per comparison) of the exact MSE and rejects leave-one-out GRPO's;
* the batch rules, which the per-group theory cannot describe, by enumerating whole batches
  against ``batch_monte_carlo`` within ``Z_CHECK`` standard errors, rejecting the full mean's MSE;
* the conformance kit rejects a planted bug in float32 and in float64 batches, and passes the
  frameworks' own functions extracted to tests/data (verl's ``compute_opo_outcome_advantage`` at
  equal lengths, ROLL's ``reward_norm`` with ``batch`` and with ``running`` on a fresh state,
  slime's group mean, token broadcast and ``distributed_masked_whiten`` chained as its loss
  does); as negative controls it rejects verl's ``opo`` on ragged responses, ROLL's ``running``
  option once its state has seen an earlier batch, and slime's function as NeMo-RL's
  ``reinforce_plus_plus`` (population variance);
* ROLL's running state after ``t`` batches holds the pooled mean and Bessel std of all of them.

As ordinary conventions, the kit's run on the reference and on framework-style implementations
in float32 and float64 is tests/conformance/test_conformance.py's, the pinned tolerance
tests/conformance/test_kit_tolerance_pinned.py's, and the literal formula in float64
tests/advantages/test_conventions.py's, over every convention.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from framework_calls import roll_reward_norm
from rule_checks import (
    Z_CHECK,
    check_batch_rule_monte_carlo,
    check_group_rules_monte_carlo,
    check_provenance,
    exact_batch,
)
from script_loader import ROOT, load_data

from ustat_rl import theory
from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import advantages
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search
from ustat_rl.policies.enumeration import enumerate_prompt_estimates
from ustat_rl.policies.examples import small_bandit
from ustat_rl.training.batch_study import batch_monte_carlo

pytestmark = pytest.mark.integration  # conformance runs: verl's opo and ROLL's reward_norm against their copied sources

RTOL, ATOL = 1e-12, 1e-14  # two float64 routes through the same arithmetic, to rounding
NEW_RULES = ("verl_opo", "roll_batch", "slime_reinforce_pp_baseline")
SLIME = "slime_reinforce_pp_baseline"


# ---------------------------------------------------------------- provenance
def test_each_rule_is_registered_with_checked_provenance():
    check_provenance(NEW_RULES, (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8"))
    assert get_rule("verl_opo").statistics == "group"
    assert get_rule("roll_batch").statistics == "batch"
    assert get_rule(SLIME).statistics == "batch"


def test_hand_computed_values():
    ids = np.array([0, 0, 0, 1, 1, 2])
    z = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 3.0])
    # opo at equal lengths: z - m_g; the singleton keeps its reward (baseline 0)
    np.testing.assert_allclose(advantages("verl_opo", z, ids),
                               [2 / 3, -1 / 3, -1 / 3, 0.0, 0.0, 3.0], rtol=1e-15)
    # ROLL: batch mean 1, Bessel std sqrt(6/5); the groups play no part
    expected = (z - 1.0) / (np.sqrt(6 / 5) + 1e-6)
    np.testing.assert_allclose(advantages("roll_batch", z, ids), expected, rtol=1e-15)
    np.testing.assert_array_equal(advantages("roll_batch", [2.0, 2.0, 2.0], [0, 1, 1]), 0.0)
    with pytest.raises(ValueError, match="batch of at least 2"):
        advantages("roll_batch", [1.0], [0])
    # slime: c = [1/2, -1/2, 0, 0, 0, 0] (group means 1/2, 2, 0), batch mean 0, one-pass
    # variance E[c^2] = 1/12 times 6/5 = 0.1, 1e-8 inside the square root
    got = advantages(SLIME, [1.0, 0.0, 2.0, 2.0, 0.0, 0.0], np.repeat([0, 1, 2], 2))
    np.testing.assert_allclose(got, np.array([0.5, -0.5, 0, 0, 0, 0]) / np.sqrt(0.1 + 1e-8),
                               rtol=1e-14)
    # every group all-equal: c = 0, divided by sqrt(1e-8), so 0, not NaN; a batch of one (no
    # Bessel correction, as slime's N >= 2 test) also 0
    with np.errstate(all="raise"):
        assert np.all(advantages(SLIME, [3.0, 3.0, 1.0, 1.0], [0, 0, 1, 1]) == 0.0)
        assert np.all(advantages(SLIME, [0.7], [0]) == 0.0)


# ---------------------------------------------------------------- exact theory (verl_opo)
def test_opo_exact_moments_equal_enumeration_and_the_full_means():
    bandit = small_bandit()
    moments = bandit.moments()
    for G in range(2, 7):
        out = theory.advantage_moments(moments, "verl_opo", G)
        means, mses = [], []
        for x in range(bandit.n_prompts):
            values, prob = enumerate_prompt_estimates(bandit, x, G, "verl_opo")
            means.append(prob @ values)
            mses.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
        np.testing.assert_allclose(out.mean_factor[:, None] * bandit.grad_per_prompt,
                                   np.array(means), rtol=RTOL, atol=ATOL, err_msg=f"G={G}")
        np.testing.assert_allclose(out.mse_grad, mses, rtol=RTOL, atol=ATOL, err_msg=f"G={G}")
        # the full mean: mean factor (G - 1)/G (docs/theory.md C2), verl_grpo_nostd's MSE
        np.testing.assert_allclose(out.mean_factor, (G - 1) / G, rtol=RTOL)
        np.testing.assert_allclose(theory.per_prompt_mse(moments, "verl_grpo_nostd", G), mses,
                                   rtol=RTOL, atol=ATOL)
        # negative control: the same comparison rejects leave-one-out GRPO's MSE
        assert not np.allclose(theory.per_prompt_mse(moments, "grpo", G), mses, rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_opo_monte_carlo_matches_exact(backend):
    check_group_rules_monte_carlo(("verl_opo",), lambda name: "grpo", backend, seed=38)


# ---------------------------------------------------------------- batch rule (roll_batch)
def test_roll_batch_monte_carlo_matches_batch_enumeration():
    # one case, two groups of two, 4000 batches: the check is in standard errors, and the full
    # mean's MSE (the negative control) sits far outside them
    check_batch_rule_monte_carlo("roll_batch", ((2, 2, 381),), reps=4_000)


def test_slime_reinforce_pp_baseline_monte_carlo_matches_batch_enumeration():
    # negative control inside: the full mean's MSE
    check_batch_rule_monte_carlo(SLIME, ((2, 2, 382),), reps=4_000)
    # and NeMo-RL's REINFORCE++ (the same centring, population variance floored at 1e-8):
    # its enumerated MSE differs from slime's, by about the factor (N - 1)/N = 3/4 of the
    # squared advantage at N = 4, and the same Monte Carlo rejects it
    bandit = small_bandit()
    mc = batch_monte_carlo(bandit, SLIME, 2, 2, 4_000, np.random.default_rng(382))
    _, nemo = exact_batch(bandit, "nemo_rl_reinforce_pp", 2, 2)
    assert abs(mc.mse - nemo) > Z_CHECK * mc.mse_se


# ---------------------------------------------------------------- conformance kit
def _plain(name, bug):
    """``plain(rewards, group_ids)`` in the rewards' dtype (torch), with ``bug`` planted."""
    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards))
        ids = np.asarray(group_ids)
        if name == "roll_batch":  # bug: the population std
            return ((z - z.mean()) / (z.std(correction=0) + 1e-6)).numpy()
        if name == SLIME:  # the group mean, then whitening; bug: its population variance
            c = z.clone()
            for g in np.unique(ids):
                members = torch.as_tensor(np.flatnonzero(ids == g))
                c[members] = z[members] - z[members].mean()
            c = c - c.mean()  # right so far; the bug follows (NeMo-RL's variance, not Bessel's)
            return (c * torch.rsqrt((c * c).mean() + 1e-8)).numpy()
        out = torch.empty_like(z)
        for g in np.unique(ids):
            members = torch.as_tensor(np.flatnonzero(ids == g))
            r = z[members]  # bug: a singleton's baseline is its reward, so it gets 0
            out[members] = r - r.mean()
        return out.numpy()
    return fn


PLANTED = [("verl_opo", "singleton baseline its reward"), ("roll_batch", "population std"),
           (SLIME, "population variance")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,bug", PLANTED, ids=[f"{n}-{b}" for n, b in PLANTED])
def test_planted_bug_is_rejected_in_either_dtype(name, bug, dtype):
    report = check_conformance(_plain(name, bug), name,
                               search=Search(dtypes=(dtype,), shrink=False))
    assert not report.passed
    assert report.failure is not None and report.failure.rewards.dtype == np.dtype(dtype)


def _verl_opo_equal_lengths(tokens):
    """verl's own opo called with every response ``tokens`` long (reward on the last token)."""
    verl = load_data("verl_opo_remax_1dda039b")

    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards))
        token_rewards = torch.zeros((z.numel(), tokens), dtype=z.dtype)
        token_rewards[:, -1] = z
        mask = torch.ones((z.numel(), tokens), dtype=z.dtype)
        adv, _ = verl.compute_opo_outcome_advantage(token_rewards, mask, np.asarray(group_ids))
        return adv[:, 0].numpy()
    return fn, verl


def _slime(tokens):
    """slime's own chain (tests/data) in TRL's signature, every response ``tokens`` long."""
    slime = load_data("slime_reinforce_pp_baseline_624b824a")
    return lambda rewards, n: slime.slime_reinforce_pp_baseline(rewards, n, tokens)


def test_frameworks_own_functions_conform():
    opo, _ = _verl_opo_equal_lengths(3)
    for fn, name in ((opo, "verl_opo"), (roll_reward_norm("batch"), "roll_batch"),
                     (roll_reward_norm("running"), "roll_batch")):
        report = check_conformance(fn, name, search=Search(max_examples=50))  # float32 and float64
        assert report.passed, report.summary()
    # one token per response, as the rule is stated (the control below: three tokens each)
    report = check_conformance(_slime(1), SLIME, signature="trl", search=Search(max_examples=50))
    assert report.passed, report.summary()


@pytest.mark.filterwarnings("ignore:std\\(\\)")  # ROLL's batch std of a one-reward batch: NaN
def test_frameworks_own_functions_are_told_apart():
    """Negative controls of the runs above: verl's opo on the kit's ragged responses (1 to 4
    tokens) weighs rewards by length; ROLL's running option, its state kept across the kit's
    batches, pools them; slime's whitening over three tokens per response counts tokens in its
    Bessel factor (NT/(NT - 1), not N/(N - 1)), so even equal lengths are another rule at small
    batches; each against a neighbouring rule as well."""
    _, verl = _verl_opo_equal_lengths(1)
    roll = load_data("roll_reward_norm_8eb27cc2")
    for fn, name, signature in (
            (verl.compute_opo_outcome_advantage, "verl_opo", "verl"),
            (roll_reward_norm("running", roll.RunningMoments()), "roll_batch", "plain"),
            (_verl_opo_equal_lengths(2)[0], "verl_rloo", "plain"),
            (roll_reward_norm("batch"), "openrlhf_reinforce", "plain"),
            (_slime(1), "nemo_rl_reinforce_pp", "trl"),
            (_slime(3), SLIME, "trl")):
        report = check_conformance(fn, name, signature=signature, tensors="torch",
                                   search=Search(max_examples=100, shrink=False))
        assert not report.passed, (name, signature)


def test_roll_running_state_is_every_batch_pooled():
    """After t batches ROLL's RunningMoments holds the mean and Bessel std of all t batches
    together (float32 state: rtol 1e-5); negative control: not the last batch's alone."""
    roll = load_data("roll_reward_norm_8eb27cc2")
    state, seen = roll.RunningMoments(), []
    rng = np.random.default_rng(38)
    for size in (5, 8, 3, 12):
        batch = rng.normal(2.0, 1.5, size=size)
        seen.append(batch)
        out = roll.reward_norm(torch.as_tensor(batch), running_ctrl={"domain": state},
                               norm_mean_type="running", norm_std_type="running").numpy()
        pooled = np.concatenate(seen)
        np.testing.assert_allclose(float(state.mean), pooled.mean(), rtol=1e-5)
        np.testing.assert_allclose(float(state.std), pooled.std(ddof=1), rtol=1e-5)
        np.testing.assert_allclose(out, (batch - pooled.mean()) / (pooled.std(ddof=1) + 1e-6),
                                   rtol=1e-5, atol=1e-6)
    assert not np.isclose(float(state.std), batch.std(ddof=1), rtol=1e-3)
