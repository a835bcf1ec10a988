"""A softmax bandit whose actions carry ``K`` binary reward channels (docs/theory.md C52).

Each action ``a`` at prompt ``x`` gives a joint outcome ``o`` of the channels with probability
``p(o | x, a)`` (outcomes of :func:`ustat_rl.theory.multichannel.binary_outcomes`); the policy
and its scores ``W = e_a - pi(x)`` are those of :class:`~ustat_rl.policies.softmax.SoftmaxBandit`
on the same logits. Its :class:`~ustat_rl.theory.multichannel.ChannelMoments` are exact:

    q_o(x) = sum_a pi_a p(o | x, a),   nu_o(x) = sum_a pi_a p(o | x, a) (e_a - pi(x)),
    t_o(x) = sum_a pi_a p(o | x, a) ||e_a - pi(x)||^2,

each ``nu_o(x)`` in prompt ``x``'s block of the ``P A`` parameters, so blocks of different
prompts are orthogonal.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_probabilities, as_rng
from ..theory.multichannel import ChannelMoments, binary_outcomes
from .softmax import SoftmaxBandit

__all__ = ["MultiChannelBandit", "multireward_bandit", "reward_independent_bandit"]


class MultiChannelBandit:
    """Tabular softmax bandit with ``K`` binary reward channels per action.

    Parameters
    ----------
    logits : array_like (P, A)
    outcome_prob : array_like (P, A, 2^K)
        ``p(o | x, a)``, each row summing to one.
    prompt_prob : array_like (P,), optional
        ``f(x)``; uniform by default.
    """

    def __init__(self, logits, outcome_prob, prompt_prob=None):
        outcome = as_probabilities(outcome_prob, "outcome_prob", ndim=(3,))
        logits = np.asarray(logits, dtype=np.float64)
        if outcome.shape[:2] != np.shape(logits):
            raise ValueError(f"`outcome_prob` must have shape (P, A, 2^K) with (P, A) = "
                             f"{np.shape(logits)}, got {outcome.shape}")
        K = int(round(np.log2(outcome.shape[2])))
        if outcome.shape[2] != 2**K or K < 1:
            raise ValueError(f"`outcome_prob` needs 2^K outcomes per action, got "
                             f"{outcome.shape[2]}")
        if not np.allclose(outcome.sum(axis=2), 1.0, atol=1e-12):
            raise ValueError("`outcome_prob` must sum to 1 over the outcomes of each action")
        self.outcome_prob = outcome
        self.n_channels = K
        self.outcomes = binary_outcomes(K)  # (O, K)
        marginal = outcome @ self.outcomes  # (P, A, K) success probability of each channel
        self.channel_prob = marginal
        self._softmax = SoftmaxBandit(logits, marginal[:, :, 0], prompt_prob)
        self.policy, self.prompt_prob = self._softmax.policy, self._softmax.prompt_prob
        self.n_prompts, self.n_actions = self._softmax.n_prompts, self._softmax.n_actions
        self.dim = self._softmax.dim

    @classmethod
    def from_channels(cls, logits, channel_prob, prompt_prob=None) -> "MultiChannelBandit":
        """Channels independent given the action, channel ``k`` succeeding with
        ``channel_prob[x, a, k]``; they correlate across draws through the actions."""
        p = as_probabilities(channel_prob, "channel_prob", ndim=(3,))
        o = binary_outcomes(p.shape[2])  # (O, K)
        joint = np.prod(np.where(o[None, None] > 0, p[:, :, None, :], 1 - p[:, :, None, :]),
                        axis=3)  # (P, A, O)
        return cls(logits, joint, prompt_prob)

    def channel_bandit(self, k: int) -> SoftmaxBandit:
        """The single-reward bandit of channel ``k`` alone (same policy and prompts)."""
        k = as_int(k, "k", 0)
        if k >= self.n_channels:
            raise ValueError(f"`k` must be in [0, {self.n_channels - 1}], got {k}")
        return SoftmaxBandit(self._softmax.logits, self.channel_prob[:, :, k], self.prompt_prob)

    def _blocks(self):
        """``nu (P, O, A)`` within each prompt's block and ``t (P, O)``."""
        pi = self.policy  # (P, A)
        weight = pi[:, :, None] * self.outcome_prob  # (P, A, O) P(a, o | x)
        score = self._softmax.score_table  # (P, A, A): row a is e_a - pi(x)
        nu = np.einsum("xao,xab->xob", weight, score)
        t = np.einsum("xao,xa->xo", weight, np.sum(score**2, axis=2))
        return nu, t

    def channel_moments(self) -> ChannelMoments:
        """The exact :class:`~ustat_rl.theory.multichannel.ChannelMoments`."""
        nu, t = self._blocks()
        P, O = t.shape
        gram = np.zeros((P, O, P, O))
        for x in range(P):  # blocks of different prompts are orthogonal
            gram[x, :, x, :] = nu[x] @ nu[x].T
        q = np.einsum("xa,xao->xo", self.policy, self.outcome_prob)
        return ChannelMoments(self.prompt_prob, q, t, gram)

    def target_gradient(self, weights) -> np.ndarray:
        """``t = sum_x f(x) sum_k w_k g_k(x)``, shape ``(P A,)``: the gradient of
        ``E[sum_k w_k Z_k]``."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n_channels,):
            raise ValueError(f"`weights` must have shape ({self.n_channels},), got {w.shape}")
        nu, _ = self._blocks()
        per_prompt = np.einsum("xob,o->xb", nu, self.outcomes @ w)  # (P, A)
        return (self.prompt_prob[:, None] * per_prompt).ravel()

    def sample(self, group_size, n_groups, rng, prompt=None):
        """``(prompt (n,), action (n, G), outcome (n, G))`` of ``n`` groups, draw by draw."""
        G = as_int(group_size, "group_size", 1)
        n = as_int(n_groups, "n_groups", 1)
        rng = as_rng(rng)
        if prompt is None:
            prompts = self._softmax.sample_prompts(n, rng)
        else:
            prompts = np.full(n, as_int(prompt, "prompt", 0), dtype=np.int64)
        cum = np.cumsum(self.policy[prompts], axis=1)  # (n, A)
        action = np.minimum(np.sum(rng.random((n, G))[:, :, None] >= cum[:, None, :], axis=2),
                            self.n_actions - 1)
        cum_o = np.cumsum(self.outcome_prob[prompts[:, None], action], axis=2)  # (n, G, O)
        outcome = np.minimum(np.sum(rng.random((n, G))[:, :, None] >= cum_o, axis=2),
                             self.outcomes.shape[0] - 1)
        return prompts, action, outcome

    def rewards(self, outcome) -> np.ndarray:
        """The channels' rewards of outcomes ``(...)``: ``(..., K)``."""
        return self.outcomes[np.asarray(outcome, dtype=np.int64)]

    def scores(self, prompt, action, full: bool = True) -> np.ndarray:
        """``W = e_a - pi(x)``: ``(n, G, P A)`` (``full``) or ``(n, G, A)`` within the block."""
        return self._softmax.scores(prompt, action, full=full)


def multireward_bandit() -> MultiChannelBandit:
    """Two prompts, three actions, two channels of different scale and difficulty.

    Channel 0 is a hard verifier (success 0.05 to 0.6, strongly action-dependent), channel 1 an
    easy format check (0.55 to 0.95) that favours other actions: the two orders of combining
    them weigh the channels differently (docs/theory.md C52). Fixed numbers, not tuned.
    """
    logits = [[0.4, -0.3, 0.1], [0.0, 0.8, -0.5]]
    channel = [[[0.6, 0.55], [0.1, 0.95], [0.3, 0.7]],
               [[0.05, 0.9], [0.35, 0.6], [0.2, 0.8]]]
    return MultiChannelBandit.from_channels(logits, channel, [0.4, 0.6])


def reward_independent_bandit() -> MultiChannelBandit:
    """One prompt whose two channels do not depend on the action: the score is independent of
    the rewards, the premise of the multireward-grpo package's Theorem 3, so ``g(x) = 0``.

    Joint outcomes (00, 10, 01, 11) with probabilities (0.35, 0.1, 0.15, 0.4): channel
    successes 0.5 and 0.55, correlation about 0.50.
    """
    joint = np.tile([0.35, 0.1, 0.15, 0.4], (1, 3, 1))  # (1, 3, 4)
    return MultiChannelBandit([[0.3, -0.2, 0.0]], joint)
