"""Argument checking and the result type of the pilot's moment estimates (ustat_rl/pilot/estimate.py).

``group_moments`` refuses a 2-D reward and fewer than three samples with a message that names
``reward``; ``PilotStatistics`` reports its sizes as ints, defaults ``column_group`` to ``None``
(every column its own block) and is frozen.
"""

import dataclasses

import numpy as np
import pytest

from ustat_rl.pilot.estimate import SCORE_MOMENTS, PilotStatistics, group_moments, pilot_statistics
from ustat_rl.pilot.rollouts import Rollouts

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("reward", [np.zeros((3, 1)), np.zeros((4, 2)), np.zeros(2), np.zeros(0)])
def test_group_moments_needs_a_1d_reward_of_three_samples(reward):
    score = np.zeros((reward.shape[0], 2))
    with pytest.raises(ValueError, match=r"^`reward` must be 1-D with >= 3 samples, got shape"):
        group_moments(reward, score)


def _stats():
    rng = np.random.default_rng(5)
    ids = np.repeat(np.arange(3), 4)
    return pilot_statistics(Rollouts(prompt_id=ids, reward=rng.normal(size=12),
                                     score=rng.normal(size=(12, 5))))


def test_sizes_are_ints_and_the_result_is_frozen():
    stats = _stats()
    assert stats.n_prompts == 3 and isinstance(stats.n_prompts, int)
    assert stats.n_columns == 5 and isinstance(stats.n_columns, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.sketched = True


def test_column_group_defaults_to_none():
    stats = _stats()
    fields = {f.name: getattr(stats, f.name) for f in dataclasses.fields(PilotStatistics)
              if f.name != "column_group"}
    bare = PilotStatistics(**fields)
    assert bare.column_group is None
    assert set(bare.columns) == set(SCORE_MOMENTS)


@pytest.mark.parametrize("score", [np.zeros((4, 2)), np.zeros(3), np.zeros((3, 2, 1))])
def test_group_moments_needs_one_score_row_per_reward(score):
    with pytest.raises(ValueError, match=r"^`score` must have shape \(3, k\), got \("):
        group_moments(np.zeros(3), score)
