"""Tabular contextual softmax bandit whose every moment is exact (docs/theory.md C3-C10, C17).

Prompts ``x`` in ``{0..P-1}`` are drawn from ``f``, an action ``a`` in ``{0..K-1}`` from
``pi(.|x) = softmax(logits[x])``, and a two-point reward ``Z = lo + (hi - lo) * Bernoulli(r[x, a])``.
The parameter is ``theta = logits`` flattened to ``P*K``, so the score of prompt ``x`` is
``W = e_a - pi(x)`` in block ``x`` of a ``P*K`` vector and zero elsewhere. Every expectation
below is a finite sum over actions, so all quantities are exact. The bandit supplies its
moments (:meth:`SoftmaxBandit.moments`); the MSEs, constants and ``G*`` come from
:mod:`ustat_rl.theory`.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from .. import theory
from .._validation import as_finite_array, as_float, as_int, as_probabilities, as_rng
from ..advantages.registry import get_rule
from ..theory import PromptMoments, ScalingConstants

__all__ = ["SoftmaxBandit", "HoeffdingComponents", "GroupSample"]

_MAX_ENUMERATION = 2_000_000


@dataclass(frozen=True)
class HoeffdingComponents:
    """Hoeffding decomposition of the GRPO kernel at one prompt (docs/theory.md C4).

    An outcome ``o = (a, z)`` is an action and a reward value; there are ``2K`` of them.

    Attributes
    ----------
    outcome_prob : ndarray (2K,)
        ``P(a, z | x)``.
    outcome_action, outcome_reward : ndarray (2K,)
        The action and reward of each outcome.
    kernel : ndarray (2K, 2K, K)
        ``h(o, o') = (w_a - w_a')(z - z')/2``.
    h0 : ndarray (K,)
        ``E h``; equals ``g(x)``.
    h1 : ndarray (2K, K)
        ``h1(o) = E h(o, O')``.
    h2 : ndarray (2K, 2K, K)
        Degenerate part ``h - h1(o) - h1(o') + h0``.
    zeta1, zeta2 : float
        ``tr Cov h1(O)`` and ``tr Cov h(O, O')``.
    """

    outcome_prob: np.ndarray
    outcome_action: np.ndarray
    outcome_reward: np.ndarray
    kernel: np.ndarray
    h0: np.ndarray
    h1: np.ndarray
    h2: np.ndarray
    zeta1: float
    zeta2: float


@dataclass(frozen=True)
class GroupSample:
    """Sampled groups: ``prompt (n,)``, ``action (n, G)``, ``reward (n, G)``."""

    prompt: np.ndarray
    action: np.ndarray
    reward: np.ndarray


class SoftmaxBandit:
    """Tabular contextual softmax bandit with exact moments of every group estimator.

    Parameters
    ----------
    logits : array_like, shape (P, K)
        Policy logits ``theta``; ``K >= 2``.
    reward_prob : array_like, shape (P, K)
        Success probability ``r[x, a]`` in [0, 1].
    prompt_prob : array_like, shape (P,), optional
        Prompt distribution ``f``; uniform by default.
    reward_values : tuple of float
        ``(lo, hi)``: the reward is ``hi`` on success and ``lo`` otherwise (default Bernoulli).

    Examples
    --------
    With deterministic rewards the oracle baseline removes all noise, while GRPO keeps its
    ``1/(G(G-1))`` term:

    >>> bandit = SoftmaxBandit([[0.0, 0.0]], [[1.0, 0.0]])
    >>> float(bandit.value[0])
    0.5
    >>> round(bandit.exact_mse("oracle", group_size=4), 6)
    0.0
    >>> round(bandit.exact_mse("grpo", group_size=4), 6)
    0.020833
    """

    def __init__(self, logits, reward_prob, prompt_prob=None, reward_values=(0.0, 1.0)):
        logits = as_finite_array(logits, "logits", ndim=(2,))
        reward_prob = as_probabilities(reward_prob, "reward_prob", ndim=(2,))
        if reward_prob.shape != logits.shape:
            raise ValueError(
                f"`reward_prob` must have the shape of `logits` {logits.shape}, got {reward_prob.shape}"
            )
        if logits.shape[1] < 2:
            raise ValueError(f"`logits` needs K >= 2 actions per prompt, got shape {logits.shape}")
        n_prompts = logits.shape[0]
        if prompt_prob is None:
            prompt_prob = np.full(n_prompts, 1.0 / n_prompts)
        prompt_prob = as_probabilities(prompt_prob, "prompt_prob", ndim=(1,))
        if prompt_prob.shape != (n_prompts,):
            raise ValueError(f"`prompt_prob` must have shape ({n_prompts},), got {prompt_prob.shape}")
        if abs(prompt_prob.sum() - 1.0) > 1e-9:
            raise ValueError(f"`prompt_prob` must sum to 1, got {prompt_prob.sum()!r}")
        if len(reward_values) != 2:
            raise ValueError(f"`reward_values` must be a pair (lo, hi), got {reward_values!r}")
        lo = as_float(reward_values[0], "reward_values")
        hi = as_float(reward_values[1], "reward_values")

        self.logits = logits
        self.reward_prob = reward_prob
        self.prompt_prob = prompt_prob
        self.reward_values = (lo, hi)
        self.n_prompts, self.n_actions = logits.shape
        self.dim = self.n_prompts * self.n_actions
        self._moments()

    def __repr__(self) -> str:
        return (f"SoftmaxBandit(n_prompts={self.n_prompts}, n_actions={self.n_actions}, "
                f"reward_values={self.reward_values})")

    # ------------------------------------------------------------------ exact moments
    def _moments(self) -> None:
        lo, hi = self.reward_values
        pi = softmax(self.logits, axis=1)  # (P, K)
        r = self.reward_prob
        mean_z = lo + (hi - lo) * r  # (P, K)  E[Z | x, a]
        second_z = lo**2 * (1.0 - r) + hi**2 * r  # (P, K)  E[Z^2 | x, a]
        eye = np.eye(self.n_actions)
        score = eye[None, :, :] - pi[:, None, :]  # (P, K, K)  row a: w(x, a)
        sq_norm = np.einsum("pak,pak->pa", score, score)  # (P, K)  ||w(x, a)||^2
        value = np.sum(pi * mean_z, axis=1)  # (P,)
        resid_sq = second_z - 2.0 * mean_z * value[:, None] + value[:, None] ** 2  # E[(Z-V)^2|x,a]

        self.policy = pi
        self.reward_mean = mean_z
        self.reward_second_moment = second_z
        self.score_table = score
        self.score_sq_norm_table = sq_norm
        self.value = value
        self.reward_var = np.sum(pi * second_z, axis=1) - value**2
        self.score_sq_norm = np.sum(pi * sq_norm, axis=1)
        self.grad_per_prompt = np.einsum("pa,pak->pk", pi * mean_z, score)
        grad_sq = np.sum(self.grad_per_prompt**2, axis=1)
        self.grad = (self.prompt_prob[:, None] * self.grad_per_prompt).ravel()
        self.sigma_oracle = (np.einsum("pa,pak,pal->pkl", pi * resid_sq, score, score)
                             - np.einsum("pk,pl->pkl", self.grad_per_prompt, self.grad_per_prompt))
        # blocks of different prompts are disjoint, so the Gram matrix of g(x) is diagonal
        self._prompt_moments = PromptMoments(
            prompt_prob=self.prompt_prob, value=value, reward_var=self.reward_var,
            score_sq=self.score_sq_norm, score_sq_reward=np.sum(pi * sq_norm * mean_z, axis=1),
            score_sq_reward_sq=np.sum(pi * sq_norm * second_z, axis=1),
            score_sq_centred=np.sum(pi * resid_sq * sq_norm, axis=1), grad_sq=grad_sq,
            grad_gram=np.diag(grad_sq), grad_norm_sq=float(self.grad @ self.grad))
        self.trace_sigma_oracle = self._prompt_moments.trace_sigma_oracle
        self.prompt_variance = theory.prompt_heterogeneity(self._prompt_moments)

    def moments(self, matrices: bool = False) -> PromptMoments:
        """The exact moments contract of this bandit (docs/theory.md section 1).

        Parameters
        ----------
        matrices : bool
            Also fill the matrix forms in the full ``P*K``-dimensional parameter space
            (``grad_per_prompt`` and ``E[W W^T Z^q]``): ``P (PK)^2`` floats, so only for small
            bandits.
        """
        if not matrices:
            return self._prompt_moments
        P, K, d = self.n_prompts, self.n_actions, self.dim
        if P * d * d > 50_000_000:
            raise ValueError(f"matrix moments need {P * d * d} floats for P={P}, d={d}; use "
                             "matrices=False")
        outer = np.zeros((3, P, d, d))
        grads = np.zeros((P, d))
        pi = self.policy
        for x in range(P):
            block = slice(x * K, (x + 1) * K)
            w = self.score_table[x]  # (K, K) row a: w(x, a)
            for q, weight in enumerate((pi[x], pi[x] * self.reward_mean[x],
                                        pi[x] * self.reward_second_moment[x])):
                outer[q, x, block, block] = np.einsum("a,ak,al->kl", weight, w, w)
            grads[x, block] = self.grad_per_prompt[x]
        return dataclasses.replace(self._prompt_moments, grad_per_prompt=grads,
                                   score_outer=outer[0], score_outer_reward=outer[1],
                                   score_outer_reward_sq=outer[2])

    # ------------------------------------------------------------------ exact MSEs
    def exact_mse_per_prompt(self, estimator: str, group_size) -> np.ndarray:
        """Exact MSE of the per-prompt estimator against ``g(x)``, shape ``(P,)`` (C5).

        ``estimator`` in ``{"vanilla", "grpo", "oracle", "fullmean"}``; the formula is
        :func:`ustat_rl.theory.per_prompt_mse` (Theorem 2) on :meth:`moments`.
        """
        return theory.per_prompt_mse(self._prompt_moments, _check_estimator(estimator),
                                     _scalar_size(group_size))

    def exact_mse(self, estimator: str, group_size, batch_size=1) -> float:
        """Exact minibatch MSE against the full gradient ``g`` (Proposition 3, C6).

        :func:`ustat_rl.theory.minibatch_mse` on :meth:`moments`.
        """
        return theory.minibatch_mse(self._prompt_moments, _check_estimator(estimator),
                                    _scalar_size(group_size), batch_size)

    def prompt_averaged_mse(self, estimator: str, group_size) -> float:
        """``E_X MSE(X)``: the per-prompt MSE averaged over ``f``, without prompt variance (C5)."""
        return theory.prompt_averaged_mse(self._prompt_moments, _check_estimator(estimator),
                                          _scalar_size(group_size))

    def baseline_mse_per_prompt(self, baseline, group_size) -> np.ndarray:
        """Exact MSE with a prompt-only baseline ``b(x)``, scalar or ``(P,)`` (Corollary 5, C8, C9)."""
        return theory.per_prompt_mse(self._prompt_moments, "baseline", _scalar_size(group_size),
                                     baseline=baseline)

    @property
    def optimal_constant_baseline(self) -> np.ndarray:
        """MSE-optimal prompt-only baseline ``b*(x) = E[||W||^2 Z] / E||W||^2`` (C9)."""
        return theory.optimal_constant_baseline(self._prompt_moments)

    @property
    def score_reward_covariance(self) -> np.ndarray:
        """``Cov(||W||^2, Z | x)``; zero for every prompt iff Assumption 2 holds (C8)."""
        return theory.score_reward_covariance(self._prompt_moments)

    # ------------------------------------------------------------------ scaling law
    def scaling_constants(self) -> ScalingConstants:
        """``c1``, ``c2`` and the exact ``c3'`` of the scaling law (Theorem 7, C17)."""
        return theory.scaling_constants(self._prompt_moments)

    def optimal_group_size(self, exact: bool = True) -> float:
        """``G* = 1 + sqrt(c3'/c1)`` (or the paper's ``sqrt(c3/c1)``; ``inf`` if ``c1 = 0``) (C17).

        The policy's constants read by :func:`ustat_rl.theory.group_size.optimal_group_size`.
        """
        return self.scaling_constants().optimal_group_size(exact)

    # ------------------------------------------------------------------ Hoeffding parts
    def hoeffding(self, prompt) -> HoeffdingComponents:
        """Hoeffding decomposition of the GRPO kernel at ``prompt``, by enumeration (C4).

        Computed from the kernel alone (no closed form), so it is an independent route to
        ``h0 = g(x)``, ``2(h1 - h0) = W(Z - V) - g`` and the exact variance of Lemma 1.
        """
        prompt = as_int(prompt, "prompt", 0)
        if prompt >= self.n_prompts:
            raise ValueError(f"`prompt` must be in [0, {self.n_prompts - 1}], got {prompt}")
        lo, hi = self.reward_values
        pi, r = self.policy[prompt], self.reward_prob[prompt]
        action = np.repeat(np.arange(self.n_actions), 2)  # (2K,)
        reward = np.tile([lo, hi], self.n_actions)  # (2K,)
        prob = np.stack([pi * (1.0 - r), pi * r], axis=1).ravel()  # (2K,)
        w = self.score_table[prompt][action]  # (2K, K)
        kernel = 0.5 * (w[:, None, :] - w[None, :, :]) * (reward[:, None] - reward[None, :])[..., None]
        h0 = np.einsum("o,q,oqk->k", prob, prob, kernel)
        h1 = np.einsum("q,oqk->ok", prob, kernel)
        h2 = kernel - h1[:, None, :] - h1[None, :, :] + h0
        zeta1 = float(prob @ np.sum((h1 - h0) ** 2, axis=1))
        zeta2 = float(np.einsum("o,q,oq->", prob, prob, np.sum((kernel - h0) ** 2, axis=2)))
        return HoeffdingComponents(prob, action, reward, kernel, h0, h1, h2, zeta1, zeta2)

    # ------------------------------------------------------------------ sampling
    def _check_prompts(self, prompt, n_groups: int) -> np.ndarray | None:
        if prompt is None:
            return None
        prompt = np.asarray(prompt)
        if not np.issubdtype(prompt.dtype, np.integer):
            raise TypeError(f"`prompt` must be an integer or integer array, got {prompt.dtype}")
        if np.any(prompt < 0) or np.any(prompt >= self.n_prompts):
            raise ValueError(f"`prompt` must lie in [0, {self.n_prompts - 1}]")
        return np.broadcast_to(prompt, (n_groups,)).astype(np.int64)

    def sample_prompts(self, n_groups, rng) -> np.ndarray:
        """Draw ``n_groups`` prompts from ``f``."""
        n_groups = as_int(n_groups, "n_groups", 1)
        return as_rng(rng).choice(self.n_prompts, size=n_groups, p=self.prompt_prob)

    def sample_groups(self, group_size, n_groups, rng, prompt=None) -> GroupSample:
        """Sample ``n_groups`` groups of ``group_size`` actions and rewards, sample by sample.

        This is the literal per-sample sampler; the Monte Carlo engine uses an equivalent
        sufficient-statistic sampler for speed (:mod:`ustat_rl.montecarlo`).
        """
        group_size = as_int(group_size, "group_size", 1)
        n_groups = as_int(n_groups, "n_groups", 1)
        rng = as_rng(rng)
        prompts = self._check_prompts(prompt, n_groups)
        if prompts is None:
            prompts = self.sample_prompts(n_groups, rng)
        cum = np.cumsum(self.policy, axis=1)[prompts]  # (n, K)
        cum[:, -1] = 1.0
        u = rng.random((n_groups, group_size))
        action = np.sum(u[:, :, None] >= cum[:, None, :], axis=2)  # (n, G)
        action = np.minimum(action, self.n_actions - 1)
        success = rng.random((n_groups, group_size)) < self.reward_prob[prompts[:, None], action]
        lo, hi = self.reward_values
        reward = np.where(success, hi, lo)
        return GroupSample(prompts, action, reward)

    def scores(self, prompt, action, full: bool = False) -> np.ndarray:
        """Scores ``W = e_a - pi(x)``: ``(n, G, K)`` within the prompt's block, or ``(n, G, P*K)``."""
        prompt = np.asarray(prompt, dtype=np.int64)
        action = np.asarray(action, dtype=np.int64)
        within = self.score_table[prompt[:, None], action]  # (n, G, K)
        if not full:
            return within
        out = np.zeros(within.shape[:2] + (self.dim,))
        cols = prompt[:, None] * self.n_actions + np.arange(self.n_actions)  # (n, K)
        out[np.arange(len(prompt))[:, None, None], np.arange(within.shape[1])[None, :, None],
            cols[:, None, :]] = within
        return out

    def embed(self, prompt: int, block) -> np.ndarray:
        """A ``K``-vector of prompt ``prompt`` placed in its block of the ``P*K`` parameter space."""
        out = np.zeros(self.dim)
        k = self.n_actions
        out[prompt * k:(prompt + 1) * k] = block
        return out

    def target_gradient(self, prompt=None) -> np.ndarray:
        """What an estimator aims at: ``g`` for prompts drawn from ``f``, ``g(x)`` embedded for a
        fixed ``prompt = x``."""
        if prompt is None:
            return self.grad.copy()
        return self.embed(int(prompt), self.grad_per_prompt[int(prompt)])

    def enumerate_groups(self, prompt, group_size):
        """All ``(2K)^G`` outcomes of a group at ``prompt``: ``(action, reward, prob)``.

        ``action`` and ``reward`` have shape ``(M, G)``, ``prob`` shape ``(M,)`` summing to 1.
        """
        prompt = as_int(prompt, "prompt", 0)
        group_size = as_int(group_size, "group_size", 1)
        n_out = (2 * self.n_actions) ** group_size
        if n_out > _MAX_ENUMERATION:
            raise ValueError(f"`group_size` {group_size} gives {n_out} outcomes to enumerate; "
                             f"at most {_MAX_ENUMERATION} are allowed")
        comp = self.hoeffding(prompt)
        index = np.array(list(itertools.product(range(2 * self.n_actions), repeat=group_size)))
        return (comp.outcome_action[index], comp.outcome_reward[index],
                np.prod(comp.outcome_prob[index], axis=1))


def _scalar_size(group_size) -> int:
    if np.ndim(group_size) != 0:
        raise ValueError(f"`group_size` must be one integer, got shape {np.shape(group_size)}")
    return as_int(group_size, "group_size", 1)


def _check_estimator(estimator):
    rule = get_rule(estimator, "estimator")
    if rule.centring.reference_source == "baseline":
        raise ValueError(f"`estimator` {rule.name!r} needs a baseline b(x); use "
                         "ustat_rl.theory with `baseline`")
    return rule
