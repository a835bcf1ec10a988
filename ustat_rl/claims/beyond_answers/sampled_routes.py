"""Monte Carlo routes a user runs, against exact expectations computed without them (C75).

* :func:`ustat_rl.montecarlo.bandit.prompt_averaged_squared_errors` (stratified, numba): the
  prompt-averaged MSE ``E_X E||g_hat(X) - g(X)||^2`` of leave-one-out and TRL's group rule at
  ``G = 2, 4`` against C71's enumeration of every outcome with the advantages written out;
* :func:`ustat_rl.montecarlo.bandit.per_sample_squared_errors` (the literal sampler) run by
  :func:`~ustat_rl.montecarlo.engine.run_monte_carlo`: the batch MSE of leave-one-out at
  ``G = 3, B = 2`` against the same enumeration;
* :mod:`ustat_rl.montecarlo.opo_lengths`: ``opo_advantages`` against ``z - sum T z / sum T``
  written out; :func:`~ustat_rl.montecarlo.opo_lengths.opo_monte_carlo` with equal lengths
  (``action_lengths`` of a constant table) gives the full mean's moments on the same draws
  exactly, with ``iid_lengths`` its mean factor is ``(G - 1)/G`` (the weights are exchangeable
  and independent of the draws), and its full-mean MSE is the enumeration's;
* :func:`ustat_rl.training.allocation.allocated_sizes`: the optimal allocation's ``G_x`` against
  a brute force over every composition of the budget of ``sum_x f(x)^2 MSE_x(G_x)`` (the exact
  per-prompt MSE, :func:`ustat_rl.theory.mse.per_prompt_mse`: leave-one-out is unbiased and
  the prompts' groups independent, so the batch MSE separates); and
  :func:`~ustat_rl.training.allocation.allocated_gradient` at those sizes is unbiased: the mean
  of ``<g_hat, g>/||g||^2`` over draws of its uniforms is 1.

Monte Carlo comparisons at ``Z_STRICT = 4.5`` standard errors of the replicates' spread
(two-sided false-failure rate 6.8e-6 each; 8 comparisons: 5.4e-5 for the claim). The
exact comparisons are at rtol 1e-10.
"""

from __future__ import annotations

import numpy as np

from ...tolerances import Z_STRICT
from ..registry import check_close, check_exact, check_true, register

__all__ = ["SAMPLED_REPS", "PER_SAMPLE_REPS", "OPO_REPS", "ALLOCATION_REPS",
           "ALLOCATION_BUDGET", "compositions", "brute_force_allocation", "written_opo"]

#: Replicates (quick, full) of each Monte Carlo.
SAMPLED_REPS = (4000, 40_000)
PER_SAMPLE_REPS = (2000, 20_000)
OPO_REPS = (2000, 20_000)
ALLOCATION_REPS = (400, 4000)
#: The allocation's budget over the six prompts of ``heterogeneous_score_bandit``.
ALLOCATION_BUDGET = 16


def compositions(total: int, parts: int, low: int):
    """Every tuple of ``parts`` integers ``>= low`` summing to ``total``."""
    if parts == 1:
        if total >= low:
            yield (total,)
        return
    for first in range(low, total - low * (parts - 1) + 1):
        for rest in compositions(total - first, parts - 1, low):
            yield (first,) + rest


def brute_force_allocation(moments, budget: int) -> tuple[float, tuple]:
    """The smallest ``sum_x f(x)^2 MSE_x(G_x)`` (leave-one-out) over every composition, and one
    composition reaching it."""
    from ...theory.mse import per_prompt_mse

    f = moments.prompt_prob
    P = f.size
    table = {G: per_prompt_mse(moments, "grpo", G) for G in range(2, budget - 2 * (P - 1) + 1)}
    best = (np.inf, ())
    for comp in compositions(budget, P, 2):
        value = float(sum(f[x] ** 2 * table[G][x] for x, G in enumerate(comp)))
        if value < best[0]:
            best = (value, comp)
    return best


def written_opo(rewards, lengths):
    """``z_i - sum_j T_j z_j / sum_j T_j`` per group (rows); a group of one keeps its reward
    (verl's baseline 0 there)."""
    z, T = np.asarray(rewards, dtype=np.float64), np.asarray(lengths, dtype=np.float64)
    if z.shape[-1] == 1:
        return z.copy()
    return z - (T * z).sum(axis=-1, keepdims=True) / T.sum(axis=-1, keepdims=True)


def _prompt_averaged_checks(seed, n) -> list:
    from ...montecarlo.bandit import prompt_averaged_squared_errors
    from .enumerated_routes import loo, prompt_mse, route_bandit, trl_group

    bandit = route_bandit()
    f = bandit.prompt_prob
    est = prompt_averaged_squared_errors(bandit, ("grpo", "trl_group"), (2, 4), n, seed)
    checks = []
    for i, (rule, G) in enumerate(est.labels):
        written = {"grpo": loo, "trl_group": trl_group}[rule]
        exact = float(f @ prompt_mse(bandit, G, written))
        checks.append(check_close(f"prompt_averaged_squared_errors ({rule}, G = {G}, {n} "
                                  "replicates per prompt) against the enumeration", exact,
                                  est.mean[i], est.std_error[i], z=Z_STRICT))
    return checks


def _per_sample_checks(seed, n) -> list:
    from ...montecarlo import run_monte_carlo
    from ...montecarlo.bandit import per_sample_squared_errors
    from .enumerated_routes import batch_mse, loo, route_bandit

    bandit = route_bandit()
    est = run_monte_carlo(per_sample_squared_errors(bandit, "grpo", 3, 2), n, seed)
    return [check_close(f"per_sample_squared_errors (grpo, G = 3, B = 2, {n} batches) against "
                        "the enumeration", batch_mse(bandit, 3, 2, loo), est.mean[0],
                        est.std_error[0], z=Z_STRICT)]


def _opo_checks(seed, n) -> list:
    from ...montecarlo.opo_lengths import (
        action_lengths,
        iid_lengths,
        opo_advantages,
        opo_monte_carlo,
    )
    from .enumerated_routes import batch_mse, full_mean, route_bandit

    rng = np.random.default_rng(seed)
    z = (rng.random((5, 4)) < 0.5).astype(np.float64)
    T = rng.integers(1, 9, (5, 4))
    bandit = route_bandit()
    G, B = 4, 2
    equal = opo_monte_carlo(bandit, G, B, 50, rng, action_lengths(np.full(bandit.n_actions, 7)))
    ragged = opo_monte_carlo(bandit, G, B, n, rng, iid_lengths(1, 8))
    return [
        check_exact("opo_advantages on 5 groups of 4 with ragged lengths: z - sum T z / sum T",
                    written_opo(z, T), opo_advantages(z, T), rtol=1e-12),
        check_exact("opo_monte_carlo with equal lengths (action_lengths of a constant table): "
                    "the full mean's moments on the same draws",
                    [equal.opo.mean_factor, equal.opo.mse],
                    [equal.full_mean.mean_factor, equal.full_mean.mse], rtol=1e-10),
        check_close(f"opo_monte_carlo with iid lengths 1..8 (G = {G}, B = {B}, {n} batches): "
                    "mean factor (G - 1)/G", (G - 1) / G, ragged.opo.mean_factor,
                    ragged.opo.mean_factor_se, z=Z_STRICT),
        check_close(f"opo_monte_carlo's full-mean MSE (G = {G}, B = {B}) against the "
                    "enumeration", batch_mse(bandit, G, B, full_mean), ragged.full_mean.mse,
                    ragged.full_mean.mse_se, z=Z_STRICT),
    ]


def _allocation_checks(seed, n) -> list:
    from ...policies.examples import heterogeneous_score_bandit
    from ...theory.mse import per_prompt_mse
    from ...training.allocation import allocated_gradient, allocated_sizes

    bandit, theta = heterogeneous_score_bandit()
    moments = bandit.moments(theta, matrices=False)
    sizes = allocated_sizes(bandit, theta, "optimal", "grpo", ALLOCATION_BUDGET)
    value, comp = brute_force_allocation(moments, ALLOCATION_BUDGET)
    f = moments.prompt_prob
    got = float(sum(f[x] ** 2 * per_prompt_mse(moments, "grpo", int(G))[x]
                    for x, G in enumerate(sizes)))
    rng = np.random.default_rng(seed)
    N = int(np.sum(sizes))
    g = bandit.grad(theta)
    along = np.array([allocated_gradient(bandit, theta, sizes, rng.random(2 * N)) @ g
                      for _ in range(n)]) / (g @ g)  # (n,)
    return [
        check_true(f"allocated_sizes (optimal, grpo, N = {ALLOCATION_BUDGET}) {sizes.tolist()} "
                   f"sums to N and reaches the brute force's minimum over every composition "
                   f"({comp})", int(sizes.sum()) == ALLOCATION_BUDGET
                   and abs(got - value) <= 1e-10 * value, got),
        check_close(f"allocated_gradient at those sizes is unbiased: mean <g_hat, g>/||g||^2 "
                    f"over {n} draws", 1.0, along.mean(), along.std(ddof=1) / np.sqrt(n),
                    z=Z_STRICT),
    ]


@register("C75", "Beyond the paper: the stratified and literal Monte Carlo of the bandit's "
          "squared errors, verl's opo under length models and the allocated training step "
          "agree with exact expectations computed without them (enumeration with the advantages "
          "written out, the opo formula, a brute force over every allocation)",
          "derived (docs/theory.md C75; C5, C11, C40, C41 and verl's opo)",
          "prompt_averaged_squared_errors (4000 replicates per prompt quick) and "
          "per_sample_squared_errors against C71's enumeration; opo_advantages written out, "
          "opo_monte_carlo at equal and iid lengths; allocated_sizes against a brute force "
          "over 126 compositions and allocated_gradient's mean projection; Monte Carlo within "
          "4.5 se")
def check_c75(ctx) -> list:
    seeds = [ctx.seed_for("C75", k) for k in range(4)]  # one stream per route
    return (_prompt_averaged_checks(seeds[0], ctx.reps(*SAMPLED_REPS))
            + _per_sample_checks(seeds[1], ctx.reps(*PER_SAMPLE_REPS))
            + _opo_checks(seeds[2], ctx.reps(*OPO_REPS))
            + _allocation_checks(seeds[3], ctx.reps(*ALLOCATION_REPS)))
