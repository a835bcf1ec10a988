"""The estimators frameworks run, on a committed transformer policy (docs/theory.md section 7).

Answers have 1 to 3 tokens, so loss aggregations reweight them. Exact means come from sums over
the 111 answers (:func:`ustat_rl.frameworks.aggregation.exact_aggregation_mean`) and from the exact O(G)
advantage moments on :func:`exact_moments` (:mod:`ustat_rl.theory.advantage`); the independent
route is Monte Carlo over groups drawn from the exact answer distribution with precomputed
scores. Every Monte Carlo comparison allows ``Z_TEST = 4.5`` standard errors (6.8e-6 false
failures each, two-sided) and has a negative control the same comparison rejects.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.advantages.conventions import get_convention
from ustat_rl.frameworks.aggregation import (
    AGGREGATIONS,
    aggregation_weights,
    exact_aggregation_mean,
)
from ustat_rl.policies.transformer import (
    ArithmeticTask,
    answer_table,
    exact_moments,
    load_study_policy,
    make_splits,
)
from ustat_rl.theory.advantage import advantage_moments
from ustat_rl.tolerances import Z_TEST
from ustat_rl.training.transformer import moderate_questions

pytestmark = pytest.mark.fast

#: The weak policy spreads its mass over answers of 2 and 3 tokens (the strong one does not).
POLICY = "weak"
HORIZON = 3  # the longest answer: two digits and the end token
N_REPS = 40_000


@pytest.fixture(scope="module")
def tables():
    policy, _ = load_study_policy(POLICY, device="cpu", dtype=torch.float64)
    questions = moderate_questions(policy, list(make_splits(ArithmeticTask(), seed=0).test),
                                   limit=2)
    assert len(questions) == 2
    return policy, questions, [answer_table(policy, q) for q in questions]


def _draw(table, G, n, rng):
    idx = rng.choice(table.prob.size, size=(n, G), p=table.prob)  # (n, G) answer indices
    return idx, table.reward[idx]


def test_answer_table_sanity(tables):
    _, _, tabs = tables
    for t in tabs:
        assert abs(t.prob.sum() - 1.0) < 1e-12
        assert set(np.unique(t.lengths)) == {1, 2, 3} and t.reward.sum() == 1.0
        np.testing.assert_allclose(t.prob @ t.scores, 0.0, atol=1e-10)  # E[W | x] = 0
    assert len(tabs) == 2


@pytest.mark.parametrize("G", [4, 8])
def test_aggregation_bias_exact_vs_monte_carlo(tables, G):
    """Exact mean of each aggregation (leave-one-out advantages) against Monte Carlo.

    Projected on ``u_1 = g/||g||`` and on the unit direction of the part of the
    seq-mean-token-mean mean orthogonal to ``g`` (the direction of its bias beyond a rescaling).
    Negative control: the same Monte Carlo rejects ``E = g`` for token-mean and
    seq-mean-token-mean.
    """
    _, _, tabs = tables
    rng = np.random.default_rng(20260301 + G)
    spec = get_convention("grpo")
    for t in tabs:
        g = (t.prob * t.reward) @ t.scores  # (d,) g(x)
        u1 = g / np.linalg.norm(g)
        e_mean = exact_aggregation_mean(t.prob, t.reward, t.lengths, t.scores, "grpo", G,
                                        "seq-mean-token-mean")
        resid = e_mean - (e_mean @ u1) * u1
        u2 = resid / np.linalg.norm(resid)
        proj = t.scores @ np.stack([u1, u2], axis=1)  # (M, 2): the estimators are linear in W
        idx, z = _draw(t, G, N_REPS, rng)
        adv = spec.grouped(z)  # (n, G)
        lengths = t.lengths[idx]  # (n, G)
        for mode in AGGREGATIONS:
            c = aggregation_weights(lengths, mode, HORIZON)  # (n, G), one batch per row
            draws = np.einsum("ng,ngk->nk", c * adv, proj[idx])  # (n, 2)
            mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(N_REPS)
            exact = exact_aggregation_mean(t.prob, t.reward, t.lengths, proj, "grpo", G, mode,
                                           HORIZON)
            assert np.all(np.abs(mean - exact) <= Z_TEST * se), (mode, mean, exact, se)
            unbiased = np.array([np.linalg.norm(g), 0.0])
            if mode in ("token-mean", "seq-mean-token-mean"):
                assert np.any(np.abs(mean - unbiased) > Z_TEST * se), mode
            if mode == "seq-mean-token-sum":
                np.testing.assert_allclose(exact, unbiased, atol=1e-10 * unbiased[0])


CONVENTIONS = ("grpo", "trl_group", "verl_grpo", "paper_algorithm2", "trl_none")


@pytest.fixture(scope="module")
def moments(tables):
    policy, questions, _ = tables
    return exact_moments(policy, questions)


@pytest.mark.parametrize("G", [2, 4, 8])
def test_advantage_moments_on_transformer_vs_monte_carlo(tables, moments, G):
    """Section 7's exact mean factor and second moment on ``exact_moments`` of a study policy.

    Monte Carlo of ``<g_hat, g>/||g||^2`` (mean ``c(x)``) and of ``||g_hat||^2`` (through the
    111 x 111 Gram matrix of the answer scores, so no ``d``-vector is formed per replicate).
    Negative control: with ``V`` replaced by ``V + 0.05`` in the pmf of ``M`` the same checks
    reject the prediction for at least one (convention, moment).
    """
    _, _, tabs = tables
    rng = np.random.default_rng(20260302 + G)
    rejected = 0
    for i, t in enumerate(tabs):
        g = (t.prob * t.reward) @ t.scores
        gram = t.scores @ t.scores.T  # (M, M)
        along = t.scores @ g / (g @ g)  # (M,) <W(y), g>/||g||^2
        idx, z = _draw(t, G, N_REPS, rng)
        for name in CONVENTIONS:
            spec = get_convention(name)
            if G < spec.min_group_size:
                continue
            coef = spec.grouped(z) / G  # (n, G): g_hat = sum_g coef_g W_g
            factor = np.einsum("ng,ng->n", coef, along[idx])
            second = np.einsum("ng,ngh,nh->n", coef, gram[idx[:, :, None], idx[:, None, :]],
                               coef)
            exact = advantage_moments(moments, name, G)
            for label, draws, pred in (("c(x)", factor, exact.mean_factor[i]),
                                       ("E||g_hat||^2", second, exact.second_moment[i])):
                mean, se = draws.mean(), draws.std(ddof=1) / np.sqrt(N_REPS)
                assert abs(mean - pred) <= Z_TEST * se, (name, label, mean, pred, se)
            wrong = _shifted_mean_factor(moments, i, name, G, 0.05)
            se = factor.std(ddof=1) / np.sqrt(N_REPS)
            rejected += abs(factor.mean() - wrong) > Z_TEST * se
    assert rejected > 0


def _shifted_mean_factor(moments, i, name, G, shift):
    """``c(x)`` of section 7 evaluated with a wrong ``V`` in the Binomial pmf (control)."""
    from scipy.stats import binom

    from ustat_rl.theory.advantage import advantage_table

    t = advantage_table(name, G)
    V = float(moments.value[i])
    k = np.arange(G + 1)
    pmf = binom.pmf(k, G, V + shift)
    return float(np.sum(pmf * (k * t.success / V - (G - k) * t.failure / (1 - V))) / G)
