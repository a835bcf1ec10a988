"""The frameworks' rules with batch statistics at a finite batch (docs/theory.md C57).

A rule that whitens or normalises over the whole batch (TRL's ``scale_rewards="batch"``, its
normalised RLOO, verl's REINFORCE++ options and GPG, OpenRLHF's REINFORCE options, NeMo-RL's
and slime's REINFORCE++, ROLL's batch normalisation, AReaL's two stages) couples the groups of a
step, so the per-group theory does not give its moments. C57 checks, for every such rule of
``CONVENTION_NAMES`` on the small bandit at ``G = 2, B = 2``, that the exact MSE and mean
projection from enumerating every batch
(:func:`ustat_rl.training.batch_study.batch_enumeration`) are what both Monte Carlo backends
measure through the one-channel sampler (:mod:`ustat_rl.montecarlo.batch_rules`); and verl's
``remax``, whose baseline is a greedy rollout's reward drawn apart from the group, against its
exact MSE and unbiased projection (:mod:`ustat_rl.theory.greedy_baseline`) on the same runs.
Each comparison is at ``Z_STRICT = 4.5`` standard errors (6.8e-6 two-sided); four per rule (two
statistics, two backends). Negative controls, power checks with no rate: the full mean's exact
MSE, and NeMo-RL's REINFORCE++ against slime's (they differ only in the whitening's variance).
"""

from __future__ import annotations

from ...advantages import conventions
from ...tolerances import Z_STRICT, strict_reps
from ..registry import check_close, check_true, register

#: The group and batch sizes of the comparison (``(2 K P)^G`` outcomes per group, squared).
G, B = 2, 2
#: Steps per backend at ``Z_CHECK`` (quick, full); each runs ``strict_reps`` of it.
REPS = (4_000, 40_000)
#: Group rules measured alongside as the route's positive control (the per-group theory).
GROUP_RULES = ("grpo", "fullmean")
#: verl's greedy-baseline rule, measured on the same runs.
REMAX = "verl_remax"


def batch_rule_names() -> tuple[str, ...]:
    """Every framework rule with batch statistics that admits a batch of ``G`` x ``B``."""
    return conventions.batch_rule_names(G, B)


@register("C57", "Beyond the paper: every framework rule with batch statistics (whitening or "
          "a std over the whole batch) has, at G = 2 and B = 2, the exact MSE and mean "
          "projection of enumerating every batch, on both Monte Carlo backends; NeMo-RL's "
          "REINFORCE++ (population variance) is not slime's (Bessel's); verl's remax (a greedy "
          "rollout's reward as baseline) has its exact MSE and is unbiased",
          "derived (docs/theory.md C57; docs/conventions.md, batch statistics)",
          "exact enumeration of every batch (batch_enumeration) and remax's exact moments "
          "(greedy_baseline_exact) against Monte Carlo on the numba and torch backends "
          "(batch_rule_statistics); the full mean's exact MSE and NeMo-RL's rule against "
          "slime's as negative controls")
def check_c57(ctx) -> list:
    from ...montecarlo import Backend, run_monte_carlo
    from ...montecarlo.batch_rules import batch_rule_statistics
    from ...policies.examples import small_bandit
    from ...theory.greedy_baseline import greedy_baseline_exact
    from ...training.batch_study import batch_enumeration

    bandit = small_bandit()
    exact = {}  # name: (MSE, projection <E g_hat_B, g>, where they come from)
    for name in batch_rule_names():
        e = batch_enumeration(bandit, name, G, B)
        exact[name] = (e.mse, e.projection, f"exact by enumerating {e.n_batches} batches")
    exact[REMAX] = (greedy_baseline_exact(bandit, G, B).mse, float(bandit.grad @ bandit.grad),
                    "exact: the greedy baseline's moments, unbiased")
    names = tuple(exact)
    n_reps = strict_reps(ctx.reps(*REPS))
    checks, controls = [], []
    wrong = bandit.exact_mse("fullmean", G, B)
    slime = "slime_reinforce_pp_baseline"
    nemo = exact["nemo_rl_reinforce_pp"][0]  # the same centring, the population variance
    for i, backend in enumerate(("numba", "torch")):
        stat, labels = batch_rule_statistics(bandit, names + GROUP_RULES, G, B,
                                             backend=Backend(backend, "cpu"))
        est = run_monte_carlo(stat, n_reps, ctx.seed_for("C57", i), n_jobs=ctx.n_jobs,
                              labels=labels)
        where = f"{backend} backend, {n_reps} steps, G = {G}, B = {B}"
        for name in names:
            mse, se = est.get(("sq", name, G))
            proj, proj_se = est.get(("proj", name, G))
            want_mse, want_proj, how = exact[name]
            checks += [
                check_close(f"{name}: MSE ({backend})", want_mse, mse, se, z=Z_STRICT,
                            note=f"{where}; {how}"),
                check_close(f"{name}: <g_hat_B, g> ({backend})", want_proj, proj, proj_se,
                            z=Z_STRICT, note=where)]
            controls.append(abs(mse - wrong) / se)
            if name == slime:
                controls.append(abs(mse - nemo) / se)
        for name in GROUP_RULES:  # the route measured against the per-group theory
            mse, se = est.get(("sq", name, G))
            checks.append(check_close(f"{name}: MSE ({backend}), the per-group theory",
                                      bandit.exact_mse(name, G, B), mse, se, z=Z_STRICT,
                                      note=where))
    weakest = float(min(controls))
    checks.append(check_true(
        f"negative control: the full mean's exact MSE, and NeMo-RL's REINFORCE++ for slime's, "
        f"outside {Z_STRICT:g} se on both backends", weakest > Z_STRICT, weakest,
        evidence="monte-carlo",
        note="measured: the smallest |z|; a power check, no rate stated"))
    return checks
