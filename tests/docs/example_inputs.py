"""Stand-ins for the reader's own files, so the pages' "your own run" commands run as shown.

A mark ``given="NAME ..."`` (tests/docs/doc_examples.py) puts each named input in the page's
working folder before its blocks run. Each is made here from the package's own samplers at a
fixed seed, in the layout the command documents, at the sizes the page's command assumes (a
group size of 8 where the page passes ``--group-size 8``):

* ``pilot.npz``, ``pilot.parquet``: a pilot of the README's two-prompt softmax bandit, drawn by
  :func:`ustat_rl.scores.bandit.bandit_pilot` (64 groups of 8, a 16-column Gaussian sketch);
* ``run.jsonl``: a monitor's trajectory file (``tests/frameworks/data/trajectory_v2.jsonl``);
* ``outputs``: a TRL output folder whose checkpoint's ``trainer_state.json`` logs what TRL's
  ``GRPOTrainer`` logs for 0/1 rewards at G = 8 (the batch's mean reward, the pooled reward
  std with Bessel's correction, the share of all-equal groups; ``ustat_rl.frameworks.logs``);
* ``run/completions``: TRL's completion logs (``completions_{step:05d}.parquet``, groups of 8
  contiguous, one 0/1 reward function);
* ``mymodule.py``: ``my_advantages(rewards, group_ids)``, TRL's group-scaled advantage written
  out by hand, as a user's implementation would be.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

_ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: Seed of every stand-in (fixed: the inputs are the same on every run).
SEED = 20261207
#: The group size the pages' commands pass (``--group-size 8``).
GROUP_SIZE = 8


def _bandit_pilot():
    from ustat_rl import SoftmaxBandit
    from ustat_rl.scores.bandit import bandit_pilot
    from ustat_rl.scores.spec import SketchSpec

    bandit = SoftmaxBandit(logits=[[0.3, -0.2, 0.5], [1.0, 0.0, -1.0]],
                           reward_prob=[[0.9, 0.2, 0.5], [0.1, 0.6, 0.3]])
    return bandit_pilot(bandit, 64, GROUP_SIZE, np.random.default_rng(SEED),
                        sketch=SketchSpec(16, seed=SEED))


def _pilot(folder: Path, name: str) -> None:
    _bandit_pilot().save(folder / name)


def _trajectory(folder: Path, name: str) -> None:
    shutil.copy(_ROOT / "tests" / "frameworks" / "data" / "trajectory_v2.jsonl", folder / name)


def _binary_batches(steps: int, prompts: int, rng) -> list[np.ndarray]:
    """0/1 rewards, (prompts, G) per step, each prompt's success rate drawn from Beta(1, 2)."""
    return [(rng.random((prompts, GROUP_SIZE)) < rng.beta(1.0, 2.0, (prompts, 1))).astype(float)
            for _ in range(steps)]


def _trainer_state(folder: Path, name: str) -> None:
    rng = np.random.default_rng(SEED)
    history = []
    for step, z in enumerate(_binary_batches(60, 16, rng), start=1):
        all_equal = np.ptp(z, axis=1) == 0
        history.append({"step": step, "reward": float(z.mean()),
                        "reward_std": float(z.ravel().std(ddof=1)),
                        "frac_reward_zero_std": float(all_equal.mean())})
    checkpoint = folder / name / "checkpoint-60"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps(
        {"global_step": 60, "log_history": history}, indent=1))


def _completions(folder: Path, name: str) -> None:
    import pandas as pd

    rng = np.random.default_rng(SEED)
    out = folder / name
    out.mkdir(parents=True)
    for step, z in enumerate(_binary_batches(5, 8, rng), start=1):
        prompts = [f"prompt {step}-{i}" for i in range(z.shape[0]) for _ in range(GROUP_SIZE)]
        reward = z.ravel()
        grouped = z - z.mean(1, keepdims=True)
        scale = z.std(1, ddof=1, keepdims=True) + 1e-4
        pd.DataFrame({"step": [step] * reward.size, "prompt": prompts,
                      "completion": [f"answer {i}" for i in range(reward.size)],
                      "accuracy": reward, "advantage": (grouped / scale).ravel(),
                      }).to_parquet(out / f"completions_{step:05d}.parquet")


_MODULE = '''"""A hand-written advantage function: TRL's group-scaled rule."""
import numpy as np


def my_advantages(rewards, group_ids):
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.empty_like(rewards)
    for group in np.unique(group_ids):
        rows = group_ids == group
        r = rewards[rows]
        spread = r.std(ddof=1) if r.size > 1 else 0.0  # TRL: a one-sample group's std is 0
        out[rows] = (r - r.mean()) / (spread + 1e-4)
    return out
'''


def _module(folder: Path, name: str) -> None:
    (folder / name).write_text(_MODULE)


#: Every stand-in, by the name the pages use.
MAKERS = {"pilot.npz": _pilot, "pilot.parquet": _pilot, "run.jsonl": _trajectory,
          "outputs": _trainer_state, "run/completions": _completions, "mymodule.py": _module}


def make(name: str, folder: Path) -> Path:
    """Write the stand-in ``name`` into ``folder`` and return its path.

    Raises
    ------
    KeyError
        For a name with no stand-in (the mark names an input nobody makes).
    """
    if name not in MAKERS:
        raise KeyError(f"no stand-in input named {name!r}; known: {', '.join(MAKERS)}")
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    MAKERS[name](folder, name)
    return folder / name
