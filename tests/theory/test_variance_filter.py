"""RAGEN-2's reward-variance filter (beyond the paper): the reference mask, its conformance
target run on the frameworks' filters, and the kept batch's exact moments against enumeration.

docs/theory.md section 7, "The reward-variance filter". Exact comparisons are to 1e-12 (float64
sums of a few thousand terms); the Monte Carlo comparisons are in
tests/montecarlo/test_variance_filter_mc.py.
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from script_loader import DATA

import ustat_rl.theory.variance_filter as vf_module
import ustat_rl.theory.variance_filter_kit as kit_module
from ustat_rl.policies.examples import small_bandit
from ustat_rl.theory.variance_filter import (
    VarianceFilter,
    batch_group_weights,
    get_variance_filter,
    group_variances,
    kept_groups,
    variance_filter_mask,
    variance_filtered_moments,
)
from ustat_rl.theory.variance_filter_kit import check_variance_filter
from ustat_rl.training.batch_study import batch_enumeration

pytestmark = pytest.mark.fast

EXACT = 1e-12
SPECS = (VarianceFilter("top_p", 0.9), VarianceFilter("top_p", 0.5),
         VarianceFilter("top_k", top_k=1), VarianceFilter("top_p", 0.6, include_zero=True,
                                                          divisor="batch"))


def test_doctests():
    for module in (vf_module, kit_module):
        assert doctest.testmod(module).failed == 0


# --- the reference ------------------------------------------------------------------------------

def test_top_p_keeps_the_smallest_prefix_reaching_the_mass():
    # variances 0.5 (g0), 0 (g1), 1/3 (g2, k = 1 of 3), 0.5 (g3); total 4/3
    r = [1, 0, 1, 1, 1, 0, 0, 0, 1]
    ids = [0, 0, 1, 1, 2, 2, 2, 3, 3]
    _, var, sizes = group_variances(r, ids, 1)
    np.testing.assert_allclose(var, [0.5, 0.0, 1 / 3, 0.5])
    assert sizes.tolist() == [2, 2, 3, 2]
    # 0.5 < 0.7 * 4/3 = 0.933 <= 1.0: two groups, g0 and g3 (ties in batch order)
    assert kept_groups(var, VarianceFilter("top_p", 0.7)).tolist() == [True, False, False, True]
    # 1.0 < 0.8 * 4/3 = 1.067: the third, g2
    assert kept_groups(var, VarianceFilter("top_p", 0.8)).tolist() == [True, False, True, True]
    # a prefix ending exactly on the target stops there: 0.5 = 0.375 * 4/3
    assert kept_groups(var, VarianceFilter("top_p", 0.375)).tolist() == [True, False, False, False]
    # the later group first among ties
    assert kept_groups(var, VarianceFilter("top_p", 0.3, tie="last")).tolist() == [
        False, False, False, True]
    mask = variance_filter_mask(r, ids, VarianceFilter("top_p", 0.7))
    assert mask.astype(int).tolist() == [1, 1, 0, 0, 0, 0, 0, 1, 1]


def test_top_k_include_zero_and_the_flat_batch():
    var = np.array([0.0, 0.25, 0.0, 0.1])
    assert kept_groups(var, VarianceFilter("top_k", top_k=3)).tolist() == [False, True, False, True]
    assert kept_groups(var, VarianceFilter("top_k", top_k=3, include_zero=True)).tolist() == [
        True, True, False, True]
    assert kept_groups(var, VarianceFilter("top_k", top_k=1, epsilon=0.2)).tolist() == [
        False, True, False, False]
    # no group above epsilon: the batch is kept whole (no signal to rank by)
    assert kept_groups(np.zeros(3), VarianceFilter("top_p", 0.9)).all()
    assert kept_groups(var, VarianceFilter("top_k", top_k=1, epsilon=0.3)).all()


def test_batched_selection_equals_one_batch_at_a_time():
    rng = np.random.default_rng(3)
    var = rng.choice([0.0, 0.1, 0.25, 0.3], size=(200, 6))
    for spec in SPECS:
        whole = kept_groups(var, spec)
        one = np.stack([kept_groups(v, spec) for v in var])
        assert np.array_equal(whole, one)


@pytest.mark.parametrize("kwargs, match", [
    ({"strategy": "top_q"}, "`strategy`"), ({"top_p": 0.0}, "`top_p`"),
    ({"top_p": 1.5}, "`top_p`"), ({"strategy": "top_k"}, "`top_k`"),
    ({"ddof": -1}, "`ddof`"), ({"epsilon": -1.0}, "`epsilon`"), ({"tie": "random"}, "`tie`"),
    ({"divisor": "tokens"}, "`divisor`")])
def test_bad_options_name_the_parameter(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        VarianceFilter(**kwargs)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="`rewards`"):
        variance_filter_mask([0.0, np.nan], [0, 0])
    with pytest.raises(ValueError, match="`group_ids`"):
        variance_filter_mask([0.0, 1.0], [0])
    with pytest.raises(ValueError, match="`group_filter`"):
        get_variance_filter("keep_all")
    with pytest.raises(ValueError, match="`param`"):
        get_variance_filter("reward_variance_top_k")


# --- the conformance target ---------------------------------------------------------------------

def _population_variance_filter(spec):
    """A planted bug: the population variance where the sample variance is asked."""
    wrong = VarianceFilter(spec.strategy, spec.top_p, spec.top_k, 0, spec.include_zero,
                           spec.epsilon, spec.tie, spec.divisor)
    return lambda r, g: variance_filter_mask(r, g, wrong)


def _late_prefix_filter(spec):
    """A planted bug: the top_p prefix cut one group late."""
    def fn(r, g):
        _, var, _ = group_variances(r, g, spec.ddof)
        keep = kept_groups(var, spec)
        order = np.lexsort((np.arange(len(var)), -np.where(var > 0, var, -1.0)))
        nxt = [i for i in order if not keep[i] and var[i] > 0]
        if nxt and not keep.all():
            keep[nxt[0]] = True
        _, inverse = np.unique(np.asarray(g), return_inverse=True)
        return keep[inverse.reshape(-1)]
    return fn


def test_the_kit_passes_the_reference_and_rejects_planted_bugs():
    spec = VarianceFilter("top_p", 0.9)
    assert check_variance_filter(lambda r, g: variance_filter_mask(r, g, spec), spec).passed
    pop = check_variance_filter(_population_variance_filter(spec), spec)
    assert not pop.passed
    # with equal group sizes ddof scales every variance alike, so only ragged groups tell
    _, sizes = np.unique(pop.group_ids, return_counts=True)
    assert len(set(sizes.tolist())) > 1, pop.summary()
    late = check_variance_filter(_late_prefix_filter(spec), spec)
    assert not late.passed
    assert late.expected.sum() < late.got.sum()


def _prs():
    return {f["framework"]: f for f in json.loads((DATA / "variance_filter_prs.json").read_text())
            ["filters"]}


def _vagen_top_p(top_p: float, ddof: int):
    """VAGEN's reward_variance_top_p as its facts (tests/data/variance_filter_prs.json) state it."""
    def fn(rewards, group_ids):
        keys = [str(g) for g in group_ids]
        members: dict = {}
        for i, k in enumerate(keys):
            members.setdefault(k, []).append(i)
        var = {k: (float(np.var(np.asarray(rewards)[idx], ddof=ddof)) if len(idx) > 1 else 0.0)
               for k, idx in members.items()}
        total = sum(var.values())
        if total <= 0:
            return np.ones(len(keys), bool)
        chosen, running = [], 0.0
        for k in sorted(var, key=lambda k: var[k], reverse=True):
            if running >= top_p * total:
                break
            chosen.append(k)
            running += var[k]
        return np.array([k in chosen for k in keys])
    return fn


def _vagen_top_k(ratio: float):
    """VAGEN's reward_variance (top-k by a ratio), ddof 0, zero-variance groups rankable."""
    def fn(rewards, group_ids):
        _, var, _ = group_variances(rewards, group_ids, 0)
        k = max(1, int(np.ceil(len(var) * ratio)))
        return variance_filter_mask(rewards, group_ids,
                                    VarianceFilter("top_k", top_k=k, ddof=0, include_zero=True))
    return fn


def test_vagen_top_p_is_the_reference_at_ddof_0_and_not_at_the_sample_variance():
    facts = _prs()["VAGEN"]["functions"]["reward_variance_top_p"]
    assert facts["ddof_default"] == 0 and facts["top_p_default"] == 0.9
    vagen = _vagen_top_p(facts["top_p_default"], facts["ddof_default"])
    assert check_variance_filter(vagen, VarianceFilter("top_p", 0.9, ddof=0)).passed
    # against the sample variance the other PRs name, it differs on ragged groups only
    verdict = check_variance_filter(vagen, VarianceFilter("top_p", 0.9, ddof=1))
    assert not verdict.passed
    _, sizes = np.unique(verdict.group_ids, return_counts=True)
    assert len(set(sizes.tolist())) > 1


def test_vagen_top_k_ratio_keeps_flat_groups_to_fill_its_count():
    r, ids = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0], [0, 0, 1, 1, 2, 2]
    assert _vagen_top_k(0.5)(r, ids).astype(int).tolist() == [1, 1, 1, 1, 0, 0]
    # the flat groups are kept where a filter without include_zero would not
    assert variance_filter_mask(r, ids, VarianceFilter("top_k", top_k=2, ddof=0)).astype(
        int).tolist() == [1, 1, 0, 0, 0, 0]


def _z_scored(spec):
    """A filter that ranks each group's z-scores ``(r - mean)/(std + 1e-4)`` (TRL PR #7242 under
    normalize_then_sum, as its review describes) with ``spec``."""
    def fn(rewards, group_ids):
        r, g = np.asarray(rewards, dtype=np.float64), np.asarray(group_ids)
        z = np.zeros_like(r)
        for key in np.unique(g):
            sel = g == key
            if sel.sum() > 1:
                z[sel] = (r[sel] - r[sel].mean()) / (r[sel].std(ddof=1) + 1e-4)
        return variance_filter_mask(z, g, spec)
    return fn


def test_trl_normalize_then_sum_ranks_z_scores_not_variances():
    """Every group with spread has z-score variance ``(s/(s + 1e-4))^2``, just under 1: the order
    survives (an increasing function of ``s``), the variance mass does not, so top_p keeps about
    that share of the groups with spread whatever their variances; top_k differs only where the
    z-scores' rounding splits groups of equal variance."""
    spec = VarianceFilter("top_p", 0.5)
    verdict = check_variance_filter(_z_scored(spec), spec)
    assert not verdict.passed
    r, ids = [1, 0, 1, 0, 0, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1, 2, 2, 2, 2]  # 0.5, 0.25, 0.25
    assert variance_filter_mask(r, ids, spec).astype(int).tolist() == [1, 1] + [0] * 8
    assert _z_scored(spec)(r, ids).astype(int).tolist() == [1] * 6 + [0] * 4
    # top_k keeps the order, up to rounding: where it differs, two groups' variances tie
    top_k = VarianceFilter("top_k", top_k=2)
    differs = check_variance_filter(_z_scored(top_k), top_k)
    if not differs.passed:
        _, var, _ = group_variances(differs.rewards, differs.group_ids, 1)
        rounded = np.round(var[var > 0] / var.max(), vf_module.TIE_DIGITS)
        assert len(np.unique(rounded)) < len(rounded), differs.summary()


def test_unreadable_pull_requests_say_so():
    prs = _prs()
    for name in ("TRL", "verl", "SkyRL"):
        assert prs[name]["commit"] is None and "could not be read" in prs[name]["read"]
    assert len(prs["VAGEN"]["commit"]) == 40


# --- exact moments ------------------------------------------------------------------------------

@pytest.mark.parametrize("G, B", [(2, 2), (3, 2)])
def test_level_enumeration_is_batch_enumeration(G, B):
    bandit = small_bandit()
    moments = bandit.moments()
    g_sq = float(bandit.grad @ bandit.grad)
    for spec in SPECS:
        want = batch_enumeration(bandit, "grpo", G, B,
                                 group_weights=lambda r, s=spec: batch_group_weights(r, s))
        got = variance_filtered_moments(moments, "grpo", G, B, spec)
        assert abs(got.mse - want.mse) < EXACT
        assert abs(got.mean_factor - want.projection / g_sq) < EXACT


def test_ddof_does_not_matter_with_equal_groups():
    moments = small_bandit().moments()
    a = variance_filtered_moments(moments, "grpo", 5, 4, VarianceFilter("top_p", 0.7, ddof=0))
    b = variance_filtered_moments(moments, "grpo", 5, 4, VarianceFilter("top_p", 0.7, ddof=1))
    assert abs(a.mse - b.mse) < EXACT and abs(a.keep_rate - b.keep_rate) < EXACT


def test_top_p_one_and_the_batch_divisor_keep_the_unfiltered_moments():
    """top_p = 1 keeps every group with spread; a rule that gives flat groups no gradient,
    summed over B, is then the unfiltered estimate."""
    moments = small_bandit().moments()
    out = variance_filtered_moments(moments, "grpo", 4, 5, VarianceFilter("top_p", 1.0,
                                                                          divisor="batch"))
    assert abs(out.mse - out.unfiltered_mse) < EXACT
    assert abs(out.mean_factor - 1.0) < EXACT
    np.testing.assert_allclose(out.level_keep[1:], 1.0, atol=EXACT)


def test_level_keep_probability_grows_with_the_level():
    moments = small_bandit().moments()
    out = variance_filtered_moments(moments, "grpo", 6, 8, VarianceFilter("top_p", 0.6))
    # a flat group is kept only in a batch of flat groups, which is kept whole
    assert abs(out.level_keep[0] - out.level_prob[0] ** 7) < EXACT
    assert np.all(np.diff(out.level_keep[1:]) >= 0)
    assert abs(out.keep_rate - out.level_prob @ out.level_keep) < EXACT


def test_too_many_level_batches_is_refused_before_work():
    with pytest.raises(ValueError, match="`batch_size`"):
        variance_filtered_moments(small_bandit().moments(), "grpo", 64, 4000)
