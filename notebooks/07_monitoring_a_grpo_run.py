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
# # Monitoring a GRPO run
#
# TRL's `GRPOTrainer` asks for `num_generations`, the group size $G$, and most runs keep the
# default. The paper's scaling law (Theorem 7, docs/theory.md C17) says what it should be: at a
# fixed budget of $N = BG$ completions per step the gradient MSE is
# $(c_1 G + c_2 + c_3'/(G-1))/N$, smallest at $G^* = 1 + \sqrt{c_3'/c_1}$, where $c_1$ is how much
# the prompts' gradients differ, $c_2$ the noise of one completion and $c_3'$ the price of
# estimating the baseline from the group itself. Theorem 7 also says that $G^*$ does not depend on
# the training iteration. `GroupSizeMonitor` estimates all of it from the run's own groups while it
# trains (sketched scores of the completions, docs/theory.md C31, C32), and `ustat-rl gstar
# --trajectory` checks the universality claim on the run.
#
# The run here is the demo run of `ustat_rl.frameworks.demo`: a small GPT-2 built from a config
# (no download), prompts `a+b=`, reward 1 when the first answer character has the parity of
# $a + b$. It trains on the CPU in well under a minute.

# %%
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt

from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule, read_trajectory
from ustat_rl.frameworks.demo import demo_trainer
from ustat_rl.frameworks.universality import format_universality, gstar_universality
from ustat_rl.interface.plotting_trajectory import plot_trajectory
from ustat_rl.scores.spec import SketchSpec

folder = Path(tempfile.mkdtemp())
trainer = demo_trainer(folder, group_size=4, groups=16, steps=16, learning_rate=2e-3)
monitor = GroupSizeMonitor(trainer, MonitorConfig(
    schedule=Schedule(every=2, pool=4), sketch=SketchSpec(64),
    outputs=Outputs(folder / "trajectory.jsonl")))
trainer.add_callback(monitor)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    trainer.train()

# %% [markdown]
# The monitor wrote its estimates into TRL's own logs, so whatever logger the run uses (here the
# trainer's `log_history`) shows them next to TRL's `frac_reward_zero_std`:

# %%
logged = [h for h in trainer.state.log_history if "ustat/c1" in h]
for h in logged[:4]:
    print({k: round(v, 3) for k, v in h.items() if k.startswith("ustat/") or k == "frac_reward_zero_std"})

# %% [markdown]
# Each window is also one line of the trajectory file, read back as a `WindowRecord`. The run's
# advantage rule (its `estimator`) was read from the trainer's config and looked up in the registry:

# %%
records = read_trajectory(folder / "trajectory.jsonl")
last = records[-1]
print(last.estimator, "from", last.estimator_source)
print(f"G* = {last.gstar.estimate:.3g}, 90% interval [{last.gstar.low:.3g}, "
      f"{last.gstar.high:.3g}]; advice G = {last.recommended_group_size}; "
      f"GRPO beats vanilla at G = {last.group_size}: {last.grpo_beats_vanilla}")

# %% [markdown]
# ## G* along the run
#
# One $G$ inside every window's interval is a statement about all windows at once, so each
# window's interval is rebuilt at the Bonferroni level before the intervals are intersected
# (the same rule as the toy-policy check C18):

# %%
result = gstar_universality(records, level=0.9)
print(format_universality(result))

# %%
figure = plot_trajectory(result)
plt.show()

# %% [markdown]
# ## What the numbers mean for `num_generations`
#
# - **$G^*$ and its band.** A window with few groups often cannot bound $G^*$ from above (its
#   $c_1$ interval reaches 0, so the band is open upwards): the data then say only that $G$
#   should not be smaller than the lower end. More groups per window (a larger `pool`, or more
#   prompts per step) close the band; `ustat-rl gstar` on a saved window says how many.
# - **The advice** is the divisor of the budget with the smallest worst-case excess MSE over the
#   interval (docs/theory.md C32), not the point estimate rounded.
# - **All-equal groups.** For binary rewards a group of $G$ completions is all-equal with
#   probability $p^G + (1-p)^G$: the monitor predicts the fraction from the earlier windows and
#   sets it beside the newest batch's observed fraction (TRL's `frac_reward_zero_std`). Those
#   groups carry no gradient under any group-relative rule; a larger $G$ makes them rarer, at the
#   price of fewer prompts per step.
# - **Universality.** If one $G$ lies inside every rebuilt interval, the run is consistent with a
#   $G^*$ that does not change during training, as Theorem 7 predicts; if not, the output names
#   two windows whose intervals do not meet.
