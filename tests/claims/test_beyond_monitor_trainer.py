"""C47's reference route (``ustat_rl.claims.beyond_monitor.trainer``, docs/theory.md "Against a
real trainer"): each ``loss_type``'s completion weights
(:func:`ustat_rl.frameworks.trainer_units.completion_weights`) against TRL's loss aggregation,
written from the trainer's source and differentiated by autograd.
"""

from __future__ import annotations

import numpy as np
import pytest

from ustat_rl.claims.beyond_monitor.trainer import trl_token_weights
from ustat_rl.frameworks.trainer_units import LOSS_WEIGHTS, completion_weights, units_note

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("loss_type", sorted(LOSS_WEIGHTS))
def test_weights_are_trls_aggregation(loss_type):
    """``(1/n) sum_i A_i w_i W_i`` is the gradient of TRL's loss: ``w_i / n`` is the weight
    TRL's aggregation gives each of completion ``i``'s tokens, found by autograd on the
    aggregation written from the trainer's source (C47's reference route, which owns it)."""
    lengths = np.array([1, 3, 2, 5])
    got = completion_weights(loss_type, lengths, max_completion_length=6)
    want = lengths.size * trl_token_weights(loss_type, lengths, 6)
    assert np.allclose(got, want, rtol=1e-14)
    assert units_note(loss_type).startswith("trainer")
