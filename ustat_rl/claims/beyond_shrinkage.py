"""Shrinkage and score-weighted baselines, beyond the paper (docs/theory.md C54).

C54: JSPO's James-Stein baseline (leave-one-out shrunk towards the other prompts' mean, its
weight estimated from the batch) keeps the batch gradient unbiased, and its exact finite-G,
finite-B MSE matches Monte Carlo; the same sample rejects the exact MSE with the weight ignored
(0: leave-one-out; 1: the other prompts' mean). C54.map: where shrinkage beats leave-one-out
(alike prompts, small G) and where it loses (prompts of different difficulty), over a table of
G, B and the spread of difficulty, computed exactly each run. C54.ot: verl's optimal-token
baseline at sequence level matches its exact moments, and its MSE approaches that of the
MSE-optimal baseline b* (C9) at rate 1/G^2, which the oracle V does not. C54.ebpo: EBPO's
empirical-Bayes baseline with its running prior matches its exact moments at the stationary
prior; where it beats leave-one-out and where its prior costs MSE against its own full mean.
"""

from __future__ import annotations

import numpy as np

from ..policies.examples import small_bandit
from ..policies.softmax import SoftmaxBandit
from ..theory.ebpo import ebpo_exact, ebpo_monte_carlo, stationary_prior
from ..theory.mse import minibatch_mse
from ..theory.shrinkage import (
    jspo_exact,
    jspo_monte_carlo,
    otb_exact,
    otb_monte_carlo,
    prompt_baseline_exact,
    squared_score_norms,
)
from .registry import Z_CHECK, check_close, check_exact, check_true, register

#: ``(G, B)`` at which JSPO's Monte Carlo is compared with its exact MSE.
MC_CASES = ((3, 2), (2, 3))
#: Spreads of prompt difficulty (success probability gap between the two prompts) of C54.map.
SPREADS = (0.0, 0.3, 0.6, 0.8)
#: The losing cell sampled in C54.map: spread, G, B.
LOSING_CELL = (0.8, 4, 2)


def spread_bandit(spread: float) -> SoftmaxBandit:
    """Two equally likely prompts, three actions, the same policy; the prompts' success
    probabilities are ``0.5 -+ spread/2`` plus action offsets ``(0.15, 0, -0.15)``."""
    offsets = np.array([0.15, 0.0, -0.15])
    reward = np.stack([0.5 - spread / 2 + offsets, 0.5 + spread / 2 + offsets])
    return SoftmaxBandit([[0.4, 0.0, -0.4]] * 2, np.clip(reward, 0.0, 1.0), [0.5, 0.5])


def _outside(name, exact, mc, note):
    """Negative control: ``exact`` must lie outside ``Z_CHECK`` standard errors of ``mc``."""
    z = abs(mc.mse - exact) / mc.mse_se
    return check_true(name, z > Z_CHECK, z, "monte-carlo",
                      f"|measured - control| = {z:.1f} se > {Z_CHECK:g} se required. {note}")


@register("C54", "Beyond the paper: JSPO's James-Stein baseline (1 - lambda) x leave-one-out + "
          "lambda x the other prompts' mean, lambda estimated from the other prompts, keeps the "
          "batch gradient unbiased, and its exact finite-G, finite-B MSE matches Monte Carlo; "
          "with lambda ignored (0 or 1) the exact MSE is rejected",
          "derived (docs/theory.md C54); JSPO-Official 6071c3b compute_jspo_outcome_advantage",
          "enumeration of batches of (prompt, success count) cells; numpy Monte Carlo of the "
          "batch estimator on the small bandit; lambda = 0 against the paper's exact GRPO MSE")
def check_c54(ctx):
    bandit = small_bandit()
    n = ctx.reps(6_000, 60_000)
    checks = []
    for i, (G, B) in enumerate(MC_CASES):
        exact = jspo_exact(bandit, G, B)
        checks.append(check_exact(f"lambda = 0 is leave-one-out: exact MSE = Theorem 2's, G={G}"
                                  f" B={B}", bandit.exact_mse("grpo", G, B),
                                  jspo_exact(bandit, G, B, weight=0.0).mse))
        checks.append(check_exact(f"unbiased: exact mean factor = 1, G={G} B={B}", 1.0,
                                  exact.mean_factor))
        mc = jspo_monte_carlo(bandit, G, B, n, np.random.default_rng(ctx.seed_for("C54", i)))
        checks.append(check_close(f"JSPO MSE, G={G} B={B}", exact.mse, mc.mse, mc.mse_se,
                                  note=f"{n} batches"))
        checks.append(check_close(f"JSPO mean factor, G={G} B={B}", 1.0, mc.mean_factor,
                                  mc.mean_factor_se, note=f"{n} batches"))
        for w in (0.0, 1.0):
            checks.append(_outside(f"negative control: lambda fixed at {w:g}, G={G} B={B}",
                                   jspo_exact(bandit, G, B, weight=w).mse, mc,
                                   "the same sample against the exact MSE with lambda ignored"))
    return checks


def shrinkage_table(group_sizes, batch_sizes, spreads=SPREADS, weight=None):
    """``{(B, G, spread): MSE_JSPO / MSE_leave-one-out}``, exact (``weight``: a fixed lambda)."""
    out = {}
    for spread in spreads:
        bandit = spread_bandit(spread)
        for B in batch_sizes:
            for G in group_sizes:
                out[B, G, spread] = jspo_exact(bandit, G, B, weight=weight).mse / bandit.exact_mse("grpo", G, B)
    return out


@register("C54.map", "Beyond the paper: JSPO's shrinkage beats leave-one-out when prompts are "
          "alike (spread 0) at every G and B of the table, its advantage shrinks as the prompts' "
          "difficulties spread, and it loses to leave-one-out when they differ widely "
          "(spread 0.8), a loss Monte Carlo confirms",
          "derived (docs/theory.md C54)",
          "exact MSE ratio JSPO / leave-one-out over G, B and the spread of prompt difficulty on "
          "two-prompt bandits; Monte Carlo at the losing cell")
def check_c54_map(ctx):
    sizes = (2, 3, 4, 6, 8) if ctx.quick else (2, 3, 4, 6, 8, 12)
    table = shrinkage_table(sizes, (2, 3))
    words = "; ".join(f"B={B} G={G} spread={s:g}: {r:.3f}" for (B, G, s), r in table.items())
    alike = [table[B, G, 0.0] for B in (2, 3) for G in sizes]
    wide = [table[B, G, 0.8] for B in (2, 3) for G in sizes]
    def rising(tab):
        return all(np.all(np.diff([tab[B, G, s] for s in SPREADS]) > 0)
                   for B in (2, 3) for G in sizes)

    ignored = shrinkage_table(sizes, (2, 3), weight=0.0)
    checks = [
        check_true("shrinkage beats leave-one-out for alike prompts (ratio < 1 at spread 0)",
                   max(alike) < 1.0, max(alike), note=words),
        check_true("negative control: the same test (ratio < 1) fails at spread 0.8",
                   not max(wide) < 1.0, max(wide), note="the largest ratio at spread 0.8"),
        check_true("the ratio rises with the spread at every G and B", rising(table),
                   note="exact, over spreads " + ", ".join(f"{s:g}" for s in SPREADS)),
        check_true("negative control: the same test fails with lambda ignored (0)",
                   not rising(ignored), max(abs(r - 1.0) for r in ignored.values()),
                   note="lambda = 0 is leave-one-out: every ratio 1; largest |ratio - 1| shown"),
    ]
    spread, G, B = LOSING_CELL
    bandit = spread_bandit(spread)
    n = ctx.reps(8_000, 80_000)
    mc = jspo_monte_carlo(bandit, G, B, n, np.random.default_rng(ctx.seed_for("C54.map")))
    loo = bandit.exact_mse("grpo", G, B)
    checks.append(check_close(f"JSPO MSE at the losing cell (spread {spread:g}, G={G}, B={B})",
                              jspo_exact(bandit, G, B).mse, mc.mse, mc.mse_se,
                              note=f"{n} batches"))
    checks.append(check_true("the loss is sampled: leave-one-out's exact MSE lies below "
                             f"the band by more than {Z_CHECK:g} se",
                             mc.mse - Z_CHECK * mc.mse_se > loo, (mc.mse - loo) / mc.mse_se,
                             "monte-carlo", f"leave-one-out {loo:.5f}, JSPO sampled "
                             f"{mc.mse:.5f}; (sampled - leave-one-out) / se shown"))
    return checks


@register("C54.ot", "Beyond the paper: verl's optimal-token baseline at sequence level (the "
          "group's rewards weighted by 1 - 2 pi(a) + sum pi^2, which is ||W||^2 exactly in a "
          "softmax bandit) matches its exact finite-G moments, is biased along g by O(1/G), "
          "and its MSE approaches that of the MSE-optimal baseline b* (C9) at rate 1/G^2, "
          "while the oracle V stays a 1/G term away",
          "derived (docs/theory.md C54); verl 1dda039 compute_optimal_token_baseline_advantage",
          "verl's weight against the score norm; enumeration of groups against numpy Monte "
          "Carlo; G x (MSE - MSE_b*) along G for the optimal-token baseline and for V")
def check_c54_ot(ctx):
    bandit = small_bandit()
    prompt = np.repeat(np.arange(bandit.n_prompts), bandit.n_actions)
    action = np.tile(np.arange(bandit.n_actions), bandit.n_prompts)
    norms = np.sum(bandit.scores(prompt, action[:, None]) ** 2, axis=(1, 2))
    checks = [check_exact("verl's weight 1 - 2 pi(a) + sum pi^2 = ||W||^2", norms,
                          squared_score_norms(bandit, prompt, action[:, None]).ravel())]
    G, B, n = 3, 2, ctx.reps(6_000, 60_000)
    exact = otb_exact(bandit, G, B)
    mc = otb_monte_carlo(bandit, G, B, n, np.random.default_rng(ctx.seed_for("C54.ot")))
    checks.append(check_close(f"optimal-token MSE, G={G} B={B}", exact.mse, mc.mse, mc.mse_se,
                              note=f"{n} batches"))
    checks.append(check_close(f"optimal-token mean factor, G={G} B={B}", exact.mean_factor,
                              mc.mean_factor, mc.mean_factor_se, note=f"{n} batches"))
    checks.append(_outside(f"negative control: weights ignored (group mean), G={G} B={B}",
                           bandit.exact_mse("fullmean", G, B), mc, "the same sample"))
    sizes = range(2, 6 if ctx.quick else 7)
    m = bandit.moments()
    star = {g: minibatch_mse(m, "baseline", g, baseline=bandit.optimal_constant_baseline)
            for g in sizes}  # C9's closed form
    gap_ot = np.array([g * abs(otb_exact(bandit, g).mse - star[g]) for g in sizes])
    gap_v = np.array([g * abs(minibatch_mse(m, "oracle", g) - star[g]) for g in sizes])
    bias = np.array([g * (1.0 - otb_exact(bandit, g).mean_factor) for g in sizes])
    unbiased = np.array([g * (1.0 - prompt_baseline_exact(bandit, g).mean_factor)
                         for g in sizes])
    last = list(sizes)[-1]

    def approaches(gap):
        return bool(np.all(np.diff(gap) < 0) and gap[-1] < gap[0] / 2)

    words = ", ".join(f"G={g}: {a:.4f}" for g, a in zip(sizes, gap_ot))
    checks += [
        check_true(f"G x |MSE_ot - MSE_b*| falls along G = 2..{last}, to under half its G = 2 "
                   "value", approaches(gap_ot), gap_ot[-1], note=words),
        check_true("negative control: the same test fails for the oracle V",
                   not approaches(gap_v), gap_v[-1],
                   note=", ".join(f"G={g}: {a:.4f}" for g, a in zip(sizes, gap_v))),
        check_true("bias along g is O(1/G): G (1 - mean factor) stays within [0.5, 2]",
                   bool(np.all((bias > 0.5) & (bias < 2.0))), bias[-1],
                   note=", ".join(f"G={g}: {b:.3f}" for g, b in zip(sizes, bias))),
        check_true("negative control: the same test fails for b* (unbiased)",
                   not bool(np.all((unbiased > 0.5) & (unbiased < 2.0))), unbiased[-1],
                   note="G (1 - mean factor) of b*"),
    ]
    return checks


#: (G, B, steps) of the running-prior Monte Carlo of C54.ebpo.
EBPO_MC_CASE = (3, 2, 100)
#: Group sizes and batch sizes of C54.ebpo's exact map.
EBPO_SIZES, EBPO_BATCHES = (2, 3, 4, 6, 8), (1, 4)


def ebpo_ratio_table(reference, group_sizes=EBPO_SIZES, batch_sizes=EBPO_BATCHES, spreads=SPREADS):
    """``{(B, G, spread): MSE_EBPO / MSE_reference}``, exact, EBPO at its stationary prior."""
    out = {}
    for spread in spreads:
        bandit = spread_bandit(spread)
        for B in batch_sizes:
            for G in group_sizes:
                out[B, G, spread] = ebpo_exact(bandit, G, B).mse / bandit.exact_mse(reference, G, B)
    return out


def _rises_with_g(tab):
    return all(np.all(np.diff([tab[B, G, s] for G in EBPO_SIZES]) > 0)
               for B in EBPO_BATCHES for s in SPREADS)


@register("C54.ebpo", "Beyond the paper: EBPO's empirical-Bayes baseline (the full group mean "
          "shrunk by S = (sigma^2/G) / (sigma^2/G + tau^2) towards a running prior) has, at its "
          "stationary prior, exact moments that Monte Carlo of the running-prior estimator "
          "matches, mean factor 1 - (1 - S)/G; it beats leave-one-out at every G, B and spread "
          "of the table, most at small G, yet its prior costs MSE against its own S = 0 "
          "(full-mean) rule at B = 1 and 4",
          "derived (docs/theory.md C54.ebpo); arXiv:2602.05165v1 section 3.2 and Algorithm 1",
          "section 7's per-count terms at a fixed prior; numpy Monte Carlo of 100 steps of "
          "Welford-updated priors on the small bandit; exact MSE ratios on two-prompt bandits")
def check_c54_ebpo(ctx):
    bandit = small_bandit()
    G, B, steps = EBPO_MC_CASE
    exact = ebpo_exact(bandit, G, B)
    S = stationary_prior(bandit, G).weight(G)
    checks = [
        check_exact(f"S = 0 is the full-mean rule: exact MSE = Theorem 2's, G={G} B={B}",
                    bandit.exact_mse("fullmean", G, B), ebpo_exact(bandit, G, B, weight=0.0).mse),
        check_exact(f"mean factor = 1 - (1 - S)/G at the stationary S = {S:.4f}, G={G}",
                    1.0 - (1.0 - S) / G, exact.mean_factor),
    ]
    n = ctx.reps(20_000, 100_000)
    mc = ebpo_monte_carlo(bandit, G, B, n, np.random.default_rng(ctx.seed_for("C54.ebpo")),
                          steps=steps)
    note = f"{n} runs of {steps} steps, the last step's estimator"
    checks.append(check_close(f"EBPO MSE, running prior, G={G} B={B}", exact.mse, mc.mse,
                              mc.mse_se, note=note))
    checks.append(check_close(f"EBPO mean factor, running prior, G={G} B={B}", exact.mean_factor,
                              mc.mean_factor, mc.mean_factor_se, note=note))
    for w in (0.0, 1.0):
        checks.append(_outside(f"negative control: S fixed at {w:g}, G={G} B={B}",
                               ebpo_exact(bandit, G, B, weight=w).mse, mc,
                               "the same sample against the exact MSE with S ignored"))
    loo, full = ebpo_ratio_table("grpo"), ebpo_ratio_table("fullmean")
    words = "; ".join(f"B={b} G={g} spread={s:g}: {r:.3f}" for (b, g, s), r in loo.items())
    checks += [
        check_true("EBPO beats leave-one-out (MSE ratio < 1) at every G, B and spread",
                   max(loo.values()) < 1.0, max(loo.values()), note=words),
        check_true("negative control: the same test fails against EBPO's own S = 0 rule "
                   "(the full mean)", not max(full.values()) < 1.0, max(full.values()),
                   note="the largest ratio EBPO / full mean"),
        check_true("the ratio to leave-one-out rises with G at every B and spread (strongest "
                   "at small G)", _rises_with_g(loo), note="exact, G = "
                   + ", ".join(map(str, EBPO_SIZES))),
        check_true("negative control: the same test fails for the ratio to the full mean",
                   not _rises_with_g(full), min(full.values()),
                   note="the smallest ratio EBPO / full mean"),
    ]
    return checks
