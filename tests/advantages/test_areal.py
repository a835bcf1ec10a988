"""AReaL's two-stage normalisation, ``areal_grpo`` (ustat_rl.advantages.conventions,
docs/conventions.md): ``reward_norm`` per group, then ``adv_norm`` over the batch, each with
``NormConfig``'s defaults (no leave-one-out, Bessel std, 1e-5 added), as AReaL's GRPO examples
set the levels. The second stage whitens the first stage's output, so the rule is a batch
rule whose centring is a group function (the first stage). Checked by independent routes:

* provenance: a full commit and its date, and a row of docs/conventions.md naming them;
* hand-computed values, and the rule equal to its two stages written out in numpy (1e-12);
* AReaL's own ``Normalization`` (extracted to tests/data) passes the conformance kit, called
  as its actor calls it; as negative controls the kit rejects AReaL's class with the first
  stage alone, with no std in the first stage, and with the population std in the second; a
  leave-one-out group mean changes only the epsilon's effect (its std is taken about the
  leave-one-out means), so it is shown close, not rejected;
* a planted bug (the second stage's epsilon inside the square root) is rejected in float32
  and in float64 batches, the same code without it passing;
* the batch estimator's Monte Carlo on the bandit is within ``Z_CHECK`` standard errors of its
  exact mean and MSE by enumerating every batch (rule_checks.check_batch_rule_monte_carlo),
  rejecting the exact MSE of the full mean and of the first stage alone (TRL's group rule).

The kit's run on the reference and on framework-style implementations in float32 and float64,
the pinned tolerance and the literal formula are the per-convention tests' (tests/conformance,
tests/advantages/test_conventions.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from framework_calls import areal_normalization
from rule_checks import check_batch_rule_monte_carlo
from script_loader import ROOT

from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import AREAL_REWARD_NORM, CONVENTION_NAMES, advantages
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.fast

NAME = "areal_grpo"


def test_registered_with_checked_provenance():
    page = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    rule = get_rule(NAME)
    assert NAME in CONVENTION_NAMES and rule.statistics == "batch"
    assert re.fullmatch(r"[0-9a-f]{40}", rule.commit) and rule.commit.startswith("4aef98d8")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rule.commit_date)
    assert f"`{NAME}`" in page and f"{rule.commit[:8]} ({rule.commit_date})" in page
    assert rule.repository in page and rule.path in page


def _two_stages(z, ids):
    """The rule written out: each group's (z - m)/(s + 1e-5), then the batch's whitening."""
    a = np.empty_like(z)
    for g in np.unique(ids):
        r = z[ids == g]
        a[ids == g] = (r - r.mean()) / (r.std(ddof=1) + 1e-5)
    return (a - a.mean()) / (a.std(ddof=1) + 1e-5)


def test_hand_computed_values():
    ids = np.repeat([0, 1, 2], 2)
    z = np.array([1.0, 0.0, 3.0, 3.0, 2.0, 0.0])
    # first stage: +-1/2 over (sqrt(1/2) + 1e-5), +-1 over (sqrt(2) + 1e-5), the tie 0
    first = np.array([0.5, -0.5, 0, 0, 1, -1]) / np.array([np.sqrt(0.5) + 1e-5] * 4
                                                          + [np.sqrt(2.0) + 1e-5] * 2)
    expected = first / (first.std(ddof=1) + 1e-5)  # batch mean 0 by symmetry
    np.testing.assert_allclose(advantages(NAME, z, ids), expected, rtol=1e-12, atol=1e-15)
    rng = np.random.default_rng(383)
    for _ in range(5):
        ids = rng.permutation(np.repeat(np.arange(4), 3))
        z = rng.normal(size=12)
        np.testing.assert_allclose(advantages(NAME, z, ids), _two_stages(z, ids), rtol=1e-12,
                                   atol=1e-14)
    np.testing.assert_array_equal(advantages(NAME, [2.0, 2.0, 5.0, 5.0], [0, 0, 1, 1]), 0.0)
    np.testing.assert_array_equal(AREAL_REWARD_NORM.grouped([[4.0, 4.0, 4.0]]), 0.0)
    with pytest.raises(ValueError, match="same size"):
        advantages(NAME, [1.0, 0.0, 1.0], [0, 0, 1])


def test_areals_own_normalization_conforms_and_its_neighbours_do_not():
    report = check_conformance(areal_normalization(), NAME, tensors="torch",
                               search=Search(max_examples=40))
    assert report.passed, report.summary()
    controls = {"first stage alone": areal_normalization(second_stage=False),
                "group mean without std (its Dr. GRPO example)": areal_normalization(
                    reward_norm={"std_level": None}),
                "population batch std": areal_normalization(adv_norm={"std_unbiased": False})}
    for which, fn in controls.items():
        assert not check_conformance(fn, NAME, tensors="torch",
                                     search=Search(max_examples=100, shrink=False)).passed, which


def test_a_leave_one_out_group_mean_changes_only_the_epsilons_effect():
    """AReaL takes the group std about the leave-one-out means, which scales it by n/(n - 1)
    as it scales the numerator: with mean_leave1out=True the advantages move only through the
    epsilon's share (rtol 1e-4 at group spreads near 1; the population-std option, a real
    change, is off by more than 1%)."""
    rng = np.random.default_rng(386)
    ids = np.repeat(np.arange(4), 5)
    z = rng.normal(size=ids.size)
    ours = advantages(NAME, z, ids)
    np.testing.assert_allclose(areal_normalization(reward_norm={"mean_leave1out": True})(z, ids), ours,
                               rtol=1e-4, atol=1e-5)
    assert not np.allclose(areal_normalization(adv_norm={"std_unbiased": False})(z, ids), ours, rtol=1e-2)


def _torch_rule(bug):
    """The rule in the rewards' dtype (torch); with ``bug`` the second stage's epsilon goes
    inside the square root of the variance instead of being added to the std."""
    def fn(rewards, group_ids):
        z = torch.as_tensor(np.asarray(rewards))
        ids = torch.as_tensor(np.asarray(group_ids))
        a = torch.zeros_like(z)
        for g in torch.unique(ids):
            r = z[ids == g]
            if r.numel() > 1:  # AReaL: a group of one has mean z and std 1, so 0
                a[ids == g] = (r - r.mean()) / (r.std() + 1e-5)
        centred = a - a.mean()
        return (centred / (torch.sqrt(a.var() + 1e-5) if bug else a.std() + 1e-5)).numpy()
    return fn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_planted_bug_is_rejected_in_either_dtype(dtype):
    assert check_conformance(_torch_rule(False), NAME,
                             search=Search(max_examples=50, dtypes=(dtype,))).passed
    assert not check_conformance(_torch_rule(True), NAME,
                                 search=Search(dtypes=(dtype,), shrink=False)).passed


def test_monte_carlo_matches_batch_enumeration():
    """Monte Carlo within Z_CHECK se of the enumerated mean factor and MSE at G = B = 2,
    rejecting the exact MSE of the full mean and of TRL's group rule, the first stage without
    the whitening (its epsilon 1e-4 instead of 1e-5, a negligible difference here)."""
    check_batch_rule_monte_carlo(NAME, ((2, 2, 384),), reps=2_000,
                                 neighbours=("fullmean", "trl_group"))
