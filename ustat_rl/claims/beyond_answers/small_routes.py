"""Small answering routes against their written-out forms (C81).

Each route here answers a user (a number, an advantage, a matrix or a score) and no other claim
executes it; each is set against a form written out in this module, never the package's helper:

* :func:`~ustat_rl.training.std.trl_group_rule`, TRL's ``scale_rewards="group"`` advantage of a
  binary reward from its group's success count, against ``(r - mean r)/(std(r, ddof=1) + 1e-4)``
  of the group written out, every ``G`` in 2..6 and every count (control: the population std);
* :meth:`~ustat_rl.theory.gram.FactoredGram.copy` and
  :meth:`~ustat_rl.theory.gram.FactoredGram.restrict` against ``F F^T`` with its diagonal
  replaced, and the restriction's rows and columns picked by hand at an unsorted index (control:
  the index sorted); the copy is a new array;
* :attr:`~ustat_rl.advantages.rule.AdvantageRule.function` of GRPO's leave-one-out rule and
  TRL's group rule on groups of unequal sizes, against the advantages written out (control: the
  leave-one-out mean replaced by the group mean);
* :attr:`~ustat_rl.frameworks.config.LossWeighting.ratio_factor`, the loss's factor at importance
  ratio 1, against ``clamp(1, max=epsilon_high)`` for TRL's ``cispo`` and 1 otherwise;
* :meth:`~ustat_rl.frameworks.grouped.GroupedRewards.to_rollouts`: rows kept in the table's
  order with their rewards and scores, and the string group ids turned into the same partition;
* :meth:`~ustat_rl.policies.transformer.model.TransformerPolicy.scores_by_loop` and
  :meth:`~ustat_rl.policies.transformer.model.TransformerPolicy.flat_grad` on a small float64
  transformer: the loop's scores equal the vmapped ones, ``flat_grad`` of the summed
  log-probabilities is their sum, and over every output of a prompt ``sum_y pi(y) W(y) = 0``
  (the score identity, an independent truth; control: the scores of other answers).

All exact (float64 rounding), no sampling: no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["trl_written", "trl_group_written", "loo_written"]

#: TRL's epsilon in ``(r - mean)/(std + epsilon)``.
TRL_EPSILON = 1e-4
#: Group sizes of the TRL group rule's table.
TRL_SIZES = (2, 3, 4, 5, 6)
RTOL, ATOL = 1e-12, 1e-14


def trl_written(rewards: np.ndarray, groups: np.ndarray, scale="group") -> np.ndarray:
    """TRL's ``sum_then_normalize`` advantage of rewards ``(n,)`` with group ids ``groups``:
    ``r - group mean``, over ``group std + 1e-4`` (``"group"``, ``True``) or ``batch std +
    1e-4`` (``"batch"``), or undivided (``"none"``, ``False``); sample stds, by loops."""
    rewards, groups = np.asarray(rewards, dtype=np.float64), np.asarray(groups)
    out = np.empty_like(rewards)
    for g in np.unique(groups):
        rows = rewards[groups == g]
        centred = rows - rows.mean()
        if scale in ("group", True):
            centred = centred / (rows.std(ddof=1) + TRL_EPSILON)
        elif scale == "batch":
            centred = centred / (rewards.std(ddof=1) + TRL_EPSILON)
        out[groups == g] = centred
    return out


def trl_group_written(z: float, m: int, G: int, ddof: int = 1) -> float:
    """The advantage of reward ``z`` in a group of ``G`` binary rewards with ``m`` ones (the
    population std with ``ddof=0``, for the negative control)."""
    rewards = np.array([1.0] * m + [0.0] * (G - m))
    if ddof == 1:
        return float(trl_written(rewards, np.zeros(G))[0 if z == 1.0 else G - 1])
    return float((z - rewards.mean()) / (rewards.std(ddof=ddof) + TRL_EPSILON))


def loo_written(z: np.ndarray, groups: np.ndarray, own_mean: bool = False) -> np.ndarray:
    """``z_i - mean of the other rewards of i's group`` (or of the whole group)."""
    out = np.empty_like(z)
    for i in range(z.size):
        peers = [z[j] for j in range(z.size) if groups[j] == groups[i] and (own_mean or j != i)]
        out[i] = z[i] - sum(peers) / len(peers)
    return out


def _trl_group_checks() -> list:
    from ...training.std import trl_group_rule

    pairs = [(z, m, G) for G in TRL_SIZES for m in range(G + 1) for z in (0.0, 1.0)
             if (z == 1.0 and m >= 1) or (z == 0.0 and m <= G - 1)]
    z, m, G = (np.array(col) for col in zip(*pairs))
    got = np.array([trl_group_rule(zi, mi, int(Gi)) for zi, mi, Gi in zip(z, m, G)],
                   dtype=np.float64).ravel()
    want = np.array([trl_group_written(*p) for p in pairs])
    population = np.array([trl_group_written(*p, ddof=0) for p in pairs])
    return [check_exact(f"trl_group_rule = (r - mean)/(std(ddof=1) + 1e-4) written out, G = 2..6, "
                        f"every count ({len(pairs)} cases)", want, got, rtol=RTOL, atol=ATOL),
            check_true("negative control: the population std (ddof=0) is rejected by the same "
                       "comparison", not check_exact("", population, got, rtol=RTOL,
                                                     atol=ATOL).passed,
                       float(np.max(np.abs(population - got))))]


def _gram_checks() -> list:
    from ...theory.gram import FactoredGram

    rng = np.random.default_rng(8101)
    factor, diagonal = rng.standard_normal((6, 3)), rng.uniform(1.0, 2.0, 6)
    dense = factor @ factor.T
    for a in range(6):
        dense[a, a] = diagonal[a]
    gram = FactoredGram(factor, diagonal)
    index = np.array([4, 0, 3])
    picked = np.array([[dense[a, b] for b in index] for a in index])
    copy = gram.copy()
    copy[0, 1] += 1.0  # a new array: the Gram matrix itself is unchanged
    restricted = gram.restrict(index).copy()
    sorted_pick = np.array([[dense[a, b] for b in np.sort(index)] for a in np.sort(index)])
    return [check_exact("FactoredGram.copy = F F^T with the diagonal replaced", dense,
                        gram.copy(), rtol=RTOL, atol=ATOL),
            check_true("FactoredGram.copy is a new array (writing to it leaves the matrix)",
                       bool(np.allclose(gram.copy(), dense, rtol=RTOL, atol=ATOL)), 1.0),
            check_exact("FactoredGram.restrict([4, 0, 3]) = rows and columns picked by hand",
                        picked, restricted, rtol=RTOL, atol=ATOL),
            check_true("negative control: the index sorted is rejected by the same comparison",
                       not check_exact("", sorted_pick, restricted, rtol=RTOL,
                                       atol=ATOL).passed, 1.0)]


def _rule_function_checks() -> list:
    from ...advantages.registry import get_rule

    z = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.5])
    groups = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2])  # sizes 3, 4, 2
    counts = np.bincount(groups)
    loo = get_rule("grpo").function(z, groups, counts)
    trl = get_rule("trl_group").function(z, groups, counts)
    trl_want = trl_written(z, groups)
    own = loo_written(z, groups, own_mean=True)
    return [check_exact("AdvantageRule.function of 'grpo' = z minus the mean of the others, "
                        "groups of 3, 4 and 2", loo_written(z, groups), loo, rtol=RTOL,
                        atol=ATOL),
            check_exact("AdvantageRule.function of 'trl_group' = (z - mean)/(std(ddof=1) + "
                        "1e-4) per group", trl_want, trl, rtol=RTOL, atol=ATOL),
            check_true("negative control: the group's own mean in place of the leave-one-out "
                       "mean is rejected by the same comparison",
                       not check_exact("", own, loo, rtol=RTOL, atol=ATOL).passed, 1.0)]


def _ratio_factor_checks() -> list:
    from ...frameworks.config import LossWeighting

    cases = [("cispo", 0.2), ("cispo", 5.0), ("cispo", 1.0), ("dapo", 0.2), ("grpo", 0.28),
             (None, 0.2)]
    want = [min(1.0, eps) if loss == "cispo" else 1.0 for loss, eps in cases]
    got = [LossWeighting(loss_type=loss, epsilon_high=eps).ratio_factor for loss, eps in cases]
    return [check_exact("LossWeighting.ratio_factor = clamp(ratio = 1, max = epsilon_high) for "
                        "cispo, 1 for the other losses and without one", want, got, rtol=RTOL,
                        atol=ATOL)]


def _to_rollouts_checks() -> list:
    from ...frameworks.grouped import GroupedRewards

    group_id = np.array(["b", "a", "b", "c", "a", "c", "b", "a", "c"])
    reward = np.arange(9, dtype=np.float64) / 8.0
    score = np.arange(18, dtype=np.float64).reshape(9, 2)
    rollouts = GroupedRewards(group_id, reward).to_rollouts(score)
    ids = np.asarray(rollouts.prompt_id)
    same_partition = all((ids[i] == ids[j]) == (group_id[i] == group_id[j])
                         for i in range(9) for j in range(9))
    return [check_true("GroupedRewards.to_rollouts keeps the rows' order, rewards and scores "
                       "and the groups' partition", same_partition
                       and np.array_equal(rollouts.reward, reward)
                       and np.array_equal(rollouts.score, score), float(ids.size))]


def _policy_checks() -> list:
    import torch

    from ...policies.transformer import TransformerArchitecture, new_policy
    from ...policies.transformer.task import ArithmeticTask, make_splits

    task = ArithmeticTask(max_operand=3, max_factor=3, max_answer=9)  # 11 possible outputs
    questions = make_splits(task, n_test=4, n_train=8, seed=0).test[:2]
    policy = new_policy(task, 3, architecture=TransformerArchitecture(16, 1, 2, 32),
                        device="cpu", dtype=torch.float64)
    outputs = policy.enumerate_outputs()  # (M, A)
    prompts = policy.encode_prompts(questions)
    checks = []
    for q in range(len(questions)):
        prompt = prompts[q:q + 1].expand(outputs.shape[0], -1)
        loop = policy.scores_by_loop(prompt, outputs)  # (M, d)
        fast = policy.scores(prompt, outputs, chunk_size=4)
        prob = policy.log_prob(prompt, outputs).exp().detach()
        summed = policy.flat_grad(policy.log_prob(prompt, outputs).sum())
        mean = (prob[:, None] * loop).sum(dim=0).numpy()
        checks += [
            check_exact(f"prompt {q}: scores_by_loop = the vmapped scores, every output",
                        fast.numpy(), loop.numpy(), rtol=1e-10, atol=1e-12),
            check_exact(f"prompt {q}: flat_grad of the summed log-probabilities = the sum of "
                        f"the loop's scores", loop.sum(dim=0).numpy(), summed.numpy(),
                        rtol=1e-10, atol=1e-12),
            check_exact(f"prompt {q}: sum_y pi(y) W(y) = 0 over all {outputs.shape[0]} outputs "
                        f"(the score identity)", np.zeros_like(mean), mean, rtol=0.0,
                        atol=1e-12)]
    other = policy.scores_by_loop(prompt, outputs.flip(0))  # the last prompt, outputs reversed
    checks.append(check_true("negative control: the scores of the outputs in reverse order are "
                             "rejected by the same comparison",
                             not check_exact("", fast.numpy(), other.numpy(), rtol=1e-10,
                                             atol=1e-12).passed, 1.0))
    return checks


@register("C81", "Beyond the paper: small answering routes equal their written-out forms: TRL's "
          "group advantage from a success count, a factored Gram matrix's copy and "
          "restriction, an advantage rule's function, the loss's factor at ratio 1, a grouped "
          "table's rollouts, and a transformer policy's loop scores and flat gradient (with "
          "the score identity)",
          "derived (docs/theory.md C81; section 2's rules, section 7's scores)",
          "each route against a form written out in the claim's module (TRL's formula, F F^T "
          "picked by hand, leave-one-out means by loops, clamp at ratio 1, the table's rows, "
          "sum_y pi(y) W(y) = 0 over every output); a negative control per part")
def check_c81(ctx) -> list:
    return (_trl_group_checks() + _gram_checks() + _rule_function_checks()
            + _ratio_factor_checks() + _to_rollouts_checks() + _policy_checks())
