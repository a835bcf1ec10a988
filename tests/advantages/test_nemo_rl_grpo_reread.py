"""NeMo-RL's GRPO re-read at 7ea279ab, still NVIDIA-NeMo/RL's newest readable commit (issue 47,
docs/conventions.md "Re-read at each framework's newest commit"): the kit's verdict on its own
``GRPOAdvantageEstimator`` (``use_leave_one_out_baseline`` and ``normalize_rewards`` on, the
defaults), and the batch the page names.

The estimator is NeMo-RL's ``calculate_baseline_and_std_per_prompt`` (extracted unchanged at
7ea279ab into tests/data/nemo_rl_gdpo_7ea279ab.py) with a valid mask of ones, then its rule for
the division written here: the numerator ``z - baseline`` is divided by ``std + 1e-6`` where
``std > 0`` and left undivided elsewhere. Its std of the others is ``E[x^2] - E[x]^2`` in
float32 (one pass), so at an offset of 1e6 the others ``[1e6, 1e6 + 4]`` (exact Bessel std
``2 sqrt(2)``) get a std that is not above 0 and the numerator ``-2`` is left undivided: the
kit's tolerance at float32 is about 1.27 there, and ``|-2 - (-0.707)| = 1.29`` exceeds it. As a
control the same function is within the tolerance on well-separated rewards near 0.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from script_loader import load_data

from ustat_rl.advantages.conventions import advantages
from ustat_rl.conformance.kit import check_conformance, tolerance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.integration  # a conformance run on a framework's own code

NAME = "nemo_rl_grpo"


def nemo_grpo(rewards, group_ids):
    """``GRPOAdvantageEstimator.compute_advantage`` at 7ea279ab, one token per response; NeMo-RL
    holds rewards in float32."""
    nemo = load_data("nemo_rl_gdpo_7ea279ab")
    z = torch.as_tensor(np.asarray(rewards)).to(torch.float32)
    ids = torch.as_tensor(np.asarray(group_ids)).reshape(-1, 1)
    baseline, std = nemo.calculate_baseline_and_std_per_prompt(ids, z, torch.ones_like(z),
                                                               leave_one_out_baseline=True)
    out = z - baseline
    divide = std > 0
    out[divide] = out[divide] / (std[divide] + 1e-6)
    return out.numpy()


def test_the_pages_batch_is_outside_the_kits_tolerance():
    z, ids = np.float32([1e6, 1e6, 1e6 + 4]), np.zeros(3, dtype=np.int64)
    got, expected = nemo_grpo(z, ids), advantages(NAME, z, ids)
    np.testing.assert_allclose(expected, [-1 / np.sqrt(2), -1 / np.sqrt(2), 4.0], rtol=1e-5)
    np.testing.assert_array_equal(got, [-2.0, -2.0, 4.0])
    excess = np.abs(got - expected) > tolerance(NAME, z, ids, np.float32)
    np.testing.assert_array_equal(excess, [True, True, False])


def test_well_separated_rewards_are_within_the_tolerance():
    z, ids = np.float32([0.0, 1.0, 3.0, 0.5, 2.0, 0.0]), np.repeat([0, 1], 3)
    got, expected = nemo_grpo(z, ids), advantages(NAME, z, ids)
    assert np.all(np.abs(got - expected) <= tolerance(NAME, z, ids, np.float32))


def test_the_kit_rejects_nemo_rls_own_grpo():
    report = check_conformance(nemo_grpo, NAME, search=Search(max_examples=200, shrink=False))
    assert not report.passed
