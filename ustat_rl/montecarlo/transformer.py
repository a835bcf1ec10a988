"""Monte Carlo of the group estimators' squared errors on a transformer policy (docs/theory.md C5, C11).

The route independent of :mod:`.moments`: answers are drawn autoregressively with a
``torch.Generator``, scores come from ``vmap`` per-sample gradients, the estimators of
:mod:`ustat_rl.advantages.gradients` are formed and ``||g_hat(x) - g(x)||^2`` is recorded, with ``g(x)``
computed directly as ``grad pi(y*|x)`` (:func:`.moments.value_gradients`). Groups of every size
are nested in one draw of ``max(G)`` answers (common random numbers).

Replicates run through the shared engine :func:`ustat_rl.montecarlo.run_monte_carlo`: block
``j`` of prompt ``x`` gets the numpy seed ``child_seed(seed, x, j)``, from which the
statistic seeds its ``torch.Generator`` with :func:`ustat_rl.seeding.child_int`. Blocks run
one after another: ``torch.func.functional_call`` swaps the module's parameters while it runs, so
one policy must not be scored from two threads at once.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import as_group_sizes, as_int
from ..advantages.gradients import grpo_gradient, oracle_gradient, vanilla_gradient
from ..policies.transformer.model import TransformerPolicy
from ..policies.transformer.moments import value_gradients
from ..seeding import child_int, child_seed
from ..training.transformer import question_values
from .engine import MonteCarloEstimate, run_monte_carlo, stratified_estimate

__all__ = ["MC_ESTIMATORS", "DEGENERATE", "squared_error_statistic", "mc_squared_errors"]

#: Estimators sampled, labelled ``(estimator, G)`` like the bandit statistics.
MC_ESTIMATORS = ("vanilla", "grpo", "oracle")
#: Label of ``||g_grpo - g_oracle||^2``, the degenerate Hoeffding part (C4): ``(DEGENERATE, G)``.
DEGENERATE = "grpo-oracle"


def _estimator_weights(reward: np.ndarray, sizes: np.ndarray, value: float) -> np.ndarray:
    """Coefficients ``c`` with ``g_hat = c @ W`` for every (estimator, G), nested groups.

    The estimators are linear in the scores, so evaluating them at ``W = I_G`` returns exactly
    their per-sample weights; the formulas stay in :mod:`ustat_rl.advantages.gradients`.
    """
    g_max = reward.shape[0]
    rows = []
    for est in MC_ESTIMATORS:
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


def squared_error_statistic(policy: TransformerPolicy, question, group_sizes, *,
                            value: float | None = None, grad: torch.Tensor | None = None,
                            chunk_size: int = 128):
    """Per-replicate squared errors at one prompt, as a statistic for :func:`run_monte_carlo`.

    Parameters
    ----------
    policy : TransformerPolicy
    question : Question
        The prompt ``x``.
    group_sizes : sequence of int
        Sizes ``G >= 2``, nested in one draw of ``max(G)`` answers per replicate.
    value, grad : optional
        ``V(x)`` and ``g(x)`` ``(d,)`` if already known (computed exactly otherwise).
    chunk_size : int
        Sequences per ``vmap`` call; the scores of ``max(1, chunk_size // max(G))`` replicates
        (``(k, max(G), d)``) are held at once.

    Returns
    -------
    statistic : callable
        ``statistic(rng, n) -> ndarray (n, 4 n_G)``: columns ``||g_hat - g(x)||^2`` for each
        ``(estimator, G)``, estimator-major, then ``||g_grpo - g_oracle||^2`` for each ``G``.
        The block's ``rng`` only supplies the seed of a ``torch.Generator`` on the policy's
        device (``child_int(rng.bit_generator.seed_seq, 0)``); the ``n * max(G)`` answers of a
        block are drawn in one batch.
    labels : tuple
        ``(estimator, G)`` and ``("grpo-oracle", G)`` per column.
    """
    sizes = as_group_sizes(group_sizes, "group_sizes", 2)
    chunk_size = as_int(chunk_size, "chunk_size", 1)
    g_max, n_g = int(sizes[-1]), len(sizes)
    if value is None:
        value = float(question_values(policy, [question])[0])
    if grad is None:
        grad = value_gradients(policy, [question], chunk_size)[0]
    grad = grad.to(device=policy.device, dtype=torch.float64)  # (d,)
    prompt = policy.encode_prompts([question])  # (1, Pw)
    reps_per_call = max(1, chunk_size // g_max)  # replicates whose scores are held at once
    labels = tuple((e, int(g)) for e in MC_ESTIMATORS + (DEGENERATE,) for g in sizes)

    def statistic(rng: np.random.Generator, n: int) -> np.ndarray:
        gen = torch.Generator(device=policy.device)
        gen.manual_seed(child_int(rng.bit_generator.seed_seq, 0))
        answers = policy.sample(prompt.expand(n * g_max, -1), gen)  # (n G_max, A)
        reward = policy.rewards([question] * (n * g_max), answers).reshape(n, g_max)
        out = np.empty((n, len(labels)))
        for start in range(0, n, reps_per_call):
            stop = min(start + reps_per_call, n)
            coef = torch.as_tensor(np.stack([_estimator_weights(reward[r], sizes, value)
                                             for r in range(start, stop)]),
                                   dtype=policy.dtype, device=policy.device)  # (k, 3 n_G, G_max)
            rows = slice(start * g_max, stop * g_max)
            score = policy.scores(prompt.expand(rows.stop - rows.start, -1), answers[rows],
                                  chunk_size).reshape(stop - start, g_max, -1)  # (k, G_max, d)
            g_hat = torch.bmm(coef, score).double()  # (k, 3 n_G, d) each replicate's estimates
            diff = g_hat - grad  # (k, 3 n_G, d)
            # degenerate Hoeffding part g_grpo - g_oracle: E||.||^2 = MSE_grpo - MSE_oracle (C4)
            degenerate = g_hat[:, n_g:2 * n_g] - g_hat[:, 2 * n_g:]  # (k, n_G, d)
            out[start:stop] = torch.cat([(diff * diff).sum(dim=2),
                                         (degenerate * degenerate).sum(dim=2)], dim=1).cpu().numpy()
        return out

    return statistic, labels


def mc_squared_errors(policy: TransformerPolicy, questions, group_sizes, n_reps: int, seed, *,
                      block_size: int = 16, chunk_size: int = 128,
                      progress: bool = False) -> MonteCarloEstimate:
    """Monte Carlo prompt-averaged MSE of vanilla, GRPO and oracle by sampling (C5, C11).

    Parameters
    ----------
    policy : TransformerPolicy
    questions : sequence of Question
        The fixed prompt set; ``f`` is uniform on it, as in :func:`.moments.exact_moments`.
    group_sizes : sequence of int
        Sizes ``G >= 2``; groups of smaller sizes are the first ``G`` answers of each draw.
    n_reps : int
        Replicates per prompt.
    seed : int or numpy.random.SeedSequence
        Prompt ``x`` uses ``child_seed(seed, x)`` as the root of its per-block seeds.
    block_size : int
        Replicates per block of :func:`run_monte_carlo` (the unit of seeding: results depend on
        it, and blocks run serially, see the module notes).
    chunk_size : int
        Sequences per ``vmap`` call.
    progress : bool
        Show progress bars.

    Returns
    -------
    MonteCarloEstimate
        Estimates of ``sum_x f(x) E||g_hat(x) - g(x)||^2`` labelled ``(estimator, G)``, and under
        ``("grpo-oracle", G)`` of ``sum_x f(x) E||g_grpo(x) - g_oracle(x)||^2``, whose expectation
        is ``MSE_grpo - MSE_oracle`` exactly (C4) and which is positive in every replicate (so it
        can be fitted on a log scale). ``n_reps`` is the total over prompts.

    Notes
    -----
    Stratified over the fixed prompt set: each prompt is simulated on its own and the estimates
    are combined by :func:`ustat_rl.montecarlo.stratified_estimate`, ``mean = sum_x f(x) mean_x``
    and, the prompts being independent, ``cov = sum_x f(x)^2 cov_x`` with ``cov_x`` the sample
    covariance of prompt ``x``'s replicates over ``n_reps``. Prompts are fixed, not sampled, so
    the prompt-variance term of a minibatch is not part of this MSE.
    """
    questions = list(questions)
    if not questions:
        raise ValueError("`questions` must not be empty")
    sizes = as_group_sizes(group_sizes, "group_sizes", 2)
    n_reps = as_int(n_reps, "n_reps", 2)
    values = question_values(policy, questions)  # (P,) exact V(x)
    grads = value_gradients(policy, questions, chunk_size)  # (P, d) exact g(x)
    estimates = []
    for i, question in enumerate(questions):
        statistic, labels = squared_error_statistic(policy, question, sizes,
                                                    value=float(values[i]), grad=grads[i],
                                                    chunk_size=chunk_size)
        estimates.append(run_monte_carlo(statistic, n_reps, child_seed(seed, i),
                                         block_size=block_size, progress=progress, labels=labels,
                                         desc=f"Monte Carlo prompt {i + 1}/{len(questions)}"))
    weights = np.full(len(questions), 1.0 / len(questions))
    return stratified_estimate(estimates, weights)
