"""``--replace-ratio`` of ``ustat-rl gstar`` and ``ustat-rl rewards`` (ustat_rl.pilot.replace_sampling).

A pilot with known success counts (``m = 1, 3, 5, 7`` of ``n = 8``) fixes every number: the
report must equal the theory's functions called directly on the dynamic-sampling report's ``r``
and on the pilot's moments made binary (1e-13, the same arithmetic). Negative control: the same
numbers at another ratio differ. Refusals name the option.
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest

import ustat_rl.pilot.replace_sampling as module
from ustat_rl.interface.cli import main
from ustat_rl.pilot.dynamic_sampling import pilot_dynamic_sampling
from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.pilot.replace_sampling import pilot_replace_sampling
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.theory.advantage import binary_projection
from ustat_rl.theory.replace_sampling import replace_batch_moments, replace_cost_at_keep_probability

pytestmark = pytest.mark.fast

RTOL, BUDGET = 1e-13, 32


def _pilot() -> Rollouts:
    reward = np.concatenate([np.repeat([1.0, 0.0], [m, 8 - m]) for m in (1, 3, 5, 7)])
    ids = np.repeat(np.arange(4), 8)
    score = np.random.default_rng(2).normal(size=(ids.size, 3)) + reward[:, None]
    return Rollouts(ids, reward, score)


def test_report_equals_the_theory_at_the_reports_keep_probability():
    pilot = _pilot()
    ds = pilot_dynamic_sampling(pilot, BUDGET, 3)
    out = pilot_replace_sampling(pilot, ds, 0.3)
    projected = binary_projection(estimate_moments(pilot_statistics(pilot)))
    other = pilot_replace_sampling(pilot, ds, 0.6)
    for i, (G, B) in enumerate(zip(ds.group_sizes, ds.batch_sizes)):
        r = ds.keep_prob_unbiased[i] if ds.keep_prob_unbiased[i] is not None else ds.keep_prob[i]
        want = replace_cost_at_keep_probability(r, G, B, 0.3, 3)
        got = (out.replace_prob[i], out.expected_gen_batches[i], out.cap_probability[i])
        np.testing.assert_allclose(got, (want.replace_prob, want.expected_gen_batches,
                                         want.cap_probability), rtol=RTOL)
        exact = replace_batch_moments(projected, "grpo", G, B, 0.3)
        np.testing.assert_allclose((out.bias_sq[i], out.mse[i]), (exact.bias_sq, exact.mse),
                                   rtol=RTOL)
        if B > 1 and 0.0 < r < 1.0:  # negative control: the ratio matters
            assert abs(other.replace_prob[i] - out.replace_prob[i]) > 1e-3


@pytest.mark.parametrize("command", ["gstar", "rewards"])
def test_commands_print_the_section_and_write_its_json(tmp_path, capsys, command):
    path = _pilot().save(tmp_path / "pilot.npz")
    code = main([command, str(path), "--budget", str(BUDGET), "--dynamic-sampling",
                 "--replace-ratio", "0.3", "--max-gen-batches", "4",
                 "--json", str(tmp_path / "out.json")])
    got = capsys.readouterr()
    assert code == 0 and got.err == ""
    assert "POLARIS replace as SkyRL runs it (min_replace_ratio 0.3, cap K = 4" in got.out
    payload = json.loads((tmp_path / "out.json").read_text())
    section = payload["replace_sampling"]
    assert section["group_sizes"] == payload["dynamic_sampling"]["group_sizes"]
    assert (section["mse"] is None) == (command == "rewards")


@pytest.mark.parametrize("extra, words", [
    (["--replace-ratio", "0.3"], "`--replace-ratio` applies only with --dynamic-sampling"),
    (["--dynamic-sampling", "--replace-ratio", "1.0"], "`--replace-ratio` must lie in [0, 1)"),
])
def test_bad_ratios_are_refused_in_one_line(tmp_path, capsys, extra, words):
    path = _pilot().save(tmp_path / "pilot.npz")
    code = main(["rewards", str(path), "--budget", str(BUDGET), *extra])
    got = capsys.readouterr()
    assert code == 2 and got.out == "" and got.err.count("\n") == 1 and words in got.err


def test_examples_run():
    assert doctest.testmod(module).failed == 0
