"""Shrinkage and score-weighted baselines, beyond the paper: exact finite-G, finite-B moments.

Two baselines that frameworks run are not U-statistics within one group (docs/theory.md
"Shrinkage baselines"):

* **JSPO** (James-Stein policy optimisation; ``guanning03/JSPO-Official`` at
  :data:`JSPO_SOURCE`, ``compute_jspo_outcome_advantage``): the baseline of response ``g`` of
  prompt ``b`` is ``(1 - lambda_b) * loo_bg + lambda_b * M_b``, where ``loo_bg`` is the
  leave-one-out mean of its own group and, over the *other* prompts ``p != b`` of the batch,
  ``M_b`` is the mean of their rewards, ``v_b`` the mean of their ``s_p^2 / G`` (Bessel
  variance) and ``s_b`` the population variance of their group means:
  ``lambda_b = v_b / (v_b + s_b + 1e-6)``. Since ``lambda_b`` and ``M_b`` use other prompts
  only, the estimator is unbiased for every ``B >= 2``; its MSE depends on ``B``.
* **verl's optimal-token baseline** (``verl-project/verl`` at :data:`OTB_SOURCE`,
  ``compute_optimal_token_baseline_advantage``) reduced to sequence level (one token per
  response, the reward at the end): the baseline is ``sum_k w_k z_k / (sum_k w_k + 1e-8)``
  over the whole group, itself included, with ``w_k = 1 - 2 pi(a_k) + sum_a pi(a)^2``. In a
  softmax bandit ``w_k = ||W_k||^2`` exactly, so the baseline is the plug-in form of the
  MSE-optimal ``b*(x) = E[||W||^2 Z] / E||W||^2`` (C9); it is biased at finite ``G``.

JSPO's exact moments (:func:`jspo_exact`) need only the moments contract of binary rewards:
given every group's cell (prompt, success count), JSPO's weights are fixed and each group's
advantage is a table ``a(z, m)``, so section 7's per-count summands apply, summed over the
``(P (G + 1))^B`` batches of cells (at most :data:`MAX_BATCH_CELLS`: for two prompts, ``G <= 222``
at ``B = 2``, ``G <= 28`` at ``B = 3``, ``G <= 9`` at ``B = 4``); exact for any number
of actions. The optimal-token baseline weighs each response by its own score norm, not a
function of ``(z, m)``: its moments (:func:`group_rule_exact`) enumerate the ``(2K)^G``
outcomes of a group of a :class:`~ustat_rl.policies.softmax.SoftmaxBandit`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._validation import as_float, as_int, as_rng
from ..advantages.registry import get_rule
from .advantage import advantage_table, count_terms
from .moments import PromptMoments

__all__ = ["JSPO_SOURCE", "OTB_SOURCE", "JSPO_EPSILON", "OTB_EPSILON", "MAX_BATCH_CELLS",
           "ShrinkageMoments", "leave_one_out_means", "jspo_weights", "jspo_advantages",
           "score_weighted_advantages", "squared_score_norms", "jspo_exact",
           "group_rule_exact", "otb_exact", "prompt_baseline_exact", "jspo_monte_carlo",
           "otb_monte_carlo", "MonteCarloMoments", "draw_batches", "batch_moments",
           "as_group_rewards"]

#: (repository, path, commit, function) of JSPO's advantage, read at that commit.
JSPO_SOURCE = ("guanning03/JSPO-Official", "code/verl/trainer/ppo/core_algos.py",
               "6071c3bb2684731ad440a04603b92b52c05f24ea", "compute_jspo_outcome_advantage")
#: (repository, path, commit, function) of verl's optimal-token baseline, read at that commit.
OTB_SOURCE = ("verl-project/verl", "verl/trainer/ppo/core_algos.py",
              "1dda039b9c6311889a9c9a26040677e1254814f9",
              "compute_optimal_token_baseline_advantage")
#: JSPO's ``epsilon`` in ``lambda = v / (v + s + epsilon)`` (its default).
JSPO_EPSILON = 1e-6
#: verl's ``epsilon`` added to the optimal-token baseline's denominator (its default).
OTB_EPSILON = 1e-8
#: Largest number of batches of cells enumerated by :func:`jspo_exact`.
MAX_BATCH_CELLS = 200_000
_CHUNK = 4096  # batches of cells evaluated at once


@dataclass(frozen=True)
class ShrinkageMoments:
    """Exact moments of one batch estimator ``g_hat_B = (1/(B G)) sum_bg A_bg W_bg``.

    Attributes
    ----------
    mean_factor : float
        ``<E g_hat_B, g> / ||g||^2`` (1 for no bias along ``g``).
    bias_sq : float
        ``||E g_hat_B - g||^2``.
    mse : float
        ``E||g_hat_B - g||^2``.
    group_size, batch_size : int
    """

    mean_factor: float
    bias_sq: float
    mse: float
    group_size: int
    batch_size: int


def as_group_rewards(rewards, name="rewards", ndim=2) -> np.ndarray:
    """``rewards`` as floats, checked: finite, at least ``ndim`` axes, groups of at least 2."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim < ndim or r.shape[-1] < 2 or not np.all(np.isfinite(r)):
        raise ValueError(f"`{name}` must be finite with at least {ndim} axes and a last axis "
                         f"(the group) of at least 2, got shape {r.shape}")
    return r


def leave_one_out_means(rewards) -> np.ndarray:
    """``loo_g = (sum_k z_k - z_g) / (G - 1)`` along the last axis: the registry's ``grpo``
    rule's baseline, read off its advantage ``z - loo``."""
    r = as_group_rewards(rewards, ndim=1)
    flat = r.reshape(-1, r.shape[-1])
    return (flat - get_rule("grpo").grouped(flat)).reshape(r.shape)


def jspo_weights(rewards, epsilon: float = JSPO_EPSILON):
    """JSPO's ``(lambda, M)`` for each group of batches ``rewards (..., B, G)``, ``B >= 2``.

    For group ``b``, over the other ``B - 1`` groups: ``M`` the mean of their rewards, ``v``
    the mean of their Bessel variances over ``G``, ``s`` the population variance of their
    means, ``lambda = v / (v + s + epsilon)``. Returns two arrays of shape ``(..., B)``.
    """
    r = as_group_rewards(rewards, ndim=2)
    epsilon = as_float(epsilon, "epsilon", low=0.0)
    B, G = r.shape[-2:]
    if B < 2:
        raise ValueError(f"`rewards` must hold batches of at least 2 groups (JSPO pools the "
                         f"other prompts), got B = {B}")
    means, var = r.mean(axis=-1), r.var(axis=-1, ddof=1) / G
    lam, target = np.empty(means.shape), np.empty(means.shape)
    for b in range(B):
        others = [p for p in range(B) if p != b]
        m_o, v_o = means[..., others], var[..., others]
        target[..., b] = m_o.mean(axis=-1)
        v = v_o.mean(axis=-1)
        s = ((m_o - target[..., b][..., None]) ** 2).mean(axis=-1)
        lam[..., b] = v / (v + s + epsilon)
    return lam, target


def jspo_advantages(rewards, epsilon: float = JSPO_EPSILON, weight=None) -> np.ndarray:
    """JSPO's advantages ``z - (1 - lambda) loo - lambda M`` for batches ``rewards (..., B, G)``.

    ``weight``: a fixed ``lambda`` in [0, 1] used instead of JSPO's estimate (``0`` is the
    leave-one-out rule; the negative controls of C54).
    """
    r = as_group_rewards(rewards, ndim=2)
    lam, target = jspo_weights(r, epsilon)
    if weight is not None:
        lam = np.full(lam.shape, as_float(weight, "weight", low=0.0, high=1.0))
    return r - (1.0 - lam[..., None]) * leave_one_out_means(r) - (lam * target)[..., None]


def score_weighted_advantages(rewards, weights, epsilon: float = OTB_EPSILON) -> np.ndarray:
    """``z_g - sum_k w_k z_k / (sum_k w_k + epsilon)`` along the last axis (verl's optimal-token
    baseline at sequence level, ``w`` the squared score norms; ``w = 1`` and ``epsilon = 0``
    give the full group mean)."""
    r = as_group_rewards(rewards, ndim=1)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != r.shape or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError(f"`weights` must be finite, non-negative and shaped like `rewards` "
                         f"{r.shape}, got {w.shape}")
    epsilon = as_float(epsilon, "epsilon", low=0.0)
    base = np.sum(w * r, axis=-1) / (np.sum(w, axis=-1) + epsilon)
    return r - base[..., None]


def squared_score_norms(bandit, prompt, action) -> np.ndarray:
    """verl's per-token weight ``1 - 2 pi(a) + sum_a pi(a)^2`` at ``(prompt (n,), action (n, G))``
    (``= ||e_a - pi||^2``, the squared score norm in the logits)."""
    pi = bandit.policy[np.asarray(prompt, dtype=np.int64)]  # (n, K)
    chosen = np.take_along_axis(pi, np.asarray(action, dtype=np.int64), axis=1)  # (n, G)
    return 1.0 - 2.0 * chosen + np.sum(pi**2, axis=1, keepdims=True)


def _enumerated(bandit, G):
    """Per prompt ``x``: ``(prob (M,), reward (M, G), W (M, G, D), w (M, G))`` of every group."""
    out = []
    for x in range(bandit.n_prompts):
        action, reward, prob = bandit.enumerate_groups(x, G)
        prompt = np.full(len(prob), x)
        out.append((bandit.prompt_prob[x] * prob, reward, bandit.scores(prompt, action, full=True),
                    squared_score_norms(bandit, prompt, action)))
    return out


def _moments(bandit, G, B, mean, second) -> ShrinkageMoments:
    g = bandit.grad
    return ShrinkageMoments(float(mean @ g / (g @ g)), float(np.sum((mean - g) ** 2)),
                            float(second - 2.0 * mean @ g + g @ g), G, B)


def group_rule_exact(bandit, group_size, batch_size, advantages) -> ShrinkageMoments:
    """Exact moments of a group-level rule ``advantages(rewards (M, G), weights (M, G), prompt)``
    at ``B`` independent groups: ``MSE = ||E h - g||^2 + (E||h||^2 - ||E h||^2) / B``."""
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 1)
    mean, second = np.zeros(bandit.dim), 0.0
    for x, (prob, reward, score, w) in enumerate(_enumerated(bandit, G)):
        h = np.einsum("mg,mgd->md", advantages(reward, w, x), score) / G
        mean += prob @ h
        second += prob @ np.sum(h**2, axis=1)
    return _moments(bandit, G, B, mean, mean @ mean + (second - mean @ mean) / B)


def otb_exact(bandit, group_size, batch_size=1, epsilon: float = OTB_EPSILON) -> ShrinkageMoments:
    """Exact moments of verl's optimal-token baseline at sequence level."""
    return group_rule_exact(bandit, group_size, batch_size,
                            lambda z, w, x: score_weighted_advantages(z, w, epsilon))


def prompt_baseline_exact(bandit, group_size, batch_size=1, baseline=None) -> ShrinkageMoments:
    """Exact moments with a prompt-only baseline ``b(x)`` (default ``b*``, C9), by the same
    enumeration (``baseline = V`` is the oracle)."""
    b = bandit.optimal_constant_baseline if baseline is None else baseline
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (bandit.n_prompts,))
    return group_rule_exact(bandit, group_size, batch_size, lambda z, w, x: z - b[x])


def jspo_exact(moments, group_size, batch_size, epsilon: float = JSPO_EPSILON,
               weight=None) -> ShrinkageMoments:
    """Exact moments of JSPO's batch estimator at ``G``, ``B >= 2`` (``weight``: a fixed lambda).

    ``moments``: a :class:`~ustat_rl.theory.moments.PromptMoments` of binary rewards (or
    anything with a ``moments()`` method returning one). Given the cells ``s = (x_b, m_b)_b``
    (prompt, success count) of the batch, ``lambda_b`` and ``M_b`` are fixed and the groups are
    independent, and group ``b``'s advantage is the table ``a(z, m) = (1 - lambda_b)
    a_loo(z, m) + lambda_b (z - M_b)``, so section 7's summands at ``M = m_b``
    (:func:`~ustat_rl.theory.advantage.count_terms`) give ``E[h_b | s] = kappa_b g(x_b)`` and
    ``E[||h_b||^2 | s]``; then ``E[||g_hat||^2 | s] = (sum_bc kappa_b kappa_c Gamma(x_b, x_c)
    + sum_b (E[||h_b||^2 | s] - kappa_b^2 ||g(x_b)||^2)) / B^2``, summed over the
    ``(P (G + 1))^B`` batches of cells.
    """
    m = moments.moments() if hasattr(moments, "moments") else moments
    G = as_int(group_size, "group_size", 2)
    B = as_int(batch_size, "batch_size", 2)
    if not isinstance(m, PromptMoments) or not np.allclose(m.reward_var, m.value * (1 - m.value)):
        raise ValueError("`moments` must be the PromptMoments of binary rewards Z in {0, 1} "
                         "(or a bandit whose moments() returns them)")
    V = np.clip(m.value, 0.0, 1.0)
    cell_x, cell_k = (a.ravel() for a in np.meshgrid(np.arange(len(V)), np.arange(G + 1),
                                                      indexing="ij"))
    prob = m.prompt_prob[cell_x] * binom.pmf(cell_k, G, V[cell_x])
    cell_x, cell_k, prob = cell_x[prob > 0], cell_k[prob > 0], prob[prob > 0]
    C = len(prob)
    if C**B > MAX_BATCH_CELLS:
        raise ValueError(f"`batch_size` {B} gives {C}^{B} batches of cells to enumerate; at most "
                         f"{MAX_BATCH_CELLS} are allowed")
    loo = advantage_table("grpo", G)
    gram = np.asarray(m.grad_gram, dtype=np.float64)
    alpha, second_total = np.zeros(len(V)), 0.0  # E g_hat = sum_x alpha_x g(x)
    batches = itertools.product(range(C), repeat=B)
    while chunk := list(itertools.islice(batches, _CHUNK)):
        idx = np.array(chunk)  # (n, B)
        x, k, p = cell_x[idx], cell_k[idx], np.prod(prob[idx], axis=1)
        rewards = (np.arange(G) < k[..., None]).astype(float)  # a group per cell: k successes
        lam, target = jspo_weights(rewards, epsilon)
        if weight is not None:
            lam = np.full(lam.shape, as_float(weight, "weight", low=0.0, high=1.0))
        a1 = (1.0 - lam) * loo.success[k] + lam * (1.0 - target)
        a0 = (1.0 - lam) * loo.failure[k] - lam * target
        mean, w1, w0, wg = count_terms(V[x], k, a1, a0, G)
        kappa = mean / G  # E[h_b | s] = kappa_b g(x_b)
        second = (w1 * m.score_sq_reward[x] + w0 * (m.score_sq - m.score_sq_reward)[x]
                  + wg * m.grad_sq[x]) / G**2
        cross = np.einsum("nb,nc,nbc->n", kappa, kappa, gram[x[:, :, None], x[:, None, :]])
        second_total += p @ (cross + np.sum(second - kappa**2 * m.grad_sq[x], axis=1)) / B**2
        np.add.at(alpha, x.ravel(), np.repeat(p, B) * kappa.ravel() / B)
    f = m.prompt_prob
    target_sq, along = f @ gram @ f, alpha @ gram @ f
    return ShrinkageMoments(float(along / target_sq), float((alpha - f) @ gram @ (alpha - f)),
                            float(second_total - 2.0 * along + target_sq), G, B)


@dataclass(frozen=True)
class MonteCarloMoments:
    """Sampled ``mean_factor``, ``mse`` and their standard errors over ``n_reps`` batches."""

    mean_factor: float
    mean_factor_se: float
    mse: float
    mse_se: float
    n_reps: int


def batch_moments(bandit, g_hat) -> MonteCarloMoments:
    """Mean factor along ``g`` and MSE of sampled batch estimates ``g_hat (n, d)``, with their
    standard errors."""
    g, n = bandit.grad, len(g_hat)
    along = g_hat @ g / (g @ g)
    err = np.sum((g_hat - g) ** 2, axis=1)
    return MonteCarloMoments(float(along.mean()), float(along.std(ddof=1) / np.sqrt(n)),
                             float(err.mean()), float(err.std(ddof=1) / np.sqrt(n)), n)


def draw_batches(bandit, G, B, n_reps, rng):
    """``n_reps`` batches of ``B`` groups of ``G`` from the bandit: ``(sample, scores (n, B, G,
    d), n, B, G)``."""
    G = as_int(G, "group_size", 2)
    B = as_int(B, "batch_size", 1)
    n = as_int(n_reps, "n_reps", 2)
    s = bandit.sample_groups(G, n * B, as_rng(rng))
    return s, bandit.scores(s.prompt, s.action, full=True).reshape(n, B, G, -1), n, B, G


def jspo_monte_carlo(bandit, group_size, batch_size, n_reps, rng, epsilon: float = JSPO_EPSILON,
                     weight=None) -> MonteCarloMoments:
    """JSPO's batch estimator sampled from the bandit, response by response (numpy)."""
    s, score, n, B, G = draw_batches(bandit, group_size, batch_size, n_reps, rng)
    adv = jspo_advantages(s.reward.reshape(n, B, G), epsilon, weight)
    return batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G))


def otb_monte_carlo(bandit, group_size, batch_size, n_reps, rng,
                    epsilon: float = OTB_EPSILON) -> MonteCarloMoments:
    """verl's sequence-level optimal-token baseline sampled from the bandit (numpy)."""
    s, score, n, B, G = draw_batches(bandit, group_size, batch_size, n_reps, rng)
    adv = score_weighted_advantages(s.reward, squared_score_norms(bandit, s.prompt, s.action),
                                    epsilon).reshape(n, B, G)
    return batch_moments(bandit, np.einsum("nbg,nbgd->nd", adv, score) / (B * G))
