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
# # G* and the noise budget for your own policy
#
# Theorem 7 says that at a fixed budget of $N = BG$ samples per step the GRPO gradient's MSE is
# $(c_1 G + c_2 + c_3'/(G-1))/N$, smallest at $G^* = 1 + \sqrt{c_3'/c_1}$ (`docs/theory.md` C17).
# The constants depend on the policy. This notebook estimates them from a *pilot*: a few prompts,
# a few samples each, with rewards and per-sample scores $W$ (or a random projection $RW$ of
# them), following `docs/theory.md` section 7:
#
# * every moment is an unbiased U-statistic of order at most 3 (C31);
# * intervals come from a jackknife over prompts and over projection rows (C32);
# * `ustat-rl gstar` turns a pilot file into the choice of $G$.
#
# The policy here is a softmax bandit, so the exact answer is known and we can see how close the
# pilot gets. Everything below calls the package; no formula is re-implemented here.

# %%
# %matplotlib inline
import tempfile
from pathlib import Path

import numpy as np

from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.pilot import estimate_constants, load_rollouts, pilot_intervals
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import SketchSpec, drawn_spec
from ustat_rl.pilot.report import format_report, gstar_report
from ustat_rl.interface.plotting_pilot import plot_gstar_report

bandit = interior_optimum_bandit()
exact = bandit.scaling_constants()
exact, exact.optimal_group_size()

# %% [markdown]
# ## A pilot: 64 prompts, 16 samples each, scores projected to k = 32
#
# `bandit_pilot` stands in for a practitioner's rollouts. The pilot is saved and read back as a
# file, exactly what `ustat-rl gstar` consumes (`.npz` or Parquet, the same fields).

# %%
pilot = bandit_pilot(bandit, 64, 16, rng=np.random.default_rng(2026),
                     sketch=SketchSpec(32, seed=1395062587))
folder = Path(tempfile.mkdtemp())
path = pilot.save(folder / "pilot.npz")
pilot = load_rollouts(path)
pilot.n_prompts, pilot.n_samples, pilot.sketch_dim, pilot.sketch_kind

# %% [markdown]
# ## Constants and G* with 90% intervals
#
# The interval for $c_1$ is wide: prompts barely disagree here, which is exactly why $G^*$ is
# large. The interval for $G^*$ is the image of Fieller's interval for the ratio $c_1/c_3'$; it
# has no upper end exactly when the interval for $c_1$ reaches 0, and then the pilot cannot
# bound $G^*$ from above: that is an answer, not a failure (`docs/theory.md` C32 gives the
# coverage at each pilot size).

# %%
out = pilot_intervals(pilot, level=0.9)
for name, truth in (("c1", exact.c1), ("c2", exact.c2), ("c3", exact.c3)):
    part = getattr(out, name)
    print(f"{name}: {part.estimate:.4g}  [{part.low:.4g}, {part.high:.4g}]   exact {truth:.4g}")
g = out.optimal_group_size
print(f"G*: {g.estimate:.3g}  [{g.low:.3g}, {g.high:.3g}]   exact {exact.optimal_group_size():.3g}")

# %% [markdown]
# ## Unbiased, not just consistent
#
# Over many independent pilots the estimates of $c_1$ average to the exact value (C31), even
# though a single pilot is noisy. ($G^*$ itself is a nonlinear function of them: consistent,
# not unbiased.)

# %%
rng = np.random.default_rng(7)
draws = np.array([estimate_constants(bandit_pilot(bandit, 64, 16, rng,
                                                  sketch=drawn_spec(32, rng))).c1
                  for _ in range(200)])
print(f"mean of 200 estimates of c1: {draws.mean():.4g} +- {draws.std(ddof=1) / np.sqrt(200):.2g}"
      f" (exact {exact.c1:.4g})")

# %% [markdown]
# ## The report: which G to use at N = 480
#
# The same as `ustat-rl gstar pilot.npz --budget 480 --plot mse.png`. When this pilot's estimate
# of $c_1$ is below 0 the curve at the point estimates falls all the way to $G = N$, one prompt
# per batch: under the exact constants that has several times the optimum's MSE. The report
# therefore does not take the argmin at the estimates. It recommends the divisor whose predicted
# MSE stays closest to the best one for every $c_1$ its interval allows (minimax regret, with
# $c_2$ and $c_3'$ at their well-determined estimates), says how far from the best that can be,
# and how many pilot prompts would bound $G^*$.

# %%
report = gstar_report(pilot, 480)
print(format_report(report))

# %%
plot_gstar_report(report)

# %% [markdown]
# ## Checking the advice against the exact answer
#
# The exact fixed-budget MSE of the recommended $G$ against the exact optimum over the divisors
# of $N$ (`simulations/pilot_coverage.py` repeats this over 1000 pilots; `docs/theory.md` C32
# gives the figures):

# %%
sizes = np.array(report.group_sizes, dtype=float)
optimum = exact.fixed_budget_mse(sizes, 480).min()
for name, G in (("recommended", report.recommended_group_size),
                ("argmin at the estimates", report.best_group_size)):
    print(f"{name}: G = {G}, exact MSE / optimum = "
          f"{exact.fixed_budget_mse(float(G), 480) / optimum:.3f}")

# %% [markdown]
# ## A pilot large enough to bound G*
#
# With 2048 prompts the interval for $c_1$ stays above 0 and the report bounds $G^*$.

# %%
large = gstar_report(bandit_pilot(bandit, 2048, 16, rng=np.random.default_rng(2026),
                                  sketch=SketchSpec(32, seed=1846120509)), 480)
print(format_report(large).split("predicted minibatch MSE")[0])

# %% [markdown]
# ## Your own model
#
# For a causal language model, `ustat_rl.scores.causal_lm.causal_lm_pilot(model, prompts,
# reward_fn, Sampling(group_size, max_new_tokens, seed), SketchSpec(256))` samples the answers,
# scores them with your reward function and records projected whole-sequence scores without ever holding a
# $d \times k$ matrix; save the result with `.save("pilot.parquet")` and run
# `ustat-rl gstar pilot.parquet --budget N`. With a weak policy (small success rates) the report
# also shows where GRPO loses to vanilla (C10) and how many groups would have all-equal rewards.
