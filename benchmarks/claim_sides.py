"""Which package functions both sides of a claim's comparison call, and why each shared one may be.

A claim that compares two routes shows something only where the routes share no code on the
path under test: an exact moment and a Monte Carlo that both take one helper's output agree
whatever the helper computes. For each claim of :data:`SIDES` this script runs each side alone
(a small call of the claim's own functions) under ``sys.setprofile``, lists the functions of
``ustat_rl`` each side enters (the claims package itself apart: it is the comparison, not the
code under test), and sets the intersection against :data:`SHARED_ALLOWED`, where every shared
function a claim may keep is justified in one line. ``tests/claims/test_claim_sides.py`` runs the
same scan and fails on a shared function without a reason.

Usage (from the repository root)::

    python benchmarks/claim_sides.py              # prints the table
    python benchmarks/claim_sides.py --markdown docs/claim_sides.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: Frames of these packages are the comparison itself, not a route under test.
NOT_ROUTES = ("ustat_rl.claims",)


def trace(func) -> set[str]:
    """The ``module.qualname`` of every ``ustat_rl`` function ``func()`` enters (Python frames;
    a compiled kernel counts as the Python function that calls it)."""
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("ustat_rl.") and not module.startswith(NOT_ROUTES):
            seen.add(f"{module}.{frame.f_code.co_qualname}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        func()
    finally:
        sys.setprofile(previous)
    return seen


def shared(sides: dict) -> set[str]:
    """The functions every side of ``sides`` (name -> zero-argument callable) enters."""
    traced = [trace(func) for func in sides.values()]
    return set.intersection(*traced) if traced else set()


# ---------------------------------------------------------------------------------------------
# The sides of each claim: small calls of the claim's own functions
# ---------------------------------------------------------------------------------------------


def _c46_sides():
    """Exact moments from the rule's two-point table against the enumeration of its advantages;
    the third route, the framework's formula written out, reads none of the rule's data."""
    import numpy as np

    from ustat_rl.advantages import get_rule
    from ustat_rl.claims.beyond_frameworks.conventions import (
        ENUM_LOGITS,
        ENUM_REWARD_PROB,
        enumerated_moments,
    )
    from ustat_rl.policies.softmax import SoftmaxBandit
    from ustat_rl.theory.advantage import advantage_moments

    bandit = SoftmaxBandit(np.array(ENUM_LOGITS), np.array(ENUM_REWARD_PROB))
    moments = bandit.moments()
    rule = get_rule("trl_group")
    return {"exact": lambda: advantage_moments(moments, rule, 3),
            "enumeration": lambda: enumerated_moments(bandit, 0, 3, rule)}


def _c57_sides():
    """Every batch enumerated against the Monte Carlo of the batch rules (numba backend)."""
    from ustat_rl.montecarlo import Backend, run_monte_carlo
    from ustat_rl.montecarlo.batch_rules import batch_rule_statistics
    from ustat_rl.policies.examples import small_bandit
    from ustat_rl.training.batch_study import batch_enumeration

    bandit = small_bandit()

    def monte_carlo():
        stat, labels = batch_rule_statistics(bandit, ("trl_batch",), 2, 2,
                                             backend=Backend("numba", "cpu"))
        return run_monte_carlo(stat, 2048, 0, labels=labels)

    return {"enumeration": lambda: batch_enumeration(bandit, "trl_batch", 2, 2),
            "monte carlo": monte_carlo}


def _c60_sides():
    """The package's weights against the reductions written out and differentiated."""
    import numpy as np

    from ustat_rl.claims.beyond_reach.reductions import (
        BATCH_LENGTHS,
        PADDED_WIDTH,
        PROMPT_IDS,
        PROMPT_LENGTHS,
        prompt_mean_written_out,
        written_out_weights,
    )
    from ustat_rl.frameworks.aggregation import aggregation_weights, prompt_mean_weights

    lengths = np.array(BATCH_LENGTHS)
    return {"package": lambda: (aggregation_weights(lengths, "seq-mean-token-mean"),
                                prompt_mean_weights(PROMPT_LENGTHS, PROMPT_IDS)),
            "written out": lambda: (written_out_weights("seq-mean-token-mean", lengths,
                                                        PADDED_WIDTH),
                                    prompt_mean_written_out(PROMPT_LENGTHS, PROMPT_IDS,
                                                            PADDED_WIDTH))}


def _c61_sides():
    """The monitor's entry against the windows built by hand."""
    from ustat_rl.claims.beyond_reach.monitor_entry import entry_windows, reference_windows

    return {"entry": lambda: entry_windows(7), "by hand": lambda: reference_windows(7)}


def _c64_sides():
    """The set over summary statistics of many tables against the set of one raw table."""
    import numpy as np

    from ustat_rl.stats.best_set import best_set, best_sets

    table = {2: [0.1, 0.2, 0.15], 4: [0.5, 0.55, 0.6], 8: [0.52, 0.5, 0.58]}
    return {"one table": lambda: best_set(table),
            "summaries": lambda: best_sets([[np.mean(v) for v in table.values()]],
                                           [[np.var(v, ddof=1) for v in table.values()]], 3)}


def _c65_sides():
    """The exact scale-free error against batches drawn and scored by the rule written out."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.scale_free import (
        BANDIT_LOGITS,
        BANDIT_PROMPT_PROB,
        BANDIT_REWARD_PROB,
        hand_gradient,
        sampled_estimates,
        scale_free_estimate,
    )
    from ustat_rl.policies.softmax import SoftmaxBandit
    from ustat_rl.theory.group_size import scale_free_error

    bandit = SoftmaxBandit(BANDIT_LOGITS, BANDIT_REWARD_PROB, BANDIT_PROMPT_PROB)
    return {"exact": lambda: scale_free_error(bandit.moments(), "trl_group", 8, [2, 4, 8]),
            "monte carlo": lambda: scale_free_estimate(
                sampled_estimates("trl_group", 4, 8, 64, np.random.default_rng(0)),
                hand_gradient())}


def _c66_sides():
    """The report's expected share of simulated groups against the share summed over the law."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.flat_groups import exact_flat_share
    from ustat_rl.frameworks import GroupedRewards
    from ustat_rl.frameworks.flat_groups import flat_group_report

    z = (np.random.default_rng(0).random(32) < 0.5).astype(float)
    table = GroupedRewards(np.repeat(np.arange(4), 8).astype(str), z)
    return {"report": lambda: flat_group_report(table, (2, 4)),
            "exact": lambda: exact_flat_share((2, 4))}


def _c67_sides():
    """The package's zetas (exact and estimated) against enumeration and loops over indices."""

    from ustat_rl.claims.beyond_answers.ustatistic import (
        ZETA_LOGITS,
        ZETA_REWARD_PROB,
        enumerated_zetas,
        grpo_kernel,
        looped_statistics,
        outcomes,
    )
    from ustat_rl.policies.softmax import SoftmaxBandit
    from ustat_rl.stats.ustatistics import estimate_zetas, u_statistic
    from ustat_rl.theory.hoeffding import kernel_zetas

    moments = SoftmaxBandit(ZETA_LOGITS, ZETA_REWARD_PROB).moments()
    sample = outcomes(1)[0][[0, 1, 3, 4, 5]]
    return {"package": lambda: (kernel_zetas(moments), estimate_zetas(grpo_kernel, sample),
                                u_statistic(grpo_kernel, sample)),
            "enumeration and loops": lambda: (enumerated_zetas(1), looped_statistics(sample))}


def _c69_sides():
    """The running normalisation's exact form and loop against both written out."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.running_norm import hand_population, written_loop
    from ustat_rl.claims.beyond_answers.scale_free import (
        BANDIT_LOGITS,
        BANDIT_PROMPT_PROB,
        BANDIT_REWARD_PROB,
    )
    from ustat_rl.policies.softmax import SoftmaxBandit
    from ustat_rl.theory.running_norm import fixed_statistics_exact, running_norm_monte_carlo

    bandit = SoftmaxBandit(BANDIT_LOGITS, BANDIT_REWARD_PROB, BANDIT_PROMPT_PROB)
    return {"package": lambda: (fixed_statistics_exact(bandit, 4, 2),
                                running_norm_monte_carlo(bandit, 4, 2, (1, 3), 16, 0)),
            "written out": lambda: (hand_population(),
                                    written_loop(3, 16, np.random.default_rng(0)))}


def _c71_sides():
    """The exact moment routes against every outcome enumerated, advantages written out."""
    from ustat_rl.claims.beyond_answers.enumerated_routes import (
        ROUTE_PRIOR,
        batch_mse,
        covariance,
        dynamic_sampling,
        loo,
        prompt_mse,
        route_bandit,
    )
    from ustat_rl.theory.advantage import dynamic_sampling_mse, per_prompt_advantage_mse
    from ustat_rl.theory.ebpo import EBPOPrior, ebpo_advantages, ebpo_exact
    from ustat_rl.theory.mse import per_prompt_covariance

    bandit = route_bandit()
    prior = EBPOPrior(*ROUTE_PRIOR)
    return {"exact": lambda: (per_prompt_advantage_mse(bandit.moments(), "grpo", 3, "arcsin"),
                              dynamic_sampling_mse(bandit.moments(), "grpo", 3, 2),
                              per_prompt_covariance(bandit.moments(matrices=True), "grpo", 3),
                              ebpo_exact(bandit.moments(), 3, 2, prior)),
            "enumeration": lambda: (prompt_mse(bandit, 3, loo, True),
                                    dynamic_sampling(bandit, 3, 2, loo),
                                    covariance(bandit, 3, loo),
                                    batch_mse(bandit, 3, 2, lambda z: ebpo_advantages(z, prior)))}


def _c72_sides():
    """The reports a user reads against the keep probabilities and binomial sums written out
    and section 7's dynamic-sampling MSE at the pilot's moments made binary."""
    from ustat_rl.claims.beyond_answers.filter_reports import (
        REPORT_BUDGET,
        hand_keep,
        hand_replace,
        report_pilot,
    )
    from ustat_rl.pilot.dynamic_sampling import pilot_dynamic_sampling
    from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
    from ustat_rl.pilot.replace_sampling import pilot_replace_sampling
    from ustat_rl.theory.advantage import binary_projection, dynamic_sampling_mse

    rollouts = report_pilot(0)
    moments = estimate_moments(pilot_statistics(rollouts))
    return {"report": lambda: pilot_replace_sampling(
                rollouts, pilot_dynamic_sampling(rollouts, REPORT_BUDGET)),
            "written out and section 7": lambda: (
                hand_keep(rollouts.reward, rollouts.prompt_id, (2, 4, 8, 16)),
                hand_replace(0.5, 4, 0.3),
                dynamic_sampling_mse(binary_projection(moments), "grpo", 4, 4))}


def _c73_sides():
    """The limit law and the eigenbasis form against the Lyapunov equation solved by hand."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.quadratic_law import (
        kronecker_sigma,
        law_problem,
        range_basis,
    )
    from ustat_rl.theory.limit_law import eigenbasis_covariance, quadratic_limit_law

    problem = law_problem()
    lam, basis = range_basis(problem.curvature)
    omega = 4.0 * basis.T @ problem.noise_cov @ basis
    return {"package": lambda: (quadratic_limit_law(problem, 2.0),
                                eigenbasis_covariance(lam, omega, 2.0)),
            "by hand": lambda: np.linalg.eigvals(
                np.diag(lam) @ kronecker_sigma(np.diag(lam), omega, 2.0))}


def _c74_sides():
    """The multi-reward kit's rule and tolerance against TRL's orders written out."""
    import numpy as np

    from ustat_rl.advantages.multichannel import get_multichannel_rule
    from ustat_rl.claims.beyond_answers.multichannel_kit import (
        KIT_WEIGHTS,
        float32_sum_then_normalize,
        kit_batch,
        normalize_then_sum,
    )
    from ustat_rl.conformance.multichannel import multichannel_tolerance

    z, ids = kit_batch()
    w = np.array(KIT_WEIGHTS)
    rule = get_multichannel_rule("trl_normalize_then_sum")
    return {"kit": lambda: (rule.advantages(z, ids, w),
                            multichannel_tolerance(rule, z, ids, w)),
            "written out": lambda: (normalize_then_sum(z, ids, w),
                                    float32_sum_then_normalize(z, ids, w))}


def _c75_sides():
    """The Monte Carlo routes against the enumeration, opo written out and the brute force."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.enumerated_routes import (
        batch_mse,
        full_mean,
        loo,
        prompt_mse,
        route_bandit,
    )
    from ustat_rl.claims.beyond_answers.sampled_routes import brute_force_allocation, written_opo
    from ustat_rl.montecarlo import run_monte_carlo
    from ustat_rl.montecarlo.bandit import (
        per_sample_squared_errors,
        prompt_averaged_squared_errors,
    )
    from ustat_rl.montecarlo.opo_lengths import iid_lengths, opo_advantages, opo_monte_carlo
    from ustat_rl.policies.examples import heterogeneous_score_bandit
    from ustat_rl.training.allocation import allocated_sizes

    bandit = route_bandit()
    loglinear, theta = heterogeneous_score_bandit()
    moments = loglinear.moments(theta, matrices=False)
    z, T = np.array([[1.0, 0.0, 1.0]]), np.array([[2, 5, 1]])
    return {"monte carlo": lambda: (
                prompt_averaged_squared_errors(bandit, ("grpo",), (2,), 64, 0),
                run_monte_carlo(per_sample_squared_errors(bandit, "grpo", 3, 2), 64, 0),
                opo_advantages(z, T),
                opo_monte_carlo(bandit, 4, 2, 16, np.random.default_rng(0), iid_lengths(1, 8)),
                allocated_sizes(loglinear, theta, "optimal", "grpo", 16)),
            "enumeration and written out": lambda: (
                prompt_mse(bandit, 2, loo), batch_mse(bandit, 3, 2, loo),
                batch_mse(bandit, 4, 2, full_mean), written_opo(z, T),
                brute_force_allocation(moments, 16))}


def _c76_sides():
    """The log-linear bandit's exact routes against its groups enumerated in parameter space."""
    from ustat_rl.claims.beyond_answers.enumerated_routes import loo
    from ustat_rl.claims.beyond_answers.loglinear_routes import (
        loglinear_problem,
        parameter_moments,
        parameter_mse,
    )
    from ustat_rl.theory.mse import minibatch_mse

    bandit, theta = loglinear_problem()
    return {"package": lambda: (bandit.prompt_covariance(theta, "grpo", 3),
                                bandit.exact_mse(theta, "grpo", 3, 4),
                                minibatch_mse(bandit.moments(theta, matrices=False)
                                              .restrict([0, 2]).reweight([0.4, 0.6]),
                                              "grpo", 3, 4)),
            "enumeration": lambda: parameter_mse(
                parameter_moments(bandit, theta, 3, lambda z, x: loo(z)), bandit.prompt_prob, 4)}


def _c77_sides():
    """A user's registered affine rule by name against every outcome of a group."""
    from ustat_rl.advantages.registry import register_rule, unregister_rule
    from ustat_rl.claims.beyond_answers.enumerated_routes import route_bandit
    from ustat_rl.claims.beyond_answers.user_rules import (
        USER_RULE_NAME,
        enumerated_moments,
        user_rule,
        written_out,
    )
    from ustat_rl.theory.mse import per_prompt_covariance, per_prompt_mse

    bandit = route_bandit()
    moments = bandit.moments(matrices=True)

    def package():
        register_rule(user_rule(), replace=True)
        try:
            return (per_prompt_mse(moments, USER_RULE_NAME, 3),
                    per_prompt_covariance(moments, USER_RULE_NAME, 3))
        finally:
            unregister_rule(USER_RULE_NAME)

    return {"package": package,
            "enumeration": lambda: enumerated_moments(bandit, 3, written_out)}


def _c78_sides():
    """The aggregation's exact mean against every group of outputs, weights written out."""
    import numpy as np

    from ustat_rl.claims.beyond_answers.aggregation_means import (
        HORIZON,
        OUTPUT_LENGTHS,
        OUTPUT_PROB,
        OUTPUT_REWARD,
        enumerated_mean,
        output_scores,
    )
    from ustat_rl.claims.beyond_answers.enumerated_routes import loo
    from ustat_rl.frameworks.aggregation import AGGREGATIONS, exact_aggregation_mean

    args = (np.array(OUTPUT_PROB), np.array(OUTPUT_REWARD), np.array(OUTPUT_LENGTHS),
            output_scores())
    return {"package": lambda: [exact_aggregation_mean(*args, "grpo", 3, mode, horizon=HORIZON)
                                for mode in AGGREGATIONS],
            "enumeration": lambda: [enumerated_mean(3, loo, mode) for mode in AGGREGATIONS]}


def _c52_pilot_sides():
    """The multi-reward pilot's moments against their U-statistics by loops over the draws."""
    import numpy as np

    from ustat_rl.claims.beyond_frameworks.multireward import looped_channel_moments
    from ustat_rl.pilot.channels import estimate_channel_moments

    rng = np.random.default_rng(0)
    prompt_id = rng.permutation(np.repeat([7, 2, 5], [3, 4, 6]))
    channels = (rng.random((prompt_id.size, 2)) < 0.5).astype(float)
    score = rng.normal(size=(prompt_id.size, 3))
    return {"package": lambda: estimate_channel_moments(prompt_id, channels, score),
            "loops": lambda: looped_channel_moments(prompt_id, channels, score)}


def _c80_sides():
    """A causal LM's pilot (full route) against per-answer gradients of the log-probability
    written out position by position."""
    from ustat_rl.claims.beyond_reach.causal_lm_routes import (
        TEMPERATURE,
        _padded,
        _pilot,
        gated_lm,
        written_scores,
    )

    model = gated_lm()
    _, seen = _pilot(model, 3, None, "auto")
    answers = _padded(seen)
    return {"package": lambda: _pilot(model, 3, None, "auto"),
            "written out": lambda: written_scores(model, answers, TEMPERATURE)}


def _c81_sides():
    """Small routes (TRL's group rule, a rule's function, the Gram matrix's restriction)
    against their forms written out in the claims package."""
    import numpy as np

    from ustat_rl.advantages.registry import get_rule
    from ustat_rl.claims.beyond_answers.small_routes import loo_written, trl_group_written
    from ustat_rl.theory.gram import FactoredGram
    from ustat_rl.training.std import trl_group_rule

    z, groups = np.array([1.0, 0.0, 1.0, 0.0, 0.0]), np.array([0, 0, 0, 1, 1])
    factor, diagonal = np.arange(6.0).reshape(3, 2), np.ones(3)

    def written():
        dense = factor @ factor.T
        dense[np.diag_indices(3)] = diagonal
        return trl_group_written(1.0, 2, 4), loo_written(z, groups), dense[np.ix_([2, 0], [2, 0])]

    return {"package": lambda: (trl_group_rule(1.0, 2, 4),
                                get_rule("grpo").function(z, groups, np.bincount(groups)),
                                FactoredGram(factor, diagonal).restrict([2, 0]).copy()),
            "written out": written}


#: Claim -> a function returning its sides (name -> zero-argument callable).
SIDES = {"C46": _c46_sides, "C57": _c57_sides, "C60": _c60_sides, "C61": _c61_sides,
         "C64": _c64_sides, "C65": _c65_sides, "C66": _c66_sides, "C67": _c67_sides,
         "C69": _c69_sides, "C71": _c71_sides,
         "C72": _c72_sides, "C73": _c73_sides,
         "C74": _c74_sides, "C75": _c75_sides,
         "C76": _c76_sides, "C77": _c77_sides, "C78": _c78_sides,
         "C80": _c80_sides, "C81": _c81_sides, "C52.pilot": _c52_pilot_sides}

#: Claim -> shared function -> why sharing it does not hide a bug of the route under test. A
#: prefix ending in "." allows every function of a module.
SHARED_ALLOWED = {
    "C46": {
        "ustat_rl.advantages.": "the rule's coefficients and divisor are read by both sides "
                                "traced here; the claim's third side enumerates with each "
                                "framework's formula written out (literal_enumerated_moments), "
                                "which reads none of the rule's data",
        "ustat_rl._validation.": "argument checks only",
        "ustat_rl.policies.softmax.": "the bandit's exact probabilities and scores are the "
                                      "problem, not the route (C1-C10 check them)",
    },
    "C57": {
        "ustat_rl.advantages.": "the rule's batch statistics are computed by the rule on both "
                                "sides; C46's literal_checks set every rule against its "
                                "framework's formula written out",
        "ustat_rl._validation.": "argument checks only",
        "ustat_rl.policies.": "the bandit is the problem, not the route",
        "ustat_rl.seeding.": "seed derivation only",
    },
    "C60": {},
    "C65": {},
    "C66": {},
    "C67": {},
    "C69": {},
    "C72": {
        "ustat_rl.theory.advantage.": "section 7's per-count terms (c(x), E||g_hat(x)||^2, the "
                                      "all-equal probability), the projection to binary and "
                                      "the unfiltered batch's MSE: the input of both sides, "
                                      "set against every outcome enumerated by C71 and C46; "
                                      "C72 tests the reports' assembly from them",
        "ustat_rl.theory.moments.": "the moments' container, validation and batch terms "
                                    "(C71 checks the batch MSE built on them)",
        "ustat_rl.theory.gram.": "the Gram matrix's container",
        "ustat_rl.advantages.": "leave-one-out's table, read by both sides (C46 sets the tables "
                                "against enumeration)",
        "ustat_rl._validation.": "argument checks only",
    },
    "C73": {},
    "C76": {
        "ustat_rl.theory.moments.": "the tabular bandit validates its own moments when it is "
                                    "made; the enumeration reads only its probabilities and "
                                    "scores",
        "ustat_rl.theory.mse._check_moments": "the same construction's argument check",
        "ustat_rl.theory.mse.prompt_heterogeneity": "computed when the tabular bandit is made; "
                                                    "no enumerated number reads it",
        "ustat_rl.policies.loglinear.LogLinearBandit._theta": "theta's shape check",
        "ustat_rl._validation.": "argument checks only",
    },
    "C74": {},
    "C77": {"ustat_rl._validation.": "argument checks only (the enumeration's group size)"},
    "C78": {},
    "C52.pilot": {},
    "C75": {
        "ustat_rl.theory.mse.": "the per-prompt MSE is the objective both the allocation and "
                                "the brute force minimise: the comparison tests the search "
                                "(C5 and C71 set the MSE against enumeration)",
        "ustat_rl.theory.affine.": "the per-prompt MSE's affine form, as above",
        "ustat_rl.theory.moments.": "the moments' container",
        "ustat_rl.advantages.": "leave-one-out's coefficients inside the per-prompt MSE, as above",
        "ustat_rl.policies.softmax.": "the bandit's scores are the problem, not the route "
                                      "(C1-C10 check them)",
        "ustat_rl._validation.": "argument checks only",
    },
    "C71": {
        "ustat_rl._validation.": "argument checks only",
        "ustat_rl.theory.ebpo._prior": "the prior's type check only",
        "ustat_rl.theory.ebpo.EBPOPrior.weight": "EBPO's S: the claim also sets ebpo_advantages "
                                                 "against S written out",
    },
    "C61": {
        "ustat_rl.scores.": "the sketch is C44's claim (factored sketch against exact scores)",
        "ustat_rl.frameworks.window.": "window_record is the reference the entry is checked "
                                       "against; C48 checks it against gstar_report",
        "ustat_rl.frameworks.trajectory.": "the record's container and its serialisation",
        "ustat_rl.frameworks.grouped.": "the all-equal fraction inside window_record (C48)",
        "ustat_rl.frameworks.flat_groups.": "the window's flat-group shares inside window_record "
                                            "(C66 checks them against simulated groups)",
        "ustat_rl.frameworks.generation.": "the Generation container (reference side builds "
                                           "it only to feed the entry's inputs)",
        "ustat_rl.frameworks.aggregation.prompt_mean_weights": "the loop's weights are an "
                                                               "input both sides receive, "
                                                               "checked by C60",
        "ustat_rl.frameworks.config.": "the monitor's settings",
        "ustat_rl.pilot.": "the window's statistics inside window_record (C17, C32, C48, C53)",
        "ustat_rl.theory.": "G* and the fixed-budget curve inside window_record (C17, C48)",
        "ustat_rl.advantages.": "the run rule's advantages inside window_record (C46, C53)",
        "ustat_rl.stats.": "intervals inside window_record",
        "ustat_rl.weighted_chi2.": "the limit law inside window_record's report",
        "ustat_rl._validation.": "argument checks only",
        "ustat_rl._paths.": "the config's output paths checked (none here)",
        "ustat_rl.formatting.": "the record's JSON form",
        "ustat_rl.tolerances.": "named constants",
    },
    "C64": {
        "ustat_rl.stats.best_set.best_sets": "best_set is best_sets on one table by design; "
                                             "C64's rate checks hold best_sets to the level, "
                                             "and best_set on raw tables to best_sets",
        "ustat_rl.stats.best_set.best_sets.<locals>.": "best_sets' own inner helper",
        "ustat_rl.stats.best_set._welch_parts": "one home of Welch's formula; the tests hold "
                                                "it to hand-computed values",
    },
}


def unexplained(claim: str, functions) -> list[str]:
    """The shared functions of ``claim`` with no reason in :data:`SHARED_ALLOWED`."""
    allowed = SHARED_ALLOWED.get(claim, {})
    return sorted(f for f in functions
                  if not any(f == key or (key.endswith(".") and f.startswith(key))
                             for key in allowed))


def scan(claims=None) -> dict:
    """``claim -> (shared functions, unexplained ones)`` for the claims of :data:`SIDES`."""
    out = {}
    for claim in claims or SIDES:
        both = shared(SIDES[claim]())
        out[claim] = (sorted(both), unexplained(claim, both))
    return out


def markdown(result: dict) -> str:
    lines = ["# Functions both sides of a claim call", "",
             "Written by `python benchmarks/claim_sides.py --markdown docs/claim_sides.md`; "
             "each side traced alone (`sys.setprofile`), the claims package apart.", "",
             "| claim | shared functions | without a reason |", "|---|---|---|"]
    for claim, (both, missing) in result.items():
        lines.append(f"| {claim} | {len(both)} | {', '.join(missing) or 'none'} |")
    lines += ["", "Reasons (docs/theory.md, the claims' notes):", ""]
    for claim, reasons in SHARED_ALLOWED.items():
        for key, why in reasons.items():
            lines.append(f"- {claim}, `{key}`: {why}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, default=None, help="write the table here")
    args = parser.parse_args(argv)
    result = scan()
    text = markdown(result)
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text)
    return result


if __name__ == "__main__":
    main()
