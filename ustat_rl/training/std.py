"""Training with std-normalised advantages on the arcsin-conflict bandit (docs/theory.md C26).

At finite G the std-normalised update has mean ``sum_x f(x) c_G(x) g(x) - kappa grad KL`` with
``c_G(x)`` the exact mean factor of docs/theory.md section 7; :func:`mean_field_root` is the
parameter that training converges to, and :func:`train_std_normalised` runs stochastic gradient
ascent with a framework's advantages to test it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float, as_int
from ..advantages.registry import get_rule
from ..theory.advantage import advantage_moments

__all__ = ["StdTraining", "kl_penalty_gradient", "mean_field", "mean_field_root",
           "train_std_normalised", "trl_group_rule"]


def trl_group_rule(z, m, G):
    """TRL's ``scale_rewards="group"`` advantage for binary rewards as ``a(z, m, G)``: O(G).

    ``(z - m/G)/(s_m + 1e-4)`` with the Bessel-corrected ``s_m``, read from the registry's
    ``trl_group`` rule (:meth:`~ustat_rl.advantages.AdvantageRule.binary_table`).
    """
    success, failure = get_rule("trl_group").binary_table(int(G))
    m = np.asarray(m, dtype=np.int64)
    return np.where(np.asarray(z, dtype=np.float64) == 1.0, success[m], failure[m])


def _binary_part(bandit):
    """The same bandit without the KL penalty: its moments describe the binary rewards."""
    from ..policies.loglinear import LogLinearBandit

    return LogLinearBandit(bandit.features, bandit.reward_prob, bandit.prompt_prob,
                           bandit.reward_values, 0.0, bandit.ref_theta)


def kl_penalty_gradient(bandit, theta) -> np.ndarray:
    """``-tau grad E_X KL(pi_theta || pi_ref)`` at each row of ``theta (R, d)``, shape ``(R, d)``.

    Per prompt ``grad KL = sum_a pi(a) w(x, a) log(pi/pi_ref)(a)``, since ``E w = 0``.
    """
    from scipy.special import log_softmax

    theta = np.atleast_2d(theta)
    log_pi = log_softmax(np.einsum("pkd,rd->rpk", bandit.features, theta), axis=2)  # (R, P, K)
    pi = np.exp(log_pi)
    w = bandit.features[None] - np.einsum("rpk,pkd->rpd", pi, bandit.features)[:, :, None, :]
    ratio = log_pi - bandit.ref_log_policy[None]  # (R, P, K)
    return -bandit.kl_weight * np.einsum("p,rpk,rpkd->rd", bandit.prompt_prob, pi * ratio, w)


def mean_field(bandit, theta: float, factor) -> float:
    """Expected update direction at scalar ``theta``: ``sum_x f c(x) g(x) - tau grad KL``.

    ``factor``: ``"value"`` (``c = 1``, the gradient of ``E V - tau KL``), ``"arcsin"``
    (``c = 1/sqrt(V(1-V))``, Proposition 13's objective) or an :class:`AdvantageTable`, whose
    exact mean factor ``c_G(x)`` (docs/theory.md section 7) makes this the mean of the
    std-normalised update at group size ``G``.
    """
    from ..theory.advantage import arcsin_weight

    theta_vec = np.array([float(theta)])
    moments = _binary_part(bandit).moments(theta_vec, matrices=True)
    if isinstance(factor, str):
        c = np.ones(bandit.n_prompts) if factor == "value" else arcsin_weight(moments.value)
    else:
        c = advantage_moments(moments, factor).mean_factor
    reward_part = bandit.prompt_prob @ (c[:, None] * moments.grad_per_prompt)
    return float(reward_part[0] + kl_penalty_gradient(bandit, theta_vec)[0, 0])


def mean_field_root(bandit, factor, bracket=(-4.0, 6.0)) -> float:
    """The root of :func:`mean_field` in ``bracket`` (one shared parameter, ``d = 1``)."""
    from scipy.optimize import brentq

    if bandit.dim != 1:
        raise ValueError(f"mean_field_root needs a one-parameter bandit, got d = {bandit.dim}")
    return float(brentq(lambda t: mean_field(bandit, t, factor), *bracket, xtol=1e-13))


@dataclass(frozen=True)
class StdTraining:
    """The settings of :func:`train_std_normalised`, validated.

    Attributes
    ----------
    estimator : str
        A registered advantage rule.
    group_size, batch_size : int
        ``G`` and ``B``.
    n_iter : int
        Steps ``n``.
    beta, offset : float
        The step ``beta / (i + offset)``.
    windows : tuple of (float, float)
        ``(start, stop)`` fractions of ``n_iter`` whose iterates are averaged; each must cover
        at least one step.
    """

    estimator: str
    group_size: int
    batch_size: int
    n_iter: int
    beta: float = 30.0
    offset: float = 30.0
    windows: tuple = ((0.5, 1.0),)

    def __post_init__(self):
        rule = get_rule(self.estimator, "estimator")
        group_size = as_int(self.group_size, "group_size", rule.min_group_size,
                            rule.min_group_reason)
        n_iter = as_int(self.n_iter, "n_iter", 1)
        windows = tuple((float(a), float(b)) for a, b in self.windows)
        if not windows or any(not 0 <= int(a * n_iter) < int(b * n_iter) <= n_iter
                              for a, b in windows):
            raise ValueError(f"`windows` must hold (start, stop) fractions with 0 <= start < "
                             f"stop <= 1 that cover at least one step, got {self.windows!r}")
        for name, value in (("group_size", group_size), ("n_iter", n_iter),
                            ("batch_size", as_int(self.batch_size, "batch_size", 1)),
                            ("beta", as_float(self.beta, "beta", low=0.0)),
                            ("offset", as_float(self.offset, "offset", low=0.0)),
                            ("windows", windows)):
            object.__setattr__(self, name, value)


def train_std_normalised(bandit, config: StdTraining, n_runs: int, rng) -> np.ndarray:
    """Stochastic gradient ascent with a named advantage convention; Polyak averages ``(R, d)``.

    Each step draws ``B`` prompts from ``f`` and ``G`` responses per prompt from ``pi_theta``
    for each of ``R`` independent runs, forms ``(1/B) sum_b (1/G) sum_g A_g W_g`` with
    ``estimator``'s advantages, adds the exact penalty gradient ``-tau grad KL`` and steps
    ``beta/(i + offset)`` (``beta`` times the mean field's slope exceeds 1/2, as the 1/i rate
    of Lemma 6 needs). Returns each run's average of its iterates over the second half.

    ``config.windows`` lists ``(start, stop)`` fractions of ``n_iter``: with more than one
    window the result is ``(n_windows, R, d)``, the average of iterates
    ``start n_iter < i <= stop n_iter`` for each (one window, the default second half, returns
    ``(R, d)``). Windows of one run let a caller extrapolate the averaged iterate's O(1/n) bias
    away (``check_c26_train``).
    """
    if not isinstance(config, StdTraining):
        raise TypeError(f"`config` must be a StdTraining, got {type(config).__name__}")
    n_runs = as_int(n_runs, "n_runs", 1)
    estimator, n_iter, beta, offset = config.estimator, config.n_iter, config.beta, config.offset
    group_size, batch_size = config.group_size, config.batch_size
    spans = [(int(a * n_iter), int(b * n_iter)) for a, b in config.windows]
    spec = get_rule(estimator)
    theta = np.tile(bandit.ref_theta, (n_runs, 1))  # (R, d)
    total = np.zeros((len(spans),) + theta.shape)  # (n_windows, R, d)
    feats = bandit.features
    B, G = batch_size, group_size
    for i in range(1, n_iter + 1):
        x = rng.choice(bandit.n_prompts, size=(n_runs, B), p=bandit.prompt_prob)  # (R, B)
        phi = feats[x]  # (R, B, K, d)
        logits = np.einsum("rbkd,rd->rbk", phi, theta)
        pi = np.exp(logits - logits.max(axis=2, keepdims=True))
        pi /= pi.sum(axis=2, keepdims=True)  # (R, B, K)
        cum = np.cumsum(pi, axis=2)
        cum[..., -1] = 1.0
        u = rng.random((n_runs, B, G))
        action = np.sum(u[..., None] >= cum[:, :, None, :], axis=3)  # (R, B, G)
        reward = (rng.random((n_runs, B, G))
                  < bandit.reward_prob[x[..., None], action]).astype(np.float64)
        mean_phi = np.einsum("rbk,rbkd->rbd", pi, phi)
        score = np.take_along_axis(phi, action[..., None], axis=2) - mean_phi[:, :, None, :]
        adv = spec.grouped(reward.reshape(n_runs * B, G)).reshape(n_runs, B, G)
        g_hat = np.einsum("rbg,rbgd->rd", adv, score) / (B * G)
        theta = theta + beta / (i + offset) * (g_hat + kl_penalty_gradient(bandit, theta))
        for k, (lo, hi) in enumerate(spans):
            if lo < i <= hi:
                total[k] += theta
    means = total / np.array([hi - lo for lo, hi in spans], dtype=np.float64)[:, None, None]
    return means[0] if len(spans) == 1 else means
