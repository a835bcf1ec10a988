# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The GRPO gradient is a U-statistic
#
# This notebook walks through what the U-statistic view of GRPO says and shows each statement
# with the `ustat_rl` package (claims refer to `docs/theory.md`):
#
# * **C1 (Lemma 1).** The leave-one-out GRPO gradient of one prompt,
#   $\hat g(x) = \frac1G\sum_g W_g (Z_g - \bar Z_{-g})$, equals the order-2 U-statistic
#   $\binom G2^{-1}\sum_{i<j} h_{ij}$ with kernel $h_{ij} = \tfrac12 (W_i - W_j)(Z_i - Z_j)$.
#   It is an algebraic identity, true for any scores and rewards.
# * **C4 (Hoeffding decomposition).** $h_0 = g(x)$, so the estimator is unbiased for every
#   $G \ge 2$; the first-order part satisfies $2(h_1 - h_0) = W(Z - V) - g$, i.e. it *is* the
#   oracle estimator with the true value $V(x)$ as baseline; the rest is a degenerate part.
# * **C5 (Theorem 2).** Hence
#   $\mathrm{MSE}_{\rm GRPO}(x) = \mathrm{tr}\,\Sigma_{\rm oracle}(x)/G
#   + (E\|W\|^2\,\mathrm{Var}(Z\mid x) + \|g(x)\|^2)/(G(G-1))$: the oracle MSE plus a term of
#   order $1/G^2$.
# * **C17 (Theorem 7).** Under a fixed budget $N = BG$ the MSE is
#   $(c_1 G + c_2 + c_3'/(G-1))/N$, minimised at $G^* = 1 + \sqrt{c_3'/c_1}$, whatever $N$.
#
# Everything below calls the package; no formula is re-implemented here.

# %%
# %matplotlib inline
import numpy as np
import pandas as pd

from ustat_rl.advantages.gradients import (
    fullmean_gradient,
    grpo_gradient,
    grpo_gradient_pairwise,
    grpo_kernel,
)
from ustat_rl.policies.examples import interior_optimum_bandit, small_bandit
from ustat_rl.montecarlo import bandit_statistics, run_monte_carlo
from ustat_rl.interface.plotting import new_figure, plot_mse_curve, set_group_size_ticks
from ustat_rl.stats.rates import loglog_slope
from ustat_rl.stats.ustatistics import u_statistic, ustat_variance

rng = np.random.default_rng(20260301)

# %% [markdown]
# ## 1. Leave-one-out = pairwise (C1)
#
# Take arbitrary real vectors as scores and arbitrary rewards (no policy needed: the identity
# is algebraic). Three routes give the same vector: the $O(Gd)$ leave-one-out formula, the
# $O(G^2 d)$ sum over pairs, and the generic order-2 U-statistic applied to the GRPO kernel
# with observations $(W_g, Z_g)$ stacked as rows.

# %%
G, d = 7, 5
score = rng.normal(size=(G, d))  # (G, d) arbitrary "scores"
reward = rng.normal(size=G)  # (G,) arbitrary real rewards

loo = grpo_gradient(score, reward)
pairwise = grpo_gradient_pairwise(score, reward)
observations = np.column_stack([score, reward])  # (G, d + 1): row g is (W_g, Z_g)
generic = u_statistic(
    lambda a, b: grpo_kernel(a[..., :-1], a[..., -1], b[..., :-1], b[..., -1]), observations
)
print("leave-one-out :", np.round(loo, 6))
print("pairwise      :", np.round(pairwise, 6))
print("U-statistic   :", np.round(generic, 6))
print("max |loo - pairwise| =", np.abs(loo - pairwise).max())
print("max |loo - generic|  =", np.abs(loo - generic).max())
assert np.allclose(loo, pairwise, rtol=0, atol=1e-12) and np.allclose(loo, generic, atol=1e-12)

# %% [markdown]
# The same holds for a whole minibatch and for every group size; and the "GRPO" of common
# libraries (baseline = full mean, no std) is exactly $(G-1)/G$ times it (C2), hence biased.

# %%
worst = 0.0
for group_size in range(2, 12):
    s = rng.normal(size=(4, group_size, 3))  # (B, G, d)
    z = rng.integers(0, 2, size=(4, group_size)).astype(float)  # binary rewards this time
    worst = max(worst, np.abs(grpo_gradient(s, z) - grpo_gradient_pairwise(s, z)).max())
    ratio_gap = np.abs(fullmean_gradient(s, z) - (group_size - 1) / group_size * grpo_gradient(s, z))
    worst = max(worst, ratio_gap.max())
print(f"largest discrepancy over G = 2..11 (both identities): {worst:.1e}")

# %% [markdown]
# ## 2. Hoeffding decomposition on a small bandit (C4)
#
# `small_bandit()` has two prompts and three actions. At prompt 0 an outcome $o = (a, z)$ is an
# action and a binary reward, six outcomes in all, so $h_0 = E\,h$, $h_1(o) = E\,h(o, O')$ and
# $h_2$ are exact finite sums (`bandit.hoeffding(0)` computes them from the kernel alone).

# %%
bandit = small_bandit()
comp = bandit.hoeffding(0)
x = 0
W = bandit.score_table[x][comp.outcome_action]  # (2K, K): score of each outcome
Z = comp.outcome_reward  # (2K,)
V, g = bandit.value[x], bandit.grad_per_prompt[x]

pd.DataFrame({
    "action": comp.outcome_action, "reward": Z, "P(o)": comp.outcome_prob.round(4),
    "|2(h1-h0)|": np.linalg.norm(2 * (comp.h1 - comp.h0), axis=1).round(4),
    "|W(Z-V)-g|": np.linalg.norm(W * (Z - V)[:, None] - g, axis=1).round(4),
})

# %% [markdown]
# Three statements, each checked against quantities the bandit computes independently:
#
# 1. $h_0 = g(x)$ (unbiasedness for every $G \ge 2$, C3);
# 2. $2(h_1 - h_0) = W(Z - V) - g$: the first-order part of GRPO is the oracle estimator minus
#    its mean (C4);
# 3. $h_2(o, o') = -\tfrac12[W(Z' - V) + W'(Z - V)]$, and it is degenerate:
#    $E\,h_2(o, O') = 0$ for every $o$, which makes the three parts uncorrelated.

# %%
h2_claim = -0.5 * (W[:, None, :] * (Z[None, :, None] - V) + W[None, :, :] * (Z[:, None, None] - V))
checks = {
    "max |h0 - g(x)|": np.abs(comp.h0 - g).max(),
    "max |2(h1 - h0) - (W(Z-V) - g)|": np.abs(2 * (comp.h1 - comp.h0) - (W * (Z - V)[:, None] - g)).max(),
    "max |h2 - claimed h2|": np.abs(comp.h2 - h2_claim).max(),
    "max |E h2(o, O')|": np.abs(np.einsum("q,oqk->ok", comp.outcome_prob, comp.h2)).max(),
}
for name, value in checks.items():
    print(f"{name:36s} {value:.1e}")
assert max(checks.values()) < 1e-12

# %% [markdown]
# The first-order part has trace covariance $4\zeta_1 = \mathrm{tr}\,\Sigma_{\rm oracle}(x)$, and
# Hoeffding's exact variance formula $\mathrm{Var}\,U = (4(G-2)\zeta_1 + 2\zeta_2)/(G(G-1))$
# reproduces the closed-form GRPO MSE of Theorem 2 at every $G$: two routes to one number.

# %%
print(f"4 zeta1 = {4 * comp.zeta1:.6f}    tr Sigma_oracle(x) = {bandit.trace_sigma_oracle[x]:.6f}")
sizes = np.array([2, 3, 4, 8, 16, 64])
hoeffding_route = [ustat_variance(comp.zeta1, comp.zeta2, n) for n in sizes]
closed_form = [bandit.exact_mse_per_prompt("grpo", n)[x] for n in sizes]
pd.DataFrame({"G": sizes, "Hoeffding variance": hoeffding_route, "Theorem 2 MSE": closed_form})

# %% [markdown]
# ## 3. Exact MSE curves against a small Monte Carlo (C5, C7)
#
# `bandit_statistics` samples groups through their sufficient statistics (exact in law), with
# the groups of all sizes nested (common random numbers). With `degenerate=True` it also
# returns $\|\hat g_{\rm GRPO} - \hat g_{\rm oracle}\|^2$, whose mean is
# $\mathrm{MSE}_{\rm GRPO} - \mathrm{MSE}_{\rm oracle}$ because the Hoeffding parts are
# uncorrelated: the $1/G^2$ term measured directly rather than as a small difference of two
# noisy MSEs.

# %%
group_sizes = [2, 4, 8, 16, 32, 64]
estimators = ("vanilla", "grpo", "oracle")
statistic, labels = bandit_statistics(bandit, estimators, group_sizes, prompt=x, degenerate=True)
mc = run_monte_carlo(statistic, 20_000, seed=1, labels=labels)

rows = []
for est in estimators:
    for G_ in group_sizes:
        mean, se = mc.get(("sq", est, G_))
        exact = bandit.exact_mse_per_prompt(est, G_)[x]
        rows.append({"estimator": est, "G": G_, "MC": mean, "se": se, "exact": exact,
                     "z": (mean - exact) / se})
table = pd.DataFrame(rows)
print(f"largest |z| over {len(table)} rows: {table['z'].abs().max():.2f}")
table.pivot(index="G", columns="estimator", values=["MC", "exact"]).round(5)

# %%
fig, axes = new_figure(1, 2, panel_size=(4.2, 3.3), sharex=False)
dense = np.arange(2, 65)
for est in estimators:
    part = table[table["estimator"] == est]
    plot_mse_curve(axes[0, 0], est, group_sizes=part["G"], mse=part["MC"],
                   interval=(part["MC"] - 1.96 * part["se"], part["MC"] + 1.96 * part["se"]),
                   exact=(dense, [bandit.exact_mse_per_prompt(est, n)[x] for n in dense]))
axes[0, 0].set(title="per-prompt MSE (prompt 0)", xlabel="group size G", ylabel="MSE")
set_group_size_ticks(axes[0, 0], group_sizes)
axes[0, 0].legend(fontsize=7)

deg = np.array([mc.get(("degenerate", G_)) for G_ in group_sizes])  # (L, 2): mean, se
gap_exact = [bandit.exact_mse_per_prompt("grpo", n)[x] - bandit.exact_mse_per_prompt("oracle", n)[x]
             for n in dense]
axes[0, 1].errorbar(group_sizes, deg[:, 0], yerr=1.96 * deg[:, 1], fmt="o", mfc="white",
                    color="#1b9e77", label="MC  E||g_GRPO - g_oracle||^2")
axes[0, 1].plot(dense, gap_exact, color="#1b9e77", label="exact MSE_GRPO - MSE_oracle")
axes[0, 1].set(yscale="log", title="degenerate part: the 1/G^2 term", xlabel="group size G")
set_group_size_ticks(axes[0, 1], group_sizes)
axes[0, 1].legend(fontsize=7)
fig

# %% [markdown]
# Rates: $G\cdot\mathrm{MSE}_{\rm oracle}$ is constant (rate $1/G$) while the GRPO excess decays
# with log-log slope $-2$ (C5), so $\mathrm{MSE}_{\rm GRPO}/\mathrm{MSE}_{\rm oracle} \to 1$
# (C7, the oracle property). The slope below is fitted on the Monte Carlo degenerate part with
# its full covariance (common random numbers make the points correlated), for $G \ge 8$. The
# exact excess is proportional to $1/(G(G-1))$, whose local slope $-1 - G/(G-1)$ tends to $-2$
# from below, so over $G = 8..64$ the reference is the slope of the exact curve on the same
# points (about $-2.06$), not $-2$ itself.

# %%
large = [i for i, n in enumerate(group_sizes) if n >= 8]
deg_labels = [("degenerate", group_sizes[i]) for i in large]
sub = mc.subset(deg_labels)
slope = loglog_slope(np.array(group_sizes)[large], sub.mean, cov=sub.cov)
gap_at_sizes = [bandit.exact_mse_per_prompt("grpo", group_sizes[i])[x]
                - bandit.exact_mse_per_prompt("oracle", group_sizes[i])[x] for i in large]
reference = loglog_slope(np.array(group_sizes)[large], np.array(gap_at_sizes))
print(f"log-log slope of the GRPO excess (MC, G >= 8): {slope.slope:.3f} "
      f"[{slope.ci_low:.3f}, {slope.ci_high:.3f}] at level {slope.level}")
print(f"slope of the exact excess on the same G: {reference.slope:.3f}; "
      f"inside the interval: {slope.contains(reference.slope)}")
print("G * MSE_oracle (exact):", np.round([n * bandit.exact_mse_per_prompt("oracle", n)[x]
                                           for n in group_sizes], 6))
print("MSE_GRPO / MSE_oracle (exact):", np.round([bandit.exact_mse_per_prompt("grpo", n)[x]
                                                  / bandit.exact_mse_per_prompt("oracle", n)[x]
                                                  for n in group_sizes], 4))

# %% [markdown]
# ## 4. The optimal group size (C17)
#
# With a minibatch of $B$ prompts the MSE against the full gradient adds the prompt
# heterogeneity $c_1 = E\|g(X) - g\|^2$, which only more prompts can average away. At a fixed
# budget $N = BG$, a larger $G$ buys a better baseline (the $c_3'/(G-1)$ term) at the price of
# fewer prompts (the $c_1 G$ term). `optimal_group_size()` returns the minimiser
# $G^* = 1 + \sqrt{c_3'/c_1}$; it does not depend on $N$.

# %%
for name, b in [("small_bandit", bandit), ("interior_optimum_bandit", interior_optimum_bandit())]:
    const = b.scaling_constants()
    print(f"{name:24s} c1 = {const.c1:.5f}  c2 = {const.c2:.5f}  c3' = {const.c3:.5f}  "
          f"G* = {b.optimal_group_size():.2f}  (paper's sqrt(c3/c1): {b.optimal_group_size(exact=False):.2f})")

# %%
b = interior_optimum_bandit()
fig, axes = new_figure(1, 1, panel_size=(4.8, 3.4))
ax = axes[0, 0]
for budget, style in [(256, dict(marker="o", ms=9, mfc="none", color="0.6", ls="-")),
                      (1024, dict(marker="s", ms=5, mfc="none", color="0.3", ls="--")),
                      (4096, dict(marker=".", ms=4, color="0.0", ls=":"))]:
    feasible = [n for n in range(2, 129) if budget % n == 0]
    mse = [b.exact_mse("grpo", n, batch_size=budget // n) for n in feasible]
    ax.plot(feasible, np.array(mse) * budget, label=f"N = {budget}", **style)
ax.axvline(b.optimal_group_size(), ls="--", color="#d95f02", label="G* = 1 + sqrt(c3'/c1)")
ax.set(xlabel="group size G (B = N / G)", ylabel="N x MSE (exact)",
       title="fixed budget: the best G does not depend on N")
set_group_size_ticks(ax, [2, 4, 8, 16, 32, 64, 128])
ax.legend(fontsize=7)
fig

# %% [markdown]
# $N\cdot\mathrm{MSE}$ is the same curve for every budget, so its minimiser is the same: the
# group size that gives the most accurate gradient per sample is a property of the task
# (through $c_1$ and $c_3'$), not of the compute budget. The paper reports $G^* = 32$ for
# its GSM8K runs; on these two small bandits the prediction is about 5 and 8.
