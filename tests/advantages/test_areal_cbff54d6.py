"""AReaL re-read at areal-project/AReaL cbff54d6 (issue 47): ``areal_grpo_cbff54d6``, the two
stages of ``areal_grpo`` over ragged trajectory groups, and ``areal_rollout_norm``, its
rollout-time normalisation (ustat_rl.advantages.conventions, docs/conventions.md).

``areal_grpo`` stays pinned at inclusionAI/AReaL 4aef98d8, where the actor slices fixed blocks
of ``group_size`` and the rule needs equal groups; at cbff54d6 the actor passes its trajectory
group sizes, so a group that lost a sample is normalised on its own. Checked by independent
routes:

* provenance: full commits and dates, rows of docs/conventions.md naming them, the old row kept
  at its own commit;
* hand-computed values on a ragged batch, and at equal groups the new row equal to the old one
  (1e-12): the formulas did not change;
* AReaL's code re-expressed from the facts read at cbff54d6 (tests/data/areal_cbff54d6.json)
  passes the conformance kit against its rows; negative controls: the actor's fixed-block
  slicing (what it does when called without the group sizes, and what 4aef98d8 always did) is
  rejected on ragged batches, the rollout step is rejected against verl's Bessel std and rLLM's
  1e-6, and a planted Bessel std in the rollout step is rejected;
* ``areal_rollout_norm``'s exact finite-G mean and MSE (docs/theory.md section 7) equal
  enumeration of every group to 1e-12, and its Monte Carlo on both bandit backends is within
  ``Z_CHECK = 4`` standard errors (6.3e-5 two-sided per comparison) of the exact MSE and
  rejects verl's ``grpo``'s;
* ``areal_grpo_cbff54d6``'s Monte Carlo within ``Z_CHECK`` standard errors of whole batches
  enumerated, rejecting the full mean's and TRL's group rule's exact MSE.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from rule_checks import (
    check_batch_rule_monte_carlo,
    check_exact_moments_by_enumeration,
    check_group_rules_monte_carlo,
    check_provenance,
)
from script_loader import DATA, ROOT

from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import advantages
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.integration  # conformance runs and Monte Carlo on both backends

RULES = ("areal_grpo_cbff54d6", "areal_rollout_norm")
FACTS = json.loads((DATA / "areal_cbff54d6.json").read_text())
ACTOR, ROLLOUT = FACTS["actor_normalisation"], FACTS["rollout_normalisation"]
EPS = ACTOR["norm_config_defaults"]["eps"]


def _standardise(x, eps):
    """A run's ``(x - mean)/(std + eps)``: float64 statistics, Bessel std, a run of one std 1;
    the output cast to float32, as AReaL's Normalization returns it."""
    x = x.to(torch.float64)
    std = x.std() if x.numel() > 1 else torch.tensor(1.0, dtype=torch.float64)
    return ((x - x.mean()) / (std + eps)).to(torch.float32)


def areal_actor(rewards, group_ids, group_sizes=True):
    """The actor's reward_norm then adv_norm, one token per response. Each prompt's samples
    arrive together (ordered by group here, put back after); with ``group_sizes`` the first
    stage takes runs of the trajectory group sizes, without them fixed blocks of the configured
    group size (the largest group: a ragged group has lost samples), a tail shorter than a
    block keeping mean 0 and std 0."""
    z = torch.as_tensor(np.asarray(rewards))
    ids = np.asarray(group_ids)
    order = np.argsort(ids, kind="stable")
    sizes = np.unique(ids, return_counts=True)[1]
    x = z[torch.as_tensor(order)]
    if group_sizes:
        runs = torch.split(x, sizes.tolist())
        first = torch.cat([_standardise(run, EPS) for run in runs])
    else:
        block = int(sizes.max())
        first = x.to(torch.float32) / EPS  # the tail: (x - 0)/(0 + eps)
        for start in range(0, x.numel() - block + 1, block):
            first[start:start + block] = _standardise(x[start:start + block], EPS)
    second = _standardise(first, EPS)
    out = torch.empty_like(second)
    out[torch.as_tensor(order)] = second
    return out.numpy()


def areal_rollout(rewards, group_ids, unbiased=False):
    """The rollout-time step on each complete group: a float32 tensor of its rewards, less its
    mean, over its std (population unless ``unbiased``) plus 1e-8; a group of one untouched."""
    z = np.asarray(rewards)
    ids = np.asarray(group_ids)
    out = np.empty(z.shape, dtype=np.float64)
    for g in np.unique(ids):
        r = torch.as_tensor(z[ids == g], dtype=torch.float32)
        if r.numel() == 1:
            out[ids == g] = r.numpy()
            continue
        std = r.std(correction=1 if unbiased else 0)
        out[ids == g] = ((r - r.mean()) / (std + ROLLOUT["epsilon"])).numpy()
    return out


def test_each_rule_is_registered_with_checked_provenance():
    page = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    check_provenance(RULES + ("areal_grpo",), page)
    for name in RULES:
        rule = get_rule(name)
        assert (rule.repository, rule.commit) == (FACTS["repository"], FACTS["commit"])
        assert rule.commit_date == FACTS["commit_date"]
    old = get_rule("areal_grpo")  # the old row kept, at its own commit
    assert (old.repository, old.commit[:8]) == ("inclusionAI/AReaL", "4aef98d8")
    assert old.equal_group_sizes and not get_rule("areal_grpo_cbff54d6").equal_group_sizes
    assert get_rule("areal_grpo_cbff54d6").statistics == "batch"
    assert get_rule("areal_rollout_norm").statistics == "group"


def test_hand_computed_values():
    z, ids = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 3.0]), np.array([0, 0, 0, 1, 1, 2])
    # first stage: group 0 has mean 1/3 and Bessel std sqrt(1/3); group 1 is tied; the
    # singleton (z - z)/(1 + 1e-5) = 0. Its values sum to 0, so the batch mean is 0
    first = np.array([2 / 3, -1 / 3, -1 / 3, 0, 0, 0]) / (np.sqrt(1 / 3) + EPS)
    expected = first / (first.std(ddof=1) + EPS)
    np.testing.assert_allclose(advantages("areal_grpo_cbff54d6", z, ids), expected, rtol=1e-12,
                               atol=1e-15)
    with pytest.raises(ValueError, match="same size"):  # the 4aef98d8 row needs equal groups
        advantages("areal_grpo", z, ids)
    # the rollout step: mean 1/3, population std sqrt(2)/3; a configured group size of one
    s = np.sqrt(2) / 3
    np.testing.assert_allclose(advantages("areal_rollout_norm", z[:3], ids[:3]),
                               np.array([2 / 3, -1 / 3, -1 / 3]) / (s + 1e-8), rtol=1e-14)
    np.testing.assert_array_equal(advantages("areal_rollout_norm", [3.0, -2.0], [0, 1]),
                                  [3.0, -2.0])
    with pytest.raises(ValueError, match="same size"):  # incomplete groups are dropped
        advantages("areal_rollout_norm", z, ids)
    # the re-expressed code gives the same numbers (float32 outputs: rtol 1e-6)
    np.testing.assert_allclose(areal_actor(z, ids), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(areal_rollout(z[:3], ids[:3]),
                               advantages("areal_rollout_norm", z[:3], ids[:3]), rtol=1e-6)


def test_equal_groups_are_unchanged_since_4aef98d8():
    rng = np.random.default_rng(4701)
    for size in (1, 2, 5):
        ids = rng.permutation(np.repeat(np.arange(4), size))
        z = rng.normal(size=ids.size)
        np.testing.assert_allclose(advantages("areal_grpo_cbff54d6", z, ids),
                                   advantages("areal_grpo", z, ids), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, fn", [("areal_grpo_cbff54d6", areal_actor),
                                      ("areal_rollout_norm", areal_rollout)])
def test_areals_code_conforms(name, fn):
    report = check_conformance(fn, name, search=Search(max_examples=60))
    assert report.passed, report.summary()


def test_fixed_block_slicing_is_rejected_on_ragged_groups():
    fixed = lambda r, g: areal_actor(r, g, group_sizes=False)  # noqa: E731
    report = check_conformance(fixed, "areal_grpo_cbff54d6",
                               search=Search(max_examples=100, shrink=False))
    assert not report.passed
    # at equal groups the two slicings agree: the old row accepts the fixed blocks
    assert check_conformance(fixed, "areal_grpo", search=Search(max_examples=40)).passed
    # docs/conventions.md's batch: blocks of 2 put group 0's reward with one of group 1's, and
    # the tail, group 1's other reward, is divided by 1e-5 alone; whitened, [0, 0, 1e5] is
    # (-1, -1, 2)/sqrt(3) where the row gives 0, -1, 1 (up to the epsilons)
    z, ids = np.array([0.0, 0.0, 1.0]), np.array([0, 1, 1])
    np.testing.assert_allclose(fixed(z, ids), np.array([-1.0, -1.0, 2.0]) / np.sqrt(3),
                               rtol=1e-5)
    np.testing.assert_allclose(advantages("areal_grpo_cbff54d6", z, ids), [0.0, -1.0, 1.0],
                               atol=2e-5)


@pytest.mark.parametrize("neighbour", ["verl_grpo", "rllm_grpo"])
def test_rollout_step_is_told_from_its_neighbours(neighbour):
    report = check_conformance(areal_rollout, neighbour,
                               search=Search(max_examples=100, shrink=False))
    assert not report.passed, neighbour


def test_planted_bessel_std_in_the_rollout_step_is_rejected():
    report = check_conformance(lambda r, g: areal_rollout(r, g, unbiased=True),
                               "areal_rollout_norm", search=Search(max_examples=100, shrink=False))
    assert not report.passed


def test_rollout_exact_moments_equal_enumeration():
    check_exact_moments_by_enumeration("areal_rollout_norm", range(2, 6))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_rollout_monte_carlo_matches_exact(backend):
    check_group_rules_monte_carlo(("areal_rollout_norm",), lambda name: "verl_grpo", backend,
                                  seed=4702)


def test_batch_rule_monte_carlo_matches_batch_enumeration():
    check_batch_rule_monte_carlo("areal_grpo_cbff54d6", ((2, 2, 4703),), reps=2_000,
                                 neighbours=("fullmean", "trl_group"))
