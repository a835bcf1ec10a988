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
# # What std normalisation does
#
# The paper's Algorithm 1 uses the leave-one-out baseline, whose gradient is an unbiased
# U-statistic (docs/theory.md C1-C5). The frameworks people run mostly divide by a group
# standard deviation as well (docs/conventions.md). For binary rewards the exact finite-G
# moments of any such advantage are sums of $G+1$ terms (docs/theory.md section 7), so we can see
# exactly what the division costs and what it buys:
#
# * the estimate is no longer an estimate of $g(x)$ but, as $G$ grows, of
#   $g(x)/\sqrt{V(1-V)}$, the gradient of $2\arcsin\sqrt{V}$ (Proposition 13, C26);
# * at finite $G$ all-equal groups (probability $V^G + (1-V)^G$) contribute nothing, which damps
#   prompts with extreme $V$ (C24);
# * in training, the fixed point moves from $\arg\max E V - \tau\,\mathrm{KL}$ towards
#   $\arg\max E[2\arcsin\sqrt V] - \tau\,\mathrm{KL}$ (C26.train).

# %%
import matplotlib.pyplot as plt
import numpy as np

from ustat_rl.training.batch_study import batch_monte_carlo
from ustat_rl.training.std import mean_field_root, trl_group_rule
from ustat_rl.advantages.conventions import advantages
from ustat_rl.policies.examples import arcsin_conflict_bandit, small_bandit
from ustat_rl.policies.softmax import SoftmaxBandit
from ustat_rl.theory.advantage import (
    advantage_moments,
    advantage_table,
    all_equal_probability,
    dynamic_sampling_mse,
    minibatch_advantage_mse,
)

# %% [markdown]
# ## One batch, five conventions
#
# Two groups, a mixed one and an all-equal one, then a single response. The conventions agree
# that an all-equal group carries no signal, and disagree on everything else: the scale (std
# division or not), leave-one-out versus full mean (a factor $(G-1)/G$), the epsilon, and the
# singleton (0 in TRL, its raw reward divided by $1.00000095$ in verl's GRPO, its raw reward in
# verl's RLOO). TRL reshapes into equal groups, so its singleton case needs a batch of
# singletons; the reference implementation accepts ragged groups only where the framework does.

# %%
rewards = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
group_ids = np.array([0, 0, 0, 0, 1, 1, 1, 1])
for name in ("grpo", "fullmean", "trl_group", "verl_grpo", "paper_algorithm2"):
    print(f"{name:>18}: {np.round(advantages(name, rewards, group_ids), 4)}")
singleton = (np.append(rewards, 0.7), np.append(group_ids, 2))
for name in ("verl_grpo", "verl_rloo"):
    print(f"{name:>18}, one-sample group with reward 0.7: "
          f"{advantages(name, *singleton)[-1]:.9f}")
print(f"{'trl_group':>18}, a batch of one-sample groups: {advantages('trl_group', [0.7], [0])}")

# %% [markdown]
# ## The mean of the std-normalised estimator, prompt by prompt
#
# For one prompt, $E\,\hat g(x) = c_G(x)\,g(x)$. Leave-one-out has $c_G = 1$. TRL's
# `scale_rewards="group"` has $c_G(x)\sqrt{V(1-V)} \to 1$: its estimate points along $g(x)$ but
# is scaled by $1/\sqrt{V(1-V)}$, the arcsin objective's weighting. At small $G$ the all-equal
# groups pull $c_G$ down, most for extreme $V$.

# %%
values = np.array([0.02, 0.1, 0.3, 0.5])
sizes = np.array([2, 4, 8, 16, 32, 64, 128, 256, 1024])
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for v in values:
    bandit = SoftmaxBandit([[0.0, 0.0]], [[2 * v, 0.0]])  # V = v with a uniform policy
    m = bandit.moments()
    sigma = np.sqrt(v * (1 - v))
    scaled = [advantage_moments(m, advantage_table(trl_group_rule, g)).mean_factor[0] * sigma
              for g in sizes]
    axes[0].semilogx(sizes, scaled, "o-", label=f"V = {v}")
    axes[1].loglog(sizes, [all_equal_probability(v, g) for g in sizes], "o-", label=f"V = {v}")
axes[0].axhline(1.0, color="k", lw=0.8)
axes[0].set(xlabel="G", ylabel=r"$c_G(x)\,\sqrt{V(1-V)}$",
            title="mean of TRL group normalisation, scaled")
axes[1].set(xlabel="G", ylabel=r"$V^G + (1-V)^G$", title="all-equal groups", ylim=(1e-12, 2))
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# ## Which gradient it estimates well
#
# Against $g(x)$ the std-normalised estimator has a bias that does not vanish with $G$; against
# $g(x)/\sqrt{V(1-V)}$ its MSE falls like $1/G$, like leave-one-out's against $g(x)$.

# %%
bandit = SoftmaxBandit([[0.8, -0.3, 0.1]], [[0.1, 0.7, 0.4]])
m = bandit.moments()
rows = {"leave-one-out vs g(x)": [], "TRL group vs g(x)": [], "TRL group vs arcsin gradient": []}
for g in sizes:
    loo = advantage_moments(m, advantage_table("grpo", g))
    std = advantage_moments(m, advantage_table(trl_group_rule, g))
    rows["leave-one-out vs g(x)"].append(loo.mse_grad[0])
    rows["TRL group vs g(x)"].append(std.mse_grad[0])
    rows["TRL group vs arcsin gradient"].append(std.mse_arcsin[0])
fig, ax = plt.subplots(figsize=(5.5, 4))
for label, mse in rows.items():
    ax.loglog(sizes, mse, "o-", label=label)
ax.set(xlabel="G", ylabel="exact MSE", title=f"one prompt, V = {bandit.value[0]:.2f}")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## Where training goes
#
# On `arcsin_conflict_bandit` two prompts share one parameter. The exact mean field of the
# std-normalised update at group size $G$ has a root $\theta_G$; training converges there
# (C26.train checks it with 256 runs). At $G=2$ the normalised advantage is $\pm 1/\sqrt 2$
# whenever the two rewards differ, and $\theta_2$ lies below even the $E\,V$ optimum; around
# $G=16$ it overshoots the arcsin maximiser, because the all-equal groups of prompt B (small $V$)
# still damp its pull; for large $G$ it settles on the arcsin maximiser.

# %%
conflict = arcsin_conflict_bandit()
theta_value = mean_field_root(conflict, "value")
theta_arcsin = mean_field_root(conflict, "arcsin")
group_sizes = np.array([2, 3, 4, 8, 16, 64, 256, 1024, 4096])
roots = [mean_field_root(conflict, advantage_table(trl_group_rule, g)) for g in group_sizes]
fig, ax = plt.subplots(figsize=(5.5, 4))
ax.semilogx(group_sizes, roots, "o-", label=r"$\theta_G$ (TRL group normalisation)")
ax.axhline(theta_value, color="C1", ls="--", label=r"argmax $E\,V - \tau$ KL")
ax.axhline(theta_arcsin, color="C2", ls="--", label=r"argmax $E[2\arcsin\sqrt{V}] - \tau$ KL")
ax.set(xlabel="G", ylabel=r"$\theta$", title="fixed point of std-normalised training")
ax.legend()
fig.tight_layout()
print(f"theta_V = {theta_value:.4f}, theta_arcsin = {theta_arcsin:.4f}, "
      f"theta_8 = {roots[3]:.4f}")

# %% [markdown]
# ## Dropping, refilling or zeroing the all-equal groups
#
# A group whose rewards are all equal gets advantage 0 in every convention. DAPO's dynamic
# sampling instead draws again until the batch holds $B$ groups that are not all-equal; that
# scales the zeroing estimator's mean by $1/(1-Q)$, with $Q$ the probability that a group is
# all-equal, and has an exact MSE (docs/theory.md section 7). Dropping the groups without
# refilling divides by a random count, and batch-level std couples the groups: for those two
# the route is Monte Carlo (`ustat_rl.training.batch_study`). Below, on `small_bandit` with $B = 4$:
# exact MSEs against $g$ for zeroing and refilling, and Monte Carlo for dropping and for TRL's
# `scale_rewards="batch"`.

# %%
two_prompts = small_bandit()
m2 = two_prompts.moments()
sizes_b = [2, 4, 8, 16]
rng = np.random.default_rng(6)
print(" G  zero (exact)  refill (exact)  1/(1-Q)  drop (MC)        TRL batch std (MC)")
for g in sizes_b:
    scale, refill = dynamic_sampling_mse(m2, "trl_group", g, 4)
    drop = batch_monte_carlo(two_prompts, "trl_group", g, 4, 2000, rng, "drop")
    batch = batch_monte_carlo(two_prompts, "trl_batch", g, 4, 2000, rng)
    print(f"{g:2d}  {minibatch_advantage_mse(m2, 'trl_group', g, 4):.4f}        "
          f"{refill:.4f}          {scale:.3f}    {drop.mse:.4f}+-{drop.mse_se:.4f}  "
          f"{batch.mse:.4f}+-{batch.mse_se:.4f}")

# %% [markdown]
# ## Several rewards: normalise before or after summing?
#
# With several reward functions (a verifier and a format check, say) TRL offers two orders:
# `multi_objective_aggregation="sum_then_normalize"` (its default: one group std of the weighted
# sum) and `"normalize_then_sum"` (GDPO, verl's and NeMo-RL's `gdpo`: each reward normalised in
# its group, the weighted sum then whitened over the batch). For binary channels both have exact
# finite-G moments (docs/theory.md C52). The two rules differ in scale, so we compare them at
# their best step size: $1 - \langle E\hat g, t\rangle^2 / (E\|\hat g\|^2 \|t\|^2)$, with $t$ the
# gradient of the weighted objective. On `multireward_bandit` (a hard verifier and an easy format
# check) normalising first wins at every $G$ when the format check weighs half; with equal
# weights it wins only at small $G$. Neither order is better in general: compute it for your
# weights (a Monte Carlo run at $G = 4$ checks the exact MSE below the plot).

# %%
from ustat_rl.montecarlo import run_monte_carlo
from ustat_rl.montecarlo.multichannel import multichannel_statistics
from ustat_rl.policies.multichannel import multireward_bandit
from ustat_rl.theory.multichannel import multichannel_moments

multi = multireward_bandit()
mm = multi.channel_moments()
sizes_m = [2, 3, 4, 6, 8, 12, 16]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, w in zip(axes, [(1.0, 0.5), (1.0, 1.0)]):
    for rule, style in (("trl_sum_then_normalize", "o-"), ("trl_normalize_then_sum", "s--")):
        curve = [multichannel_moments(mm, rule, g, w, 4).scale_free_mse for g in sizes_m]
        ax.plot(sizes_m, curve, style, label=rule.removeprefix("trl_"))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("G (B = 4 groups)")
    ax.set_title(f"weights w = {w}")
axes[0].set_ylabel("MSE at the best step size")
axes[0].legend()
fig.tight_layout()

stat, labels = multichannel_statistics(multi, ("trl_sum_then_normalize",), (4,), 4, (1.0, 0.5))
est = run_monte_carlo(stat, 4000, 6, labels=labels)
exact_sum = multichannel_moments(mm, "trl_sum_then_normalize", 4, (1.0, 0.5), 4)
mean, se = est.get(("sq", "trl_sum_then_normalize", 4))
print(f"sum_then_normalize at G = 4, B = 4, w = (1, 0.5): exact MSE {exact_sum.mse:.5f}, "
      f"Monte Carlo {mean:.5f} +- {se:.5f}")
