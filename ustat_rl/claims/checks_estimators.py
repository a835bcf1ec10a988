"""Checks of the estimator identities and the U-statistic structure (C1-C4, C28)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..estimators import fullmean_gradient, grpo_gradient, grpo_gradient_pairwise
from ..examples import arithmetic_bandit, small_bandit
from ..montecarlo import bandit_statistics, run_monte_carlo
from ..ustatistics import hoeffding_parts, ustat_variance
from ._common import enumerate_prompt_estimates, mc_errors, slope_check
from .registry import Z_CHECK, check_close, check_exact, check_true, register
from .symbolic import symbolic_checks

#: Level of the normality test in C28: rejects a true normal law with probability 1e-4.
NORMALITY_ALPHA = 1e-4


def _random_groups(rng, sizes, dim=5):
    for g in sizes:
        yield g, rng.normal(size=(3, g, dim)), rng.normal(size=(3, g))


@register("C1", "The leave-one-out GRPO gradient equals the order-2 U-statistic with kernel "
          "h_ij = (W_i - W_j)(Z_i - Z_j)/2, for every G >= 2.", "Lemma 1",
          "O(G) estimator vs O(G^2) pairwise sum on random vectors")
def check_c1(ctx):
    rng = np.random.default_rng(ctx.seed_for("C1"))
    fast, slow = [], []
    for _g, score, reward in _random_groups(rng, [2, 3, 5, 8, 17, 64]):
        fast.append(grpo_gradient(score, reward, per_prompt=True))
        slow.append(grpo_gradient_pairwise(score, reward, per_prompt=True))
    checks = [check_exact("leave-one-out == pairwise U-statistic, G in {2,3,5,8,17,64}",
                          np.concatenate(slow), np.concatenate(fast))]
    return checks + symbolic_checks("C1")


@register("C2", "The full-mean estimator (TRL/verl/OpenRLHF without std) equals (G-1)/G times "
          "the leave-one-out estimator.", "docs/theory.md C2 [derived]",
          "identity on random vectors")
def check_c2(ctx):
    rng = np.random.default_rng(ctx.seed_for("C2"))
    lhs, rhs = [], []
    for g, score, reward in _random_groups(rng, [2, 3, 8, 64]):
        lhs.append(fullmean_gradient(score, reward, per_prompt=True))
        rhs.append((g - 1) / g * grpo_gradient(score, reward, per_prompt=True))
    checks = [check_exact("full-mean == (G-1)/G x leave-one-out, G in {2,3,8,64}",
                          np.concatenate(rhs), np.concatenate(lhs))]
    return checks + symbolic_checks("C2")


def unbiasedness_checks(ctx, claim_id: str, estimator: str, n_reps: int, group_size: int = 64):
    """Exact and Monte Carlo checks that ``estimator`` has mean ``g(x)`` (C3).

    Used by C3 with ``"grpo"``; the negative control runs it with ``"fullmean"``.
    """
    bandit = small_bandit()
    checks = []
    for g in (2, 3, 4):
        for x in range(bandit.n_prompts):
            values, prob = enumerate_prompt_estimates(bandit, x, g, estimator)
            checks.append(check_exact(f"E[{estimator}] == g(x) by enumeration, x={x}, G={g}",
                                      bandit.grad_per_prompt[x], prob @ values))
    big = arithmetic_bandit(2.8)
    x = 0
    g_x = big.grad_per_prompt[x]
    direction = big.embed(x, g_x / np.linalg.norm(g_x))
    stat, labels = bandit_statistics(big, (estimator,), (group_size,), prompt=x,
                                     direction=direction)
    est = run_monte_carlo(stat, n_reps, ctx.seed_for(claim_id, 1), n_jobs=ctx.n_jobs,
                          labels=labels)
    mean, se = est.get(("proj", estimator, group_size))
    checks.insert(0, check_close(f"E<{estimator}, g/|g|> == |g(x)|, G={group_size}, MC",
                                 np.linalg.norm(g_x), mean, se))
    return checks


@register("C3", "The GRPO gradient is unbiased for g(x) for every G >= 2 (h0 = g).",
          "Lemma 1 / Theorem 2", "enumeration of all groups (G <= 4) and Monte Carlo (G = 64)")
def check_c3(ctx):
    return unbiasedness_checks(ctx, "C3", "grpo", ctx.reps(200_000, 2_000_000))


@register("C4", "Hoeffding decomposition of the GRPO kernel: h0 = g, 2(h1 - h0) = W(Z - V) - g "
          "(the oracle estimator minus g), h2 degenerate, parts uncorrelated, and "
          "Var = (4(G-2) zeta1 + 2 zeta2)/(G(G-1)) equals the exact GRPO MSE.",
          "Lemma 1, Theorem 2", "enumeration of the kernel on a softmax bandit")
def check_c4(ctx):
    bandit = small_bandit()
    checks = []
    for x in range(bandit.n_prompts):
        comp = bandit.hoeffding(x)
        w = bandit.score_table[x][comp.outcome_action]  # (2K, K)
        oracle_part = w * (comp.outcome_reward - bandit.value[x])[:, None] - comp.h0
        checks += [
            check_exact(f"h0 == g(x), x={x}", bandit.grad_per_prompt[x], comp.h0),
            check_exact(f"2(h1 - h0) == W(Z - V) - g, x={x}", oracle_part, 2 * (comp.h1 - comp.h0)),
            check_exact(f"E_o' h2(o, o') == 0 (degenerate), x={x}", np.zeros_like(comp.h1),
                        np.einsum("q,oqk->ok", comp.outcome_prob, comp.h2)),
            check_exact(f"zeta1 == tr Sigma_oracle / 4, x={x}",
                        bandit.trace_sigma_oracle[x] / 4, comp.zeta1),
        ]
        sizes = np.arange(2, 12)
        variance = [ustat_variance(comp.zeta1, comp.zeta2, g) for g in sizes]
        exact = [bandit.exact_mse_per_prompt("grpo", g)[x] for g in sizes]
        checks.append(check_exact(f"Var U from zetas == exact GRPO MSE, G=2..11, x={x}",
                                  exact, variance))
    # Sample-level identity U = h0 + linear + degenerate on random groups of the bandit.
    rng = np.random.default_rng(ctx.seed_for("C4"))
    x = 1
    comp = bandit.hoeffding(x)
    sample = bandit.sample_groups(9, 1, rng, prompt=x)
    w = bandit.scores(sample.prompt, sample.action)[0]  # (G, K)
    data = np.column_stack([w, sample.reward[0]])  # (G, K+1): score and reward per sample

    def kernel(a, b):
        return 0.5 * (a[..., :-1] - b[..., :-1]) * (a[..., -1:] - b[..., -1:])

    def h1(d):
        return 0.5 * (d[:, :-1] * (d[:, -1:] - bandit.value[x]) + comp.h0)

    parts = hoeffding_parts(kernel, data, comp.h0, h1)
    checks.append(check_exact("U == h0 + linear + degenerate on a sampled group (G=9)", parts.u,
                              parts.h0 + parts.linear + parts.degenerate))
    checks.append(check_exact("U == grpo_gradient on that group", grpo_gradient(w, sample.reward[0]),
                              parts.u))
    return checks + symbolic_checks("C4")


@register("C28", "Non-degenerate U-statistic CLT: sqrt(G)(U - h0) -> N(0, 4 zeta1) with "
          "4 zeta1 = tr Sigma_oracle; the degenerate part is O_p(1/G).",
          "Hoeffding (1948); used in Theorem 2", "exact variance, MC slope, normality test")
def check_c28(ctx):
    bandit = arithmetic_bandit(2.8)
    x = 3
    comp = bandit.hoeffding(x)
    sizes = np.array([8, 16, 32, 64, 128, 256])
    g_var = np.array([g * ustat_variance(comp.zeta1, comp.zeta2, g) for g in sizes])
    limit = 4 * comp.zeta1
    checks = [check_exact("G Var U - 4 zeta1 == (2 zeta2 - 4 zeta1)/(G - 1)",
                          (2 * comp.zeta2 - 4 * comp.zeta1) / (sizes - 1), g_var - limit),
              check_exact("4 zeta1 == tr Sigma_oracle(x)", bandit.trace_sigma_oracle[x], limit)]
    est = mc_errors(ctx, "C28", bandit, sizes, ctx.reps(40_000, 400_000), estimators=("grpo",),
                    prompt=x)
    deg = [("degenerate", int(g)) for g in sizes]
    exact_deg = np.array([bandit.exact_mse_per_prompt("grpo", g)[x]
                          - bandit.exact_mse_per_prompt("oracle", g)[x] for g in sizes])
    checks.append(slope_check("degenerate part E||U - U_hajek||^2 slope (O_p(1/G)^2)", sizes, est,
                              deg, exact_deg, -2.0))
    for g in (sizes[0], sizes[-1]):
        m, se = est.get(("grpo", int(g)))
        checks.append(check_close(f"G E||U - g||^2 == (4(G-2)zeta1+2zeta2)/(G-1), G={g}",
                                  g * ustat_variance(comp.zeta1, comp.zeta2, int(g)), g * m, g * se))
    stat_big = normality_pvalue(ctx, bandit, x, 256, ctx.reps(2000, 20000))
    checks.append(check_true(f"sqrt(G)(U - g).u normal at G=256: KS p = {stat_big:.3g} "
                             f">= {NORMALITY_ALPHA:g}", stat_big >= NORMALITY_ALPHA, stat_big,
                             "monte-carlo", "KS test against N(0, u' 4 Sigma_1 u) with exact "
                             "finite-G variance; false-failure rate 1e-4"))
    stat_small = normality_pvalue(ctx, bandit, x, 2, ctx.reps(2000, 20000))
    checks.append(check_true(f"power: the same test rejects normality at G=2 (p = {stat_small:.3g})",
                             stat_small < NORMALITY_ALPHA, stat_small, "monte-carlo",
                             "lattice law of a two-sample group: the test must reject it"))
    return checks


def normality_pvalue(ctx, bandit, prompt: int, group_size: int, n_reps: int) -> float:
    """KS p-value of the standardised projection of sqrt(G)(U - g) onto g/|g| (C28)."""
    g_x = bandit.grad_per_prompt[prompt]
    u = g_x / np.linalg.norm(g_x)
    comp = bandit.hoeffding(prompt)
    # exact variance of the projection: Var(u'U) from the projected kernel's zetas
    h1c = (comp.h1 - comp.h0) @ u
    hc = (comp.kernel - comp.h0) @ u
    zeta1 = float(comp.outcome_prob @ h1c**2)
    zeta2 = float(comp.outcome_prob @ hc**2 @ comp.outcome_prob)
    sd = np.sqrt(ustat_variance(zeta1, zeta2, group_size))
    stat, _ = bandit_statistics(bandit, ("grpo",), (group_size,), prompt=prompt,
                                direction=bandit.embed(prompt, u))
    rng = np.random.default_rng(ctx.seed_for("C28", group_size))
    values = (stat(rng, n_reps)[:, 1] - np.linalg.norm(g_x)) / sd
    return float(stats.kstest(values, "norm").pvalue)


__all__ = ["Z_CHECK", "unbiasedness_checks", "normality_pvalue"]
