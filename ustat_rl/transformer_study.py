"""Exact ground truth and Monte Carlo gradient-MSE study for transformer policies (docs/theory.md C5, C11, C17).

Two independent routes to the MSE of the group estimators at a transformer policy:

* **Exact** (:func:`exact_moments`). A constrained policy has a finite output space (111
  answers for two digits), so for every prompt ``x`` the per-prompt moments are finite sums:
  ``V(x) = sum_y pi(y|x) Z(y)``, ``g(x) = sum_y pi(y|x) Z(y) W(y)``, ``S = E||W||^2``,
  ``A = E||W(Z - V)||^2``, ``B = E||W Z||^2``. The exact MSE formulas of Theorem 2 (C5) then give

      MSE_vanilla(x) = (B - ||g||^2)/G
      MSE_oracle(x)  = (A - ||g||^2)/G
      MSE_GRPO(x)    = MSE_oracle(x) + (S Var(Z|x) + ||g||^2)/(G(G-1))

  with no Monte Carlo error and no reference gradient to correct for: ``g(x)`` is exact.
* **Monte Carlo** (:func:`mc_squared_errors`). Answers are drawn autoregressively with a
  ``torch.Generator``, scores come from ``vmap`` per-sample gradients, the estimators of
  :mod:`ustat_rl.estimators` are formed and ``||g_hat(x) - g(x)||^2`` is averaged, with ``g(x)``
  computed directly as ``grad pi(y*|x)`` (the only rewarded answer). Groups of every size are
  nested in one draw of ``max(G)`` answers (common random numbers).

Prompt-averaged MSEs are means over a fixed prompt set (``f`` uniform on it). The scaling
constants of Theorem 7 (C17) are exact for that set; their intervals come from a bootstrap over
prompts, i.e. they describe the set as a draw from the task's prompt distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ._validation import as_group_sizes, as_int, as_rng
from .estimators import grpo_gradient, oracle_gradient, vanilla_gradient
from .montecarlo import MonteCarloEstimate
from .theory import ScalingConstants
from .transformer import TransformerPolicy
from .transformer_io import load_policy
from .transformer_train import question_values

__all__ = [
    "POLICY_NAMES",
    "load_study_policy",
    "moderate_questions",
    "PromptMoments",
    "ConstantsInterval",
    "exact_moments",
    "exact_mse",
    "scaling_constants",
    "bootstrap_constants",
    "fixed_budget_mse",
    "optimal_group_size",
    "value_gradients",
    "mc_squared_errors",
]

_MC_ESTIMATORS = ("vanilla", "grpo", "oracle")

#: The committed warm-up checkpoints, weakest first (made by
#: ``simulations/make_transformer_policies.py``; analogues of base, instruct, few-shot instruct).
POLICY_NAMES = ("weak", "medium", "strong")
_CHECKPOINTS = Path(__file__).resolve().parent / "data" / "transformer_policies"


def load_study_policy(name: str, device=None, dtype: torch.dtype = torch.float32):
    """Load one of :data:`POLICY_NAMES`; returns ``(policy, metadata)``."""
    if name not in POLICY_NAMES:
        raise ValueError(f"`name` must be one of {POLICY_NAMES}, got {name!r}")
    return load_policy(_CHECKPOINTS / f"{name}.pt", device=device, dtype=dtype)


def moderate_questions(policy: TransformerPolicy, questions, low: float = 0.2,
                       high: float = 0.8, limit: int | None = None) -> list:
    """The questions with ``low <= V(x) <= high`` (moderate success probability), in order."""
    values = question_values(policy, questions)
    chosen = [q for q, v in zip(questions, values) if low <= v <= high]
    return chosen if limit is None else chosen[:limit]


@dataclass(frozen=True)
class PromptMoments:
    """Exact per-prompt moments of a constrained policy over a prompt set (docs/theory.md C5).

    Attributes
    ----------
    value : ndarray (P,)
        ``V(x) = E[Z | x]``.
    reward_var : ndarray (P,)
        ``Var(Z | x) = V(1 - V)`` (binary reward).
    score_sq : ndarray (P,)
        ``S(x) = E||W||^2``.
    score_sq_reward : ndarray (P,)
        ``B(x) = E||W Z||^2``.
    score_sq_centred : ndarray (P,)
        ``A(x) = E||W (Z - V)||^2``.
    grad_sq : ndarray (P,)
        ``||g(x)||^2``.
    score_mean_norm : ndarray (P,)
        ``||E W||``: zero by the score identity, up to rounding.
    prob_total : ndarray (P,)
        ``sum_y pi(y | x)``: one up to rounding.
    gram : ndarray (P, P)
        ``<g(x_i), g(x_j)>``, for the prompt-heterogeneity constant and its bootstrap.
    mean_grad : ndarray (d,)
        ``g = mean_x g(x)``.
    """

    value: np.ndarray
    reward_var: np.ndarray
    score_sq: np.ndarray
    score_sq_reward: np.ndarray
    score_sq_centred: np.ndarray
    grad_sq: np.ndarray
    score_mean_norm: np.ndarray
    prob_total: np.ndarray
    gram: np.ndarray
    mean_grad: np.ndarray

    @property
    def n_prompts(self) -> int:
        return int(self.value.shape[0])


def exact_moments(policy: TransformerPolicy, questions, chunk_size: int = 128,
                  progress: bool = False) -> PromptMoments:
    """Per-prompt moments by enumerating every output of a constrained policy (C5, C11).

    Cost: ``len(questions) * M`` per-sample scores (``M = 111`` for two-digit answers), and a
    ``(P, d)`` float32 store of the per-prompt gradients while the Gram matrix is formed.
    """
    if not isinstance(policy, TransformerPolicy):
        raise TypeError(f"`policy` must be a TransformerPolicy, got {type(policy).__name__}")
    questions = list(questions)
    if not questions:
        raise ValueError("`questions` must not be empty")
    outputs = policy.enumerate_outputs()  # (M, A)
    n_out = outputs.shape[0]
    prompts = policy.encode_prompts(questions)  # (P, Pw)
    fields = {k: np.empty(len(questions)) for k in
              ("value", "score_sq", "score_sq_reward", "score_sq_centred", "grad_sq",
               "score_mean_norm", "prob_total")}
    grads = torch.empty(len(questions), policy.dim, dtype=torch.float32)  # (P, d)
    for i in tqdm(range(len(questions)), desc="enumerating outputs", disable=not progress,
                  leave=False):
        block = prompts[i:i + 1].expand(n_out, -1)
        with torch.no_grad():
            prob = policy.log_prob(block, outputs).exp().double()  # (M,)
        reward = torch.as_tensor(policy.rewards([questions[i]] * n_out, outputs),
                                 dtype=torch.float64, device=prob.device)  # (M,)
        sq, sums = policy.score_moments(block, outputs, torch.stack([prob, prob * reward]),
                                        chunk_size)  # (M,), (2, d): E W and g(x)
        value = float(prob @ reward)
        grad_x = sums[1]  # (d,) g(x) = sum_y pi Z W
        fields["value"][i] = value
        fields["score_sq"][i] = float(prob @ sq)
        fields["score_sq_reward"][i] = float(prob @ (sq * reward**2))
        fields["score_sq_centred"][i] = float(prob @ (sq * (reward - value) ** 2))
        fields["grad_sq"][i] = float(grad_x @ grad_x)
        fields["score_mean_norm"][i] = float(torch.linalg.vector_norm(sums[0]))
        fields["prob_total"][i] = float(prob.sum())
        grads[i] = grad_x.float().cpu()
    gram = torch.zeros(len(questions), len(questions), dtype=torch.float64)  # (P, P)
    for col in range(0, policy.dim, 8192):  # column blocks keep the float64 copy small
        part = grads[:, col:col + 8192].double()
        gram += part @ part.T
    gram = gram.numpy()
    mean_grad = grads.double().mean(dim=0).numpy()
    fields["reward_var"] = fields["value"] * (1.0 - fields["value"])
    return PromptMoments(gram=gram, mean_grad=mean_grad, **fields)


def exact_mse(moments: PromptMoments, estimator: str, group_sizes,
              per_prompt: bool = False) -> np.ndarray:
    """Exact MSE of ``estimator`` in ``{"vanilla", "grpo", "oracle", "fullmean"}`` (Theorem 2, C5).

    Returns the prompt average ``(n_G,)``, or ``(P, n_G)`` with ``per_prompt=True``. The MSE is
    per prompt, against ``g(x)``: the prompt-variance term of a minibatch is excluded.
    """
    minimum = 2 if estimator in ("grpo", "fullmean") else 1
    sizes = as_group_sizes(group_sizes, "group_sizes", minimum).astype(float)[None, :]  # (1, n_G)
    m = moments
    gsq = m.grad_sq[:, None]
    oracle = (m.score_sq_centred[:, None] - gsq) / sizes  # (P, n_G)
    if estimator == "oracle":
        out = oracle
    elif estimator == "vanilla":
        out = (m.score_sq_reward[:, None] - gsq) / sizes
    elif estimator in ("grpo", "fullmean"):
        extra = (m.score_sq[:, None] * m.reward_var[:, None] + gsq) / (sizes * (sizes - 1))
        out = oracle + extra
        if estimator == "fullmean":  # c g_grpo with c = (G-1)/G: c^2 Var + (1-c)^2 ||g||^2
            shrink = (sizes - 1) / sizes
            out = shrink**2 * out + (1 - shrink) ** 2 * gsq
    else:
        raise ValueError(f"`estimator` must be one of vanilla, grpo, oracle, fullmean; got {estimator!r}")
    return out if per_prompt else out.mean(axis=0)


def _constants(m: PromptMoments, weight: np.ndarray) -> tuple[float, float, float]:
    # weight (P,) sums to 1: prompt frequencies (uniform, or bootstrap counts / P)
    mean_sq = float(weight @ m.grad_sq)
    c1 = mean_sq - float(weight @ m.gram @ weight)  # E||g(X)||^2 - ||E g(X)||^2
    c2 = float(weight @ (m.score_sq_centred - m.grad_sq))
    c3 = float(weight @ (m.score_sq * m.reward_var + m.grad_sq))
    return max(c1, 0.0), c2, c3


def scaling_constants(moments: PromptMoments) -> ScalingConstants:
    """``c1 = E||g(X) - g||^2``, ``c2 = E tr Sigma_oracle``, ``c3' = E[S Var(Z|X) + ||g(X)||^2]`` (C17)."""
    weight = np.full(moments.n_prompts, 1.0 / moments.n_prompts)
    return ScalingConstants(*_constants(moments, weight))


def optimal_group_size(constants: ScalingConstants) -> float:
    """``G* = 1 + sqrt(c3'/c1)``, minimiser of ``(c1 G + c2 + c3'/(G-1))/N`` (C17)."""
    if constants.c1 <= 0:
        return math.inf
    return 1.0 + math.sqrt(constants.c3 / constants.c1)


@dataclass(frozen=True)
class ConstantsInterval:
    """Scaling constants, ``G*`` and percentile bootstrap intervals over prompts (C17).

    Attributes
    ----------
    constants : ScalingConstants
        Exact values for the prompt set.
    g_star : float
        ``1 + sqrt(c3'/c1)``.
    low, high : dict
        Interval ends for the keys ``"c1"``, ``"c2"``, ``"c3"``, ``"g_star"``.
    level : float
    n_boot : int
    """

    constants: ScalingConstants
    g_star: float
    low: dict
    high: dict
    level: float
    n_boot: int


def bootstrap_constants(moments: PromptMoments, rng, n_boot: int = 2000,
                        level: float = 0.95) -> ConstantsInterval:
    """Exact constants with a percentile bootstrap over prompts (resampling the prompt set)."""
    rng = as_rng(rng)
    n_boot = as_int(n_boot, "n_boot", 10)
    n = moments.n_prompts
    draws = np.empty((n_boot, 4))
    for b in range(n_boot):
        weight = np.bincount(rng.integers(0, n, size=n), minlength=n) / n
        c = ScalingConstants(*_constants(moments, weight))
        draws[b] = (c.c1, c.c2, c.c3, optimal_group_size(c))
    tail = (1.0 - level) / 2.0
    lo = np.quantile(draws, tail, axis=0, method="inverted_cdf")  # no inf - inf interpolation
    hi = np.quantile(draws, 1.0 - tail, axis=0, method="inverted_cdf")
    keys = ("c1", "c2", "c3", "g_star")
    constants = scaling_constants(moments)
    return ConstantsInterval(constants, optimal_group_size(constants), dict(zip(keys, lo)),
                             dict(zip(keys, hi)), level, n_boot)


def fixed_budget_mse(constants: ScalingConstants, group_sizes, budget: int) -> np.ndarray:
    """Minibatch GRPO MSE at ``N = B G``: ``(c1 G + c2 + c3'/(G-1))/N`` (Proposition 3, C17)."""
    sizes = as_group_sizes(group_sizes, "group_sizes", 2).astype(float)
    budget = as_int(budget, "budget", 2)
    c = constants
    return (c.c1 * sizes + c.c2 + c.c3 / (sizes - 1)) / budget


def value_gradients(policy: TransformerPolicy, questions, chunk_size: int = 128) -> torch.Tensor:
    """``g(x) = grad V(x) = pi(y*|x) W(y*)`` for each question, ``(P, d)`` (direct route)."""
    prompts = policy.encode_prompts(questions)
    answers = policy.answer_tokens(questions)
    with torch.no_grad():
        prob = policy.log_prob(prompts, answers).exp()  # (P,)
    return prob[:, None] * policy.scores(prompts, answers, chunk_size)


def _estimator_weights(reward: np.ndarray, sizes: np.ndarray, value: float) -> np.ndarray:
    """Coefficients ``c`` with ``g_hat = c @ W`` for every (estimator, G), nested groups.

    The estimators are linear in the scores, so evaluating them at ``W = I_G`` returns exactly
    their per-sample weights; the formulas stay in :mod:`ustat_rl.estimators`.
    """
    g_max = reward.shape[0]
    rows = []
    for est in _MC_ESTIMATORS:
        for g in sizes:
            eye, z = np.eye(g), reward[:g]
            if est == "vanilla":
                c = vanilla_gradient(eye, z)
            elif est == "grpo":
                c = grpo_gradient(eye, z)
            else:
                c = oracle_gradient(eye, z, value)
            rows.append(np.concatenate([c, np.zeros(g_max - g)]))
    return np.array(rows)  # (n_estimators * n_G, G_max)


def mc_squared_errors(policy: TransformerPolicy, questions, group_sizes, n_reps: int,
                      generator: torch.Generator, chunk_size: int = 128,
                      progress: bool = False) -> MonteCarloEstimate:
    """Monte Carlo prompt-averaged MSE of vanilla, GRPO and oracle by sampling (C5, C11).

    Every prompt gets ``n_reps`` independent draws of ``max(group_sizes)`` answers; the groups of
    smaller sizes are their first ``G`` answers. The result estimates
    ``(1/P) sum_x E||g_hat(x) - g(x)||^2`` with labels ``(estimator, G)``, and under the label
    ``("grpo-oracle", G)`` the mean of ``||g_grpo - g_oracle||^2``, the degenerate Hoeffding part,
    whose expectation is ``MSE_grpo - MSE_oracle`` exactly (C4) and which is positive in every
    replicate (so it can be fitted on a log scale). The covariance is the
    stratified one, ``(1/P^2) sum_x Cov_x / n_reps``, so prompts are fixed, not sampled.
    """
    sizes = as_group_sizes(group_sizes, "group_sizes", 2)
    n_reps = as_int(n_reps, "n_reps", 2)
    questions = list(questions)
    g_max = int(sizes[-1])
    values = question_values(policy, questions)  # (P,) exact V(x)
    labels = tuple((e, int(g)) for e in _MC_ESTIMATORS + ("grpo-oracle",) for g in sizes)
    per_prompt_mean = np.empty((len(questions), len(labels)))
    per_prompt_cov = np.zeros((len(labels), len(labels)))
    for i in tqdm(range(len(questions)), desc="Monte Carlo prompts", disable=not progress,
                  leave=False):
        grad_x = value_gradients(policy, questions[i:i + 1], chunk_size)[0].double()  # (d,)
        prompt = policy.encode_prompts(questions[i:i + 1]).expand(g_max, -1)
        errors = np.empty((n_reps, len(labels)))
        for r in range(n_reps):
            answers = policy.sample(prompt, generator)
            reward = policy.rewards([questions[i]] * g_max, answers)  # (G_max,)
            coef = torch.as_tensor(_estimator_weights(reward, sizes, values[i]))  # (labels, G_max)
            _, g_hat = policy.score_moments(prompt, answers, coef, chunk_size)  # (labels, d)
            diff = g_hat - grad_x  # (labels, d)
            n_g = len(sizes)
            # degenerate Hoeffding part g_grpo - g_oracle: E||.||^2 = MSE_grpo - MSE_oracle (C4)
            degenerate = g_hat[n_g:2 * n_g] - g_hat[2 * n_g:]
            errors[r] = torch.cat([(diff * diff).sum(dim=1),
                                   (degenerate * degenerate).sum(dim=1)]).cpu().numpy()
        per_prompt_mean[i] = errors.mean(axis=0)
        per_prompt_cov += np.cov(errors, rowvar=False) / n_reps
    n_prompts = len(questions)
    cov = per_prompt_cov / n_prompts**2
    return MonteCarloEstimate(per_prompt_mean.mean(axis=0), np.sqrt(np.diag(cov)), cov,
                              n_reps * n_prompts, labels)
