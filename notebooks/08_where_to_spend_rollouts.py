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
# # Where to spend rollouts
#
# The paper gives every prompt the same group size $G$. With a budget of $N$ rollouts per batch
# and Theorem 2's exact per-prompt MSE,
# $\mathrm{MSE}_x(G) = \mathrm{tr}\,\Sigma_\text{oracle}(x)/G + (E\|W\|^2\,\mathrm{Var}(Z|x) +
# \|g(x)\|^2)/(G(G-1))$, the sizes $G_x$ with $\sum_x G_x = N$ can instead be chosen to minimise
# the batch MSE $\sum_x f(x)^2\,\mathrm{MSE}_x(G_x)$ (docs/theory.md C40). Each term is convex and
# decreasing in $G$, so giving rollouts one at a time to the prompt whose term falls most is exact.
#
# The rules published in 2026 decide from the success rate $p$ alone: Neyman-type
# $G_x \propto \sqrt{p(1-p)}$ (also VIP's variance model and Rollout-GDRO's square-root rule at
# the prompt level) and sGPO's $G_x \propto 1/p$. The MSE depends on the score norms as much as
# on $p$; this notebook shows by how much that matters.

# %%
import matplotlib.pyplot as plt
import numpy as np

from ustat_rl.theory.allocation import per_prompt_terms
from ustat_rl.pilot.allocation import format_pilot_allocation, loglinear_pilot, pilot_allocation
from ustat_rl.theory.allocation_rules import compare_allocations
from ustat_rl.policies.examples import HETEROGENEOUS_SCALES, HETEROGENEOUS_VALUES, heterogeneous_score_bandit
from ustat_rl.interface.plotting_allocation import plot_allocations, plot_mse_curves

# %% [markdown]
# ## Six prompts: three success rates, two score scales
#
# `heterogeneous_score_bandit` crosses the success rates 0.15, 0.5 and 0.85 with score scales
# 0.5 and 3: prompts 0 and 3 have the same $p$, but every score of prompt 3 is six times
# larger, so its gradient noise is 36 times larger. A reward-only rule cannot tell them apart.

# %%
bandit, theta = heterogeneous_score_bandit()
moments = bandit.moments(theta, matrices=False)
labels = [f"x={x}: p={p:.2f}, scale {s:g}"
          for x, (p, s) in enumerate(zip(HETEROGENEOUS_VALUES, HETEROGENEOUS_SCALES))]
sizes, terms, _ = per_prompt_terms(moments, "grpo", 2, 64)
plot_mse_curves(sizes, terms, labels);

# %% [markdown]
# ## The allocations side by side at N = 48
#
# The optimal sizes follow the noise: the large-score prompts get about four times the rollouts
# of the small-score ones at the same $p$. Neyman puts the most on $p = 0.5$ whatever its scale,
# and sGPO on the hardest prompts.

# %%
out = compare_allocations(moments, "grpo", 48)
plot_allocations(out)
for name, alloc in out.items():
    print(f"{name:8s} {alloc.group_sizes.tolist()}  MSE / uniform = "
          f"{alloc.mse / out['uniform'].mse:.3f}")

# %% [markdown]
# ## The gain against each rule, across budgets
#
# The ratio of the optimal MSE to each rule's at the same budget: below 1 means the optimal
# allocation wins (it can never be above 1). The gain over uniform settles near 0.65; sGPO's
# $1/p$ rule is about three times worse than the optimum on this bandit.

# %%
budgets = [12, 24, 48, 96, 192, 384]
ratios = {rule: [] for rule in ("uniform", "neyman", "vip", "sgpo")}
for n in budgets:
    res = compare_allocations(moments, "grpo", n)
    for rule in ratios:
        ratios[rule].append(res["optimal"].mse / res[rule].mse)
fig, ax = plt.subplots(figsize=(5, 3.5))
for rule, r in ratios.items():
    ax.semilogx(budgets, r, "o-", label=f"optimal / {rule}")
ax.axhline(1.0, color="grey", lw=0.8)
ax.set_xlabel("budget N (rollouts per batch)")
ax.set_ylabel("MSE ratio")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## A transformer policy
#
# On the committed `"medium"` transformer policy (exact moments by enumerating the 111 answers
# of each question), success rates and score norms also vary across questions, and the likeliest
# answers have the smallest score norms.

# %%
from ustat_rl.policies.transformer import ArithmeticTask, exact_moments, load_study_policy, make_splits

policy, _ = load_study_policy("medium", device="cpu")
questions = list(make_splits(ArithmeticTask(), seed=0).test)[:12]
tf_moments = exact_moments(policy, questions)
tf = compare_allocations(tf_moments, "grpo", 8 * len(questions))
print("V(x)     ", np.round(tf_moments.value, 2).tolist())
print("E||W||^2 ", np.round(tf_moments.score_sq, 0).tolist())
for name, alloc in tf.items():
    print(f"{name:8s} {alloc.group_sizes.tolist()}  MSE / uniform = "
          f"{alloc.mse / tf['uniform'].mse:.3f}")

# %% [markdown]
# ## From a pilot
#
# In practice the moments come from a pilot. `ustat-rl allocate` computes every rule from the
# pilot's unbiased per-prompt moments and a cross-fitted ratio to uniform: sizes fitted on half
# of each prompt's samples, scored on the other half. A pilot of 64 samples per prompt on the
# six-prompt bandit:

# %%
pilot = loglinear_pilot(bandit, theta, 64, rng=0)
print(format_pilot_allocation(pilot_allocation(pilot, 48)))

# %% [markdown]
# With six prompts the interval has five degrees of freedom and is wide; with few samples per
# prompt the fitted sizes chase noise and can be worse than uniform (docs/theory.md C40 gives
# measured figures), which is what the cross-fitted ratio is there to show.
