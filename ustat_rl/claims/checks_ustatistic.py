"""Lemma 1, Theorem 2, Proposition 3 and Corollary 4: the GRPO gradient as a U-statistic
and its exact finite-G MSE (C1-C7), the U-statistic CLT (C28) and reward scaling (C30).
"""

from __future__ import annotations

import numpy as np

from ..advantages.gradients import fullmean_gradient, grpo_gradient, grpo_gradient_pairwise
from ..montecarlo import bandit_squared_errors, bandit_statistics, run_monte_carlo
from ..policies.examples import arithmetic_bandit, small_bandit
from ..policies.softmax import SoftmaxBandit
from ..stats.rates import fit_mse_rate, loglog_slope
from ..stats.ustatistics import hoeffding_parts, ustat_variance
from ..tolerances import Z_STRICT, strict_reps
from ._clt import NORMALITY_ALPHA, normality_pvalues
from ._common import (
    SLOPE_LEVEL,
    enumerate_prompt_estimates,
    exact_curve,
    mc_errors,
    slope_check,
)
from .registry import Z_CHECK, check_close, check_exact, check_interval, check_true, register
from .symbolic import symbolic_checks


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
          "Hoeffding (1948); used in Theorem 2", "exact variance, MC slope, KS test against the Edgeworth law")
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
    p_big, p_wrong = normality_pvalues(ctx, bandit, x, 256, ctx.reps(2000, 20000))
    checks.append(check_true(f"sqrt(G)(U - g).u ~ its Edgeworth law at G=256: KS p = {p_big:.3g} "
                             f">= {NORMALITY_ALPHA:g}", p_big >= NORMALITY_ALPHA, p_big,
                             "monte-carlo", "KS test against N(0, 1) plus the two Edgeworth terms "
                             "of the exact finite-G cumulants; false-failure rate 1e-4 "
                             "(docs/theory.md C28)"))
    checks.append(check_true(f"negative control: the same test rejects the wrong limit N(0, 2 zeta2) "
                             f"(p = {p_wrong:.3g})", p_wrong < NORMALITY_ALPHA, p_wrong,
                             "monte-carlo", "the kernel's variance in place of 4 zeta1"))
    p_small, _ = normality_pvalues(ctx, bandit, x, 2, ctx.reps(2000, 20000))
    checks.append(check_true(f"power: the same test rejects the law at G=2 (p = {p_small:.3g})",
                             p_small < NORMALITY_ALPHA, p_small, "monte-carlo",
                             "lattice law of a two-sample group: the test must reject it"))
    return checks


ESTS = ("vanilla", "grpo", "oracle")


RATE_SIZES = np.array([2, 4, 8, 16, 32, 64, 128, 256])


LARGE = RATE_SIZES[RATE_SIZES >= 8]  # where 1/(G(G-1)) is close to its 1/G^2 asymptote


def exact_vs_enumeration(bandit: SoftmaxBandit, mse_formula, sizes=(2, 3, 4)):
    """Compare ``mse_formula(estimator, G) -> (P,)`` with MSEs from enumerating every group."""
    checks = []
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        enum, formula = [], []
        for g in sizes:
            for x in range(bandit.n_prompts):
                values, prob = enumerate_prompt_estimates(bandit, x, g, est)
                enum.append(prob @ np.sum((values - bandit.grad_per_prompt[x]) ** 2, axis=1))
            formula.extend(mse_formula(est, g))
        checks.append(check_exact(f"exact MSE formula == enumeration, {est}, G={list(sizes)}",
                                  enum, formula))
    return checks


def rate_checks(ctx, claim_id: str, bandit: SoftmaxBandit, prompt: int, n_reps: int,
                oracle_exponent: float = -1.0, degenerate_exponent: float = -2.0):
    """Monte Carlo MSE vs exact at every G, and the 1/G and 1/G^2 slopes (C5).

    The exponents are parameters so that the negative controls can run the same check
    with a wrong exponent.
    """
    est = mc_errors(ctx, claim_id, bandit, RATE_SIZES, n_reps, prompt=prompt)
    checks = [
        slope_check("log-log slope of MSE_oracle (rate 1/G)", RATE_SIZES, est,
                    [("oracle", int(g)) for g in RATE_SIZES],
                    exact_curve(bandit, "oracle", RATE_SIZES, True, prompt) *
                    RATE_SIZES ** (oracle_exponent + 1.0), oracle_exponent),
        slope_check("log-log slope of MSE_grpo - MSE_oracle (rate 1/G^2), G >= 8", LARGE, est,
                    [("degenerate", int(g)) for g in LARGE],
                    exact_curve(bandit, "degenerate", LARGE, True, prompt) *
                    LARGE ** (degenerate_exponent + 2.0), degenerate_exponent),
    ]
    labels = [("grpo", int(g)) for g in RATE_SIZES]
    sub = est.subset(labels)
    fit = fit_mse_rate(RATE_SIZES, sub.mean, cov=sub.cov)
    exact_fit = fit_mse_rate(RATE_SIZES, exact_curve(bandit, "grpo", RATE_SIZES, True, prompt),
                             cov=sub.cov)
    checks.append(check_interval(
        "GLS fit MSE_grpo = a/G + b/G^2: leading coefficient a", exact_fit.a, fit.a,
        fit.a - Z_CHECK * fit.a_se, fit.a + Z_CHECK * fit.a_se,
        note=f"predicted a = same fit of the exact curve (tr Sigma_oracle = "
             f"{bandit.trace_sigma_oracle[prompt]:.4g}); {Z_CHECK:g} se"))
    for name in ESTS:
        exact = exact_curve(bandit, name, RATE_SIZES, True, prompt)
        for g, value in zip(RATE_SIZES, exact):
            m, se = est.get((name, int(g)))
            checks.append(check_close(f"MC MSE_{name} == exact, G={g}", value, m, se, z=Z_STRICT))
    return checks


@register("C5", "Exact finite-G MSE: MSE_GRPO = tr Sigma_oracle/G + (E||W||^2 Var Z + ||g||^2)"
          "/(G(G-1)); G x MSE_oracle is constant (rate 1/G) and MSE_GRPO - MSE_oracle decays "
          "like 1/G^2.", "Theorem 2", "enumeration, Monte Carlo over G = 2..256, GLS slopes")
def check_c5(ctx):
    checks = rate_checks(ctx, "C5", arithmetic_bandit(2.8), 5,
                         ctx.reps(strict_reps(30_000), strict_reps(300_000)))
    checks += exact_vs_enumeration(small_bandit(), small_bandit().exact_mse_per_prompt)
    return checks + symbolic_checks("C5")


@register("C6", "Minibatch MSE = E||g(X) - g||^2/B + E tr Sigma_oracle(X)/(BG) + "
          "E[E||W||^2 Var(Z|X) + ||g(X)||^2]/(BG(G-1)); the prompt-variance term is shared by "
          "every estimator and does not depend on G; the MSE scales as 1/B.", "Proposition 3",
          "enumeration of minibatches, Monte Carlo over B and G")
def check_c6(ctx):
    small = small_bandit()
    checks = []
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        checks.append(check_exact(f"minibatch MSE == enumeration, {est}, G=2, B=2",
                                  _enumerated_minibatch_mse(small, est, 2, 2),
                                  small.exact_mse(est, 2, 2)))
    bandit = arithmetic_bandit(2.8)
    c = bandit.scaling_constants()
    checks.append(check_exact("exact GRPO minibatch MSE == (c1 + c2/G + c3/(G(G-1)))/B, G=8, B=4",
                              (c.c1 + c.c2 / 8 + c.c3 / 56) / 4, bandit.exact_mse("grpo", 8, 4)))
    batches = np.array([1, 2, 4, 8])
    n_reps = ctx.reps(strict_reps(20_000), strict_reps(200_000))  # 24 comparisons at Z_STRICT
    per_b = []
    for i, b in enumerate(batches):
        est = mc_errors(ctx, "C6", bandit, (4, 16), n_reps, batch_size=int(b), stream=i)
        per_b.append(est)
        for name in ESTS:
            for g in (4, 16):
                m, se = est.get((name, g))
                within = bandit.prompt_averaged_mse(name, g)
                checks.append(check_close(f"B x MSE - E_X MSE(X) == c1, {name}, G={g}, B={b}",
                                          c.c1, b * m - within, b * se, z=Z_STRICT))
    means = np.array([e.get(("grpo", 16))[0] for e in per_b])
    ses = np.array([e.get(("grpo", 16))[1] for e in per_b])
    fit = loglog_slope(batches, means, std_error=ses, level=SLOPE_LEVEL)
    checks.insert(0, check_interval("log-log slope of GRPO MSE in B (1/B scaling), G=16", -1.0,
                                    fit.slope, fit.ci_low, fit.ci_high,
                                    note="99.99% WLS interval; false-failure rate 1e-4"))
    return checks


@register("C6.torch", "Proposition 3's exact minibatch MSE, measured with the torch Monte Carlo "
          "backend (CPU): every estimator, G = 4 and 16, B = 2.", "Proposition 3",
          "Monte Carlo through backend='torch' (the same law drawn by other code than the numba "
          "kernel) against the exact minibatch MSE")
def check_c6_torch(ctx):
    return _torch_backend_checks(ctx, arithmetic_bandit(2.8))


def _torch_backend_checks(ctx, bandit: SoftmaxBandit) -> list:
    """The torch Monte Carlo backend (on CPU) against the exact minibatch MSE, every estimator.

    The same law as the numba kernel drawn by other code, so a bug in either backend turns this
    claim; ``Z_STRICT`` standard errors at ``strict_reps`` replicates, false-failure rate 6.8e-6
    per comparison (ustat_rl.tolerances: eight at ``Z_CHECK`` would exceed a claim's budget).
    """
    names = ("vanilla", "grpo", "oracle", "fullmean")
    stat, labels = bandit_squared_errors(bandit, names, (4, 16), batch_size=2, backend="torch",
                                         device="cpu")
    est = run_monte_carlo(stat, ctx.reps(strict_reps(20_000), strict_reps(200_000)),
                          ctx.seed_for("C6.torch"),
                          labels=labels, n_jobs=ctx.n_jobs)
    checks = []
    for name, g in labels:
        m, se = est.get((name, g))
        checks.append(check_close(f"torch backend MC MSE == exact, {name}, G={g}, B=2",
                                  bandit.exact_mse(name, g, 2), m, se, z=Z_STRICT))
    return checks


def _enumerated_minibatch_mse(bandit: SoftmaxBandit, estimator: str, group_size: int,
                              batch_size: int) -> float:
    # Every (prompt, group) outcome of one draw, in the full P*K space, then all B-tuples.
    values, probs = [], []
    k = bandit.n_actions
    for x in range(bandit.n_prompts):
        est, prob = enumerate_prompt_estimates(bandit, x, group_size, estimator)
        full = np.zeros((len(prob), bandit.dim))
        full[:, x * k:(x + 1) * k] = est
        values.append(full)
        probs.append(prob * bandit.prompt_prob[x])
    values, probs = np.concatenate(values), np.concatenate(probs)
    mean_vec = np.zeros((1, bandit.dim))
    weight = np.ones(1)
    for _ in range(batch_size):  # build the B-fold product distribution of the batch mean
        mean_vec = (mean_vec[:, None, :] + values[None, :, :] / batch_size).reshape(-1, bandit.dim)
        weight = (weight[:, None] * probs[None, :]).ravel()
    return float(weight @ np.sum((mean_vec - bandit.grad) ** 2, axis=1))


@register("C7", "Oracle property: MSE_GRPO / MSE_oracle -> 1 as G -> infinity, per prompt and "
          "for minibatches; exactly, (ratio - 1)(G - 1) is constant per prompt.", "Corollary 4",
          "exact ratios and Monte Carlo ratios (delta method) at G = 8, 64, 256")
def check_c7(ctx):
    bandit = arithmetic_bandit(2.8)
    x = 5
    sizes = np.arange(2, 513)
    ratio = np.array([bandit.exact_mse_per_prompt("grpo", g)[x] / bandit.exact_mse_per_prompt(
        "oracle", g)[x] for g in sizes])
    m = bandit.moments()
    const = (m.score_sq_reward_var[x] + m.grad_sq[x]) / m.trace_sigma_oracle[x]
    checks = [
        check_exact("(ratio - 1)(G - 1) == (E||W||^2 Var Z + ||g||^2)/tr Sigma, G=2..512",
                    np.full(sizes.size, const), (ratio - 1) * (sizes - 1)),
        check_true("exact per-prompt ratio decreases to 1", bool(np.all(np.diff(ratio) < 0)
                                                                  and ratio[-1] < 1.01), ratio[-1]),
    ]
    for batch, prompt in ((1, x), (4, None)):
        est = mc_errors(ctx, "C7", bandit, (8, 64, 256), ctx.reps(30_000, 300_000),
                        batch_size=batch, prompt=prompt, stream=batch)
        for g in (8, 64, 256):
            if prompt is None:
                exact = bandit.exact_mse("grpo", g, batch) / bandit.exact_mse("oracle", g, batch)
            else:
                exact = ratio[g - 2]
            gi, oi = est.index(("grpo", g)), est.index(("oracle", g))
            r = est.mean[gi] / est.mean[oi]
            grad = np.zeros(len(est.labels))
            grad[gi], grad[oi] = 1 / est.mean[oi], -r / est.mean[oi]
            _, se = est.contrast(grad)
            where = f"prompt {prompt}" if prompt is not None else f"minibatch B={batch}"
            checks.append(check_close(f"MC ratio MSE_grpo/MSE_oracle, {where}, G={g}", exact, r, se))
    return checks


@register("C30", "MSE scales with the square of the reward range: rescaling Z by a multiplies "
          "every MSE by a^2 (and a shift leaves GRPO and oracle unchanged, not vanilla).",
          "docs/theory.md C30", "exact formulas and Monte Carlo with rewards in {0, 3}")
def check_c30(ctx):
    base = arithmetic_bandit(2.8)
    checks = []
    for scale in (0.5, 3.0):
        scaled = SoftmaxBandit(base.logits, base.reward_prob, reward_values=(0.0, scale))
        for est in ("vanilla", "grpo", "oracle", "fullmean"):
            checks.append(check_exact(f"MSE with Z in {{0,{scale}}} == {scale}^2 MSE, {est}, G=8",
                                      scale**2 * base.exact_mse(est, 8), scaled.exact_mse(est, 8)))
    shifted = SoftmaxBandit(base.logits, base.reward_prob, reward_values=(2.0, 3.0))
    for est in ("grpo", "oracle"):
        checks.append(check_exact(f"shift by 2 leaves {est} MSE unchanged, G=8",
                                  base.exact_mse(est, 8), shifted.exact_mse(est, 8)))
    checks.append(check_true("shift by 2 changes vanilla MSE, G=8",
                             shifted.exact_mse("vanilla", 8) > 1.5 * base.exact_mse("vanilla", 8),
                             shifted.exact_mse("vanilla", 8) / base.exact_mse("vanilla", 8)))
    scaled = SoftmaxBandit(base.logits, base.reward_prob, reward_values=(0.0, 3.0))
    stat, labels = bandit_squared_errors(scaled, ESTS, (4, 32), batch_size=2)
    mc = run_monte_carlo(stat, ctx.reps(20_000, 200_000), ctx.seed_for("C30"), labels=labels,
                         n_jobs=ctx.n_jobs)
    for name, g in labels:
        m, se = mc.get((name, g))
        checks.append(check_close(f"MC MSE (Z in {{0,3}}) == 9 x exact (Z in {{0,1}}), {name}, G={g}",
                                  9 * base.exact_mse(name, g, 2), m, se))
    return checks
