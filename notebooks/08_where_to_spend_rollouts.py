# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
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
from ustat_rl.theory.allocation_baselines import compare_allocations
from ustat_rl.policies.examples import HETEROGENEOUS_SCALES, HETEROGENEOUS_VALUES, heterogeneous_score_bandit
from ustat_rl.interface.plotting_allocation import plot_allocations, plot_mse_curves

# %% [markdown]
# ## Six prompts: three success rates, two score scales
#
# `heterogeneous_score_bandit` crosses the success rates 0.15, 0.5 and 0.85 with score scales
# 0.5 and 3: prompts 0 and 3 have the same $p$, but every score of prompt 3 is six times
# larger, so its gradient noise is 36 times larger. A reward-only allocation cannot tell them apart.

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

# %% [markdown]
# ## Dynamic sampling: dropping the all-equal groups (beyond the paper)
#
# DAPO's dynamic sampling, as verl runs it (`algorithm.filter_groups`), drops every group whose
# $G$ rewards are all equal and draws more generation batches of $b$ prompts until $B$ groups are
# kept. A group at a prompt with success rate $p$ is all-equal with probability
# $q = p^G + (1-p)^G$, and is kept with probability $r = 1 - \sum_x f(x)\,q(x)$ overall. The kept
# groups are i.i.d. draws conditioned on being kept, so the batch has exact moments
# (docs/theory.md section 7 and C51): for GRPO $E\,\hat g_\text{DS} = g/r$, the right direction
# but $1/r$ too long, a bias $(Q/r)\,g$ with $Q = 1 - r$ that no batch size removes.
#
# Ten equally likely prompts with $p = 0.05, 0.15, \dots, 0.95$, $B = 16$ kept groups: the
# relative bias $Q/r$ falls quickly with $G$ (at $G = 2$ the keep probability is 0.34), and the
# MSE with filtering sits above the unfiltered one at every $G$. The points are verl's loop
# itself (`simulate_dynamic_sampling`, 4000 steps each; bars of two standard errors, smaller
# than the points).

# %%
from ustat_rl.montecarlo.dynamic_sampling import simulate_dynamic_sampling
from ustat_rl.policies.examples import known_value_bandit
from ustat_rl.theory.dynamic_sampling import (
    filtered_batch_moments,
    generation_cost,
    optimal_filtered_group_size,
)

spread = known_value_bandit(np.linspace(0.05, 0.95, 10))
ds_moments = spread.moments()
ds_sizes, kept_groups = np.arange(2, 33), 16
kept = [filtered_batch_moments(ds_moments, "grpo", int(G), kept_groups) for G in ds_sizes]
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.plot(ds_sizes, [np.sqrt(k.bias_sq / ds_moments.grad_norm_sq) for k in kept], "o-", ms=3,
          label="filtered: Q/r")
left.axhline(0.0, color="grey", lw=0.8, label="unfiltered GRPO: unbiased")
left.set_xlabel("group size G")
left.set_ylabel("|E g_DS - g| / |g|")
left.legend(fontsize=8)
right.semilogy(ds_sizes, [k.mse for k in kept], "-", label="filtered (exact)")
right.semilogy(ds_sizes, [k.unfiltered_mse for k in kept], "--", label="unfiltered (exact, C6)")
for G in (2, 4, 8):
    run = simulate_dynamic_sampling(spread, "grpo", G, kept_groups, 4000,
                                    np.random.default_rng(G))
    sq = np.sum((run.gradients - spread.grad) ** 2, axis=1)
    right.errorbar(G, sq.mean(), yerr=2 * sq.std(ddof=1) / np.sqrt(sq.size), fmt="ko", ms=3)
right.set_xlabel("group size G")
right.set_ylabel(f"MSE at B = {kept_groups} kept groups")
right.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## What filtering costs in generation batches
#
# Each generation batch keeps Binomial$(b, r)$ groups, and batches are whole: with $b = B$ one
# batch is enough only when all $B$ of its groups are kept, so a step usually takes two even
# when $r$ is near 1, and $E N$ is not $B/(b r)$ (`generation_cost`, exact; C51 checks it
# against the loop, with and without verl's cap `max_num_gen_batches`). The DAPO scripts draw
# $b = 3B$ prompts per generation batch, with which one batch is almost always enough from
# $G = 3$ on.

# %%
batch = 64
keep = np.array([filtered_batch_moments(ds_moments, "grpo", int(G), 1).keep_prob
                 for G in ds_sizes])
fig, ax = plt.subplots(figsize=(5, 3.5))
for multiple in (1, 3):
    gen = [generation_cost(ds_moments.value, int(G), batch, multiple * batch, 0,
                           ds_moments.prompt_prob).expected_gen_batches for G in ds_sizes]
    line, = ax.plot(ds_sizes, gen, "o-", ms=3, label=f"E N, b = {multiple}B")
    ax.plot(ds_sizes, batch / (multiple * batch * keep), ":", color=line.get_color(),
            label=f"B/(b r), b = {multiple}B (not the cost)")
ax.set_xlabel("group size G")
ax.set_ylabel(f"generation batches per step (B = {batch})")
ax.set_ylim(0, 4)
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## The best G when the budget counts generated rollouts
#
# At $N = 1024$ rollouts per step the best $G$ depends on what $N$ counts
# (`optimal_filtered_group_size`): every generated rollout, discarded groups and the overflow
# of the last batch included, only the $B G$ kept ones (which makes filtering look free), or no
# filter at all. C51 checks the generated-rollout answer against a search over every $(G, B)$
# and runs the loop at it. On this task filtering never pays in gradient MSE against $g$: the
# bias of the kept batch stays whatever $N$ is.

# %%
budget = 1024
counted = {"generated": "filtered, N counts generated rollouts",
           "accepted": "filtered, N counts kept rollouts", "unfiltered": "no filter"}
best = {accounting: optimal_filtered_group_size(ds_moments, budget, "grpo", accounting,
                                                np.arange(2, 65))
        for accounting in counted}
fig, ax = plt.subplots(figsize=(5, 3.5))
for accounting, res in best.items():
    line, = ax.semilogy(res.group_sizes, res.mses, "-", label=counted[accounting])
    ax.semilogy(res.group_size, res.mse, "o", color=line.get_color())
    print(f"{accounting:10s} best G = {res.group_size:2d}, B = {res.batch_size:3d}, "
          f"MSE = {res.mse:.3g}, rollouts generated per step = "
          f"{res.rollouts[res.group_sizes == res.group_size][0]:.0f}")
ax.set_xlabel("group size G")
ax.set_ylabel(f"exact MSE at N = {budget}")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## Other frameworks' group filters, and POLARIS's replace (beyond the paper)
#
# With binary rewards every framework's filter is a rule keep$(k, G)$ on a group's success count
# $k$ (`ustat_rl.theory.group_filters`, docs/conventions.md "Dynamic-sampling group filters"):
# verl's and slime's standard deviations and OpenRLHF's default mean range keep $0 < k < G$;
# ROLL's `difficulty_mask` keeps $0.1\,G < k < 0.95\,G$, so from $G = 10$ it also drops the
# groups with one success, and from $G = 20$ those with one failure. The keep probability
# $r = \sum_{k \text{ kept}} \mathrm{Binomial}(G, p)(k)$ at one prompt (C55 checks the kept
# batches against each framework's loop).

# %%
from ustat_rl.theory.dynamic_sampling import keep_probability
from ustat_rl.theory.group_filters import GROUP_FILTERS

grid = np.linspace(0.01, 0.99, 99)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), sharey=True)
for ax, G in zip(axes, (4, 10, 20)):
    for name, style in zip(GROUP_FILTERS, ("-", "--", ":", "-.")):
        ax.plot(grid, [keep_probability(p, G, group_filter=name) for p in grid], style,
                label=name)
    ax.set_title(f"G = {G}")
    ax.set_xlabel("success rate p")
axes[0].set_ylabel("keep probability r")
axes[0].legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# SkyRL's POLARIS `replace` is not a group filter: a batch of $B$ prompts is used when more than
# $0.3\,B$ of its groups have a spread, its other groups overwritten by copies of those, else it
# is redrawn (docs/theory.md section 7, "POLARIS's replace"). The copies keep the batch at $B$
# groups but are perfectly correlated with their sources, so at the same $B$ the replaced batch
# has a larger variance than verl's refilled one, and fewer batches per step. Here, the ten
# prompts above at $G = 4$.

# %%
from ustat_rl.theory.replace_sampling import replace_batch_moments, replace_generation_cost

for B in (4, 16, 64):
    polaris = replace_batch_moments(ds_moments, "grpo", 4, B)
    verl = filtered_batch_moments(ds_moments, "grpo", 4, B)
    cost = replace_generation_cost(ds_moments.value, 4, B)
    refill = generation_cost(ds_moments.value, 4, B)
    print(f"B = {B:2d}: P(batch used) = {polaris.replace_prob:.3f}, batches per step "
          f"{cost.expected_gen_batches:.2f} (verl {refill.expected_gen_batches:.2f}); MSE "
          f"{polaris.mse:.3g} (verl {verl.mse:.3g}), variance {polaris.variance:.3g} "
          f"(verl {verl.variance:.3g})")

# %% [markdown]
# ## From the logs alone: `ustat-rl logs`
#
# TRL's `trainer_state.json` logs each step's mean reward and the fraction of groups whose
# rewards are all equal (`frac_reward_zero_std`) at the run's $G_0$. Those two numbers bound the
# all-equal fraction (the dynamic-sampling waste) at any other $G$, never fix it
# (docs/theory.md "Training logs alone", checked by C56). A small synthetic log: 30 steps of 32
# groups of $G_0 = 8$, success rates from a Beta law; `ustat-rl logs trainer_state.json
# --group-size 8` prints the same report.

# %%
import json
import tempfile
from pathlib import Path

from ustat_rl.frameworks.logs import read_trainer_state
from ustat_rl.frameworks.logs_report import format_logs_report, logs_report

log_rng = np.random.default_rng(0)
entries = []
for step in range(1, 31):
    p = log_rng.beta(0.6, 0.9, size=32)
    r = (log_rng.random((32, 8)) < p[:, None]).astype(float)
    entries.append({"step": step, "reward": r.mean(), "reward_std": r.std(ddof=1),
                    "frac_reward_zero_std": np.mean(r.std(axis=1) == 0), "grad_norm": 0.5,
                    "rewards/accuracy/mean": r.mean()})
with tempfile.TemporaryDirectory() as folder:
    state = Path(folder) / "trainer_state.json"
    state.write_text(json.dumps({"logging_steps": 1, "log_history": entries}))
    history = read_trainer_state(state)
print(format_logs_report(logs_report(history, 8, window=10, group_sizes=(2, 16))))
