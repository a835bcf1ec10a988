"""An affine rule's MSE takes one form per rule, never one chosen by the data.

Vanilla's MSE once switched to the oracle's form wherever its ``D = V`` happened to be 0: equal
for a policy's exact moments, not for a pilot's estimated ones, so the MSE of a pilot whose
estimated value was exactly 0 jumped (0.246 to 0.142 below), and the jackknife, whose
finite-difference step landed on that 0, refused small continuous-reward windows as "not
affine" (found by tests/test_invariants_trajectory.py). Exact comparisons: no false-failure rate.
"""

import numpy as np
import pytest

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.window import Batch, window_record
from ustat_rl.pilot.replicates import as_moments
from ustat_rl.theory import minibatch_mse

pytestmark = pytest.mark.fast

#: A pilot's estimated summary (value, reward_var, ..., grad_norm_sq), some estimates below 0.
SUMMARY = np.array([0.0, 0.61408082, 1.82002409, 0.20855905, 2.26348809, 0.70429294,
                    0.40892592, 0.76891427, -0.20311495])


def _mse(rule, value):
    summary = SUMMARY.copy()
    summary[0] = value
    return minibatch_mse(as_moments(summary), rule, 3, 5)


@pytest.mark.parametrize("rule", ["vanilla", "oracle", "grpo", "fullmean"])
def test_the_mse_of_estimated_moments_is_continuous_at_a_value_of_zero(rule):
    assert _mse(rule, 0.0) == pytest.approx(_mse(rule, 1e-12), rel=1e-9, abs=1e-12)
    assert _mse(rule, 0.0) == pytest.approx(_mse(rule, -1e-12), rel=1e-9, abs=1e-12)


def test_vanilla_and_the_oracle_differ_on_estimated_moments():
    # the two forms' difference is what the data-chosen switch let through (control: a switch
    # between equal forms could not be seen)
    assert abs(_mse("vanilla", 0.0) - _mse("oracle", 0.0)) > 0.05


def test_a_small_continuous_window_is_estimated():
    rng = np.random.default_rng(0)
    P, G = int(rng.integers(3, 6)), 3
    reward = rng.normal(np.repeat(rng.normal(size=P), G), 1.0)
    score = rng.normal(size=(P * G, int(rng.integers(1, 4))))
    meta = dict(sketch_kind="gaussian", sketch_seed=None, sketch_blocks=None,
                sketch_route="dense", model_name="m", param_dim=score.shape[1])
    record, _ = window_record([Batch(0, G, reward, score, 0)], meta, P * G,
                              MonitorConfig(estimator=EstimatorConfig(source="test")))
    assert record.ok
