"""The numpy study routes of batch rules and ReMax's greedy baseline against exact moments (C82).

:func:`~ustat_rl.training.batch_study.batch_monte_carlo` (a batch estimator's bias and MSE,
with the all-equal groups kept or dropped) and
:func:`~ustat_rl.theory.greedy_baseline.greedy_baseline_monte_carlo` (verl's ``remax``, whose
baseline is a greedy rollout's reward drawn apart from the group) answer the batch-study and
remax questions by sampling; C57 checks the Monte Carlo engine's batch kernels, not these. On
the small bandit at ``G = 2``, ``B = 2``:

* TRL's ``scale_rewards="batch"`` rule, all-equal groups kept: MSE and mean factor against every
  batch enumerated (:func:`~ustat_rl.training.batch_study.batch_enumeration`);
* GRPO with all-equal groups dropped: MSE and mean factor against the enumeration weighted by
  the kept groups (``w_b = 1{group b not all equal} / max(1, #kept)``, written out here), and the
  kept share against ``1 - Q`` with ``Q = sum_x f(x) (V(x)^2 + (1 - V(x))^2)`` written out from
  the policy and the reward probabilities;
* remax: :func:`~ustat_rl.theory.greedy_baseline.greedy_baseline_exact` and the Monte Carlo's
  MSE against the exact MSE with the greedy law (the mode's action and its success chance)
  written out here, and the Monte Carlo's mean factor against 1 (unbiased).

One exact comparison and seven at ``Z_STRICT = 4.5`` standard errors (6.8e-6 two-sided each: 4.8e-5 for the
claim). Negative controls (power checks, no rate): the dropped run against the kept rule's exact
MSE, and remax's run against its exact MSE at one group per batch, each outside 4.5 se.
"""

from __future__ import annotations

import math

import numpy as np

from ...tolerances import Z_STRICT, strict_reps
from ..registry import check_close, check_exact, check_true, register

__all__ = ["dropped_weights", "all_equal_share", "remax_mse"]

#: Group and batch size.
G, B = 2, 2
#: Batches per route (quick, full) at ``Z_CHECK``; each runs ``strict_reps`` of it.
REPS = (20_000, 200_000)


def dropped_weights(reward: np.ndarray) -> np.ndarray:
    """``reward (M, B, G) -> (M, B)``: ``1/#kept`` on the groups whose rewards differ, 0 on the
    all-equal ones (and everywhere when every group is all equal)."""
    kept = reward.max(axis=2) != reward.min(axis=2)  # (M, B)
    count = np.maximum(kept.sum(axis=1, keepdims=True), 1)
    return kept / count


def all_equal_share(bandit, group_size: int) -> float:
    """``Q = sum_x f(x) (V^G + (1 - V)^G)``, ``V(x) = sum_a pi(a|x) r(x, a)`` (binary rewards)."""
    policy = np.asarray(bandit.policy)
    success = np.sum(policy * np.asarray(bandit.reward_prob), axis=1)
    return float(np.asarray(bandit.prompt_prob)
                 @ (success**group_size + (1.0 - success) ** group_size))


def remax_mse(bandit, group_size: int, batch_size: int) -> float:
    """remax's exact MSE with the greedy law written out: the greedy action ``argmax_a
    logits[x, a]`` succeeds with ``q_x = r[x, a*]``; conditionally on its reward ``b`` the
    estimator is the prompt-only baseline ``z - b``, whose per-prompt MSE is
    :func:`~ustat_rl.theory.mse.per_prompt_mse` (Corollary 5, claimed by C8 and C71), so
    ``MSE_B = (sum_x f(x) [q M_x(hi) + (1 - q) M_x(lo) + ||g(x)||^2] - ||g||^2) / B``."""
    from ...theory.mse import per_prompt_mse

    logits, reward_prob = np.asarray(bandit.logits), np.asarray(bandit.reward_prob)
    q = np.array([reward_prob[x, int(np.argmax(logits[x]))] for x in range(logits.shape[0])])
    lo, hi = bandit.reward_values
    m = bandit.moments()
    per_prompt = (q * per_prompt_mse(m, "baseline", group_size, baseline=hi)
                  + (1.0 - q) * per_prompt_mse(m, "baseline", group_size, baseline=lo))
    second = float(np.asarray(bandit.prompt_prob) @ (per_prompt + m.grad_sq))
    return (second - float(m.grad_norm_sq)) / batch_size


@register("C82", "Beyond the paper: the numpy study routes batch_monte_carlo (a batch rule with "
          "all-equal groups kept, GRPO with them dropped) and greedy_baseline_monte_carlo "
          "(verl's remax) measure the exact MSE, mean factor and kept share",
          "derived (docs/theory.md C82; C57's batch rules, dynamic sampling's drop)",
          "at G = 2, B = 2 on the small bandit: batch_monte_carlo against batch_enumeration "
          "(kept; dropped with the kept groups' weights written out), the kept share against "
          "1 - Q written out, greedy_baseline_monte_carlo and greedy_baseline_exact against the "
          "greedy law written out")
def check_c82(ctx) -> list:
    from ...policies.examples import small_bandit
    from ...theory.greedy_baseline import greedy_baseline_exact, greedy_baseline_monte_carlo
    from ...training.batch_study import batch_enumeration, batch_monte_carlo

    bandit = small_bandit()
    n = strict_reps(ctx.reps(*REPS))
    streams = [np.random.default_rng(s) for s in ctx.seed_for("C82").spawn(3)]
    where = f"{n} batches of {B} groups of {G}"
    checks = []

    kept_exact = batch_enumeration(bandit, "trl_batch", G, B)
    kept_run = batch_monte_carlo(bandit, "trl_batch", G, B, n, streams[0])
    checks += [check_close("batch_monte_carlo, trl_batch (groups kept): MSE = every batch "
                           "enumerated", kept_exact.mse, kept_run.mse, kept_run.mse_se,
                           z=Z_STRICT, note=where),
               check_close("batch_monte_carlo, trl_batch (groups kept): mean factor = every "
                           "batch enumerated", kept_exact.mean_factor, kept_run.mean_factor,
                           kept_run.mean_factor_se, z=Z_STRICT, note=where)]

    drop_exact = batch_enumeration(bandit, "grpo", G, B, group_weights=dropped_weights)
    drop_run = batch_monte_carlo(bandit, "grpo", G, B, n, streams[1], all_equal="drop")
    share = 1.0 - all_equal_share(bandit, G)
    share_se = math.sqrt(share * (1.0 - share) / (n * B))
    checks += [check_close("batch_monte_carlo, grpo (all-equal groups dropped): MSE = the "
                           "enumeration weighted by the kept groups", drop_exact.mse,
                           drop_run.mse, drop_run.mse_se, z=Z_STRICT, note=where),
               check_close("batch_monte_carlo, grpo (dropped): mean factor = the weighted "
                           "enumeration", drop_exact.mean_factor, drop_run.mean_factor,
                           drop_run.mean_factor_se, z=Z_STRICT, note=where),
               check_close("batch_monte_carlo, grpo (dropped): kept share = 1 - Q written out",
                           share, drop_run.kept, share_se, z=Z_STRICT,
                           note=f"binomial se over {n * B} groups")]

    remax_exact = remax_mse(bandit, G, B)
    remax_run = greedy_baseline_monte_carlo(bandit, G, B, n, streams[2])
    checks += [check_exact("greedy_baseline_exact (remax): MSE = the greedy law written out",
                           remax_exact, greedy_baseline_exact(bandit, G, B).mse, rtol=1e-10,
                           atol=1e-14),
               check_close("greedy_baseline_monte_carlo (remax): MSE = the greedy law written "
                           "out", remax_exact, remax_run.mse, remax_run.mse_se, z=Z_STRICT,
                           note=where),
               check_close("greedy_baseline_monte_carlo (remax): mean factor = 1 (unbiased)",
                           1.0, remax_run.mean_factor, remax_run.mean_factor_se, z=Z_STRICT,
                           note=where)]

    keep_grpo = bandit.exact_mse("grpo", G, B)
    one_group = remax_mse(bandit, G, 1)
    z_drop = abs(drop_run.mse - keep_grpo) / drop_run.mse_se
    z_remax = abs(remax_run.mse - one_group) / remax_run.mse_se
    checks.append(check_true(
        f"negative controls: the dropped run against GRPO's exact MSE with groups kept, and "
        f"remax's run against its exact MSE at B = 1, outside {Z_STRICT:g} se",
        min(z_drop, z_remax) > Z_STRICT, float(min(z_drop, z_remax)), evidence="monte-carlo",
        note="measured: the smaller |z|; a power check, no rate stated"))
    return checks
