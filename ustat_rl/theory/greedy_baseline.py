r"""ReMax's greedy baseline on the softmax bandit: exact moments and a Monte Carlo.

verl's ``remax`` (``algorithm.adv_estimator=remax``) subtracts from every sample's reward the
reward of one greedy rollout of its prompt, generated once per prompt and step and repeated over
the prompt's ``n`` samples: ``a = z - b``. On the bandit (docs/theory.md C3) greedy decoding is
the mode of ``pi(.|x)``, ``a*(x) = argmax_a logits[x, a]`` (the lowest index among tied logits,
as ``torch.argmax`` and ``numpy.argmax`` pick), a deterministic function of the prompt. Its
reward is drawn like any reward of that action, ``b = lo + (hi - lo) Bernoulli(r[x, a*])``,
independently of the group's ``G`` samples (a separate generation, scored separately). So
``b`` is a prompt-only baseline when ``r[x, a*]`` is 0 or 1, and in general a random one
independent of the group: the estimator stays unbiased and, conditionally on ``b``, its MSE is
the prompt-only baseline's (:func:`~ustat_rl.theory.mse.per_prompt_mse`, Corollary 5), which is
affine in each prompt's conditional second moment, so

.. math::

    \mathrm{MSE}_B = \frac{1}{B}\Big(\sum_x f(x)\big[q_x M_x(hi) + (1 - q_x) M_x(lo)
    + \|g(x)\|^2\big] - \|g\|^2\Big), \qquad q_x = r[x, a^*(x)],

``M_x(b)`` the per-prompt MSE of ``z - b``. The Monte Carlo here draws groups and greedy rewards
from the bandit and applies the registered rule with the drawn ``b`` as its reference (numpy;
the numba and torch kernels take rules of the group alone).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int, as_rng
from ..advantages.registry import get_rule
from .mse import per_prompt_mse
from .shrinkage import MonteCarloMoments, ShrinkageMoments, batch_moments, draw_batches

__all__ = ["GreedyBaseline", "greedy_baseline", "greedy_baseline_exact",
           "greedy_baseline_monte_carlo"]


@dataclass(frozen=True)
class GreedyBaseline:
    """The greedy rollout of each prompt: ``action (P,)``, the chance ``success (P,)`` that its
    reward is ``hi``, and ``values = (lo, hi)``."""

    action: np.ndarray
    success: np.ndarray
    values: tuple


def greedy_baseline(bandit) -> GreedyBaseline:
    """The mode of each prompt's policy and the law of its reward (ties: the lowest action)."""
    action = np.argmax(np.asarray(bandit.logits), axis=1)
    success = np.asarray(bandit.reward_prob)[np.arange(bandit.n_prompts), action]
    return GreedyBaseline(action, success, tuple(bandit.reward_values))


def _baseline_rule(estimator):
    rule = get_rule(estimator, "estimator")
    if rule.centring.reference_source != "baseline" or not rule.is_affine:
        raise ValueError(f"`estimator` must subtract a prompt baseline b(x) and scale nothing "
                         f"(as 'verl_remax' and 'baseline'), got {rule.name!r}")
    return rule


def greedy_baseline_exact(bandit, group_size, batch_size=1,
                          estimator="verl_remax") -> ShrinkageMoments:
    """Exact mean factor, squared bias and MSE of ``z - b`` at ``B`` groups of ``G``, ``b`` the
    greedy rollout's reward (module docstring)."""
    rule = _baseline_rule(estimator)
    G = as_int(group_size, "group_size", 1)
    B = as_int(batch_size, "batch_size", 1)
    m, law = bandit.moments(), greedy_baseline(bandit)
    lo, hi = law.values
    per_prompt = (law.success * per_prompt_mse(m, rule, G, baseline=hi)
                  + (1.0 - law.success) * per_prompt_mse(m, rule, G, baseline=lo))
    second = float(m.prompt_prob @ (per_prompt + m.grad_sq))
    return ShrinkageMoments(1.0, 0.0, (second - float(m.grad_norm_sq)) / B, G, B)


def greedy_baseline_monte_carlo(bandit, group_size, batch_size, n_reps, rng,
                                estimator="verl_remax") -> MonteCarloMoments:
    """``n_reps`` batches of ``B`` groups, each group with its own greedy reward drawn
    independently of it, through the registered rule with that reward as the reference."""
    rule = _baseline_rule(estimator)
    rng = as_rng(rng)
    s, score, n, B, G = draw_batches(bandit, group_size, batch_size, n_reps, rng)
    law = greedy_baseline(bandit)
    lo, hi = law.values
    b = np.where(rng.random(n * B) < law.success[s.prompt], hi, lo)
    adv = rule.grouped(s.reward, reference=b).reshape(n, B, G)
    return batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G))
