"""Named example problems used by ``ustat-rl verify``, the simulations, the notebooks and the tests.

Softmax bandits for the estimator claims (C3-C11, C17), log-linear KL bandits for the
policy-optimisation claims (C17-C23). Each is built for one claim and documented with why it
fits; their parameters are fixed so every run checks the same instance.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_float
from .loglinear import LogLinearBandit
from .quadratic import NoisyQuadratic
from .softmax import SoftmaxBandit

__all__ = [
    "POLICY_STRENGTHS",
    "arithmetic_bandit",
    "assumption2_bandit",
    "one_answer_bandit",
    "baseline_counterexample_bandit",
    "reversal_bandit",
    "interior_optimum_bandit",
    "small_bandit",
    "realisable_kl_bandit",
    "conflicting_prompts_bandit",
    "pl_quadratic",
    "PL_START",
    "std_normalisation_bandit",
    "arcsin_conflict_bandit",
    "heterogeneous_score_bandit",
    "HETEROGENEOUS_VALUES",
    "HETEROGENEOUS_SCALES",
    "known_value_bandit",
    "random_bandit_moments",
]

#: Logit boosts of the correct answer for the three policies of the Fig. 4 analogue
#: (base, instruct, instruct with few-shot examples).
POLICY_STRENGTHS = {"base": 2.0, "instruct": 2.8, "few-shot": 3.7}


def small_bandit() -> SoftmaxBandit:
    """Two prompts, three actions, generic parameters: small enough to enumerate groups."""
    return SoftmaxBandit([[0.3, -0.2, 0.5], [1.0, 0.0, -1.0]],
                         [[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]], [0.3, 0.7])


def arithmetic_bandit(strength: float, n_prompts: int = 40, n_actions: int = 32,
                      seed: int = 0) -> SoftmaxBandit:
    """Analogue of the paper's Fig. 4 task: ``K`` candidate answers per prompt, some correct.

    Each prompt has between 2 and 6 correct answers (reward 1; the others 0) and fixed random
    logits (scale 0.3, seeded by ``seed``); ``strength`` is added to the logits of the correct
    answers, so a larger strength is a stronger policy. With many candidates and a flat policy
    ``||W||^2`` varies little between answers, so Assumption 2 holds approximately, as it does
    for long sequences whose score norm is dominated by many tokens. The three strengths of
    :data:`POLICY_STRENGTHS` give mean success probabilities of about 0.5, 0.7 and 0.85.
    """
    strength = as_float(strength, "strength")
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 0.3, size=(n_prompts, n_actions))
    reward = np.zeros((n_prompts, n_actions))
    for x in range(n_prompts):
        correct = rng.choice(n_actions, size=rng.integers(2, 7), replace=False)
        reward[x, correct] = 1.0
    logits = logits + strength * reward
    return SoftmaxBandit(logits, reward)


def one_answer_bandit(strength: float, n_prompts: int = 40, n_actions: int = 8,
                      seed: int = 0) -> SoftmaxBandit:
    """One correct answer per prompt and a policy that concentrates on it as it improves.

    A contrast to :func:`arithmetic_bandit`: the likely correct answer has a small score norm,
    so ``Cov(||W||^2, Z | x) < 0`` (Assumption 2 fails) and, by C9, baselines below ``V`` do
    better; at high success probability plain REINFORCE beats both GRPO and the oracle.
    """
    strength = as_float(strength, "strength")
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 0.3, size=(n_prompts, n_actions))
    correct = rng.integers(0, n_actions, size=n_prompts)
    reward = np.zeros((n_prompts, n_actions))
    reward[np.arange(n_prompts), correct] = 1.0
    return SoftmaxBandit(logits + strength * reward, reward)


def assumption2_bandit() -> SoftmaxBandit:
    """A bandit where Assumption 2 (``Cov(||W||^2, Z | x) = 0``) holds exactly (C8).

    Prompt 0: ``pi = (0.4, 0.4, 0.1, 0.1)``, so actions 0, 1 share ``||W||^2`` and so do 2, 3,
    and the success probabilities ``(0.9, 0.1, 0.7, 0.3)`` give both classes mean 0.5.
    Prompt 1: a uniform policy, for which ``||W||^2`` is constant.
    """
    logits = np.log([[0.4, 0.4, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    return SoftmaxBandit(logits, [[0.9, 0.1, 0.7, 0.3], [0.2, 0.5, 0.3, 0.8]])


def baseline_counterexample_bandit() -> SoftmaxBandit:
    """Assumption 2 fails: the rare action has both a large score and a high reward (C9).

    ``pi = (0.9, 0.1)``, success probabilities ``(0.2, 0.9)``: ``||W||^2`` is 0.02 on the common
    action and 1.62 on the rare one, so ``b* = E[||W||^2 Z]/E||W||^2 = 0.83`` is far from
    ``V = 0.27`` and the constant ``b*`` beats the value baseline.
    """
    return SoftmaxBandit(np.log([[0.9, 0.1]]), [[0.2, 0.9]])


def reversal_bandit(success_prob: float, gap: float = 0.5) -> SoftmaxBandit:
    """Uniform two-action policy with mean success probability ``p`` (C10).

    The actions succeed with ``p (1 + gap)`` and ``p (1 - gap)`` (``p`` replaced by ``1 - p``
    above 1/2 so both stay in [0, 1]); the uniform policy makes ``||W||^2`` constant, so
    Assumption 2 holds and the reversal condition of C10 is exact.
    """
    p = as_float(success_prob, "success_prob", low=0.0, high=1.0)
    gap = as_float(gap, "gap", low=0.0, high=1.0)
    spread = gap * min(p, 1.0 - p)
    return SoftmaxBandit([[0.0, 0.0]], [[p + spread, p - spread]])


def interior_optimum_bandit() -> SoftmaxBandit:
    """Eight prompts with small reward gaps, so the optimal group size is interior (C17).

    Reward gaps of 0.1 between actions keep ``g(x)`` (hence ``c1``) small next to the noise
    constant ``c3'``, which puts ``G* = 1 + sqrt(c3'/c1)`` near 10.
    """
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 0.5, size=(8, 4))
    base = np.linspace(0.2, 0.8, 8)[:, None]
    reward = np.clip(base + np.array([0.15, 0.05, -0.05, -0.15])[None, :], 0.0, 1.0)
    return SoftmaxBandit(logits, reward)


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
    variant (batches sweep the 8 prompts; see :class:`~ustat_rl.policies.loglinear.LogLinearBandit`).
    """
    strength = as_float(strength, "strength", low=0.0)
    rng = np.random.default_rng(seed)
    n_prompts, n_actions, n_shared = 8, 4, 3
    shared = rng.normal(0.0, 1.0, size=(n_prompts, n_actions, n_shared))
    features = np.concatenate([shared, _prompt_indicators(n_prompts, n_actions)], axis=2)
    contrast = rng.uniform(-0.3, 0.3, size=(n_prompts, n_actions)) * strength
    reward = np.clip(0.5 + contrast, 0.02, 0.98)
    return LogLinearBandit(features, reward, kl_weight=kl_weight, prompt_sampling=prompt_sampling)


def pl_quadratic() -> NoisyQuadratic:
    """A noisy PL quadratic for Lemma 6 (C14, C15).

    ``d = 3``: curvatures ``mu = 0.5`` and ``L = 2`` plus a null direction (the maximisers form a
    line, as for softmax policies), with correlated gradient noise; :data:`PL_START` is the
    starting point of the checks.
    """
    rot = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]
    a = rot @ np.diag([0.5, 2.0, 0.0]) @ rot.T
    gam = np.array([[1.0, 0.3, 0.1], [0.3, 0.5, 0.0], [0.1, 0.0, 0.2]])
    return NoisyQuadratic(a, [1.0, -1.0, 0.5], gam)


PL_START = np.array([4.0, 3.0, -2.0])


def std_normalisation_bandit() -> SoftmaxBandit:
    """One prompt, three actions, binary rewards with ``V = 0.29`` (C24).

    Lemma 11's limit constant ``||g||^2 (1 - 2V)^2 / (4 V^2 (1 - V)^2)`` vanishes at ``V = 1/2``,
    so ``V`` is kept away from it; ``p^G + (1 - p)^G`` is 0.59 at ``G = 2`` and 0.065 at ``G = 8``,
    so all-equal groups are frequent at small ``G`` and rare at large ``G``.
    """
    return SoftmaxBandit([[0.8, -0.3, 0.1]], [[0.1, 0.7, 0.4]])


def arcsin_conflict_bandit(kl_weight: float = 0.5) -> LogLinearBandit:
    """Two prompts pulling one shared parameter apart, binary rewards and a KL penalty (C26).

    Prompt A: ``pi(a_1|A) = sigmoid(theta)``, success probabilities ``(0.9, 0)``; prompt B:
    ``pi(b_1|B) = sigmoid(-theta)``, ``(0.1, 0)``; uniform reference policy (``theta_ref = 0``).
    Raising ``theta`` helps A and hurts B. Prompt B's value is small (about 0.02 near the
    optima), so dividing its gradient by ``sqrt(V(1-V))`` weighs it up: the maximiser of
    ``E V - tau KL`` is ``theta = 0.800`` and that of ``E[2 arcsin sqrt V] - tau KL`` is
    ``theta = 1.287`` (each the unique root of its gradient), far apart compared with the
    Monte Carlo error of a few hundred training runs.
    """
    tau = as_float(kl_weight, "kl_weight", low=0.0)
    features = np.array([[[1.0], [0.0]], [[-1.0], [0.0]]])  # (P=2, K=2, d=1)
    return LogLinearBandit(features, [[0.9, 0.0], [0.1, 0.0]], kl_weight=tau)


#: Success rates and score scales of :func:`heterogeneous_score_bandit`, crossed: every
#: success rate appears with a small and a large score scale.
HETEROGENEOUS_VALUES = (0.15, 0.5, 0.85, 0.15, 0.5, 0.85)
HETEROGENEOUS_SCALES = (0.5, 0.5, 0.5, 3.0, 3.0, 3.0)


def heterogeneous_score_bandit(values=HETEROGENEOUS_VALUES, scales=HETEROGENEOUS_SCALES,
                               kl_weight: float = 0.0):
    """Prompts whose success rates and score norms vary independently (C40): ``(bandit, theta)``.

    Prompt ``x`` has three actions, the first rewarded (``Z = 1``), the others not, and its own
    block of parameters with features ``s_x e_a``; ``theta`` sets the logits to
    ``(log(2V/(1-V)), 0, 0)``, so ``V(x) = pi(a_1|x)`` is ``values[x]`` whatever the scale,
    while every score ``W = s_x (e_a - pi)`` and hence every score moment scales with ``s_x``
    (``E||W||^2`` by ``s_x^2``). The blocks are disjoint, so the Gram matrix of the ``g(x)`` is
    diagonal. A reward-only allocation sees the same ``p`` on prompts whose gradient noise differs by
    a factor ``s^2 = 36``. ``kl_weight > 0`` adds a KL penalty towards the uniform policy, so
    that Algorithm 1 has a finite optimum (the training study of C40).
    """
    values = np.asarray(values, dtype=np.float64)
    scales = np.asarray(scales, dtype=np.float64)
    if values.ndim != 1 or scales.shape != values.shape:
        raise ValueError("`values` and `scales` must be 1-D of the same length")
    if np.any((values <= 0) | (values >= 1)):
        raise ValueError("`values` must lie strictly between 0 and 1")
    if np.any(scales <= 0):
        raise ValueError("`scales` must be positive")
    P, K = values.size, 3
    features = np.zeros((P, K, P * K))
    theta = np.zeros(P * K)
    for x in range(P):
        features[x, np.arange(K), x * K + np.arange(K)] = scales[x]
        theta[x * K] = math.log(2.0 * values[x] / (1.0 - values[x])) / scales[x]
    reward = np.tile([1.0, 0.0, 0.0], (P, 1))
    return LogLinearBandit(features, reward, kl_weight=kl_weight), theta


def known_value_bandit(values, prompt_prob=None) -> SoftmaxBandit:
    """Prompts whose success probability is exactly ``values[x]`` (dynamic sampling, C51).

    Each prompt has three answers: right (reward 1), wrong (reward 0) and a coin (reward 1 with
    probability 1/2), drawn with ``pi = (p - t/2, 1 - p - t/2, t)``, ``t = min(p, 1 - p)``, so
    ``V(x) = pi_0 + t/2 = p`` and a reward does not fix the answer: the within-group law given
    the success count still varies, which is what filtering all-equal groups conditions on.

    Parameters
    ----------
    values : array_like (P,)
        Success probabilities, each strictly between 0 and 1.
    prompt_prob : array_like (P,), optional
        ``f(x)``; uniform by default.

    Returns
    -------
    SoftmaxBandit

    Examples
    --------
    >>> bandit = known_value_bandit([0.02, 0.5, 0.98])
    >>> [round(float(v), 12) for v in bandit.value]
    [0.02, 0.5, 0.98]
    """
    p = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any((p <= 0) | (p >= 1)):
        raise ValueError("`values` must be a non-empty 1-D array of success probabilities "
                         f"strictly between 0 and 1, got {values!r}")
    t = np.minimum(p, 1.0 - p)
    pi = np.stack([p - t / 2, 1.0 - p - t / 2, t], axis=1)  # (P, 3), every entry > 0
    return SoftmaxBandit(np.log(pi), np.tile([1.0, 0.0, 0.5], (p.size, 1)), prompt_prob)


def random_bandit_moments(rng, shared: bool):
    """Moments of a random 2-4 prompt bandit with binary rewards and random score scales.

    ``shared=False``: prompts own disjoint parameters (diagonal Gram matrix); ``shared=True``:
    every prompt's features live in one 2-D space, so the ``g(x)`` are not orthogonal.
    """
    P, K = int(rng.integers(2, 5)), 3
    reward = rng.uniform(0.0, 1.0, (P, K))
    scale = np.exp(rng.normal(0.0, 1.0, P))[:, None, None]
    if shared:
        features = rng.normal(size=(P, K, 2)) * scale
        return LogLinearBandit(features, reward).moments(rng.normal(size=2), matrices=False)
    logits = rng.normal(size=(P, K))
    m = SoftmaxBandit(logits, reward).moments()
    return m if rng.random() < 0.5 else _scores_scaled(m, scale.ravel())


def _scores_scaled(m, scale):
    """The same bandit with every score multiplied by ``scale[x]`` (moments times ``s^2``)."""
    from dataclasses import replace

    s2 = scale**2
    gram = m.grad_gram * np.outer(scale, scale)
    return replace(m, score_sq=m.score_sq * s2, score_sq_reward=m.score_sq_reward * s2,
                   score_sq_reward_sq=m.score_sq_reward_sq * s2,
                   score_sq_centred=m.score_sq_centred * s2, grad_sq=m.grad_sq * s2,
                   grad_gram=gram, score_sq_reward_var=m.score_sq_reward_var * s2,
                   grad_norm_sq=None)
