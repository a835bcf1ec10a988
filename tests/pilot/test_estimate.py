"""Tests of the unbiased pilot moment estimators (docs/theory.md section 7).

Two routes: the O(n k) power-sum closed forms against brute-force averages over all ordered
tuples of distinct samples (exact, to rounding), and Monte Carlo means over independent pilots
from softmax bandits against the exact moments. Each Monte Carlo comparison passes when
``|mean - exact| <= Z_CHECK * se`` (``Z_CHECK`` = 4, two-sided false-failure rate 6.3e-5 per
comparison; 12 quantities x 4 designs = 48 comparisons, so a spurious failure in under 0.3% of
runs by the union bound). The negative controls (plug-in estimators, a sketch without the
``1/sqrt(k)`` scale) go through the same check and must be rejected.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ustat_rl.pilot.estimate import (
    SCORE_MOMENTS,
    estimate_constants,
    estimate_moments,
    group_moments,
    pilot_statistics,
)
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.policies.examples import interior_optimum_bandit, small_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import drawn_spec
from ustat_rl.seeding import child_rng
from ustat_rl.theory import scaling_constants
from ustat_rl.tolerances import EXACT_RTOL, Z_CHECK

pytestmark = pytest.mark.fast

N_PILOTS = 500
FIELDS = ("value", "reward_var") + SCORE_MOMENTS
SEED = 20260301


# ---------------------------------------------------------------------------- closed forms
def _brute_force(z, w):
    """Averages of the section-7 kernels over all ordered tuples of distinct indices."""
    n = len(z)
    sq = np.sum(w * w, axis=1)
    pairs = list(itertools.permutations(range(n), 2))
    triples = list(itertools.permutations(range(n), 3))
    return {
        "value": np.mean(z),
        "reward_var": np.mean([(z[i] - z[j]) ** 2 / 2 for i, j in pairs]),
        "score_sq": np.mean(sq),
        "score_sq_reward": np.mean(sq * z),
        "score_sq_reward_sq": np.mean(sq * z * z),
        "grad_sq": np.mean([z[i] * z[j] * (w[i] @ w[j]) for i, j in pairs]),
        "score_sq_reward_var": np.mean([sq[i] * (z[j] - z[k]) ** 2 / 2 for i, j, k in triples]),
        "score_sq_centred": np.mean([sq[i] * (z[i] - z[j]) * (z[i] - z[k])
                                     for i, j, k in triples]),
    }


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_power_sums_equal_brute_force_loops(n):
    rng = np.random.default_rng(n)
    z, w = rng.normal(size=n) + 0.5, rng.normal(size=(n, 3))
    fast, slow = group_moments(z, w), _brute_force(z, w)
    for name in FIELDS:
        assert fast[name] == pytest.approx(slow[name], rel=EXACT_RTOL, abs=1e-12), name


def test_ragged_pilot_equals_per_group_results():
    rng = np.random.default_rng(3)
    sizes = [3, 6, 4, 5]
    ids = np.repeat(np.arange(4), sizes)
    perm = rng.permutation(ids.size)  # groups interleaved in the file
    z, w = rng.normal(size=ids.size), rng.normal(size=(ids.size, 2))
    stats = pilot_statistics(Rollouts(prompt_id=ids[perm], reward=z[perm], score=w[perm]))
    for a in range(4):
        slow = _brute_force(z[ids == a], w[ids == a])
        assert stats.value[a] == pytest.approx(slow["value"], rel=EXACT_RTOL)
        for name in SCORE_MOMENTS:
            assert stats.columns[name][a].sum() == pytest.approx(slow[name], rel=1e-9, abs=1e-12)


def test_cross_prompt_norm_equals_pairs_of_prompts():
    rng = np.random.default_rng(4)
    ids = np.repeat(np.arange(5), 4)
    z, w = rng.normal(size=20), rng.normal(size=(20, 3))
    m = estimate_moments(Rollouts(prompt_id=ids, reward=z, score=w))
    means = [np.mean(w[ids == a] * z[ids == a, None], axis=0) for a in range(5)]
    pairs = [means[a] @ means[b] for a, b in itertools.permutations(range(5), 2)]
    assert m.grad_norm_sq == pytest.approx(np.mean(pairs), rel=EXACT_RTOL)
    assert m.grad_gram[0, 1] == pytest.approx(means[0] @ means[1], rel=EXACT_RTOL)
    assert np.allclose(np.diag(m.grad_gram), m.grad_sq)


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 7), st.integers(0, 2**32 - 1))
def test_estimates_are_permutation_invariant(n, seed):
    rng = np.random.default_rng(seed)
    z, w = rng.normal(size=n), rng.normal(size=(n, 2))
    perm = rng.permutation(n)
    a, b = group_moments(z, w), group_moments(z[perm], w[perm])
    for name in FIELDS:
        assert a[name] == pytest.approx(b[name], rel=1e-9, abs=1e-12)


def test_needs_two_prompts():
    with pytest.raises(ValueError, match="`rollouts`"):
        estimate_moments(Rollouts(prompt_id=np.zeros(4, int), reward=np.ones(4),
                                  score=np.ones((4, 1))))


# ---------------------------------------------------------------------------- Monte Carlo
def _summaries(m, constants):
    """Prompt averages of every field, ``||g||^2`` and the three constants."""
    return [float(m.prompt_prob @ getattr(m, name)) for name in FIELDS] + [
        float(m.grad_norm_sq), constants.c1, constants.c2, constants.c3]


def _z_scores(bandit, key, sketch_dim=None, fixed=False, plug_in=False):
    rng = child_rng(SEED, *key)
    rows = []
    for _ in range(N_PILOTS):
        sketch = drawn_spec(sketch_dim, rng)
        r = bandit_pilot(bandit, 32, 8, rng, sketch=sketch, fixed_prompts=fixed)
        m = estimate_moments(r)
        if plug_in:
            m = _plug_in(r, m)
        rows.append(_summaries(m, scaling_constants(m)))
    rows = np.array(rows)  # (N_PILOTS, 13)
    exact = bandit.moments()
    truth = np.array(_summaries(exact, scaling_constants(exact)))
    se = rows.std(axis=0, ddof=1) / np.sqrt(N_PILOTS)
    return (rows.mean(axis=0) - truth) / se


def _plug_in(r, m):
    """Negative control: plug-in variance and ``||mean W Z||^2`` in place of the U-statistics."""
    import dataclasses

    ids, index = r.groups()
    gm = np.stack([np.mean(r.score[index == a] * r.reward[index == a, None], axis=0)
                   for a in range(ids.size)])
    n = np.bincount(index).astype(float)
    plug_sq = np.sum(gm * gm, axis=1)
    gram = gm @ gm.T
    return dataclasses.replace(m, reward_var=m.reward_var * (n - 1) / n, grad_sq=plug_sq,
                               grad_gram=gram, score_sq_reward_var=m.score_sq_reward_var,
                               grad_norm_sq=m.grad_norm_sq)


@pytest.mark.parametrize("sketch_dim", [None, 8, 64])
def test_pilot_means_match_exact_moments(sketch_dim):
    z = _z_scores(interior_optimum_bandit(), (1, sketch_dim or 0), sketch_dim)
    assert np.all(np.abs(z) <= Z_CHECK), dict(zip(FIELDS + ("grad_norm_sq", "c1", "c2", "c3"),
                                                  np.round(z, 2)))


def test_fixed_prompt_set_with_weights_is_unbiased():
    bandit = small_bandit()  # 2 prompts, each once, prompt_weight = f
    z = _z_scores(bandit, (2,), None, fixed=True)
    assert np.all(np.abs(z) <= Z_CHECK), np.round(z, 2)


def test_negative_control_plug_in_estimators_are_rejected():
    z = _z_scores(interior_optimum_bandit(), (3,), None, plug_in=True)
    names = FIELDS + ("grad_norm_sq", "c1", "c2", "c3")
    flagged = {name for name, value in zip(names, z) if abs(value) > Z_CHECK}
    # the plug-in variance and ||g_hat||^2 are biased (by Var/n and by E||WZ - g||^2/n), and c1
    # inherits the second bias; unbiased fields stay within the check
    assert {"reward_var", "grad_sq", "c1"} <= flagged, np.round(z, 2)


def test_negative_control_unscaled_sketch_is_rejected():
    bandit = interior_optimum_bandit()
    rng = child_rng(SEED, 4)
    est = [estimate_constants(bandit_pilot(bandit, 32, 8, rng, sketch=drawn_spec(8, rng))).c2 * 8
           for _ in range(200)]  # the projection without its 1/sqrt(k): E[R^T R] = k I
    truth = scaling_constants(bandit.moments()).c2
    z = (np.mean(est) - truth) / (np.std(est, ddof=1) / np.sqrt(len(est)))
    assert abs(z) > Z_CHECK
