"""Checks of the exact finite-G MSE, its rates, the minibatch law and reward scaling (C5-C8, C30)."""

from __future__ import annotations

import numpy as np

from ..estimators import baseline_gradient
from ..examples import arithmetic_bandit, assumption2_bandit, small_bandit
from ..montecarlo import bandit_squared_errors, run_monte_carlo
from ..policies.softmax import SoftmaxBandit
from ..rates import fit_mse_rate, loglog_slope
from ._common import (
    SLOPE_LEVEL,
    enumerate_prompt_estimates,
    exact_curve,
    mc_errors,
    slope_check,
)
from .registry import Z_CHECK, check_close, check_exact, check_interval, check_true, register
from .symbolic import symbolic_checks

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
            checks.append(check_close(f"MC MSE_{name} == exact, G={g}", value, m, se))
    return checks


@register("C5", "Exact finite-G MSE: MSE_GRPO = tr Sigma_oracle/G + (E||W||^2 Var Z + ||g||^2)"
          "/(G(G-1)); G x MSE_oracle is constant (rate 1/G) and MSE_GRPO - MSE_oracle decays "
          "like 1/G^2.", "Theorem 2", "enumeration, Monte Carlo over G = 2..256, GLS slopes")
def check_c5(ctx):
    checks = rate_checks(ctx, "C5", arithmetic_bandit(2.8), 5, ctx.reps(30_000, 300_000))
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
    n_reps = ctx.reps(20_000, 200_000)
    per_b = []
    for i, b in enumerate(batches):
        est = mc_errors(ctx, "C6", bandit, (4, 16), n_reps, batch_size=int(b), stream=i)
        per_b.append(est)
        for name in ESTS:
            for g in (4, 16):
                m, se = est.get((name, g))
                within = bandit.prompt_averaged_mse(name, g)
                checks.append(check_close(f"B x MSE - E_X MSE(X) == c1, {name}, G={g}, B={b}",
                                          c.c1, b * m - within, b * se))
    means = np.array([e.get(("grpo", 16))[0] for e in per_b])
    ses = np.array([e.get(("grpo", 16))[1] for e in per_b])
    fit = loglog_slope(batches, means, std_error=ses, level=SLOPE_LEVEL)
    checks.insert(0, check_interval("log-log slope of GRPO MSE in B (1/B scaling), G=16", -1.0,
                                    fit.slope, fit.ci_low, fit.ci_high,
                                    note="99.99% WLS interval; false-failure rate 1e-4"))
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
        closed = (bandit.trace_sigma_oracle + bandit.score_sq_norm * (bandit.value - b) ** 2) / g
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
    closed = (bandit.trace_sigma_oracle[x] + bandit.score_sq_norm[x] * (bandit.value[x] - b) ** 2) / g
    checks.append(check_close(f"MC MSE(b={b}) == closed form, prompt {x}, G={g}", closed,
                              mc.mean[0], mc.std_error[0]))
    return checks + symbolic_checks("C8")


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
