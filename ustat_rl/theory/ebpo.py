"""EBPO's empirical-Bayes baseline, beyond the paper: exact finite-G moments at a fixed prior.

EBPO (arXiv:2602.05165v1, :data:`EBPO_SOURCE`; section 3.2 "Empirical Bayes Policy
Optimization", its Remark on the between-group variance, and Algorithm 1 in the appendix)
shrinks each group's *full* mean (the response itself included) towards a global prior:

``V = (1 - S) zbar + S mu``, ``S = (sigma^2 / G) / (sigma^2 / G + tau^2)``, raw advantage
``z - V``,

where ``mu``, ``sigma^2`` and ``tau^2`` are running (Welford) statistics kept across training
steps: ``sigma^2`` the variance of *every* reward seen, ``tau^2`` the raw variance of every
group mean seen (the paper keeps the sampling noise in ``tau^2`` on purpose, so ``S`` stays in
``[0, 1]``), ``mu`` their mean. Each step first merges the step's rewards into the statistics,
then computes ``S`` and the baselines (Algorithm 1's order). The paper then standardises the raw
advantages over the batch; that step is not covered here (docs/theory.md C54.ebpo).

At a fixed prior the baseline is a table ``a(z, m) = z - (1 - S) m / G - S mu`` of the group's
success count, so section 7's per-count terms give the exact moments
(:func:`~ustat_rl.theory.advantage.minibatch_advantage_mse`); ``S = 0`` is the full-mean rule.
A stationary policy's running prior converges to :func:`stationary_prior`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int, as_rng
from .advantage import advantage_moments, minibatch_advantage_mse
from .moments import PromptMoments
from .shrinkage import MonteCarloMoments, ShrinkageMoments, as_group_rewards, batch_moments

__all__ = ["EBPO_SOURCE", "EBPOPrior", "stationary_prior", "ebpo_advantages", "ebpo_table",
           "ebpo_exact", "RunningPrior", "ebpo_monte_carlo"]

#: (paper, where the estimator is defined) read for EBPO's baseline.
EBPO_SOURCE = ("arXiv:2602.05165v1", "section 3.2 (V_q^EB, S_q, Remark on tau^2) and "
               "Algorithm 1 (appendix)")


@dataclass(frozen=True)
class EBPOPrior:
    """EBPO's global statistics: ``mean`` (mu), ``reward_var`` (sigma^2, over every reward) and
    ``group_mean_var`` (tau^2, the raw variance of the group means)."""

    mean: float
    reward_var: float
    group_mean_var: float

    def weight(self, group_size) -> float:
        """``S = (sigma^2/G) / (sigma^2/G + tau^2)``; 0 when both variances are 0 (no spread
        seen: the paper leaves it undefined, the local mean is kept here)."""
        G = as_int(group_size, "group_size", 1)
        within = self.reward_var / G
        total = within + self.group_mean_var
        return float(within / total) if total > 0 else 0.0


def _prior(prior) -> EBPOPrior:
    if not isinstance(prior, EBPOPrior):
        raise ValueError(f"`prior` must be an EBPOPrior, got {type(prior).__name__}")
    return prior


def stationary_prior(moments, group_size) -> EBPOPrior:
    """The limit of EBPO's running statistics under a fixed policy and groups of ``G``:
    ``mu = E V``, ``sigma^2 = E Var(Z|x) + Var V``, ``tau^2 = Var V + E Var(Z|x) / G``."""
    m = moments.moments() if hasattr(moments, "moments") else moments
    if not isinstance(m, PromptMoments):
        raise ValueError("`moments` must be a PromptMoments (or a bandit whose moments() "
                         "returns one)")
    G = as_int(group_size, "group_size", 1)
    f, V, var = m.prompt_prob, m.value, m.reward_var
    mu = float(f @ V)
    between = float(f @ (V - mu) ** 2)
    within = float(f @ var)
    return EBPOPrior(mu, within + between, between + within / G)


def ebpo_advantages(rewards, prior, weight=None) -> np.ndarray:
    """``z - (1 - S) zbar - S mu`` along the last axis (the group), at a fixed ``prior``.

    ``weight``: a fixed ``S`` in [0, 1] used instead of the prior's (0 is the full-mean rule;
    the negative controls of C54.ebpo).
    """
    r = as_group_rewards(rewards, ndim=1)
    p = _prior(prior)
    S = p.weight(r.shape[-1]) if weight is None else as_float(weight, "weight", low=0.0,
                                                                high=1.0)
    return r - (1.0 - S) * r.mean(axis=-1, keepdims=True) - S * p.mean


def ebpo_table(prior, weight=None):
    """EBPO at a fixed prior as a function ``(z, m, G) -> a(z, m)`` for
    :func:`~ustat_rl.theory.advantage.advantage_table`."""
    p = _prior(prior)
    if weight is not None:
        weight = as_float(weight, "weight", low=0.0, high=1.0)

    def table(z, m, G):
        S = p.weight(G) if weight is None else weight
        return np.asarray(z, dtype=np.float64) - (1.0 - S) * np.asarray(m) / G - S * p.mean

    return table


def ebpo_exact(moments, group_size, batch_size=1, prior=None, weight=None) -> ShrinkageMoments:
    """Exact moments of EBPO's batch estimator (raw advantages) at a fixed ``prior``
    (default :func:`stationary_prior`), from section 7's per-count terms.

    ``moments``: binary-reward :class:`~ustat_rl.theory.moments.PromptMoments` or a bandit.
    The mean factor along ``g`` is ``1 - (1 - S) / G`` exactly: the shrunk group mean holds
    the response's own reward, and the constant ``S mu`` adds no bias.
    """
    m = moments.moments() if hasattr(moments, "moments") else moments
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 1)
    p = stationary_prior(m, G) if prior is None else _prior(prior)
    table = ebpo_table(p, weight)
    c = advantage_moments(m, table, G).mean_factor
    f = m.prompt_prob
    gram = np.asarray(m.grad_gram, dtype=np.float64)
    target_sq = float(f @ gram @ f)
    alpha = f * c
    return ShrinkageMoments(float(alpha @ gram @ f / target_sq),
                            float((alpha - f) @ gram @ (alpha - f)),
                            float(minibatch_advantage_mse(m, table, G, B)), G, B)


class RunningPrior:
    """EBPO's two running accumulators for ``n`` independent streams at once: every reward,
    and every group mean. :meth:`update` merges a step's groups ``(n, k, G)`` by the pairwise
    form of Welford's update (count, mean, sum of squared deviations), the same numbers as
    feeding them one by one; variances are the sample (``n - 1``) variances."""

    def __init__(self, n_streams: int):
        n = as_int(n_streams, "n_streams", 1)
        self._state = {key: [0, np.zeros(n), np.zeros(n)] for key in ("reward", "group")}

    @staticmethod
    def _merge(state, x):  # x: (n, k)
        count, mean, m2 = state
        k = x.shape[1]
        x_mean = x.mean(axis=1)
        x_m2 = np.sum((x - x_mean[:, None]) ** 2, axis=1)
        total = count + k
        delta = x_mean - mean
        state[:] = [total, mean + delta * k / total, m2 + x_m2 + delta**2 * count * k / total]

    def update(self, rewards) -> None:
        r = as_group_rewards(rewards, ndim=3)
        self._merge(self._state["reward"], r.reshape(r.shape[0], -1))
        self._merge(self._state["group"], r.mean(axis=-1))

    def priors(self):
        """``(mu, sigma^2, tau^2)``, arrays over the streams (needs two groups merged)."""
        (n_r, mu, m2_r), (n_g, _, m2_g) = self._state["reward"], self._state["group"]
        if n_g < 2:
            raise ValueError("`RunningPrior` needs at least two groups merged before priors()")
        return mu, m2_r / (n_r - 1), m2_g / (n_g - 1)


def ebpo_monte_carlo(bandit, group_size, batch_size, n_reps, rng, steps: int = 100,
                     weight=None) -> MonteCarloMoments:
    """EBPO's batch estimator with its running prior, sampled from a fixed bandit: ``n_reps``
    independent runs of ``steps`` steps of ``B`` groups each (Algorithm 1: merge the step's
    rewards, then shrink); the estimator of each run's last step is recorded (numpy)."""
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 1)
    n = as_int(n_reps, "n_reps", 2)
    T = as_int(steps, "steps", 1)
    if B * T < 2:
        raise ValueError("`steps` x `batch_size` must be at least 2 (tau^2 needs two groups)")
    if weight is not None:
        weight = as_float(weight, "weight", low=0.0, high=1.0)
    rng = as_rng(rng)
    prior = RunningPrior(n)
    for _ in range(T - 1):
        prior.update(bandit.sample_groups(G, n * B, rng).reward.reshape(n, B, G))
    s = bandit.sample_groups(G, n * B, rng)
    reward = s.reward.reshape(n, B, G)
    prior.update(reward)
    mu, sigma2, tau2 = prior.priors()
    within = sigma2 / G
    total = within + tau2
    S = np.where(total > 0, within / np.where(total > 0, total, 1.0), 0.0)
    if weight is not None:
        S = np.full(n, weight)
    base = (1.0 - S)[:, None] * reward.mean(axis=-1) + (S * mu)[:, None]  # (n, B)
    adv = reward - base[..., None]
    score = bandit.scores(s.prompt, s.action, full=True).reshape(n, B, G, -1)
    return batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G))
