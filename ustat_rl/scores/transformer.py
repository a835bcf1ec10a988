"""Pilot rollouts from a constrained transformer policy, exactly and cheaply (docs/theory.md C31).

A constrained transformer policy (:class:`ustat_rl.policies.transformer.TransformerPolicy`) has a
finite answer set (``A = 111`` for two digits), so on a finite question population every answer
of every question can be listed once, with its probability, reward and score. A pilot is then a
draw of answer indices, and its score rows are looked up instead of recomputed.

The scores have ``d = 103,508`` entries, too many to keep for every pilot. Every estimator of
:mod:`ustat_rl.pilot.estimate` depends on the score rows only through their inner products
(each kernel is quadratic in ``W``, docs/theory.md section 7), so the rows are stored in
*isometric coordinates*: with ``S`` the ``(N, d)`` matrix of all ``N = M A`` answer scores and
``S S^T = U diag(lam) U^T``, the rows of ``E = U diag(sqrt(lam))`` (``N x r``, ``r <= N``) have
the same Gram matrix as the scores, ``E E^T = S S^T``. Hence:

* a pilot with full scores gives, on the rows of ``E``, the same estimates as on the rows of
  ``S`` (up to rounding);
* a Gaussian projection stays exact in distribution. Write ``S = E Q^T`` with ``Q`` a ``(d, r)``
  matrix of orthonormal columns (the thin SVD). For ``R`` with i.i.d. ``N(0, 1/k)`` entries,
  ``R Q`` is ``(k, r)`` with i.i.d. ``N(0, 1/k)`` entries (rotation invariance), so
  ``S R^T = E (R Q)^T`` has the law of ``E Omega`` for ``Omega`` drawn directly as ``(r, k)``
  i.i.d. ``N(0, 1/k)``, and the projection is shared by all rows of a pilot as it should be.
  Rademacher projections have no such invariance and are not offered here.

The question population is finite with uniform weights ``f = 1/M``; a pilot draws its prompts
i.i.d. from it, *with replacement*, and each draw is its own group. Two draws of one question
have independent answers, so ``E <g_hat_a, g_hat_b> = ||sum_x f(x) g(x)||^2`` and the pilot's
``c1`` is unbiased for the population variance of ``g(X)`` with divisor ``M``: the ``c1`` of
:func:`ustat_rl.policies.transformer.exact_moments` on the same questions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .._validation import as_int, as_rng
from ..pilot.rollouts import Rollouts
from ..policies.transformer import TransformerPolicy
from .spec import SketchSpec, as_spec

__all__ = ["AnswerPopulation", "answer_population", "population_pilot"]

#: Parameter columns per block when the Gram matrix of all answer scores is formed.
_GRAM_COLUMNS = 8192


@dataclass(frozen=True)
class AnswerPopulation:
    """Every answer of every question of a finite population, in isometric score coordinates.

    Attributes
    ----------
    prob : ndarray (M, A)
        ``pi(y | x)`` for each question ``x`` and answer ``y``, normalised to sum to one per
        question (the enumeration sums to one up to float32 rounding, about ``1e-7``).
    reward : ndarray (M, A)
        ``Z(x, y)`` (binary for the arithmetic task).
    embedding : ndarray (M, A, r)
        Rows whose inner products are those of the scores ``W(y | x)`` (module notes).
    param_dim : int
        ``d``, the length of a score.
    model_name : str
        Provenance, copied into the pilot's :class:`Rollouts`.
    """

    prob: np.ndarray
    reward: np.ndarray
    embedding: np.ndarray
    param_dim: int
    model_name: str

    @property
    def n_questions(self) -> int:
        """``M``."""
        return int(self.prob.shape[0])

    @property
    def rank(self) -> int:
        """``r``, the columns of :attr:`embedding`."""
        return int(self.embedding.shape[2])


def answer_population(policy, questions, model_name: str = "transformer",
                      chunk_size: int = 128) -> AnswerPopulation:
    """List every answer of ``questions`` under ``policy``, scores in isometric coordinates.

    Parameters
    ----------
    policy : TransformerPolicy
        Constrained decoding (its outputs can be listed).
    questions : sequence of Question
        The population, ``M`` questions with uniform weights.
    model_name : str
        Provenance for the pilots' :class:`Rollouts`.
    chunk_size : int
        Sequences per ``vmap`` call of the per-sample scores.

    Returns
    -------
    AnswerPopulation

    Notes
    -----
    Cost: ``M A`` per-sample scores held as float32 (``4 M A d`` bytes, 46 MB per question for
    the study policies), a Gram matrix ``(M A)^2 d`` multiply-adds (float32 products over blocks
    of :data:`_GRAM_COLUMNS` parameters, accumulated in float64) and one symmetric
    eigendecomposition of size ``M A``. Eigenvalues below ``M A * eps * lam_max`` are rounding
    noise in the null space and are dropped.
    """
    if not isinstance(policy, TransformerPolicy):
        raise TypeError(f"`policy` must be a TransformerPolicy, got {type(policy).__name__}")
    questions = list(questions)
    if not questions:
        raise ValueError("`questions` must not be empty")
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    outputs = policy.enumerate_outputs()  # (A, T)
    n_answers = outputs.shape[0]
    prob, reward, scores = [], [], []
    for q in questions:
        block = policy.encode_prompts([q]).expand(n_answers, -1)  # (A, Pw)
        with torch.no_grad():
            p = policy.log_prob(block, outputs).exp().double().cpu().numpy()  # (A,)
        prob.append(p / p.sum())
        reward.append(np.asarray(policy.rewards([q] * n_answers, outputs), dtype=np.float64))
        scores.append(policy.scores(block, outputs, chunk_size).detach().float().cpu())
    S = torch.cat(scores)  # (N, d), N = M A
    gram = torch.zeros(S.shape[0], S.shape[0], dtype=torch.float64)  # (N, N)
    for col in range(0, S.shape[1], _GRAM_COLUMNS):
        part = S[:, col:col + _GRAM_COLUMNS]
        gram += (part @ part.T).double()
    del S, scores
    gram = 0.5 * (gram + gram.T)
    lam, U = np.linalg.eigh(gram.numpy())
    keep = lam > lam.size * np.finfo(np.float64).eps * lam.max()
    E = U[:, keep] * np.sqrt(lam[keep])  # (N, r), E E^T = Gram
    M = len(questions)
    return AnswerPopulation(prob=np.stack(prob), reward=np.stack(reward),
                            embedding=E.reshape(M, n_answers, -1), param_dim=int(policy.dim),
                            model_name=str(model_name))


def population_pilot(population: AnswerPopulation, n_prompts, group_size, rng,
                     sketch: SketchSpec | None = None) -> Rollouts:
    """Draw a pilot: ``n_prompts`` i.i.d. questions, ``group_size`` answers each (C31, C32).

    Parameters
    ----------
    population : AnswerPopulation
    n_prompts : int
        Prompt draws, uniform on the population with replacement; each draw is its own group.
    group_size : int
        Answers per draw, i.i.d. from ``pi(. | x)``, ``>= 3``.
    rng : numpy.random.Generator or seed
    sketch : SketchSpec, optional
        A Gaussian projection to ``sketch.dimension`` columns with ``E[R^T R] = I``, drawn from
        the spec's seed (``rng`` draws the samples only), exact in distribution (module notes);
        only ``kind="gaussian"`` is, so another kind is refused. ``None`` keeps the full scores
        (in isometric coordinates).

    Returns
    -------
    Rollouts

    Examples
    --------
    >>> pop = AnswerPopulation(prob=np.array([[0.5, 0.5], [0.25, 0.75]]),
    ...                        reward=np.array([[1.0, 0.0], [0.0, 1.0]]),
    ...                        embedding=np.eye(4).reshape(2, 2, 4), param_dim=4, model_name="toy")
    >>> r = population_pilot(pop, 3, 4, rng=0, sketch=SketchSpec(2, seed=5))
    >>> r.score.shape, r.sketch_kind
    ((12, 2), 'gaussian')
    """
    if not isinstance(population, AnswerPopulation):
        raise TypeError(f"`population` must be an AnswerPopulation, got "
                        f"{type(population).__name__}")
    spec = None if sketch is None else as_spec(sketch, "sketch")
    if spec is not None and spec.kind != "gaussian":
        raise ValueError(f"`sketch` must be of kind 'gaussian' (only a Gaussian projection of the "
                         f"isometric coordinates has the law of R W), got {spec.kind!r}")
    n_prompts = as_int(n_prompts, "n_prompts", 2)
    group_size = as_int(group_size, "group_size", 3, "(order-3 kernels)")
    rng = as_rng(rng)
    question = rng.integers(0, population.n_questions, size=n_prompts)  # (P,)
    cum = np.cumsum(population.prob[question], axis=1)  # (P, A)
    u = rng.random((n_prompts, group_size))  # (P, n)
    answer = np.minimum((u[:, :, None] >= cum[:, None, :]).sum(axis=2),
                        population.prob.shape[1] - 1)  # (P, n) inverse-CDF draw
    reward = population.reward[question[:, None], answer].ravel()  # (P n,)
    rows = population.embedding[question[:, None], answer].reshape(reward.size, -1)  # (P n, r)
    meta = dict(sketch_kind="none", model_name=population.model_name)
    if spec is not None:
        k = spec.dimension
        omega = (np.random.default_rng(spec.seed).standard_normal((population.rank, k))
                 / math.sqrt(k))  # (r, k)
        rows = rows @ omega  # (P n, k), the law of R W for Gaussian R
        meta.update(sketch_kind="gaussian", sketch_seed=spec.seed, param_dim=population.param_dim)
    return Rollouts(prompt_id=np.arange(n_prompts).repeat(group_size), reward=reward,
                    score=rows, **meta)
