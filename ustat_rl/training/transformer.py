"""Training and evaluating a :class:`~.model.TransformerPolicy`: warm-up, GRPO, exact values.

* :func:`supervised_warmup` fits the canonical answers by maximum likelihood (teacher forcing).
  Stopping it after different numbers of steps gives policies of increasing strength, the
  analogues of the paper's base, instruct and few-shot instruct models (docs/theory.md section 5).
* :func:`grpo_train` is Algorithm 1 of the paper (docs/theory.md section 2): per iteration, ``B``
  prompts drawn uniformly from the training questions, ``G`` answers each, the leave-one-out
  GRPO gradient ``g_hat = (1/B) sum_b (1/G) sum_g W_bg (Z_bg - Zbar_{-g})`` and plain SGD ascent
  ``theta <- theta + eta g_hat`` at a constant learning rate. The gradient is formed through the
  surrogate ``(1/(BG)) sum A_bg log pi(Y_bg | x_b)`` with the advantages held fixed, whose
  gradient equals ``g_hat`` exactly. No std normalisation, ratio or KL term.
* :func:`expected_accuracy` is the exact test accuracy ``J = mean_x V(x) = mean_x pi(y*(x)|x)``:
  one forward pass, no sampling noise; :func:`question_values` gives the per-question values
  ``V(x)`` and :func:`moderate_questions` the prompts of moderate success probability (Fig. 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._validation import as_float, as_int
from ..advantages.gradients import leave_one_out_baseline
from ..advantages.registry import get_rule
from ..policies.transformer.model import TransformerPolicy

__all__ = [
    "supervised_warmup",
    "expected_accuracy",
    "question_values",
    "moderate_questions",
    "grpo_step_gradient",
    "grpo_train",
    "GRPORun",
]


def _check_policy(policy) -> None:
    if not isinstance(policy, TransformerPolicy):
        raise TypeError(f"`policy` must be a TransformerPolicy, got {type(policy).__name__}")


def _check_questions(questions, name: str) -> list:
    questions = list(questions)
    if not questions:
        raise ValueError(f"`{name}` must not be empty")
    return questions


def supervised_warmup(policy: TransformerPolicy, questions, n_steps: int, generator: torch.Generator,
                      batch_size: int = 128, lr: float = 3e-3) -> np.ndarray:
    """Maximum-likelihood warm-up on canonical answers; returns the loss per step ``(n_steps,)``.

    Adam, minibatches drawn uniformly with replacement using ``generator`` (on the CPU).
    """
    _check_policy(policy)
    questions = _check_questions(questions, "questions")
    n_steps = as_int(n_steps, "n_steps", 0)
    batch_size = as_int(batch_size, "batch_size", 1)
    lr = as_float(lr, "lr", low=0.0)
    prompts = policy.encode_prompts(questions)
    targets = policy.answer_tokens(questions)
    opt = torch.optim.Adam(policy.model.parameters(), lr=lr)
    losses = np.empty(n_steps)
    for step in range(n_steps):
        idx = torch.randint(len(questions), (batch_size,), generator=generator).to(policy.device)
        loss = -policy.log_prob(prompts[idx], targets[idx]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses[step] = loss.item()
    return losses


def expected_accuracy(policy: TransformerPolicy, questions, chunk_size: int = 1024) -> float:
    """Exact expected accuracy ``mean_x pi(y*(x) | x)`` over ``questions`` (docs/theory.md section 1)."""
    return float(np.mean(question_values(policy, questions, chunk_size)))


@torch.no_grad()
def question_values(policy: TransformerPolicy, questions, chunk_size: int = 1024) -> np.ndarray:
    """Exact values ``V(x) = pi(y*(x) | x)`` ``(n,)``: the probability of the one rewarded output."""
    _check_policy(policy)
    questions = _check_questions(questions, "questions")
    out = []
    for start in range(0, len(questions), chunk_size):
        part = questions[start:start + chunk_size]
        logp = policy.log_prob(policy.encode_prompts(part), policy.answer_tokens(part))
        out.append(logp.exp().double().cpu().numpy())
    return np.concatenate(out)


def moderate_questions(policy: TransformerPolicy, questions, low: float = 0.2,
                       high: float = 0.8, limit: int | None = None) -> list:
    """The questions with ``low <= V(x) <= high`` (moderate success probability), in order.

    The regime of the paper's Fig. 4 (docs/theory.md C11); ``limit`` keeps the first ones.
    """
    values = question_values(policy, questions)
    chosen = [q for q, v in zip(questions, values) if low <= v <= high]
    return chosen if limit is None else chosen[:limit]


@dataclass(frozen=True)
class GRPORun:
    """Result of :func:`grpo_train`.

    Attributes
    ----------
    iterations : ndarray (k,)
        Iteration counts at which the test accuracy was evaluated (0 = start).
    test_accuracy : ndarray (k,)
        Exact expected test accuracy ``J`` after that many iterations.
    train_reward : ndarray (n_iter,)
        Mean sampled reward of each iteration's batch.
    group_size, batch_size : int
    """

    iterations: np.ndarray
    test_accuracy: np.ndarray
    train_reward: np.ndarray
    group_size: int
    batch_size: int


def grpo_step_gradient(policy: TransformerPolicy, prompts: torch.Tensor, answers: torch.Tensor,
                       reward: np.ndarray) -> tuple[torch.Tensor, ...]:
    """Leave-one-out GRPO gradient ``g_hat`` of one batch, per parameter (Algorithm 1, C1).

    ``prompts`` and ``answers`` have ``B*G`` rows, grouped prompt by prompt; ``reward`` is
    ``(B, G)``. The surrogate ``mean(A * log pi)`` with fixed advantages
    ``A_bg = Z_bg - Zbar_{-g}`` has gradient ``(1/B) sum_b (1/G) sum_g A_bg W_bg = g_hat``.
    """
    reward = np.asarray(reward, dtype=np.float64)
    if reward.ndim != 2 or reward.shape[1] < 2:
        raise ValueError(f"`reward` must have shape (B, G) with G >= 2, got {reward.shape}")
    if reward.size != prompts.shape[0]:
        raise ValueError(f"`reward` has {reward.size} entries for {prompts.shape[0]} sequences")
    loo = leave_one_out_baseline(reward)  # (B, G) Zbar_{-g}
    advantage = torch.as_tensor((reward - loo).reshape(-1), dtype=policy.dtype,
                                device=policy.device)  # (B*G,) held fixed
    surrogate = (advantage * policy.log_prob(prompts, answers)).mean()
    return torch.autograd.grad(surrogate, list(policy.model.parameters()))


def grpo_train(policy: TransformerPolicy, splits, group_size: int, budget: int, n_iter: int,
               lr: float, generator: torch.Generator, eval_at=None) -> GRPORun:
    """Algorithm 1 (leave-one-out GRPO, plain SGD) at a fixed budget ``N = B G`` per iteration.

    Parameters
    ----------
    policy : TransformerPolicy
        Trained in place.
    splits : ArithmeticSplits
        Its ``train`` questions are trained on, its ``test`` questions evaluated (any object
        with those two sequences of Question).
    group_size : int
        ``G >= 2`` (the leave-one-out baseline needs another sample); must divide ``budget``.
    budget : int
        ``N``; the batch size is ``B = N // G``.
    n_iter : int
        Iterations ``n``.
    lr : float
        Constant learning rate ``eta``.
    generator : torch.Generator
        On the policy's device; drives prompt choice and sampling.
    eval_at : sequence of int, optional
        Iterations after which to evaluate the exact test accuracy (default: 0 and ``n_iter``).
    """
    _check_policy(policy)
    loo = get_rule("grpo")
    group_size = as_int(group_size, "group_size", loo.min_group_size, loo.min_group_reason)
    budget = as_int(budget, "budget", 2)
    if budget % group_size:
        raise ValueError(f"`group_size` = {group_size} must divide `budget` = {budget}")
    n_iter = as_int(n_iter, "n_iter", 0)
    lr = as_float(lr, "lr", low=0.0)
    if not (hasattr(splits, "train") and hasattr(splits, "test")):
        raise TypeError(f"`splits` must have `train` and `test` question sequences (an "
                        f"ArithmeticSplits), got {type(splits).__name__}")
    train_questions = _check_questions(splits.train, "splits.train")
    test_questions = _check_questions(splits.test, "splits.test")
    checkpoints = sorted({0, n_iter} | {as_int(i, "eval_at", 0) for i in (eval_at or ())})
    if checkpoints[-1] > n_iter:
        raise ValueError(f"`eval_at` must lie in [0, n_iter = {n_iter}], got {checkpoints[-1]}")
    batch_size = budget // group_size
    prompts_all = policy.encode_prompts(train_questions)
    params = list(policy.model.parameters())
    accuracy = {}
    rewards_seen = np.empty(n_iter)
    if 0 in checkpoints:
        accuracy[0] = expected_accuracy(policy, test_questions)
    for it in range(1, n_iter + 1):
        idx = torch.randint(len(train_questions), (batch_size,), generator=generator,
                            device=policy.device)
        prompts = prompts_all[idx].repeat_interleave(group_size, dim=0)  # (B*G, P)
        answers = policy.sample(prompts, generator)
        chosen = [train_questions[i] for i in idx.tolist() for _ in range(group_size)]
        reward = policy.rewards(chosen, answers).reshape(batch_size, group_size)  # (B, G)
        rewards_seen[it - 1] = reward.mean()
        step = grpo_step_gradient(policy, prompts, answers, reward)
        with torch.no_grad():
            for p, g in zip(params, step):
                p.add_(g, alpha=lr)  # ascent: theta <- theta + eta g_hat
        if it in checkpoints:
            accuracy[it] = expected_accuracy(policy, test_questions)
    its = np.array(sorted(accuracy))
    return GRPORun(its, np.array([accuracy[i] for i in its]), rewards_seen, group_size, batch_size)
