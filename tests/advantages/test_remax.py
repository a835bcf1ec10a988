"""verl's ``remax`` as the rule ``verl_remax`` (ustat_rl.advantages.conventions.VERL_REMAX) and
its exact moments on the softmax bandit (ustat_rl.theory.greedy_baseline).

The advantage is ``z - b``, ``b`` the reward of one greedy rollout of the prompt. On the bandit
the greedy rollout is the policy's mode (the lowest action among tied logits) and its reward a
draw of that action's reward, independent of the group. Checked by independent routes:

* provenance: a full commit and its date, both files named in docs/conventions.md;
* the closed form (a mixture over the greedy reward of the prompt-only baseline's MSE) equals
  the enumeration of every group at every one of the ``2^P`` greedy-reward vectors, weighted by
  their probabilities, to 1e-12 relative, G = 2..5 and B = 1, 2; with deterministic rewards it
  is the prompt-only baseline at ``r[x, a*]``; negative control: the greedy reward held at its
  mean (a fixed baseline) gives another MSE;
* the numpy Monte Carlo of the registered rule with drawn greedy rewards is within ``Z_CHECK``
  standard errors (false failures 6.3e-5 per comparison) of the exact MSE and of mean factor 1,
  and rejects the fixed-baseline MSE at the same band;
* verl's own ``compute_remax_outcome_advantage`` (tests/data), given each prompt's greedy reward
  repeated over its samples, returns the rule's advantages on every valid token, ragged
  lengths included, to one rounding in float32 and float64; a planted bug (the greedy rewards
  tiled instead of repeated per prompt) is rejected;
* the conformance kit, which draws a greedy reward per group and passes it as ``reference``
  (verl's signature: ``reward_baselines``), passes verl's own function and ``z - b`` computed
  in float32 or float64, rejects three planted bugs in float32 and float64 batches, and refuses
  the TRL signature (no place for the reference) in one line, exit 2 on the command line.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch
from script_loader import ROOT, load_data

from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import CONVENTION_NAMES, VERL_REMAX
from ustat_rl.conformance.kit import check_batch, check_conformance
from ustat_rl.conformance.search import Search
from ustat_rl.policies.examples import small_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory.greedy_baseline import (
    greedy_baseline,
    greedy_baseline_exact,
    greedy_baseline_monte_carlo,
)
from ustat_rl.theory.shrinkage import prompt_baseline_exact
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast


def test_registered_with_checked_provenance():
    page = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    rule = get_rule("verl_remax")
    assert rule is VERL_REMAX and "verl_remax" not in CONVENTION_NAMES
    assert re.fullmatch(r"[0-9a-f]{40}", rule.commit)
    assert "`verl_remax`" in page and f"{rule.commit[:8]} ({rule.commit_date})" in page
    assert rule.repository in page and all(p.strip() in page for p in rule.path.split(","))
    assert rule.centring.reference_source == "baseline" and rule.is_affine
    ids = np.array([0, 0, 1, 1, 1])
    z = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(rule.advantages(z, ids, reference=np.array([1, 1, 0, 0, 0.0])),
                                  [0.0, -1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="reference"):
        rule.advantages(z, ids)
    with pytest.raises(ValueError, match="`estimator`"):
        greedy_baseline_exact(small_bandit(), 4, estimator="grpo")


def test_greedy_rollout_is_the_mode_lowest_action_on_ties():
    bandit = SoftmaxBandit([[0.0, 2.0, 2.0], [1.0, 0.0, 1.0]], [[0.1, 0.7, 0.2], [0.4, 0.9, 0.3]])
    law = greedy_baseline(bandit)
    np.testing.assert_array_equal(law.action, [1, 0])
    np.testing.assert_array_equal(law.success, [0.7, 0.4])


def _mixture(bandit, G, B):
    """Enumerated MSE averaged over every vector of greedy rewards, one per prompt."""
    law, total = greedy_baseline(bandit), 0.0
    for bits in itertools.product((0, 1), repeat=bandit.n_prompts):
        bits = np.array(bits)
        prob = np.prod(np.where(bits == 1, law.success, 1.0 - law.success))
        total += prob * prompt_baseline_exact(bandit, G, B, baseline=bits.astype(float)).mse
    return total


@pytest.mark.parametrize("G,B", [(2, 1), (3, 2), (5, 1)])
def test_exact_mse_is_the_enumerated_mixture(G, B):
    bandit = small_bandit()
    exact = greedy_baseline_exact(bandit, G, B)
    assert exact.mean_factor == 1.0 and exact.bias_sq == 0.0
    np.testing.assert_allclose(exact.mse, _mixture(bandit, G, B), rtol=1e-12)
    fixed = prompt_baseline_exact(bandit, G, B, baseline=greedy_baseline(bandit).success).mse
    assert not np.isclose(exact.mse, fixed, rtol=1e-3)  # negative control


def test_deterministic_rewards_give_a_prompt_only_baseline():
    bandit = SoftmaxBandit([[0.3, -0.2, 0.5], [1.0, 0.0, -1.0]], [[1, 0, 0], [0, 1, 1.0]])
    b = bandit.reward_prob[[0, 1], greedy_baseline(bandit).action]
    np.testing.assert_allclose(greedy_baseline_exact(bandit, 4, 2).mse,
                               prompt_baseline_exact(bandit, 4, 2, baseline=b).mse, rtol=1e-12)


def test_monte_carlo_matches_exact_and_rejects_a_fixed_baseline():
    bandit = small_bandit()
    fixed_b = greedy_baseline(bandit).success
    for G, B, seed in ((2, 1, 380), (5, 2, 381)):
        exact = greedy_baseline_exact(bandit, G, B).mse
        mc = greedy_baseline_monte_carlo(bandit, G, B, 20_000, seed)
        assert abs(mc.mse - exact) <= Z_CHECK * mc.mse_se, (G, B)
        assert abs(mc.mean_factor - 1.0) <= Z_CHECK * mc.mean_factor_se, (G, B)
        fixed = prompt_baseline_exact(bandit, G, B, baseline=fixed_b).mse
        assert abs(mc.mse - fixed) > Z_CHECK * mc.mse_se, (G, B)


def _verl_remax(z, greedy, n, lengths, dtype, tile=False):
    """verl's own remax on ``P`` prompts of ``n`` responses each, laid out as its trainer lays
    them (each prompt's samples together); ``tile`` plants the bug."""
    verl = load_data("verl_opo_remax_1dda039b")
    width = int(lengths.max())
    mask = torch.as_tensor((np.arange(width)[None, :] < lengths[:, None]).astype(dtype))
    token = torch.zeros((z.size, width), dtype=getattr(torch, dtype))
    token[np.arange(z.size), lengths - 1] = torch.as_tensor(z.astype(dtype))
    b = np.tile(greedy, n) if tile else np.repeat(greedy, n)
    adv, _ = verl.compute_remax_outcome_advantage(token, torch.as_tensor(b.astype(dtype)), mask)
    return adv.numpy(), mask.numpy().astype(bool)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_verls_own_remax_is_the_rule_and_a_planted_bug_is_rejected(dtype):
    rng = np.random.default_rng(38)
    bound, rejected, differ = np.finfo(dtype).eps, 0, 0
    for _ in range(20):
        P, n = int(rng.integers(2, 5)), int(rng.integers(1, 5))
        z = rng.normal(size=P * n).astype(dtype)
        greedy = rng.normal(size=P).astype(dtype)
        lengths = rng.integers(1, 6, size=P * n)
        ids = np.repeat(np.arange(P), n)
        ours = VERL_REMAX.advantages(z, ids, reference=greedy.astype(np.float64)[ids])
        theirs, valid = _verl_remax(z, greedy, n, lengths, dtype)
        expected = np.where(valid, ours[:, None], 0.0)
        # one rounding of z - b in the rewards' dtype
        assert np.all(np.abs(theirs - expected) <= bound * np.abs(expected)), (z, greedy)
        bug, _ = _verl_remax(z, greedy, n, lengths, dtype, tile=True)
        rejected += not np.all(np.abs(bug - expected) <= bound * np.abs(expected))
        differ += n > 1  # tiling and repeating agree at one response per prompt
    assert rejected == differ >= 10


# ---------------------------------------------------------------- conformance kit
def _subtract(where):
    """``plain(rewards, group_ids, reference)`` computing ``z - b`` in ``where`` (float32 or
    float64 working precision), the kit's reference-taking form."""
    def fn(z, ids, b):
        return (np.asarray(z).astype(where) - np.asarray(b).astype(where)).astype(np.float64)
    return fn


def test_kit_passes_verls_own_remax_and_correct_implementations():
    verl = load_data("verl_opo_remax_1dda039b")
    report = check_conformance(verl.compute_remax_outcome_advantage, "verl_remax",
                               signature="verl", tensors="torch")
    assert report.passed, report.summary()
    for where in (np.float32, np.float64):
        report = check_conformance(_subtract(where), "verl_remax", search=Search(max_examples=100))
        assert report.passed, report.summary()


PLANTED = {  # each a slip an implementation could make
    "the batch's mean greedy reward": lambda z, ids, b: z - np.mean(b),
    "the first prompt's greedy reward for every sample": lambda z, ids, b: z - b[0],
    "the group's mean subtracted too": lambda z, ids, b: z - b - np.array(
        [np.mean(z[ids == g]) for g in ids]),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bug", list(PLANTED))
def test_kit_rejects_a_planted_bug_in_either_dtype(bug, dtype):
    report = check_conformance(PLANTED[bug], "verl_remax",
                               search=Search(dtypes=(dtype,), shrink=False))
    assert not report.passed
    failure = report.failure
    assert failure.rewards.dtype == np.dtype(dtype) and failure.reference is not None
    assert "reference = np.array(" in report.summary()


def test_kit_refusals_and_one_batch():
    with pytest.raises(ValueError, match="signature"):
        check_conformance(lambda z, n: z, "verl_remax", signature="trl")
    z, ids, b = np.array([1.0, 0.0, 2.0]), np.array([0, 0, 1]), np.array([0.5, 0.5, 3.0])
    assert check_batch(_subtract(np.float64), "verl_remax", z, ids, reference=b) is None
    assert check_batch(PLANTED["the batch's mean greedy reward"], "verl_remax", z, ids,
                       reference=b) is not None
    with pytest.raises(ValueError, match="`reference` must be given"):
        check_batch(_subtract(np.float64), "verl_remax", z, ids)
    with pytest.raises(ValueError, match="`reference` is not taken"):
        check_batch(lambda r, g: r, "grpo", z, ids, reference=b)
    with pytest.raises(ValueError, match="shape"):
        check_batch(_subtract(np.float64), "verl_remax", z, ids, reference=b[:2])


def test_command_line_exit_codes(capsys):
    from ustat_rl.interface.cli import main

    target = f"{ROOT / 'tests' / 'data' / 'verl_opo_remax_1dda039b.py'}:compute_remax_outcome_advantage"
    assert main(["conformance", target, "--estimator", "verl_remax", "--signature", "verl",
                 "--torch", "--max-examples", "30"]) == 0
    assert main(["conformance", target, "--estimator", "verl_remax", "--signature", "trl"]) == 2
    assert "passes no reference reward" in capsys.readouterr().err
