"""Exact moments of a constrained transformer policy by enumeration (docs/theory.md C5, C11, C17).

A constrained policy has a finite output space (111 answers for two digits), so for every prompt
``x`` the moments of the contract :class:`~ustat_rl.theory.PromptMoments` are finite sums over
the outputs ``y``:

    V(x) = sum_y pi(y|x) Z(y),     g(x) = sum_y pi(y|x) Z(y) W(y),     E||W||^2 = sum_y pi ||W||^2,

and likewise ``E[||W||^2 Z]``, ``E||W Z||^2`` and ``E||W (Z - V)||^2``; the reward is binary
(:func:`~.task.verify_answer`), so ``Var(Z|x) = V(x)(1 - V(x))``. The prompt weights ``f`` are
uniform on the given prompt set. Every MSE, scaling constant and ``G*`` then comes from
:mod:`ustat_rl.theory` (Theorem 2, Proposition 3, Theorem 7), with no Monte Carlo error and no
reference gradient to correct for: ``g(x)`` is exact. :func:`value_gradients` computes ``g(x)``
by a second route, ``g(x) = grad pi(y*|x)`` for the one rewarded answer ``y*``.

:func:`bootstrap_constants` resamples the prompt set, i.e. treats it as a draw from the task's
prompt distribution, and evaluates :func:`ustat_rl.theory.scaling_constants` at the resampled
prompt weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from ..._validation import as_int, as_rng
from ...stats.intervals import percentile_interval
from ...theory import PromptMoments, ScalingConstants, scaling_constants
from .model import TransformerPolicy
from .task import PAD

__all__ = [
    "Enumeration",
    "enumerate_moments",
    "exact_moments",
    "value_gradients",
    "AnswerTable",
    "answer_table",
    "ConstantsInterval",
    "bootstrap_constants",
]

#: Parameter columns per block when the Gram matrix is formed (bounds a float64 temporary).
_GRAM_COLUMNS = 8192


@dataclass(frozen=True)
class Enumeration:
    """Exact moments of a policy over a prompt set, with the by-products of the enumeration.

    Attributes
    ----------
    moments : PromptMoments
        The contract of :mod:`ustat_rl.theory`, ``kind="exact"``, ``f`` uniform on the prompts.
    score_mean_norm : ndarray (P,)
        ``||E[W | x]||``: zero by the score identity (docs/theory.md section 1), up to rounding.
    prob_total : ndarray (P,)
        ``sum_y pi(y | x)``: one up to rounding, i.e. the enumeration covers every output.
    mean_grad : ndarray (d,)
        ``g = sum_x f(x) g(x)``, the full gradient over the prompt set.
    """

    moments: PromptMoments
    score_mean_norm: np.ndarray
    prob_total: np.ndarray
    mean_grad: np.ndarray


def _check_inputs(policy, questions) -> list:
    if not isinstance(policy, TransformerPolicy):
        raise TypeError(f"`policy` must be a TransformerPolicy, got {type(policy).__name__}")
    questions = list(questions)
    if not questions:
        raise ValueError("`questions` must not be empty")
    return questions


def enumerate_moments(policy: TransformerPolicy, questions, chunk_size: int = 128,
                      progress: bool = False) -> Enumeration:
    """Per-prompt moments by enumerating every output of a constrained policy (C5, C11, C17).

    Parameters
    ----------
    policy : TransformerPolicy
        Constrained decoding (its outputs can be listed).
    questions : sequence of Question
        The prompt set; ``f`` is uniform on it.
    chunk_size : int
        Sequences per ``vmap`` call of the per-sample scores.
    progress : bool
        Show a progress bar over prompts.

    Returns
    -------
    Enumeration

    Notes
    -----
    Cost: ``P * M`` per-sample scores (``M = 111`` for two-digit answers), and a ``(P, d)``
    float64 store of the per-prompt gradients ``g(x)`` while the Gram matrix
    ``<g(x_i), g(x_j)>`` is formed (400 MB for 500 prompts of the 103,508-parameter study
    policies). Sums over outputs are in float64.
    """
    questions = _check_inputs(policy, questions)
    n_prompts = len(questions)
    outputs = policy.enumerate_outputs()  # (M, A)
    n_out = outputs.shape[0]
    prompts = policy.encode_prompts(questions)  # (P, Pw)
    names = ("value", "reward_var", "score_sq", "score_sq_reward", "score_sq_reward_sq",
             "score_sq_centred", "grad_sq", "score_mean_norm", "prob_total")
    out = {name: np.empty(n_prompts) for name in names}
    grads = torch.empty(n_prompts, policy.dim, dtype=torch.float64)  # (P, d) g(x)
    for i in tqdm(range(n_prompts), desc="enumerating outputs", disable=not progress,
                  leave=False):
        block = prompts[i:i + 1].expand(n_out, -1)  # (M, Pw)
        with torch.no_grad():
            prob = policy.log_prob(block, outputs).exp().double()  # (M,)
        reward = torch.as_tensor(policy.rewards([questions[i]] * n_out, outputs),
                                 dtype=torch.float64, device=prob.device)  # (M,)
        sq, sums = policy.score_moments(block, outputs, torch.stack([prob, prob * reward]),
                                        chunk_size)  # (M,), (2, d): E W and g(x)
        value = float(prob @ reward)
        grad_x = sums[1]  # (d,) g(x) = sum_y pi Z W
        out["value"][i] = value
        out["reward_var"][i] = value * (1.0 - value)  # the reward is binary (verify_answer)
        out["score_sq"][i] = float(prob @ sq)
        out["score_sq_reward"][i] = float(prob @ (sq * reward))
        out["score_sq_reward_sq"][i] = float(prob @ (sq * reward**2))
        out["score_sq_centred"][i] = float(prob @ (sq * (reward - value) ** 2))
        out["grad_sq"][i] = float(grad_x @ grad_x)
        out["score_mean_norm"][i] = float(torch.linalg.vector_norm(sums[0]))
        out["prob_total"][i] = float(prob.sum())
        grads[i] = grad_x.cpu()
    gram = torch.zeros(n_prompts, n_prompts, dtype=torch.float64)  # (P, P)
    for col in range(0, policy.dim, _GRAM_COLUMNS):
        part = grads[:, col:col + _GRAM_COLUMNS]  # (P, columns)
        gram += part @ part.T
    gram = gram.numpy()
    # the diagonal is ||g(x)||^2 summed in a different order: take the direct value
    np.fill_diagonal(gram, out["grad_sq"])
    prompt_prob = np.full(n_prompts, 1.0 / n_prompts)
    moments = PromptMoments(
        prompt_prob=prompt_prob, grad_gram=gram, kind="exact",
        **{name: out[name] for name in names[:7]})
    return Enumeration(moments, out["score_mean_norm"], out["prob_total"],
                       (torch.as_tensor(prompt_prob) @ grads).numpy())


def exact_moments(policy: TransformerPolicy, questions, chunk_size: int = 128,
                  progress: bool = False) -> PromptMoments:
    """The exact :class:`~ustat_rl.theory.PromptMoments` of ``policy`` on ``questions`` (C5).

    :func:`enumerate_moments` without its diagnostics; ``f`` is uniform on ``questions``.
    """
    return enumerate_moments(policy, questions, chunk_size, progress).moments


def value_gradients(policy: TransformerPolicy, questions, chunk_size: int = 128) -> torch.Tensor:
    """``g(x) = grad V(x) = pi(y*|x) W(y*)`` for each question, ``(P, d)`` (direct route, C5).

    With a binary reward that is 1 only at the canonical answer ``y*``,
    ``g(x) = E[W Z | x] = pi(y*|x) W(y*)``: one score per prompt instead of ``M``.
    """
    questions = _check_inputs(policy, questions)
    prompts = policy.encode_prompts(questions)  # (P, Pw)
    answers = policy.answer_tokens(questions)  # (P, A)
    with torch.no_grad():
        prob = policy.log_prob(prompts, answers).exp()  # (P,)
    return prob[:, None] * policy.scores(prompts, answers, chunk_size)


@dataclass(frozen=True)
class AnswerTable:
    """Every output of a constrained policy at one prompt, with its probability and score.

    Attributes
    ----------
    prob : ndarray (M,)
        ``pi(y | x)`` (float64; sums to one).
    reward : ndarray (M,)
        ``Z(y)`` in ``{0, 1}``.
    lengths : ndarray (M,)
        Response length in tokens, end token included (1 to ``max_answer_len + 1``).
    scores : ndarray (M, d)
        ``W(y) = grad log pi(y | x)``, summed over the response's tokens.
    """

    prob: np.ndarray
    reward: np.ndarray
    lengths: np.ndarray
    scores: np.ndarray


def answer_table(policy: TransformerPolicy, question, chunk_size: int = 128) -> AnswerTable:
    """Probabilities, rewards, lengths and scores of all ``M`` outputs at one prompt (C5).

    Computed once per prompt, it turns a Monte Carlo over groups into draws of answer indices
    from ``prob`` (exact sampling, no model call per replicate), and any estimator that is
    linear in the scores into sums over the ``M`` rows (docs/theory.md section 7).
    """
    questions = _check_inputs(policy, [question])
    outputs = policy.enumerate_outputs()  # (M, A)
    block = policy.encode_prompts(questions).expand(outputs.shape[0], -1)  # (M, Pw)
    with torch.no_grad():
        prob = policy.log_prob(block, outputs).exp().double().cpu().numpy()
    reward = np.asarray(policy.rewards(questions * outputs.shape[0], outputs), dtype=np.float64)
    lengths = (outputs != PAD).sum(dim=1).cpu().numpy()  # digits + end token
    scores = policy.scores(block, outputs, chunk_size).double().cpu().numpy()
    return AnswerTable(prob, reward, lengths, scores)


@dataclass(frozen=True)
class ConstantsInterval:
    """Scaling constants, ``G*`` and percentile bootstrap intervals over prompts (C17).

    Attributes
    ----------
    constants : ScalingConstants
        Exact values for the prompt set.
    g_star : float
        ``1 + sqrt(c3'/c1)`` (``inf`` when ``c1 = 0``).
    low, high : dict
        Interval ends for the keys ``"c1"``, ``"c2"``, ``"c3"``, ``"g_star"``.
    level : float
        Coverage of the percentile interval.
    n_boot : int
        Bootstrap resamples.
    """

    constants: ScalingConstants
    g_star: float
    low: dict
    high: dict
    level: float
    n_boot: int


def bootstrap_constants(moments: PromptMoments, rng, n_boot: int = 2000,
                        level: float = 0.95) -> ConstantsInterval:
    """Exact scaling constants with a percentile bootstrap over prompts (Theorem 7, C17).

    Each resample draws ``P`` prompts with replacement; its constants are
    :func:`ustat_rl.theory.scaling_constants` at the prompt weights ``counts / P`` (the constants
    of ``moments.reweight(counts / P)``), so no formula is restated here.

    Parameters
    ----------
    moments : PromptMoments
        Exact moments of a prompt set (any weights; the resamples are uniform draws).
    rng : numpy.random.Generator or int
    n_boot : int
        Resamples (at least 10).
    level : float
        Coverage of the two-sided percentile interval.
    """
    if not isinstance(moments, PromptMoments):
        raise TypeError(f"`moments` must be a PromptMoments, got {type(moments).__name__}")
    rng = as_rng(rng)
    n_boot = as_int(n_boot, "n_boot", 10)
    n = moments.n_prompts
    draws = np.empty((n_boot, 4))  # (n_boot, [c1, c2, c3, G*])
    for b in range(n_boot):
        weight = np.bincount(rng.integers(0, n, size=n), minlength=n) / n  # (P,)
        c = scaling_constants(moments, prompt_prob=weight)  # = moments.reweight(weight)
        draws[b] = (c.c1, c.c2, c.c3, c.optimal_group_size())
    lo, hi = percentile_interval(draws, level)  # no inf - inf interpolation
    keys = ("c1", "c2", "c3", "g_star")
    constants = scaling_constants(moments)
    return ConstantsInterval(constants, constants.optimal_group_size(), dict(zip(keys, lo)),
                             dict(zip(keys, hi)), level, n_boot)
