"""The trainer's own gradient in the monitor (ustat_rl/frameworks/trainer_units.py, window.py,
ustat_rl/theory/noise.py; docs/theory.md, "Against a real trainer").

Exact checks: each ``loss_type``'s completion weights against TRL's loss aggregation written
out by hand; the variance of a minibatch estimator against its MSE minus the squared bias of the
exact theory (the bias of the full mean is known in closed form); a real TRL run with
``scale_rewards="batch"`` estimates every window (the large-B limit) and records its units.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ustat_rl.claims.beyond_monitor.trainer import trl_token_weights
from ustat_rl.frameworks.trainer_units import (
    LOSS_WEIGHTS,
    completion_weights,
    units_note,
)
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.theory import minibatch_mse, minibatch_variance


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


@pytest.mark.parametrize("scale", ["batch", "group"])
@pytest.mark.integration  # TRL run
def test_a_real_run_estimates_every_window_in_trainer_units(tmp_path, scale):
    """TRL with ``scale_rewards="batch"`` (batch statistics, held at each batch's value) or
    ``"group"``: every window estimated, the run rule's MSE and variance at the run's G with
    intervals that hold their estimates and do not go below 0; G*, the intervals and the advice
    as for every window."""
    pytest.importorskip("trl")
    from ustat_rl.frameworks import GroupSizeMonitor, MonitorConfig, Outputs, Schedule
    from ustat_rl.frameworks.demo import demo_trainer
    from ustat_rl.scores.spec import SketchSpec

    trainer = demo_trainer(tmp_path / "out", 4, 8, 3, 1e-3, scale_rewards=scale,
                           loss_type="dr_grpo")
    monitor = GroupSizeMonitor(trainer, MonitorConfig(
        schedule=Schedule(every=1, pool=2), sketch=SketchSpec(32, blocks=8),
        outputs=Outputs(tmp_path / "t.jsonl")))
    trainer.add_callback(monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    records = monitor.records
    assert [r.status for r in records] == ["ok"] * 3
    assert all(r.units == units_note("dr_grpo") for r in records)
    assert all(r.gstar is not None and r.recommended_group_size >= 2 for r in records)
    for r in records:
        for name in ("var_run", "mse_run"):
            part = getattr(r, name)
            assert 0.0 <= part.low <= part.estimate <= part.high, (name, r)
        assert r.var_run.estimate > 0
        assert r.run_method.startswith(f"trl_{scale} at the run's G = 4")
        assert ("batch statistics held" in r.run_method) == (scale == "batch")
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert all("ustat/var_run" in h for h in logs)
    # dynamic sampling's cost at the run's G, from the all-equal fraction of earlier batches
    assert records[0].ds_keep_prob is None  # no earlier batch to predict from
    for r in records[1:]:
        assert r.ds_keep_prob == pytest.approx(1.0 - r.all_equal_predicted, abs=1e-15)
        # whole generation batches: at least the B/(b r) = 1/r a fractional count would give
        assert r.ds_gen_batches >= 1.0 / r.ds_keep_prob - 1e-12
