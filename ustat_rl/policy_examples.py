"""Named log-linear bandits for the policy-optimisation claims (docs/theory.md C17-C23).

Each is built for one purpose and documented with why it fits; parameters are fixed so every
run checks the same instance.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float
from .policy import LogLinearBandit

__all__ = ["realisable_kl_bandit", "conflicting_prompts_bandit"]


def _prompt_indicators(n_prompts: int, n_actions: int) -> np.ndarray:
    # (P, K, P): features constant over the actions of a prompt; they span the null space N
    return np.repeat(np.eye(n_prompts)[:, None, :], n_actions, axis=1)


def realisable_kl_bandit(kl_weight: float = 4.0, n_prompts: int = 4, n_actions: int = 3,
                         n_shared: int = 3, seed: int = 7) -> tuple[LogLinearBandit, np.ndarray]:
    """A shared-parameter KL bandit whose maximiser is known in closed form (C19-C23).

    Features are ``[shared (n_shared), prompt indicator (P)]``; the indicators span the null
    space, so ``Theta*`` is a ``P``-dimensional affine set. The success probabilities are
    ``r(x, a) = r0(x) + tau (F_x delta)_a`` for a fixed ``delta``, so that
    ``pi*(.|x) ~ pi_ref exp(E[Z|x,.]/tau)`` lies in the family: ``theta* = theta_ref + (delta, 0)``.
    At ``theta*`` the shaped reward has the same mean for every action, so ``g(x; theta*) = 0``
    for each prompt and ``-H* = tau Q^T E_X[Phi^T (diag pi - pi pi^T) Phi] Q``.

    The defaults (``tau = 4``, feature seed 7) were picked for a well-conditioned ``-H*``
    (eigenvalues about 1.29, 1.54, 2.18): with ``beta/i`` steps and ``beta lambda_min ~ 1``,
    ``beta lambda_max < 2`` so the first steps do not overshoot into the saturated region of
    the softmax, from which ``beta/i`` steps return only slowly.

    Returns
    -------
    bandit : LogLinearBandit
    theta_star : ndarray (d,)
        The closed-form maximiser with the null-space component of ``theta_ref``.
    """
    tau = as_float(kl_weight, "kl_weight", low=1e-6)
    rng = np.random.default_rng(seed)
    shared = rng.normal(0.0, 1.0, size=(n_prompts, n_actions, n_shared))
    features = np.concatenate([shared, _prompt_indicators(n_prompts, n_actions)], axis=2)
    ref = np.concatenate([rng.normal(0.0, 0.3, n_shared), np.zeros(n_prompts)])
    delta = rng.normal(0.0, 1.0, n_shared)
    tilt = shared @ delta  # (P, K)
    tilt = tilt - tilt.mean(axis=1, keepdims=True)
    scale = min(1.0, 0.35 / (tau * np.abs(tilt).max()))  # keep r within [0.15, 0.85]
    delta, tilt = scale * delta, scale * tilt
    reward = 0.5 + tau * tilt
    bandit = LogLinearBandit(features, reward, kl_weight=tau, ref_theta=ref)
    return bandit, ref + np.concatenate([delta, np.zeros(n_prompts)])


def conflicting_prompts_bandit(kl_weight: float = 0.5, strength: float = 0.5, seed: int = 3,
                               prompt_sampling: str = "iid") -> LogLinearBandit:
    """Prompts that pull shared parameters apart, so ``c1 > 0`` at the optimum (C17, C18).

    Eight prompts, four actions, three shared features plus prompt indicators. The tabular
    optimum of each prompt is not in the family, so the per-prompt gradients ``g(x; theta*)``
    do not vanish although their average does; ``strength`` scales the reward contrasts.
    The defaults put the exact optimal group size ``1 + sqrt(c3'/c1)`` near 18 both at
    ``theta = 0`` and at ``theta*``. ``prompt_sampling='stratified'`` gives the finite-prompt-set
    variant (batches sweep the 8 prompts; see :class:`~ustat_rl.policy.LogLinearBandit`).
    """
    strength = as_float(strength, "strength", low=0.0)
    rng = np.random.default_rng(seed)
    n_prompts, n_actions, n_shared = 8, 4, 3
    shared = rng.normal(0.0, 1.0, size=(n_prompts, n_actions, n_shared))
    features = np.concatenate([shared, _prompt_indicators(n_prompts, n_actions)], axis=2)
    contrast = rng.uniform(-0.3, 0.3, size=(n_prompts, n_actions)) * strength
    reward = np.clip(0.5 + contrast, 0.02, 0.98)
    return LogLinearBandit(features, reward, kl_weight=kl_weight, prompt_sampling=prompt_sampling)
