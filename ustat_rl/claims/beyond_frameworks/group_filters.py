"""Other frameworks' dynamic sampling against their own loops (docs/theory.md C55, C55.polaris).

C55: the group filters of ROLL, OpenRLHF and slime (:mod:`ustat_rl.theory.group_filters`): the exact
kept batch's MSE and squared bias and the expected generation batches
(:mod:`ustat_rl.theory.dynamic_sampling` with ``group_filter``) against the refill loop run with
the same filter (:func:`ustat_rl.montecarlo.dynamic_sampling.simulate_dynamic_sampling`), at ``p``
near 0 and near 1; negative control: the wrong filter's exact MSE and batches, rejected by the
same comparisons. C55.polaris: SkyRL's POLARIS ``replace`` (:mod:`ustat_rl.theory.replace_sampling`)
against a Monte Carlo of SkyRL's loop (:mod:`ustat_rl.montecarlo.replace_sampling`): the
replaced batch's MSE, squared bias, batches per step, copies and the cap's probability, at
``p`` near 0 and near 1; negative controls: verl's regenerating filter's exact MSE at the same
``(G, B)`` and copies that keep their own advantages.

Each comparison is at ``Z_STRICT = 4.5`` standard errors (6.8e-6 two-sided): nine in C55
(6.1e-5) and ten in C55.polaris (6.8e-5), with ``strict_reps`` steps per case.
"""

from __future__ import annotations

import math

import numpy as np

from ...stats.ustatistics import squared_mean_norm
from ...tolerances import Z_STRICT, strict_reps
from ..registry import check_close, check_true, register
from .dynamic_sampling import mean_check

#: ``(filter, values, G, B, b, wrong filter)``: ROLL's filter at p near 0 (drops k = 1 at G = 10),
#: OpenRLHF's one-prompt refill (b = 1) near 0, slime's over-sampling near 1 (G = 20).
KEEP_CASES = (
    ("roll", (0.05,), 10, 2, 2, "verl"),
    ("openrlhf", (0.05,), 10, 2, 1, "roll"),
    ("slime", (0.97,), 20, 2, 3, "roll"),
)

#: ``(values, estimator, G, B)`` of C55.polaris: p near 0 with leave-one-out (copies merged,
#: its factor mG/(mG - 1) changes), p near 1 std-normalised; and the capped case ``(values, G, B, K)``.
REPLACE_CASES = (((0.05,), "grpo", 4, 6), ((0.95,), "verl_grpo", 6, 5))
REPLACE_CAP = ((0.03,), 4, 4, 3)

#: Steps per case at ``Z_CHECK`` (quick, full); each runs ``strict_reps`` of it.
REPS = (4_000, 40_000)


def _moment_checks(label: str, exact, errors, where: str) -> tuple[list, float]:
    """MSE and squared bias against the loop's errors ``(n, d)``, and the MSE's standard error."""
    mse, se = mean_check(f"{label}: MSE", exact.mse, np.sum(errors**2, axis=1), where)
    bias, bias_se = squared_mean_norm(errors)
    return [mse, check_close(f"{label}: squared bias", exact.bias_sq, bias, bias_se, z=Z_STRICT,
                             note=f"{where}; pairwise U-statistic of the errors")], se


def _z(measured: float, predicted: float, se: float) -> float:
    return abs(measured - predicted) / se


def group_filter_checks(n_reps: int, seed_of) -> tuple[list, float]:
    """C55's comparisons, and the smallest ``|z|`` of the wrong filters' MSE and batches."""
    from ...montecarlo.dynamic_sampling import FilterLoop, simulate_dynamic_sampling
    from ...policies.examples import known_value_bandit
    from ...theory.dynamic_sampling import filtered_batch_moments, generation_cost

    checks, controls = [], []
    for i, (kept, values, G, B, b, wrong) in enumerate(KEEP_CASES):
        bandit = known_value_bandit(values)
        m = bandit.moments()
        exact, other = (filtered_batch_moments(m, "grpo", G, B, r) for r in (kept, wrong))
        cost, other_cost = (generation_cost(bandit.value, G, B, b, 0, None, r)
                            for r in (kept, wrong))
        run = simulate_dynamic_sampling(bandit, "grpo", G, B, n_reps, seed_of(i),
                                        FilterLoop(b, 0, kept))
        label = f"{kept}, p = {values[0]}, G = {G}, B = {B}, b = {b}"
        where = f"r = {exact.keep_prob:.4f}; {n_reps} steps of the refill loop with {kept}'s filter"
        found, se = _moment_checks(label, exact, run.gradients - bandit.grad, where)
        batches, batch_se = mean_check(f"{label}: expected generation batches E N",
                                       cost.expected_gen_batches, run.gen_batches, where)
        checks += found + [batches]
        controls += [_z(found[0].measured, other.mse, se),
                     _z(batches.measured, other_cost.expected_gen_batches, batch_se)]
    return checks, min(controls)


def replace_checks(n_reps: int, seed_of) -> tuple[list, float]:
    """C55.polaris's comparisons, and the smallest ``|z|`` of its two negative controls."""
    from ...montecarlo.replace_sampling import ReplaceLoop, simulate_replace_sampling
    from ...policies.examples import known_value_bandit
    from ...theory.dynamic_sampling import filtered_batch_moments
    from ...theory.replace_sampling import replace_batch_moments, replace_generation_cost

    checks, controls = [], []
    for i, (values, estimator, G, B) in enumerate(REPLACE_CASES):
        bandit = known_value_bandit(values)
        m = bandit.moments()
        exact = replace_batch_moments(m, estimator, G, B)
        cost = replace_generation_cost(bandit.value, G, B)
        run = simulate_replace_sampling(bandit, estimator, G, B, n_reps, seed_of(i))
        label = f"replace, p = {values[0]}, {estimator}, G = {G}, B = {B}"
        where = (f"r = {exact.keep_prob:.4f}, P(used) = {exact.replace_prob:.4f}; {n_reps} "
                 "steps of SkyRL's loop (min_replace_ratio 0.3)")
        found, se = _moment_checks(label, exact, run.gradients - bandit.grad, where)
        copies = B - float(exact.multiplicity_counts.sum())
        checks += found + [
            mean_check(f"{label}: batches per step E N = 1/P(used)", cost.expected_gen_batches,
                       run.gen_batches, where)[0],
            mean_check(f"{label}: copies in the batch used E[B - J | used]", copies, run.copies,
                       where)[0]]
        verl = filtered_batch_moments(m, estimator, G, B).mse
        unmerged = replace_batch_moments(m, estimator, G, B, merge_copies=False).mse
        controls += [_z(found[0].measured, verl, se), _z(found[0].measured, unmerged, se)]
    values, G, B, K = REPLACE_CAP
    bandit = known_value_bandit(values)
    cost = replace_generation_cost(bandit.value, G, B, 0.3, K)
    run = simulate_replace_sampling(bandit, "grpo", G, B, n_reps, seed_of(len(REPLACE_CASES)),
                                    ReplaceLoop(max_sample_batches=K))
    p_cap, where = cost.cap_probability, f"p = {values[0]}, G = {G}, B = {B}, K = {K}; {n_reps} steps"
    checks += [
        mean_check(f"cap K = {K}: batches E min(N, K)", cost.expected_gen_batches,
                   run.gen_batches, where)[0],
        check_close(f"cap K = {K}: P(SkyRL raises) = (1 - P(used))^K", p_cap,
                    1.0 - float(run.filled.mean()), math.sqrt(p_cap * (1 - p_cap) / n_reps),
                    z=Z_STRICT, note=f"{where}; se from the predicted rate")]
    return checks, min(controls)


def _control(controls: float, what: str) -> list:
    return [check_true(f"negative control: {what} outside {Z_STRICT:g} se in every case",
                       controls > Z_STRICT, controls, evidence="monte-carlo",
                       note="measured: the smallest |z| over the cases; a power check, no rate "
                            "stated")]


@register("C55", "Beyond the paper: under ROLL's, OpenRLHF's and slime's group filters the kept "
          "batch's exact MSE and squared bias and the expected generation batches equal the "
          "refill loop run with that filter, p near 0 and 1; the wrong filter's values are rejected",
          "derived (docs/theory.md C55; section 7, \"Other frameworks' group filters\")",
          "Monte Carlo of the refill loop (simulate_dynamic_sampling with group_filter) at three "
          "(filter, p, G, b) cases; the wrong filter's exact MSE and E N as the negative control")
def check_c55(ctx) -> list:
    n = strict_reps(ctx.reps(*REPS))
    checks, controls = group_filter_checks(
        n, lambda i: np.random.default_rng(ctx.seed_for("C55", i)))
    return checks + _control(controls, "the wrong filter's exact MSE and generation batches are")


@register("C55.polaris", "Beyond the paper: under SkyRL's POLARIS replace (bad groups "
          "overwritten by copies of good ones when more than min_replace_ratio B are good, else "
          "the batch redrawn) the replaced batch's exact MSE and squared bias, with copies "
          "merged by prompt id, the batches per step, the copies and the cap's probability "
          "equal SkyRL's loop, p near 0 and 1",
          "derived (docs/theory.md C55; section 7, \"POLARIS's replace\")",
          "Monte Carlo of SkyRL's loop (simulate_replace_sampling) at two (p, G, B) cases and "
          "a cap; verl's regenerating filter and unmerged copies as negative controls")
def check_c55_polaris(ctx) -> list:
    n = strict_reps(ctx.reps(*REPS))
    checks, controls = replace_checks(
        n, lambda i: np.random.default_rng(ctx.seed_for("C55.polaris", i)))
    return checks + _control(controls, "verl's filtered-batch MSE and the unmerged copies' are")
