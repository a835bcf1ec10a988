"""rLLM (rllm-org/rllm) as a framework: its ``grpo``, ``prpo`` and REINFORCE++ baseline
(ustat_rl.advantages.conventions, docs/conventions.md).

``rllm_grpo`` is a group rule (population std, 1e-6 added, a singleton divided by 1 + 1e-6);
``rllm_prpo`` and ``rllm_reinforce_pp_baseline`` whiten over the batch. Checked by independent
routes:

* provenance: a full commit and its date, and a row of docs/conventions.md naming them;
* hand-computed values;
* rLLM's functions, re-expressed from the facts read at that commit
  (tests/data/rllm_advantages_9beb6e0f.json), pass the conformance kit against their rows in
  float32 and float64, and, as negative controls, fail against the neighbouring rows (verl's
  Bessel std, ROLL's Bessel batch std, slime's Bessel whitening); a planted singleton bug fails;
* ``rllm_grpo``'s exact finite-G mean and MSE (docs/theory.md section 7) equal enumeration of
  every group to 1e-12, and its Monte Carlo on both bandit backends is within ``Z_CHECK = 4``
  standard errors (6.3e-5 two-sided per comparison) of the exact MSE and rejects verl's
  ``grpo``'s;
* the batch rules by enumerating whole batches against Monte Carlo within ``Z_CHECK`` standard
  errors, rejecting the full mean's MSE.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
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

RULES = ("rllm_grpo", "rllm_prpo", "rllm_reinforce_pp_baseline")
FACTS = json.loads((DATA / "rllm_advantages_9beb6e0f.json").read_text())
EPS = FACTS["estimators"]["grpo"]["epsilon"]


def _groups(rewards, group_ids):
    """rLLM's input: one array per group, groups in order of first appearance."""
    z, ids = np.asarray(rewards), np.asarray(group_ids)
    _, first = np.unique(ids, return_index=True)
    keys = ids[np.sort(first)]
    return [np.flatnonzero(ids == k) for k in keys], z


def rllm_grpo(rewards, group_ids, singleton_bug=False):
    members, z = _groups(rewards, group_ids)
    out = np.empty_like(z)
    for m in members:
        r = z[m]
        mean, std = (r.mean(), r.std()) if len(r) > 1 else (0.0, 1.0)
        if singleton_bug and len(r) == 1:
            mean = r.mean()
        out[m] = (r - mean) / (std + EPS)
    return out


def rllm_prpo(rewards, group_ids):
    z = np.asarray(rewards)
    return (z - z.mean()) / (z.std() + EPS)


def rllm_reinforce_pp_baseline(rewards, group_ids):
    members, z = _groups(rewards, group_ids)
    c = np.empty_like(z)
    for m in members:
        c[m] = z[m] - z[m].mean()
    return c / (c.std() + EPS)


OWN = {"rllm_grpo": rllm_grpo, "rllm_prpo": rllm_prpo,
       "rllm_reinforce_pp_baseline": rllm_reinforce_pp_baseline}


def test_each_rule_is_registered_with_checked_provenance():
    check_provenance(RULES, (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8"))
    assert get_rule("rllm_grpo").statistics == "group"
    assert get_rule("rllm_prpo").statistics == "batch"
    assert get_rule("rllm_reinforce_pp_baseline").statistics == "batch"
    assert get_rule("rllm_grpo").commit == FACTS["commit"]


def test_hand_computed_values():
    z, ids = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 3.0]), np.array([0, 0, 0, 1, 1, 2])
    # group 0: mean 1/3, population std sqrt(2)/3; group 1 all equal; the singleton z/(1 + 1e-6)
    s = np.sqrt(2) / 3
    np.testing.assert_allclose(advantages("rllm_grpo", z, ids),
                               [(2 / 3) / (s + 1e-6), (-1 / 3) / (s + 1e-6),
                                (-1 / 3) / (s + 1e-6), 0, 0, 3 / (1 + 1e-6)], rtol=1e-14)
    # prpo: batch mean 1, population std 1
    np.testing.assert_allclose(advantages("rllm_prpo", z, ids), (z - 1) / (1 + 1e-6), rtol=1e-14)
    # REINFORCE++ baseline: c = [2/3, -1/3, -1/3, 0, 0, 0], population std 1/3
    c = np.array([2 / 3, -1 / 3, -1 / 3, 0, 0, 0])
    np.testing.assert_allclose(advantages("rllm_reinforce_pp_baseline", z, ids),
                               c / (1 / 3 + 1e-6), rtol=1e-13, atol=1e-15)
    for name in RULES:  # rLLM's own functions give the same numbers
        np.testing.assert_allclose(OWN[name](z, ids), advantages(name, z, ids), rtol=1e-13,
                                   atol=1e-15)


@pytest.mark.parametrize("name", RULES)
def test_rllms_own_functions_conform(name):
    report = check_conformance(OWN[name], name, search=Search(max_examples=60))
    assert report.passed, report.summary()


@pytest.mark.parametrize("name, neighbour", [
    ("rllm_grpo", "verl_grpo"), ("rllm_prpo", "roll_batch"),
    ("rllm_reinforce_pp_baseline", "slime_reinforce_pp_baseline")])
def test_rllms_functions_are_told_from_their_neighbours(name, neighbour):
    report = check_conformance(OWN[name], neighbour, search=Search(max_examples=100, shrink=False))
    assert not report.passed, (name, neighbour)


def test_planted_singleton_bug_is_rejected():
    report = check_conformance(lambda r, g: rllm_grpo(r, g, singleton_bug=True), "rllm_grpo",
                               search=Search(max_examples=100, shrink=False))
    assert not report.passed


def test_grpo_exact_moments_equal_enumeration():
    check_exact_moments_by_enumeration("rllm_grpo", range(2, 6))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_grpo_monte_carlo_matches_exact(backend):
    check_group_rules_monte_carlo(("rllm_grpo",), lambda name: "verl_grpo", backend, seed=47)


@pytest.mark.parametrize("name, seed", [("rllm_prpo", 471), ("rllm_reinforce_pp_baseline", 472)])
def test_batch_rules_monte_carlo_match_batch_enumeration(name, seed):
    check_batch_rule_monte_carlo(name, ((2, 2, seed),), reps=4_000)
