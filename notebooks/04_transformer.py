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
# # GRPO gradients of a small transformer on synthetic arithmetic
#
# The bandit notebooks give exact answers for tabular policies. Here the policy is a tiny
# causal transformer (about $10^5$ parameters) that answers integer-arithmetic questions from
# the paper's five categories (two-step $\pm$, three-step $\pm$, one-step $\times$, integer
# division, $\pm$ with parentheses). Claims refer to `docs/theory.md`:
#
# * **C5 (Theorem 2)** on a transformer: the exact MSE formulas of the vanilla, GRPO and oracle
#   estimators, checked against Monte Carlo with real autoregressive sampling and
#   `torch.func.vmap` per-sample scores $W = \nabla_\theta \log \pi_\theta(Y\mid x)$.
# * **C11 (Fig. 4 analogue)**: MSE against $G$ for three policies of increasing strength.
# * **C17 / C18**: the scaling constants $c_1, c_2, c_3'$ and the predicted
#   $G^* = 1 + \sqrt{c_3'/c_1}$, then a short fixed-budget GRPO sweep.
#
# Answers have at most two digits and decoding is constrained to digits and end-of-sequence,
# so each prompt has exactly 111 possible outputs: $V(x)$ and $g(x)$ are computed **exactly**
# by enumeration, and no Monte Carlo reference gradient is needed. Everything below calls the
# package; this notebook runs the quick sizes (well under a minute on one CPU core).

# %%
# %matplotlib inline
import numpy as np
import pandas as pd
import torch

from ustat_rl import theory
from ustat_rl.interface.plotting import new_figure, plot_mse_curve
from ustat_rl.montecarlo.transformer import mc_squared_errors
from ustat_rl.policies.transformer import (
    POLICY_NAMES,
    ArithmeticTask,
    bootstrap_constants,
    exact_moments,
    load_study_policy,
    make_splits,
)
from ustat_rl.training.transformer import expected_accuracy, grpo_train, moderate_questions

splits = make_splits(ArithmeticTask(), seed=0)
print(len(splits.train), "training and", len(splits.test), "test questions, e.g.",
      [q.text + str(q.answer) for q in splits.test[:5]])

# %% [markdown]
# ## 1. Three policies of increasing strength
#
# `simulations/make_transformer_policies.py` warms one model up by maximum likelihood and saves
# snapshots after 400, 1200 and 3000 steps (analogues of a base model, an instruct model and an
# instruct model with few-shot examples). Their exact expected test accuracy:

# %%
policies = {name: load_study_policy(name, device="cpu")[0] for name in POLICY_NAMES}
pd.DataFrame({"policy": POLICY_NAMES,
              "parameters": [policies[n].dim for n in POLICY_NAMES],
              "expected test accuracy": [expected_accuracy(policies[n], splits.test)
                                         for n in POLICY_NAMES]})

# %% [markdown]
# ## 2. Exact MSE against group size (C5, C11)
#
# For each policy we take six test prompts of moderate success probability
# ($0.2 \le V(x) \le 0.8$), enumerate their answers to get the exact moments
# (`PromptMoments`, the same contract the bandits fill) and let `ustat_rl.theory` turn them into
# the exact prompt-averaged MSE curves.

# %%
group_sizes = [4, 8, 16, 32, 64]
moments, rows = {}, []
for name, policy in policies.items():
    chosen = moderate_questions(policy, list(splits.test), limit=6)
    moments[name] = (chosen, exact_moments(policy, chosen))
    for est in ("vanilla", "grpo", "oracle"):
        curve = theory.prompt_averaged_mse(moments[name][1], est, group_sizes)
        for g, v in zip(group_sizes, curve):
            rows.append({"policy": name, "estimator": est, "G": g, "MSE": v})
exact_table = pd.DataFrame(rows).pivot_table(index=["policy", "G"], columns="estimator",
                                             values="MSE")
exact_table.round(2)

# %% [markdown]
# GRPO is above the oracle and approaches it as $G$ grows, as Theorem 2 says. The paper's
# ordering *vanilla > GRPO* does **not** hold for the weaker policies here: the correct answer is
# the likeliest output and has a small score norm, so $\|W\|^2$ and $Z$ are negatively
# correlated (Assumption 2 fails), and a zero baseline can beat $V(x)$ (C9, C10).

# %% [markdown]
# ## 3. Monte Carlo with real sampling agrees with the exact formulas
#
# For the medium policy: three prompts, twenty independent draws of 32 answers each (groups of
# smaller size are nested in them), vmap scores, and the estimators of `ustat_rl.advantages.gradients`.
# Bars are 95% normal intervals. (The strong policy has heavier-tailed score norms: rare answers
# with very large $\|W\|$, so it needs many more draws for trustworthy intervals.)

# %%
mc_sizes = group_sizes[:-1]
chosen = moments["medium"][0][:3]
chosen_moments = exact_moments(policies["medium"], chosen)
mc = mc_squared_errors(policies["medium"], chosen, mc_sizes, 20, seed=0)
fig, axes = new_figure(1, 1, panel_size=(5, 3.6))
for est in ("vanilla", "grpo", "oracle"):
    mean = np.array([mc.get((est, g))[0] for g in mc_sizes])
    se = np.array([mc.get((est, g))[1] for g in mc_sizes])
    plot_mse_curve(axes[0, 0], est, group_sizes=mc_sizes, mse=mean,
                   interval=(mean - 1.96 * se, mean + 1.96 * se),
                   exact=(mc_sizes, theory.prompt_averaged_mse(chosen_moments, est, mc_sizes)))
axes[0, 0].set_xlabel("group size G")
axes[0, 0].set_ylabel("MSE")
axes[0, 0].legend(fontsize=7)
fig  # noqa: B018 - display the figure

# %% [markdown]
# ## 4. Scaling constants and the predicted group size (C17)
#
# Exact for the prompt set, with 95% bootstrap intervals over prompts.

# %%
ci = bootstrap_constants(moments["weak"][1], np.random.default_rng(0), 500)
pd.DataFrame({"estimate": [ci.constants.c1, ci.constants.c2, ci.constants.c3, ci.g_star],
              "2.5%": [ci.low[k] for k in ("c1", "c2", "c3", "g_star")],
              "97.5%": [ci.high[k] for k in ("c1", "c2", "c3", "g_star")]},
             index=["c1", "c2", "c3'", "G*"]).round(3)

# %% [markdown]
# ## 5. A tiny fixed-budget GRPO sweep (C18)
#
# Algorithm 1 (leave-one-out GRPO, plain SGD) from the weak policy at $N = BG = 64$ samples per
# iteration for a few iterations. This only shows the mechanics: the real sweep is
# `simulations/transformer_group_size.py` (sized for a GPU); at this size the differences
# between group sizes are within noise.

# %%
sweep = []
for g in (2, 8, 32):
    policy = load_study_policy("weak", device="cpu")[0]
    run = grpo_train(policy, splits, g, 64, 8, 0.01,
                     torch.Generator().manual_seed(g))
    sweep.append({"G": g, "B": run.batch_size, "accuracy before": run.test_accuracy[0],
                  "accuracy after": run.test_accuracy[-1]})
pd.DataFrame(sweep).round(4)
