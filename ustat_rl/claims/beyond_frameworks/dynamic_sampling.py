"""Dynamic sampling's exact kept batch and its cost against verl's own loop (docs/theory.md C51).

DAPO's dynamic sampling as verl runs it (``algorithm.filter_groups``): groups whose rewards are
all equal are dropped and generation batches of ``b`` prompts are drawn until ``B`` groups are
kept, at most ``max_num_gen_batches`` of them. The exact moments of the kept batch and the
expected number of generation batches (:mod:`ustat_rl.theory.dynamic_sampling`) are compared
with :func:`ustat_rl.montecarlo.dynamic_sampling.simulate_dynamic_sampling`, the loop itself, at
four ``(p, G)`` cases with ``p`` near 0 and near 1, and with a cap; the best ``G`` at a budget of
generated rollouts is compared with a search over every ``(G, B)`` and run through the loop.
The dynamic-sampling Monte Carlo has one backend (numpy, vectorised over steps); there is no
torch or numba version of the loop, so the comparisons run on that one.

Sixteen Monte Carlo comparisons at ``Z_STRICT = 4.5`` standard errors (6.8e-6 two-sided each,
about 1.1e-4 for the claim): at ``Z_CHECK`` the sixteen would state 1.0e-3, above the share one
claim may spend (``CLAIM_BUDGET``), so each runs ``strict_reps`` steps instead (the detectable
deviation ``z se`` is the same). Negative control, a power check that states no rate: the
prediction that ignores the filtering (C6's MSE of ``B`` drawn groups) is rejected by the same
comparison in every case.
"""

from __future__ import annotations

import math

import numpy as np

from ...stats.ustatistics import squared_mean_norm
from ...tolerances import Z_STRICT, strict_reps
from ..registry import check_close, check_exact, check_true, register

#: Four prompts from nearly hopeless to nearly solved, weighted towards the extremes.
MIXTURE = ((0.02, 0.3, 0.7, 0.98), (0.4, 0.1, 0.1, 0.4))

#: ``(label, values, prompt_prob, rule, G, B, b)``: ``p`` near 0 (keep probability 0.078) and
#: near 1 (0.149), the mixture at ``G = 2`` (0.115), and a std-normalised rule, whose kept batch
#: also turns the gradient's direction.
CASES = (
    ("p = 0.02", (0.02,), None, "grpo", 4, 2, 2),
    ("p = 0.98", (0.98,), None, "grpo", 8, 2, 3),
    ("four prompts", *MIXTURE, "grpo", 2, 3, 4),
    ("four prompts, verl_grpo", *MIXTURE, "verl_grpo", 4, 3, 4),
)

#: The capped case ``(values, G, B, b, K)``: at ``p = 0.02`` verl raises in about 93% of steps.
CAP_CASE = ((0.02,), 4, 2, 2, 3)

#: The budget question: ten equally likely prompts ``p = 0.05, ..., 0.95``, ``N`` rollouts
#: generated per step, the group sizes searched, and ``b = B``.
SPREAD = tuple(float(v) for v in np.linspace(0.05, 0.95, 10))
BUDGET, BUDGET_SIZES = 64, tuple(range(2, 17))

#: Steps per Monte Carlo case at ``Z_CHECK`` (quick, full); each case runs ``strict_reps`` of it.
REPS = (20_000, 200_000)


def mean_check(name: str, predicted: float, samples, note: str):
    """The mean of i.i.d. ``samples`` against ``predicted`` at ``Z_STRICT`` standard errors, and
    that standard error (C51, C55)."""
    samples = np.asarray(samples, dtype=np.float64)
    se = float(samples.std(ddof=1)) / math.sqrt(samples.size)
    return check_close(name, predicted, float(samples.mean()), se, z=Z_STRICT, note=note), se


def case_checks(label, values, prompt_prob, estimator, G, B, b, n_reps, rng) -> tuple[list, float]:
    """The MSE, squared bias and expected generation batches of one case against the loop,
    and ``|z|`` of the unfiltered MSE against the loop's (the negative control's statistic)."""
    from ...montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
    from ...policies.examples import known_value_bandit
    from ...theory.dynamic_sampling import filtered_batch_moments, generation_cost

    bandit = known_value_bandit(values, prompt_prob)
    exact = filtered_batch_moments(bandit.moments(), estimator, G, B)
    cost = generation_cost(bandit.value, G, B, b, 0, bandit.prompt_prob)
    run = simulate_dynamic_sampling(bandit, estimator, G, B, n_reps, rng, FilterLoop(b))
    errors = run.gradients - bandit.grad  # (n_reps, P*K): no cap, every step fills
    where = f"{estimator}, G = {G}, B = {B}, b = {b}; r = {exact.keep_prob:.4f}; {n_reps} steps"
    mse, se = mean_check(f"{label}: MSE of the kept batch E||g_DS - g||^2", exact.mse,
                          np.sum(errors**2, axis=1), where)
    bias, bias_se = squared_mean_norm(errors)
    checks = [
        mse,
        check_close(f"{label}: squared bias ||E g_DS - g||^2", exact.bias_sq, bias, bias_se,
                    z=Z_STRICT, note=f"{where}; pairwise U-statistic of the errors"),
        mean_check(f"{label}: expected generation batches E N", cost.expected_gen_batches,
                    run.gen_batches, where)[0],
    ]
    return checks, abs(mse.measured - exact.unfiltered_mse) / se


def cap_checks(n_reps: int, rng) -> list:
    """``E min(N, K)`` and ``P(N > K)`` (verl raises) against the capped loop."""
    from ...montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
    from ...policies.examples import known_value_bandit
    from ...theory.dynamic_sampling import generation_cost

    values, G, B, b, K = CAP_CASE
    bandit = known_value_bandit(values)
    cost = generation_cost(bandit.value, G, B, b, K)
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, n_reps, rng, FilterLoop(b, K))
    where = f"p = {values[0]}, G = {G}, B = b = {B}, K = {K}; {n_reps} steps"
    p_cap = cost.cap_probability
    # the binomial standard error at the predicted rate: a score test of the proportion
    return [
        mean_check(f"cap K = {K}: expected generation batches E min(N, K)",
                    cost.expected_gen_batches, run.gen_batches, where)[0],
        check_close(f"cap K = {K}: P(verl raises) = P(Binomial(K b, r) < B)", p_cap,
                    1.0 - float(run.filled.mean()), math.sqrt(p_cap * (1 - p_cap) / n_reps),
                    z=Z_STRICT, note=f"{where}; se from the predicted rate"),
    ]


def brute_force_budget(moments, budget: int, sizes) -> tuple[np.ndarray, np.ndarray]:
    """Per ``G``, the smallest exact MSE over every ``B`` whose expected generated rollouts
    ``G b E N`` (``b = B``, no cap) fit ``budget``, and that ``B`` (``inf`` and 0 when none do)."""
    from ...theory.dynamic_sampling import filtered_batch_moments, generation_cost

    best_mse, best_batch = np.full(len(sizes), math.inf), np.zeros(len(sizes), dtype=np.int64)
    for i, G in enumerate(sizes):
        for B in range(1, budget // G + 1):
            cost = generation_cost(moments.value, G, B, None, 0, moments.prompt_prob)
            if cost.expected_rollouts <= budget:
                mse = filtered_batch_moments(moments, "grpo", G, B).mse
                if mse < best_mse[i]:
                    best_mse[i], best_batch[i] = mse, B
    return best_mse, best_batch


def budget_checks(n_reps: int, rng) -> list:
    """The best ``G`` at ``BUDGET`` generated rollouts against the search over every ``(G, B)``,
    and the loop at that ``(G, B)``: its MSE and its generated rollouts per step."""
    from ...montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
    from ...policies.examples import known_value_bandit
    from ...theory.dynamic_sampling import optimal_filtered_group_size
    from ...theory.group_size import best_index

    bandit = known_value_bandit(SPREAD)
    moments = bandit.moments()
    found = optimal_filtered_group_size(moments, BUDGET, "grpo", "generated", BUDGET_SIZES)
    mses, batches = brute_force_budget(moments, BUDGET, BUDGET_SIZES)
    best = best_index(mses)
    G, B = BUDGET_SIZES[best], int(batches[best])
    run = simulate_dynamic_sampling(bandit, "grpo", G, B, n_reps, rng, FilterLoop(B))
    where = f"ten prompts p = 0.05..0.95, G = {G}, B = b = {B}; {n_reps} steps"
    return [
        check_true(f"N = {BUDGET} generated rollouts: the best (G, B) is the brute force's",
                   (found.group_size, found.batch_size) == (G, B), float(found.group_size),
                   note=f"search: ({found.group_size}, {found.batch_size}); every (G, B) with "
                        f"G in {BUDGET_SIZES[0]}..{BUDGET_SIZES[-1]}: ({G}, {B})"),
        check_exact("the affordable B at every G equals the brute force's",
                    batches.astype(float), found.batch_sizes.astype(float), rtol=0.0, atol=0.0),
        check_exact("the MSE at every G equals the brute force's", mses[np.isfinite(mses)],
                    found.mses[np.isfinite(mses)], rtol=1e-12, atol=0.0),
        mean_check(f"at the best (G, B) = ({G}, {B}): the loop's MSE", found.mse,
                    np.sum((run.gradients - bandit.grad) ** 2, axis=1), where)[0],
        mean_check(f"at the best (G, B) = ({G}, {B}): generated rollouts per step G b E N "
                    f"(<= {BUDGET})", float(found.rollouts[best]),
                    G * B * run.gen_batches.astype(float), where)[0],
    ]


@register("C51", "Beyond the paper: under DAPO's dynamic sampling (verl's filter_groups: "
          "all-equal groups dropped, generation batches drawn until B groups are kept, at most "
          "max_num_gen_batches), the kept batch's exact bias and MSE and the expected generation "
          "batches, capped or not, equal verl's loop, p near 0 and 1 included; the best G at a "
          "budget of generated rollouts is the brute-force one",
          "derived (docs/theory.md C51; section 7, \"Dynamic sampling (beyond the paper)\")",
          "Monte Carlo of verl's loop (simulate_dynamic_sampling, its one backend) at four "
          "(p, G) cases, a cap and the budget optimum; optimal_filtered_group_size against "
          "every (G, B); the unfiltered MSE as the negative control")
def check_c51(ctx) -> list:
    n = strict_reps(ctx.reps(*REPS))
    checks, controls = [], []
    for i, case in enumerate(CASES):
        found, z = case_checks(*case, n, np.random.default_rng(ctx.seed_for("C51", i)))
        checks += found
        controls.append(z)
    checks += cap_checks(n, np.random.default_rng(ctx.seed_for("C51", len(CASES))))
    checks += budget_checks(n, np.random.default_rng(ctx.seed_for("C51", len(CASES) + 1)))
    weakest = float(min(controls))
    checks.append(check_true(
        f"negative control: the unfiltered prediction (C6's MSE of B drawn groups) is outside "
        f"{Z_STRICT:g} se of the loop's MSE in all {len(CASES)} cases", weakest > Z_STRICT,
        weakest, evidence="monte-carlo",
        note="measured: the smallest |z| over the cases, through the MSE comparison above; a "
             "power check, no rate stated"))
    return checks
