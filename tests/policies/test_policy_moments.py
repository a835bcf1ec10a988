"""Every policy class's moments, through ``ustat_rl.theory``, against its own Monte Carlo.

One comparison for all three policy classes (docs/theory.md C5, C6): the exact MSE that
:mod:`ustat_rl.theory` computes from ``policy.moments()`` must match the mean squared error of
the estimators sampled from the same policy, for GRPO, vanilla and the oracle. Each comparison
passes when ``|MC - theory| <= Z_CHECK * se``: a false failure has probability 6.3e-5 per
comparison (normal approximation), about 1.5e-3 for the 24 comparisons here. The negative
control feeds the moments of a *different* policy to the same comparison, which must reject
at least one of its MSEs by more than ``Z_CHECK`` standard errors.

* :class:`SoftmaxBandit`: prompt-averaged per-prompt MSE, sampled by
  :func:`ustat_rl.montecarlo.prompt_averaged_squared_errors`; the other policy has different
  logits.
* :class:`LogLinearBandit`: minibatch MSE against the full gradient (Proposition 3), sampled by
  its ``sample_gradient`` from uniforms; the other policy is the same bandit at another ``theta``.
* The transformer policy: prompt-averaged per-prompt MSE on a small prompt set, sampled by
  :func:`ustat_rl.policies.transformer.mc_squared_errors`; the other policy is the same network
  before its warm-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch

from ustat_rl import theory
from ustat_rl.montecarlo import MonteCarloEstimate, prompt_averaged_squared_errors, run_monte_carlo
from ustat_rl.policies import LogLinearBandit, SoftmaxBandit
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.fast

ESTIMATORS = ("grpo", "vanilla", "oracle")
GROUPS = (2, 8)


@dataclass(frozen=True)
class Case:
    """A policy's exact MSE from its moments, the same for another policy, and a Monte Carlo.

    ``exact(moments, estimator, G)`` is the theory applied to ``moments``; ``mc`` carries the
    labels ``(estimator, G)``.
    """

    moments: theory.PromptMoments
    other_moments: theory.PromptMoments
    exact: Callable[[theory.PromptMoments, str, int], float]
    mc: MonteCarloEstimate


def _z_scores(case: Case, moments: theory.PromptMoments) -> np.ndarray:
    z = []
    for est in ESTIMATORS:
        for g in GROUPS:
            mean, se = case.mc.get((est, g))
            z.append((mean - case.exact(moments, est, g)) / se)
    return np.array(z)


def _per_prompt(moments, estimator, group_size):
    return theory.prompt_averaged_mse(moments, estimator, group_size)


def softmax_case() -> Case:
    bandit = SoftmaxBandit([[0.3, -0.2, 0.5], [1.0, 0.0, -1.0]],
                           [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]], [0.3, 0.7])
    other = SoftmaxBandit([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                          [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]], [0.3, 0.7])
    mc = prompt_averaged_squared_errors(bandit, ESTIMATORS, GROUPS, n_reps=20_000, seed=11)
    return Case(bandit.moments(), other.moments(), _per_prompt, mc)


def loglinear_case() -> Case:
    rng = np.random.default_rng(3)  # a fixed, generic instance: 3 prompts, 4 actions, d = 3
    bandit = LogLinearBandit(rng.normal(size=(3, 4, 3)), rng.uniform(0.1, 0.9, size=(3, 4)))
    theta, other_theta = np.array([0.5, -0.3, 0.2]), np.array([-1.0, 1.0, 0.8])
    batch_size = 2
    target = bandit.grad(theta)  # (d,)

    def statistic(rng, n):
        cols = []
        for est in ESTIMATORS:
            for g in GROUPS:
                uniforms = rng.random((n, bandit.draws_per_step(est, g, batch_size)))
                g_hat = bandit.sample_gradient(np.tile(theta, (n, 1)), uniforms, est, g,
                                               batch_size)  # (n, d)
                cols.append(np.sum((g_hat - target) ** 2, axis=1))
        return np.stack(cols, axis=1)  # (n, n_estimators * n_G)

    labels = [(est, g) for est in ESTIMATORS for g in GROUPS]
    mc = run_monte_carlo(statistic, 40_000, 12, block_size=10_000, labels=labels)

    def exact(moments, est, g):  # Proposition 3 with B i.i.d. prompts
        return theory.minibatch_mse(moments, est, g, batch_size)

    return Case(bandit.moments(theta, matrices=False),
                bandit.moments(other_theta, matrices=False), exact, mc)


def transformer_case() -> Case:
    from ustat_rl.montecarlo.transformer import mc_squared_errors
    from ustat_rl.policies.transformer import (
        ArithmeticTask,
        TransformerArchitecture,
        exact_moments,
        make_splits,
        new_policy,
    )
    from ustat_rl.training.transformer import moderate_questions, supervised_warmup

    task = ArithmeticTask(max_operand=3, max_factor=3, max_answer=9)  # 11 outputs per prompt
    splits = make_splits(task, n_test=20, n_train=200, seed=0)

    def tiny():
        return new_policy(task, 1, architecture=TransformerArchitecture(16, 1, 2, 32),
                          device="cpu", dtype=torch.float64)

    policy, untrained = tiny(), tiny()
    supervised_warmup(policy, splits.train, 60, torch.Generator().manual_seed(0), batch_size=64)
    questions = moderate_questions(policy, splits.test, limit=2)
    assert len(questions) == 2
    mc = mc_squared_errors(policy, questions, GROUPS, 100, seed=13)
    return Case(exact_moments(policy, questions), exact_moments(untrained, questions),
                _per_prompt, mc)


CASES = {"softmax": softmax_case, "loglinear": loglinear_case, "transformer": transformer_case}


@pytest.fixture(scope="module", params=list(CASES))
def case(request) -> Case:
    return CASES[request.param]()


def test_theory_of_moments_matches_monte_carlo(case):
    """GRPO, vanilla and oracle MSE from ``moments()`` within ``Z_CHECK`` se of sampling."""
    z = _z_scores(case, case.moments)
    assert np.all(np.abs(z) <= Z_CHECK), z


def test_moments_of_another_policy_are_rejected(case):
    """Negative control: the same comparison with another policy's moments fails."""
    z = _z_scores(case, case.other_moments)
    assert np.max(np.abs(z)) > Z_CHECK, z
