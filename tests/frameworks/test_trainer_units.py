"""The trainer's own gradient in the monitor (ustat_rl/frameworks/trainer_units.py, window.py,
ustat_rl/theory/noise.py; docs/theory.md, "Against a real trainer").

Exact checks: the weights' bad input, named, and TRL's clamp; the variance of a minibatch
estimator against its MSE minus the squared bias of the exact theory (the bias of the full mean is
known in closed form). Each ``loss_type``'s completion weights against TRL's loss aggregation by
autograd is C47's check, tested in tests/claims/test_beyond_monitor_trainer.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ustat_rl.frameworks.trainer_units import (
    completion_weights,
    units_note,
)
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.theory import minibatch_mse, minibatch_variance

pytestmark = pytest.mark.fast


def test_weights_bad_input_and_unknown_losses():
    with pytest.raises(ValueError, match="`loss_type`"):
        completion_weights("ppo", [1, 2])
    with pytest.raises(ValueError, match="`max_completion_length`"):
        completion_weights("dr_grpo", [1, 2])
    with pytest.raises(ValueError, match="`lengths`"):
        completion_weights("dapo", [])
    assert units_note("ppo").startswith("paper units")
    assert completion_weights("grpo", [0, 2]).tolist() == [1.0, 0.5]  # TRL clamps at 1


def test_variance_is_the_mse_less_the_squared_bias():
    """Unbiased rules: variance = MSE; the full mean: MSE - ((G-1)/G - 1)^2 ||g||^2; both at
    several (G, B). The MSE itself (a wrong variance) is rejected for the full mean."""
    moments = interior_optimum_bandit().moments()
    for G, B in ((2, 1), (4, 8), (16, 3)):
        for rule in ("grpo", "vanilla"):
            assert math.isclose(minibatch_variance(moments, rule, G, B),
                                minibatch_mse(moments, rule, G, B), rel_tol=1e-10)
        bias_sq = (1.0 / G) ** 2 * float(moments.grad_norm_sq)
        mse = minibatch_mse(moments, "fullmean", G, B)
        var = minibatch_variance(moments, "fullmean", G, B)
        assert math.isclose(var, mse - bias_sq, rel_tol=1e-10)
        assert not math.isclose(mse, mse - bias_sq, rel_tol=1e-6)
    sizes = np.array([2, 4, 8])
    assert np.allclose(minibatch_variance(moments, "grpo", sizes, 4),
                       minibatch_mse(moments, "grpo", sizes, 4), rtol=1e-10)
