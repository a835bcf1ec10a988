"""Corollary 5 and its finite-G consequences: prompt-only baselines under Assumption 2 (C8),
the optimal constant baseline (C9), the reversal map (C10) and the Fig. 4 pattern (C11), on a
bandit analogue and on three warm-up transformer policies (C11.tf, exact enumeration of their
111 outputs per prompt).
"""

from __future__ import annotations

import numpy as np

from ... import theory
from ...advantages.gradients import baseline_gradient
from ...montecarlo import bandit_squared_errors, run_monte_carlo
from ...policies.examples import (
    POLICY_STRENGTHS,
    arithmetic_bandit,
    assumption2_bandit,
    baseline_counterexample_bandit,
    one_answer_bandit,
    reversal_bandit,
)
from ...policies.transformer import POLICY_NAMES, exact_moments, load_study_policy
from ...tolerances import Z_STRICT, strict_reps
from ...training.transformer import moderate_questions
from .._common import (
    mc_errors,
)
from .._transformer import GROUPS, study_moments, study_splits
from ..registry import Z_CHECK, check_close, check_exact, check_true, register
from ..symbolic import symbolic_checks


@register("C8", "Under Assumption 2 (Cov(||W||^2, Z | x) = 0), any prompt-only baseline b has "
          "MSE(b) = [tr Sigma_oracle + E||W||^2 (V - b)^2]/G >= tr Sigma_oracle/G: GRPO is "
          "asymptotically MSE-optimal in that class and beats vanilla when V != 0.",
          "Corollary 5", "a bandit where Assumption 2 holds exactly; enumeration and Monte Carlo")
def check_c8(ctx):
    bandit = assumption2_bandit()
    g = 8
    checks = [check_exact("Cov(||W||^2, Z | x) == 0", np.zeros(bandit.n_prompts),
                          bandit.score_reward_covariance, atol=1e-14)]
    for b in (0.0, 0.25, 0.9):
        closed = theory.assumption2_baseline_mse(bandit.moments(), b, g)
        checks.append(check_exact(f"MSE(b={b}) == [tr Sigma + E||W||^2 (V-b)^2]/G, G={g}", closed,
                                  bandit.baseline_mse_per_prompt(b, g)))
    grid = np.linspace(0.0, 1.0, 2001)
    best = [grid[np.argmin([bandit.baseline_mse_per_prompt(b, g)[x] for b in grid])]
            for x in range(bandit.n_prompts)]
    checks.append(check_exact("argmin over constant baselines == V(x) (grid step 5e-4)",
                              bandit.value, best, rtol=0.0, atol=5e-4))
    big = 256
    checks.append(check_true(f"GRPO beats vanilla at G={big} (V != 0)", bool(np.all(
        bandit.exact_mse_per_prompt("grpo", big) < bandit.exact_mse_per_prompt("vanilla", big)))))
    # Monte Carlo for a non-value baseline, through the literal per-sample route
    x, b = 0, 0.25

    def statistic(rng, n):
        sample = bandit.sample_groups(g, n, rng, prompt=x)
        score = bandit.scores(sample.prompt, sample.action)
        est = baseline_gradient(score, sample.reward, b, per_prompt=True)
        return np.sum((est - bandit.grad_per_prompt[x]) ** 2, axis=1)[:, None]

    mc = run_monte_carlo(statistic, ctx.reps(40_000, 400_000), ctx.seed_for("C8"))
    closed = theory.assumption2_baseline_mse(bandit.moments(), b, g)[x]
    checks.append(check_close(f"MC MSE(b={b}) == closed form, prompt {x}, G={g}", closed,
                              mc.mean[0], mc.std_error[0]))
    return checks + symbolic_checks("C8")


REVERSAL_P = np.round(np.arange(0.05, 0.96, 0.05), 2)


REVERSAL_G = np.arange(2, 65)


@register("C9", "Without Assumption 2 the MSE-optimal constant baseline is b* = E[||W||^2 Z]/"
          "E||W||^2, which can beat the value baseline V.", "docs/theory.md C9 [derived]",
          "counterexample bandit: exact and paired Monte Carlo")
def check_c9(ctx):
    bandit = baseline_counterexample_bandit()
    g, x = 4, 0
    b_star = bandit.optimal_constant_baseline[x]
    grid = np.linspace(0.0, 1.0, 2001)
    best = grid[np.argmin([bandit.baseline_mse_per_prompt(b, g)[x] for b in grid])]
    mse_star = bandit.baseline_mse_per_prompt(b_star, g)[x]
    mse_value = bandit.exact_mse_per_prompt("oracle", g)[x]
    checks = [
        check_exact("argmin over constant baselines == b* (grid step 5e-4)", b_star, best,
                    rtol=0.0, atol=5e-4),
        check_true(f"exact MSE(b*) = {mse_star:.4g} < MSE(V) = {mse_value:.4g}",
                   mse_star < mse_value, mse_star / mse_value),
        check_exact("MSE(V) - MSE(b*) == E||W||^2 (V - b*)^2 / G",
                    bandit.score_sq_norm[x] * (bandit.value[x] - b_star) ** 2 / g,
                    mse_value - mse_star),
    ]
    diff_mean, diff_se = paired_baseline_difference(ctx, bandit, b_star, g, ctx.reps(40_000, 400_000))
    checks.insert(0, check_close("MC MSE(V) - MSE(b*) == exact", mse_value - mse_star, diff_mean,
                                 diff_se))
    checks.append(check_true(f"MC difference significant: {diff_mean / diff_se:.1f} se > {Z_CHECK}",
                             diff_mean > Z_CHECK * diff_se, diff_mean / diff_se, "monte-carlo"))
    return checks + symbolic_checks("C9")


def paired_baseline_difference(ctx, bandit, baseline: float, group_size: int, n_reps: int):
    """Monte Carlo ``MSE(V) - MSE(baseline)`` at prompt 0 from the same groups (paired)."""
    from ...advantages.gradients import baseline_gradient

    x = 0
    target = bandit.grad_per_prompt[x]

    def statistic(rng, n):
        sample = bandit.sample_groups(group_size, n, rng, prompt=x)
        score = bandit.scores(sample.prompt, sample.action)
        with_value = baseline_gradient(score, sample.reward, bandit.value[x], per_prompt=True)
        with_b = baseline_gradient(score, sample.reward, baseline, per_prompt=True)
        return (np.sum((with_value - target) ** 2, axis=1)
                - np.sum((with_b - target) ** 2, axis=1))[:, None]

    est = run_monte_carlo(statistic, n_reps, ctx.seed_for("C9", 1), n_jobs=ctx.n_jobs)
    return float(est.mean[0]), float(est.std_error[0])


def reversal_map(p_values=REVERSAL_P, sizes=REVERSAL_G):
    """Exact sign of MSE_vanilla - MSE_grpo over (p, G) and the C10 closed-form condition.

    Returns ``(grpo_wins_exact, grpo_wins_condition, grpo_wins_rule)``, boolean arrays of shape
    ``(len(p_values), len(sizes))``; the rule is the rough ``G - 1 > (1 - p)/p``.
    """
    exact = np.zeros((len(p_values), len(sizes)), dtype=bool)
    condition = np.zeros_like(exact)
    for i, p in enumerate(p_values):
        moments = reversal_bandit(p).moments()
        exact[i] = theory.grpo_vanilla_margin(moments, sizes)[0] > 0
        condition[i] = theory.reversal_condition(moments, sizes)[0]
    rule = (sizes[None, :] - 1) > (1 - p_values[:, None]) / p_values[:, None]
    return exact, condition, rule


@register("C10", "Finite-G reversal: GRPO beats vanilla iff (E||W||^2 Var Z + ||g||^2)/(G-1) < "
          "E||W||^2 V^2 (under Assumption 2); for binary rewards roughly G - 1 > (1-p)/p.",
          "docs/theory.md C10 [derived]", "exact map over p x G, rough rule, Monte Carlo at cells")
def check_c10(ctx):
    exact, condition, rule = reversal_map()
    agree = float(np.mean(rule == exact))
    boundary = np.argmax(exact, axis=1)  # first G index where GRPO wins
    off = [np.abs(np.flatnonzero(rule[i] != exact[i]) - boundary[i]).max(initial=0)
           for i in range(len(REVERSAL_P))]
    checks = [
        check_exact("closed-form condition == sign of exact MSE difference, 19 p x 63 G",
                    exact.astype(float), condition.astype(float)),
        check_true(f"rough rule G-1 > (1-p)/p agrees in {agree:.1%} of cells; disagreements "
                   f"within {max(off)} of the exact boundary in G", max(off) <= 2, agree),
    ]
    rng_stream = 0
    for p, g in ((0.2, 2), (0.2, 16), (0.5, 2), (0.5, 8)):
        bandit = reversal_bandit(p)
        stat, labels = bandit_squared_errors(bandit, ("vanilla", "grpo"), (g,), prompt=0)
        rng_stream += 1
        est = run_monte_carlo(stat, ctx.reps(40_000, 400_000), ctx.seed_for("C10", rng_stream),
                              labels=labels, n_jobs=ctx.n_jobs)
        diff, se = est.contrast({("vanilla", g): 1.0, ("grpo", g): -1.0})
        truth = bandit.exact_mse_per_prompt("vanilla", g)[0] - bandit.exact_mse_per_prompt("grpo", g)[0]
        checks.append(check_close(f"MC MSE_vanilla - MSE_grpo at p={p}, G={g} "
                                  f"({'GRPO wins' if truth > 0 else 'vanilla wins'})",
                                  truth, diff, se))
    return checks + symbolic_checks("C10")


@register("C11", "Fig. 4 pattern: vanilla > GRPO > oracle at moderate p for G in 4..64; GRPO ~ "
          "oracle by G ~ 8 and indistinguishable at 32-64; all MSEs fall with G and as the "
          "policy gets stronger.", "Fig. 4", "three policy strengths of a bandit analogue; exact "
          "and Monte Carlo (prompt-averaged per-prompt MSE)")
def check_c11(ctx):
    sizes = (4, 8, 16, 32, 64)
    checks = []
    curves = {}
    for name, strength in POLICY_STRENGTHS.items():
        bandit = arithmetic_bandit(strength)
        curves[name] = {e: np.array([bandit.prompt_averaged_mse(e, g) for g in sizes])
                        for e in ("vanilla", "grpo", "oracle")}
        c = curves[name]
        checks.append(check_true(f"{name}: vanilla > GRPO > oracle at G=4..64 (exact)",
                                 bool(np.all(c["vanilla"] > c["grpo"]) and np.all(c["grpo"] > c["oracle"]))))
        r8, r32 = c["grpo"][1] / c["oracle"][1], c["grpo"][3] / c["oracle"][3]
        checks.append(check_true(f"{name}: GRPO/oracle = {r8:.3f} <= 1.25 at G=8 and "
                                 f"{r32:.3f} <= 1.05 at G=32", r8 <= 1.25 and r32 <= 1.05, r8,
                                 note="our reading of 'approx' and 'indistinguishable'"))
        checks.append(check_true(f"{name}: every MSE falls with G",
                                 all(bool(np.all(np.diff(v) < 0)) for v in c.values())))
        # Monte Carlo confirmation at one prompt: the ordering at G = 8 (nine comparisons, at
        # Z_STRICT to stay within a claim's share of the run's budget: ustat_rl.tolerances)
        est = mc_errors(ctx, "C11", bandit, (8,), ctx.reps(strict_reps(20_000),
                                                           strict_reps(200_000)),
                        prompt=0, stream=int(10 * strength))
        for e in ("vanilla", "grpo", "oracle"):
            m, se = est.get((e, 8))
            checks.append(check_close(f"{name}: MC MSE_{e} at prompt 0, G=8",
                                      bandit.exact_mse_per_prompt(e, 8)[0], m, se, z=Z_STRICT))
    names = list(POLICY_STRENGTHS)
    for e in ("grpo", "oracle", "vanilla"):
        falls = all(bool(np.all(curves[b][e] < curves[a][e])) for a, b in zip(names, names[1:]))
        note = ("" if falls or e != "vanilla" else
                "differs on the analogue: vanilla's excess E||W||^2 V^2/G grows with V (C10), and "
                "the bandit's score norm does not shrink as the policy improves, as an LLM's may")
        checks.append(check_true(f"MSE_{e} falls as the policy gets stronger (all G)", falls,
                                 note=note, required=e != "vanilla"))
    contrast = one_answer_bandit(POLICY_STRENGTHS["few-shot"])
    van, ora = (contrast.prompt_averaged_mse(e, 8) for e in ("vanilla", "oracle"))
    checks.append(check_true(
        f"contrast (one correct answer, Assumption 2 fails): vanilla {van:.3g} < oracle {ora:.3g} "
        "at G=8, as C9 predicts", van < ora and bool(np.all(contrast.score_reward_covariance < 0)),
        van / ora, note="the Fig. 4 ordering needs Cov(||W||^2, Z) ~ 0"))
    return checks


@register(
    "C11.tf",
    "Fig. 4 pattern on transformers: MSE vanilla > GRPO > oracle at moderate p for G in 4..64, "
    "GRPO approaching oracle, all MSEs falling with G and as the policy gets stronger",
    "Fig. 4, Section 5",
    "exact enumeration of the 111 outputs per prompt for three warm-up transformer policies",
)
def check_c11_tf(ctx):
    n_prompts = ctx.reps(6, 500)
    test = list(study_splits().test)
    checks, common = [], {}
    for name in POLICY_NAMES:
        policy, _ = load_study_policy(name, device="cpu")
        mod = moderate_questions(policy, test, limit=n_prompts)
        m = exact_moments(policy, mod)
        mse = {e: theory.prompt_averaged_mse(m, e, GROUPS) for e in ("vanilla", "grpo", "oracle")}
        ratio = mse["grpo"] / mse["oracle"]
        checks.append(check_true(
            f"{name}: GRPO > oracle, G in {GROUPS}", bool(np.all(ratio > 1)),
            float(ratio.min()), note=f"{len(mod)} prompts with 0.2 <= V <= 0.8; min ratio shown"))
        checks.append(check_true(
            f"{name}: GRPO/oracle - 1 decreasing in G (GRPO approaches oracle)",
            bool(np.all(np.diff(ratio) < 0)), float(ratio[-1]), note="ratio at G = 64 shown"))
        # the paper's ordering; C9/C10 predict it can fail when ||W||^2 and Z are correlated
        b_star = np.mean(theory.optimal_constant_baseline(m)) / np.mean(m.value)
        ordering = mse["vanilla"] > mse["grpo"]
        checks.append(check_true(
            f"{name}: vanilla > GRPO at moderate p, G in {GROUPS}", bool(np.all(ordering)),
            float((mse["vanilla"] / mse["grpo"]).min()),
            note=f"min vanilla/GRPO ratio shown; holds at G = "
                 f"{[g for g, o in zip(GROUPS, ordering) if o]}; mean E[|W|^2 Z]/E|W|^2 / mean V = "
                 f"{b_star:.2f} (1 under Assumption 2)", required=False))
        checks.append(check_true(f"{name}: every MSE falls with G",
                                 all(np.all(np.diff(v) < 0) for v in mse.values())))
        common[name] = theory.prompt_averaged_mse(study_moments(name, test[:n_prompts]), "grpo", 16)
    values = [common[n] for n in POLICY_NAMES]
    checks.append(check_true(
        "GRPO MSE at G = 16 falls as the policy gets stronger (weak > medium > strong)",
        bool(values[0] > values[1] > values[2]), float(values[2] / values[0]),
        note=f"same {n_prompts} test prompts; MSEs {np.round(values, 1).tolist()}",
        required=False))
    return checks
