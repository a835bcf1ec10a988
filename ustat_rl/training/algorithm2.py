"""Algorithm 2 on a softmax bandit: minibatch updates from a frozen batch, and their bias (C25).

docs/theory.md section 2 and C25 (Theorem 12). One batch of ``G`` actions is drawn from
``pi_old = pi_{theta_old}``; its Algorithm 2 advantages ``A_g`` (leave-one-out difference over
the group standard error, all-equal groups zeroed: ``paper_algorithm2`` of
:mod:`ustat_rl.advantages.conventions`) are fixed, and ``m`` updates ``theta_{j+1} = theta_j + eta g_hat(
theta_j)`` reuse the batch, with

    g_hat(theta) = (1/G) sum_g [ mu_g A_g grad log pi_theta(y_g)
                                 - kappa (1 - pi_ref(y_g)/pi_theta(y_g)) grad log pi_theta(y_g) ],

``mu_g = pi_theta(y_g)/pi_old(y_g)`` the importance ratio (no clipping; one action is one token,
so the token ratio is the sequence ratio) and the second term the gradient of the K3 penalty
(docs/theory.md C27). For softmax logits ``grad log pi(y) = e_y - pi``.

The bias of the ``m``-th estimate is measured against the mean of the same estimator run
on-policy at the parameter reached, ``F(theta) = E_{y ~ pi_theta}[g_hat(theta; y)]`` with
``mu = 1``: ``b_m = E[g_hat(theta_m; y) - F(theta_m)]``, the expectation over the batch
``y ~ pi_old``. ``F`` already contains the finite-G factor of std normalisation (docs/theory.md
section 7) and the K3 direction of C27, so ``b_0 = 0`` exactly and ``b_m`` is the part that
comes from reusing the batch. With ``K`` actions the ``K^G`` ordered batches are enumerated, so
``b_m`` is exact (:func:`minibatch_bias`); :func:`minibatch_bias_monte_carlo` is the
independent route.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .._validation import as_int

__all__ = ["OffPolicyBandit", "algorithm2_gradient", "minibatch_updates", "on_policy_mean",
           "minibatch_bias", "minibatch_bias_monte_carlo"]

#: Largest number of ordered batches ``K^G`` enumerated.
_MAX_BATCHES = 100_000

#: Monte Carlo batches processed at once.
_MC_BLOCK = 5000


@dataclass(frozen=True)
class OffPolicyBandit:
    """A one-prompt softmax bandit for Algorithm 2 (docs/theory.md C25).

    Attributes
    ----------
    logits : ndarray (K,)
        ``theta_old``, the parameter at which the batch is drawn.
    ref_logits : ndarray (K,)
        Logits of ``pi_ref``.
    reward : ndarray (K,)
        Binary reward of each action.
    kl_weight : float
        ``kappa``.
    group_size : int
        ``G``.
    """

    logits: np.ndarray
    ref_logits: np.ndarray
    reward: np.ndarray
    kl_weight: float
    group_size: int

    @property
    def n_actions(self) -> int:
        return int(np.asarray(self.logits).size)

    def batches(self) -> np.ndarray:
        """Every ordered batch ``(K^G, G)`` of action indices."""
        K, G = self.n_actions, as_int(self.group_size, "group_size", 2)
        if K**G > _MAX_BATCHES:
            raise ValueError(f"K^G = {K**G} batches is more than {_MAX_BATCHES} to enumerate")
        return np.array(list(itertools.product(range(K), repeat=G)))

    def advantages(self, actions: np.ndarray) -> np.ndarray:
        """Algorithm 2's advantages ``(n, G)`` of the batches ``actions (n, G)``."""
        from ..advantages.registry import get_rule

        return get_rule("paper_algorithm2").grouped(np.asarray(self.reward, dtype=np.float64)[actions])


def _softmax(theta: np.ndarray) -> np.ndarray:
    z = theta - theta.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def algorithm2_gradient(bandit: OffPolicyBandit, theta, actions, advantages,
                        importance: bool = True) -> np.ndarray:
    """``g_hat(theta)`` of Algorithm 2 for each row: ``theta (n, K)``, batches ``(n, G)``.

    ``importance=False`` sets ``mu = 1`` (the on-policy estimator). Returns ``(n, K)``.
    """
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))  # (n, K)
    pi = _softmax(theta)  # (n, K)
    ref = _softmax(np.asarray(bandit.ref_logits, dtype=np.float64))  # (K,)
    old = _softmax(np.asarray(bandit.logits, dtype=np.float64))  # (K,)
    rows = np.arange(theta.shape[0])[:, None]
    pi_y = pi[rows, actions]  # (n, G)
    mu = pi_y / old[actions] if importance else np.ones_like(pi_y)
    coef = mu * advantages - bandit.kl_weight * (1.0 - ref[actions] / pi_y)  # (n, G)
    G = actions.shape[1]
    onehot = np.zeros((theta.shape[0], theta.shape[1]))
    np.add.at(onehot, (np.broadcast_to(rows, actions.shape), actions), coef)
    # sum_g coef_g (e_{y_g} - pi) / G
    return (onehot - coef.sum(axis=1, keepdims=True) * pi) / G


def minibatch_updates(bandit: OffPolicyBandit, actions, lr: float, n_updates: int):
    """``theta_m`` after ``m = n_updates`` steps ``theta += lr g_hat(theta)`` on each batch.

    Returns ``(theta_m (n, K), advantages (n, G))``; ``theta_0 = theta_old``.
    """
    actions = np.atleast_2d(actions)
    adv = bandit.advantages(actions)
    theta = np.tile(np.asarray(bandit.logits, dtype=np.float64), (actions.shape[0], 1))
    for _ in range(as_int(n_updates, "n_updates", 0)):
        theta = theta + lr * algorithm2_gradient(bandit, theta, actions, adv)
    return theta, adv


def on_policy_mean(bandit: OffPolicyBandit, theta) -> np.ndarray:
    """``F(theta) = E_{y ~ pi_theta}[g_hat(theta; y)]`` (``mu = 1``) by enumeration, ``(n, K)``."""
    theta = np.atleast_2d(np.asarray(theta, dtype=np.float64))  # (n, K)
    batches = bandit.batches()  # (N_b, G)
    adv = bandit.advantages(batches)  # (N_b, G)
    n, n_b = theta.shape[0], batches.shape[0]
    pi = _softmax(theta)  # (n, K)
    weight = np.prod(pi[:, batches], axis=2)  # (n, N_b) P(batch | theta)
    grads = algorithm2_gradient(bandit, np.repeat(theta, n_b, axis=0), np.tile(batches, (n, 1)),
                                np.tile(adv, (n, 1)), importance=False).reshape(n, n_b, -1)
    return np.einsum("nb,nbk->nk", weight, grads)


def minibatch_bias(bandit: OffPolicyBandit, lr: float, n_updates: int) -> np.ndarray:
    """Exact ``b_m = E[g_hat(theta_m) - F(theta_m)]`` over batches from ``pi_old``, ``(K,)``.

    Notes
    -----
    Every ordered batch is enumerated with its probability ``prod_g pi_old(y_g)``; each runs
    its ``m`` deterministic updates. Cost ``O(K^{2G} G K)`` for ``F`` at every endpoint.

    Examples
    --------
    Before any update the batch is on-policy, so the reuse bias is zero:

    >>> b = OffPolicyBandit(np.zeros(3), np.zeros(3), np.array([1.0, 0.0, 0.0]), 0.5, 3)
    >>> bool(np.abs(minibatch_bias(b, 0.1, 0)).max() < 1e-15)
    True
    >>> bool(np.abs(minibatch_bias(b, 0.1, 2)).max() > 1e-4)
    True
    """
    batches = bandit.batches()
    prob = np.prod(_softmax(np.asarray(bandit.logits, dtype=np.float64))[batches], axis=1)
    theta, adv = minibatch_updates(bandit, batches, lr, n_updates)
    diff = algorithm2_gradient(bandit, theta, batches, adv) - on_policy_mean(bandit, theta)
    return prob @ diff


def minibatch_bias_monte_carlo(bandit: OffPolicyBandit, lr: float, n_updates: int, n_reps: int,
                               rng) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo of ``b_m`` from ``n_reps`` batches drawn from ``pi_old``: ``(mean, se)``.

    Batches run in blocks of :data:`_MC_BLOCK` (``F`` needs a ``(block, K^G, G)`` array).
    """
    n = as_int(n_reps, "n_reps", 2)
    old = _softmax(np.asarray(bandit.logits, dtype=np.float64))
    total = np.zeros(bandit.n_actions)
    total_sq = np.zeros(bandit.n_actions)
    for start in range(0, n, _MC_BLOCK):
        size = min(_MC_BLOCK, n - start)
        actions = rng.choice(bandit.n_actions, size=(size, bandit.group_size), p=old)  # (b, G)
        theta, adv = minibatch_updates(bandit, actions, lr, n_updates)
        diff = algorithm2_gradient(bandit, theta, actions, adv) - on_policy_mean(bandit, theta)
        total += diff.sum(axis=0)
        total_sq += (diff**2).sum(axis=0)
    mean = total / n
    var = (total_sq - n * mean**2) / (n - 1)
    return mean, np.sqrt(np.maximum(var, 0.0) / n)
