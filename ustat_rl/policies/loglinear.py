"""Log-linear contextual bandit with shared parameters and a KL-regularised objective.

A policy ``pi(a|x) = softmax_a(phi(x, a)^T theta)`` shares ``theta`` (shape ``(d,)``) across
prompts, so prompts interact through common parameters as they do in a language model; the
tabular bandit of :class:`ustat_rl.policies.softmax.SoftmaxBandit` is the special case of one-hot features
(:meth:`LogLinearBandit.tabular`). The objective is

    J(theta) = E[Z] - tau * E_X KL(pi_theta(.|X) || pi_ref(.|X)),

with ``pi_ref = pi_{theta_ref}``. Its gradient is ``E[W Z~]`` with the *shaped reward*
``Z~ = Z - tau (log pi_theta(A|X) - log pi_ref(A|X))`` (because ``E[W | x] = 0``), so every group
estimator of Algorithm 1 (vanilla, GRPO, oracle, full-mean) applies unchanged with ``Z~`` in
place of ``Z``. Features constant across the actions of a prompt do not change the policy, so the
maximisers of ``J`` form an affine set ``theta* + N`` (Assumption 7, Theorem 8, docs/theory.md C19-C23)
with ``N = {v : phi(x, .)^T v constant in a, for every x}``.

Everything is a finite sum over prompts, actions and the two reward values, hence exact. The
module also holds the maximiser set (:class:`Optimum`, found by damped Newton ascent) and
Algorithm 1's minibatch sampler vectorised over runs, the two routes the bandit's methods
:meth:`LogLinearBandit.optimum` and :meth:`LogLinearBandit.sample_gradient` take.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_softmax

from .. import theory
from .._validation import as_finite_array, as_float, as_int, as_probabilities
from ..advantages.registry import get_rule
from ..theory import PromptMoments, ScalingConstants
from .softmax import SoftmaxBandit

__all__ = ["LogLinearBandit", "PolicyState", "PolicyMoments", "Optimum"]

_RANK_TOL = 1e-10


@dataclass(frozen=True)
class PolicyState:
    """Exact tables of a :class:`LogLinearBandit` at one ``theta`` (policy, scores, values).

    Attributes
    ----------
    theta : ndarray (d,)
    policy : ndarray (P, K)
        ``pi(a|x)``.
    score : ndarray (P, K, d)
        ``w(x, a) = phi(x, a) - sum_b pi(b|x) phi(x, b)``, the score of action ``a``.
    shaped_mean : ndarray (P, K)
        ``E[Z~ | x, a] = E[Z | x, a] - tau (log pi - log pi_ref)(a|x)``.
    reward_var : ndarray (P, K)
        ``Var(Z | x, a)`` (the shaping term is deterministic given ``(x, a)``).
    value : ndarray (P,)
        ``V(x) = E[Z~ | x]``, the oracle baseline.
    kl : ndarray (P,)
        ``KL(pi_theta(.|x) || pi_ref(.|x))``.
    grad_per_prompt : ndarray (P, d)
        ``g(x) = E[W Z~ | x]``.
    grad : ndarray (d,)
        ``g = sum_x f(x) g(x)``, the gradient of ``J``.
    objective : float
        ``J(theta) = sum_x f(x) V(x)``.
    """

    theta: np.ndarray
    policy: np.ndarray
    score: np.ndarray
    shaped_mean: np.ndarray
    reward_var: np.ndarray
    value: np.ndarray
    kl: np.ndarray
    grad_per_prompt: np.ndarray
    grad: np.ndarray
    objective: float


#: The former name of :class:`PolicyState`, kept importable.
PolicyMoments = PolicyState


class LogLinearBandit:
    """Contextual bandit with a log-linear policy and exact theory at any ``theta``.

    Parameters
    ----------
    features : array_like, shape (P, K, d)
        ``phi(x, a)``.
    reward_prob : array_like, shape (P, K)
        Success probability; ``Z = lo + (hi - lo) Bernoulli(reward_prob[x, a])``.
    prompt_prob : array_like, shape (P,), optional
        Prompt distribution ``f``; uniform by default.
    reward_values : tuple of float
        ``(lo, hi)``.
    kl_weight : float
        ``tau >= 0``; ``0`` gives the plain objective ``E[Z]`` of docs/theory.md section 1.
    ref_theta : array_like, shape (d,), optional
        Parameters of the reference policy; zeros by default.
    prompt_sampling : {"iid", "stratified"}
        How Algorithm 1 draws the ``B`` prompts of a batch: i.i.d. from ``f`` (the theory's
        model), or from a *finite prompt set* (uniform ``f``): ``B // P`` full passes over the
        ``P`` prompts plus ``B mod P`` drawn without replacement, as a shuffled dataset does.

    Examples
    --------
    >>> bandit = LogLinearBandit.tabular([[0.9, 0.1]], kl_weight=0.5)
    >>> round(bandit.objective([0.0, 0.0]), 6)  # at theta = theta_ref the KL term is zero
    0.5
    >>> opt = bandit.optimum()
    >>> round(opt.value, 6)  # tau * log E_ref exp(r / tau)
    0.645377
    """

    def __init__(self, features, reward_prob, prompt_prob=None, reward_values=(0.0, 1.0),
                 kl_weight=0.0, ref_theta=None, prompt_sampling="iid"):
        features = as_finite_array(features, "features", ndim=(3,))
        n_prompts, n_actions, dim = features.shape
        if n_actions < 2:
            raise ValueError(f"`features` needs K >= 2 actions per prompt, got shape {features.shape}")
        reward_prob = as_probabilities(reward_prob, "reward_prob", ndim=(2,))
        if reward_prob.shape != (n_prompts, n_actions):
            raise ValueError(f"`reward_prob` must have shape {(n_prompts, n_actions)}, "
                             f"got {reward_prob.shape}")
        if prompt_prob is None:
            prompt_prob = np.full(n_prompts, 1.0 / n_prompts)
        prompt_prob = as_probabilities(prompt_prob, "prompt_prob", ndim=(1,))
        if prompt_prob.shape != (n_prompts,) or abs(prompt_prob.sum() - 1.0) > 1e-9:
            raise ValueError(f"`prompt_prob` must be a probability vector of length {n_prompts}")
        if len(reward_values) != 2:
            raise ValueError(f"`reward_values` must be a pair (lo, hi), got {reward_values!r}")
        lo = as_float(reward_values[0], "reward_values")
        hi = as_float(reward_values[1], "reward_values")
        self.kl_weight = as_float(kl_weight, "kl_weight", low=0.0)
        ref = np.zeros(dim) if ref_theta is None else as_finite_array(ref_theta, "ref_theta", (1,))
        if ref.shape != (dim,):
            raise ValueError(f"`ref_theta` must have shape ({dim},), got {ref.shape}")

        self.features = features
        self.reward_prob = reward_prob
        self.prompt_prob = prompt_prob
        self.reward_values = (lo, hi)
        self.ref_theta = ref
        if prompt_sampling not in ("iid", "stratified"):
            raise ValueError(f"`prompt_sampling` must be 'iid' or 'stratified', got "
                             f"{prompt_sampling!r}")
        if prompt_sampling == "stratified" and np.ptp(prompt_prob) > 1e-12:
            raise ValueError("`prompt_sampling='stratified'` needs a uniform `prompt_prob`")
        self.prompt_sampling = prompt_sampling
        self.n_prompts, self.n_actions, self.dim = n_prompts, n_actions, dim
        self.reward_mean = lo + (hi - lo) * reward_prob  # (P, K)
        self.reward_var_table = (hi - lo) ** 2 * reward_prob * (1.0 - reward_prob)  # (P, K)
        self.ref_log_policy = log_softmax(features @ ref, axis=1)  # (P, K)
        centred = features - features.mean(axis=1, keepdims=True)  # (P, K, d)
        _, sing, vt = np.linalg.svd(centred.reshape(-1, dim), full_matrices=True)
        rank = int(np.sum(sing > _RANK_TOL * max(1.0, sing.max(initial=0.0))))
        self.identifiable_basis = vt[:rank].T  # (d, r)  Q
        self.null_basis = vt[rank:].T  # (d, d - r)

    @classmethod
    def tabular(cls, reward_prob, prompt_prob=None, reward_values=(0.0, 1.0), kl_weight=0.0,
                ref_logits=None) -> "LogLinearBandit":
        """The tabular softmax bandit (``theta`` = logits flattened to ``P*K``) in this class."""
        reward_prob = as_probabilities(reward_prob, "reward_prob", ndim=(2,))
        n_prompts, n_actions = reward_prob.shape
        features = np.eye(n_prompts * n_actions).reshape(n_prompts, n_actions, -1)  # (P, K, P*K)
        ref = None if ref_logits is None else np.ravel(as_finite_array(ref_logits, "ref_logits"))
        return cls(features, reward_prob, prompt_prob, reward_values, kl_weight, ref)

    def __repr__(self) -> str:
        return (f"LogLinearBandit(n_prompts={self.n_prompts}, n_actions={self.n_actions}, "
                f"dim={self.dim}, rank={self.identifiable_basis.shape[1]}, "
                f"kl_weight={self.kl_weight})")

    # ------------------------------------------------------------------ validation
    def _theta(self, theta) -> np.ndarray:
        theta = as_finite_array(theta, "theta", ndim=(1,))
        if theta.shape != (self.dim,):
            raise ValueError(f"`theta` must have shape ({self.dim},), got {theta.shape}")
        return theta

    # ------------------------------------------------------------------ exact moments
    def state(self, theta) -> PolicyState:
        """Exact policy, scores, shaped rewards, values and gradients at ``theta`` (C19-C23)."""
        return self._state(self._theta(theta))

    def moments(self, theta, matrices: bool = True) -> PromptMoments:
        """The moments contract at ``theta``, for the shaped reward ``Z~`` (docs/theory.md section 1).

        ``matrices=True`` also fills ``g(x)`` and ``E[W W^T Z~^q]`` (``P d^2`` floats), which the
        noise covariance of Theorem 8 needs.
        """
        m = self.state(theta)
        pi, w = m.policy, m.score  # (P, K), (P, K, d)
        second = m.reward_var + m.shaped_mean**2  # E[Z~^2 | x, a]
        centred = m.reward_var + (m.shaped_mean - m.value[:, None]) ** 2  # E[(Z~ - V)^2 | x, a]
        sq = np.einsum("pkd,pkd->pk", w, w)  # (P, K) ||w(x, a)||^2
        grad_sq = np.einsum("pd,pd->p", m.grad_per_prompt, m.grad_per_prompt)
        fields = dict(
            prompt_prob=self.prompt_prob, value=m.value,
            reward_var=np.sum(pi * centred, axis=1),  # no cancellation when Z~ is large
            score_sq=np.sum(pi * sq, axis=1), score_sq_reward=np.sum(pi * sq * m.shaped_mean, axis=1),
            score_sq_reward_sq=np.sum(pi * sq * second, axis=1),
            score_sq_centred=np.sum(pi * sq * centred, axis=1), grad_sq=grad_sq,
            grad_gram=m.grad_per_prompt @ m.grad_per_prompt.T, grad_norm_sq=float(m.grad @ m.grad))
        if matrices:
            def outer(q):  # E[W W^T q | x], q of shape (P, K)
                return np.einsum("pa,pak,pal->pkl", pi * q, w, w)
            fields.update(grad_per_prompt=m.grad_per_prompt, score_outer=outer(np.ones_like(pi)),
                          score_outer_reward=outer(m.shaped_mean), score_outer_reward_sq=outer(second))
        return PromptMoments(**fields)

    def _state(self, theta: np.ndarray) -> PolicyState:
        log_pi = log_softmax(self.features @ theta, axis=1)  # (P, K)
        pi = np.exp(log_pi)
        log_ratio = log_pi - self.ref_log_policy  # (P, K)
        kl = np.sum(pi * log_ratio, axis=1)  # (P,)
        shaped = self.reward_mean - self.kl_weight * log_ratio  # (P, K)
        score = self.features - np.einsum("pk,pkd->pd", pi, self.features)[:, None, :]  # (P, K, d)
        value = np.sum(pi * shaped, axis=1)  # (P,)
        grad_x = np.einsum("pk,pkd->pd", pi * shaped, score)  # (P, d)
        grad = self.prompt_prob @ grad_x
        return PolicyState(theta, pi, score, shaped, self.reward_var_table, value, kl, grad_x,
                           grad, float(self.prompt_prob @ value))

    def objective(self, theta) -> float:
        """``J(theta) = E[Z] - tau E_X KL(pi_theta || pi_ref)``."""
        return self.state(theta).objective

    def objective_many(self, theta) -> np.ndarray:
        """``J`` at each row of ``theta`` (shape ``(R, d)``), vectorised over runs."""
        theta = np.asarray(theta, dtype=np.float64)
        log_pi = log_softmax(np.einsum("pkd,rd->rpk", self.features, theta), axis=2)  # (R, P, K)
        pi = np.exp(log_pi)
        shaped = self.reward_mean - self.kl_weight * (log_pi - self.ref_log_policy)  # (R, P, K)
        return np.einsum("rpk,p->r", pi * shaped, self.prompt_prob)

    def grad(self, theta) -> np.ndarray:
        """``g(theta) = E[W Z~]``, shape ``(d,)``."""
        return self.state(theta).grad

    def hessian(self, theta) -> np.ndarray:
        """Exact Hessian of ``J`` (shape ``(d, d)``), the ``-nabla g`` of Lemma 16 with a sign.

        Notes
        -----
        Per prompt, in logit space ``l = Phi_x theta``, with ``u = pi * (E[Z~|x,.] - V(x))``:
        ``d^2 J_x / dl^2 = diag(u) - u pi^T - pi u^T - tau (diag(pi) - pi pi^T)``; then
        ``H = sum_x f(x) Phi_x^T (d^2 J_x / dl^2) Phi_x``.
        """
        m = self.state(theta)
        pi = m.policy
        u = pi * (m.shaped_mean - m.value[:, None])  # (P, K)
        outer = np.einsum("pk,pl->pkl", u, pi)
        fisher = np.einsum("pk,kl->pkl", pi, np.eye(self.n_actions)) - np.einsum(
            "pk,pl->pkl", pi, pi)
        logit_hess = (np.einsum("pk,kl->pkl", u, np.eye(self.n_actions)) - outer
                      - outer.transpose(0, 2, 1) - self.kl_weight * fisher)  # (P, K, K)
        return np.einsum("p,pkd,pkl,ple->de", self.prompt_prob, self.features, logit_hess,
                         self.features)

    # ------------------------------------------------------------------ noise covariance
    def prompt_covariance(self, theta, estimator: str, group_size, baseline=None) -> np.ndarray:
        """``Cov(g_hat(x) | x)`` of the per-prompt estimator, shape ``(P, d, d)`` (C5, C22, C23).

        ``estimator`` in ``{"vanilla", "grpo", "oracle", "fullmean", "baseline"}`` (``"baseline"``
        with the prompt-only ``baseline``, scalar or ``(P,)``): the matrix form of Theorem 2,
        :func:`ustat_rl.theory.per_prompt_covariance`, for the shaped reward.
        """
        args = self._check_estimator(estimator, group_size, baseline)
        return theory.per_prompt_covariance(self.moments(theta), *args)

    def _check_estimator(self, estimator, group_size, baseline):
        rule = get_rule(estimator, "estimator")
        group_size = as_int(group_size, "group_size", rule.min_group_size, rule.min_group_reason)
        uses_baseline = rule.centring.reference_source == "baseline"
        if uses_baseline and baseline is None:
            raise ValueError(f"`baseline` is required when `estimator` is {rule.name!r}")
        if not uses_baseline and baseline is not None:
            raise ValueError("`baseline` is only used with `estimator='baseline'`")
        return rule, group_size, baseline

    def noise_covariance(self, theta, estimator: str, group_size, batch_size=1,
                         baseline=None) -> np.ndarray:
        """Covariance ``Gamma`` of the minibatch estimator, shape ``(d, d)`` (Prop. 3, Thm. 8).

        ``k Cov_X g(X) + E_X Cov(g_hat(X) | X) / B`` with ``k`` from
        :meth:`prompt_variance_factor` (:func:`ustat_rl.theory.minibatch_covariance`).
        """
        args = self._check_estimator(estimator, group_size, baseline)
        batch_size = as_int(batch_size, "batch_size", 1)
        return theory.minibatch_covariance(self.moments(theta), args[0], args[1], batch_size,
                                           args[2], self.prompt_variance_factor(batch_size))

    def prompt_variance_factor(self, batch_size) -> float:
        """Factor of ``Cov_X g(X)`` in the minibatch covariance: ``1/B`` for i.i.d. prompts.

        For a finite prompt set (``prompt_sampling='stratified'``) with ``m = B mod P`` prompts
        drawn without replacement it is ``m (P - m) / ((P - 1) B^2)`` (finite-population
        correction): zero whenever ``B`` is a multiple of ``P``.
        """
        batch_size = as_int(batch_size, "batch_size", 1)
        if self.prompt_sampling == "iid":
            return 1.0 / batch_size
        P, m = self.n_prompts, batch_size % self.n_prompts
        return m * (P - m) / ((P - 1) * batch_size**2) if P > 1 else 0.0

    def exact_mse(self, theta, estimator: str, group_size, batch_size=1, baseline=None) -> float:
        """``E||g_hat - g||^2`` (Proposition 3, C6): :func:`ustat_rl.theory.minibatch_mse`.

        Only the full-mean estimator is biased, by ``-g/G`` (docs/theory.md C2).
        """
        args = self._check_estimator(estimator, group_size, baseline)
        batch_size = as_int(batch_size, "batch_size", 1)
        return theory.minibatch_mse(self.moments(theta, matrices=False), args[0], args[1],
                                    batch_size, args[2], self.prompt_variance_factor(batch_size))

    def scaling_constants(self, theta) -> ScalingConstants:
        """``c1, c2, c3'`` of Theorem 7 at ``theta`` (C17), for the shaped reward."""
        return theory.scaling_constants(self.moments(theta, matrices=False))

    def as_softmax_bandit(self, theta) -> SoftmaxBandit:
        """The tabular :class:`SoftmaxBandit` with this policy (only when ``tau = 0``).

        Its per-prompt quantities live in logit space; used to cross-check this class.
        """
        if self.kl_weight != 0.0:
            raise ValueError("`as_softmax_bandit` needs kl_weight = 0 (rewards are not shaped)")
        return SoftmaxBandit(self.features @ self._theta(theta), self.reward_prob,
                             self.prompt_prob, self.reward_values)

    # ------------------------------------------------------------------ optimum
    def optimum(self, theta_init=None, tol: float = 1e-12, max_iter: int = 200) -> Optimum:
        """A maximiser of ``J`` by damped Newton ascent on the identifiable directions.

        Parameters
        ----------
        theta_init : array_like (d,), optional
            Start (``theta_ref`` by default); its null-space component is kept.
        tol : float
            Stop when ``||g|| <= tol``.

        Raises
        ------
        ValueError
            When ``tau = 0`` (no interior maximiser of a softmax bandit in general) or when the
            Newton iteration does not reach a point with ``H* < 0`` and ``||g|| <= tol``.
        """
        return _newton_optimum(self, theta_init, tol, max_iter)

    # ------------------------------------------------------------------ training protocol
    def draws_per_step(self, estimator: str, group_size: int, batch_size: int) -> int:
        """Uniforms one step of Algorithm 1 consumes: ``B`` prompts, ``2 B G`` actions/rewards."""
        prompts = self.n_prompts if self.prompt_sampling == "stratified" else batch_size
        return prompts + 2 * batch_size * group_size

    def sample_gradient(self, theta, uniforms, estimator: str, group_size: int,
                        batch_size: int) -> np.ndarray:
        """Minibatch estimates ``g_hat`` for ``R`` runs at once, from their uniforms.

        Parameters
        ----------
        theta : ndarray (R, d)
        uniforms : ndarray (R, B (1 + 2G))
            Per run: ``B`` for the prompts, then ``B G`` for the actions and ``B G`` for the
            rewards (inverse-CDF sampling, exact in law).

        Returns
        -------
        ndarray (R, d)
        """
        return _sample_gradient(self, theta, uniforms, estimator, group_size, batch_size)


@dataclass(frozen=True)
class Optimum:
    """The maximiser set ``Theta* = theta + span(null_basis)`` and its local structure.

    Attributes
    ----------
    theta : ndarray (d,)
        One maximiser (the one whose null-space component is that of the starting point).
    value : float
        ``J* = max J``.
    basis : ndarray (d, r)
        ``Q``: orthonormal basis of the identifiable directions (``Q^T Q = I``).
    null_basis : ndarray (d, d - r)
        Orthonormal basis of ``N``, the directions that leave the policy unchanged.
    hessian : ndarray (r, r)
        ``H* = Q^T H(theta*) Q``, negative definite.
    curvature : ndarray (r,)
        ``Lambda``: eigenvalues of ``-H*``, ascending.
    grad_norm : float
        ``||g(theta*)||`` reached by the solver.
    """

    theta: np.ndarray
    value: float
    basis: np.ndarray
    null_basis: np.ndarray
    hessian: np.ndarray
    curvature: np.ndarray
    grad_norm: float

    def distance(self, theta) -> np.ndarray:
        """``d(theta, Theta*) = ||Q^T (theta - theta*)||`` for ``theta`` of shape ``(..., d)``."""
        return np.linalg.norm((np.asarray(theta) - self.theta) @ self.basis, axis=-1)


def _newton_optimum(bandit, theta_init=None, tol: float = 1e-12, max_iter: int = 200) -> Optimum:
    """A maximiser of ``J`` by damped Newton ascent on the identifiable directions.

    See :meth:`ustat_rl.policies.loglinear.LogLinearBandit.optimum`.
    """
    if bandit.kl_weight == 0.0 and theta_init is None:
        raise ValueError("`optimum` needs kl_weight > 0 or an explicit `theta_init` near an "
                         "interior maximiser")
    theta = bandit.ref_theta.copy() if theta_init is None else bandit._theta(theta_init).copy()
    q = bandit.identifiable_basis
    value = bandit.objective(theta)
    for _ in range(max_iter):
        grad = q.T @ bandit.grad(theta)  # (r,)
        if np.linalg.norm(grad) <= tol:
            break
        hess = q.T @ bandit.hessian(theta) @ q
        eig = np.linalg.eigvalsh(hess)
        step = -np.linalg.solve(hess, grad) if eig.max() < 0 else grad  # Newton or gradient
        t = 1.0
        while t > 1e-12:
            trial = theta + t * (q @ step)
            trial_value = bandit.objective(trial)
            if trial_value >= value - 1e-15:
                break
            t *= 0.5
        theta, value = trial, trial_value
    hess = q.T @ bandit.hessian(theta) @ q
    grad_norm = float(np.linalg.norm(bandit.grad(theta)))
    curvature = np.sort(np.linalg.eigvalsh(-hess))
    if grad_norm > max(tol, 1e-9) or curvature[0] <= 0:
        raise ValueError(f"Newton ascent did not reach a strict local maximiser "
                         f"(||g|| = {grad_norm:.2e}, min eig(-H*) = {curvature[0]:.2e})")
    return Optimum(theta, value, q, bandit.null_basis, hess, curvature, grad_norm)


def _sample_gradient(bandit, theta, uniforms, estimator, group_size, batch_size):
    """Algorithm 1's minibatch estimate on a :class:`LogLinearBandit`.

    Per run: ``B`` prompts from ``f`` and, per prompt, ``G`` actions from ``pi_theta`` and
    rewards, all by inverse-CDF from the uniforms; then ``g_hat = (1/(BG)) sum W (Z~ - C)``
    with the centred rewards of any group rule of :mod:`ustat_rl.advantages` (``C`` = 0 for
    vanilla, the leave-one-out mean for GRPO, ``V(x)`` for the oracle, the group mean for the
    full mean), the value being that of the shaped reward. Per-sample contributions are summed into per-(prompt, action)
    coefficients with one ``bincount`` and mapped through the features once.
    """
    rule = get_rule(estimator, "estimator")
    if rule.statistics != "group" or rule.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` {rule.name!r} needs a batch statistic or a baseline b(x); "
                         "the sampler takes rules of the group alone")
    n_runs = theta.shape[0]
    P, K, B, G = bandit.n_prompts, bandit.n_actions, batch_size, group_size
    lo, hi = bandit.reward_values
    logits = np.einsum("pkd,rd->rpk", bandit.features, theta)  # (R, P, K)
    logits -= logits.max(axis=2, keepdims=True)
    pi = np.exp(logits)
    pi /= pi.sum(axis=2, keepdims=True)
    if bandit.prompt_sampling == "stratified":
        # B // P full passes, then the first B mod P prompts of a uniform random permutation
        order = np.argsort(uniforms[:, :P], axis=1)  # (R, P)
        passes = np.broadcast_to(np.arange(P), (n_runs, P))
        prompt = np.concatenate([passes] * (B // P) + [order[:, :B % P]], axis=1)  # (R, B)
        used = P
    else:
        cum_f = np.cumsum(bandit.prompt_prob)[:-1]
        prompt = np.searchsorted(cum_f, uniforms[:, :B], side="right")  # (R, B)
        used = B
    u_action = uniforms[:, used:used + B * G].reshape(n_runs, B, G)
    u_reward = uniforms[:, used + B * G:].reshape(n_runs, B, G)
    rows = np.arange(n_runs)[:, None]
    cum_pi = np.cumsum(pi, axis=2)[rows, prompt, :-1]  # (R, B, K-1)
    action = np.sum(u_action[..., None] >= cum_pi[:, :, None, :], axis=3)  # (R, B, G)
    cell = prompt[:, :, None] * K + action  # (R, B, G)  flat (prompt, action)
    success = u_reward < bandit.reward_prob.ravel()[cell]
    reward = lo + (hi - lo) * success  # (R, B, G)
    if bandit.kl_weight:
        log_ratio = np.log(pi) - bandit.ref_log_policy  # (R, P, K)
        reward = reward - bandit.kl_weight * log_ratio.reshape(n_runs, -1)[rows[:, :, None], cell]
    value = None
    if rule.centring.reference_source == "value":
        shaped = bandit.reward_mean - (bandit.kl_weight * log_ratio if bandit.kl_weight else 0.0)
        value = np.sum(pi * shaped, axis=2)[rows, prompt].reshape(-1)  # (R B,)
    centred = rule.grouped(reward.reshape(-1, G), value).reshape(reward.shape)
    index = (np.arange(n_runs)[:, None, None] * (P * K) + cell).ravel()
    coef = np.bincount(index, weights=centred.ravel() / (B * G),
                       minlength=n_runs * P * K).reshape(n_runs, P, K)  # sum of (Z~ - C)/(BG)
    coef -= pi * coef.sum(axis=2, keepdims=True)  # score centring: e_a - pi(x)
    return np.einsum("rpk,pkd->rd", coef, bandit.features)
