"""The windows the group-filter tests of the monitor share: three batches of four groups of ten
binary rewards, with the success counts of :data:`COUNTS`, and scores that lean on the reward."""

from __future__ import annotations

import numpy as np

from ustat_rl.frameworks.window import Batch

G, GROUPS = 10, 4
COUNTS = ((1, 5, 0, 9), (10, 1, 3, 1), (2, 7, 1, 4))  # success counts per batch
META = dict(sketch_kind="gaussian", sketch_seed=None, sketch_blocks=None, sketch_route="dense",
            model_name="test", param_dim=6)


def filter_batches() -> list:
    """The three batches, drawn at a fixed seed (group order shuffled within each group)."""
    rng = np.random.default_rng(11)
    out = []
    for b, counts in enumerate(COUNTS):
        reward = np.concatenate([rng.permutation(np.repeat([1.0, 0.0], [k, G - k]))
                                 for k in counts])
        score = rng.normal(size=(reward.size, 6)) + reward[:, None]
        out.append(Batch(b, G, reward, score, b * GROUPS))
    return out
