"""The invariants of docs/invariants.md on generated inputs, across every command.

Hypothesis draws pilots (tiny and large, all rewards equal, every group all-equal, one
informative prompt, success rates near 0 and 1, continuous rewards, rewards of 1e150-1e300 and
1e-160-1e-300), budgets (one of them prime), levels and options, and runs ``gstar`` (with and
without ``--dynamic-sampling`` and a cap), ``allocate``, ``rewards``, ``conformance`` (correct,
raising, mis-signed, mutating and constant targets) and the API, then checks every invariant on
what comes out (tests/invariant_checks.py).

Budget: ``EXAMPLES`` drawn inputs per property in the suite (about 15 s for the file on one
idle core); set ``USTAT_RL_INVARIANTS=long`` for ``LONG_EXAMPLES`` (about 3 minutes; it found the
overflow of G* = 1 + sqrt(c3'/c1) at c1 = 2.2e-311 that the suite's budget had not met).
Hypothesis runs derandomized, so a run is reproducible and a failure replays.

Planted-bug controls: the same properties with a bug planted in the package (a GRPO verdict taken
from the interval's midpoint, an allocation verdict from the ratio's point estimate, the
constants' intervals left unclipped, the cap ignored) must fail; each control states the
invariant that catches it.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invariant_checks import (
    BUDGETS,
    LEVELS,
    LONG,
    NO_SHRINK,
    SETTINGS,
    check_allocation,
    check_messages,
    check_rewards,
    gstar_run,
    pilots,
    run_cli,
)

from ustat_rl.theory import ScalingConstants

pytestmark = pytest.mark.fast

EXAMPLES, LONG_EXAMPLES = 30, 1000
N = LONG_EXAMPLES if LONG else EXAMPLES


def _settings(examples: int = N, shrink: bool = True):
    return settings(max_examples=examples, **SETTINGS,
                    **({} if shrink else {"phases": NO_SHRINK}))


# ---------------------------------------------------------------------------------- gstar
#: ``--dynamic-sampling`` on or off, and ``--max-gen-batches`` (None: no cap).
DYNAMIC = st.booleans()
CAPS = st.sampled_from([None, 1, 2, 5])


def gstar_property(strategy, examples: int = N, dynamic=DYNAMIC, caps=CAPS,
                   shrink: bool = True):
    @_settings(examples, shrink)
    @given(strategy, st.sampled_from(BUDGETS), st.sampled_from(LEVELS), dynamic, caps)
    def run(pilot, budget, level, dynamic_sampling, cap):
        with tempfile.TemporaryDirectory() as folder:
            gstar_run(pilot, Path(folder), budget, level, dynamic_sampling, cap)
    return run


def test_gstar_invariants_on_generated_pilots():
    gstar_property(pilots())()


def test_gstar_invariants_on_large_pilots():
    gstar_property(pilots(large=True))()


# ------------------------------------------------------------------------- allocate, rewards
def allocate_property(strategy, examples: int = N, shrink: bool = True):
    @_settings(examples, shrink)
    @given(strategy, st.integers(0, 40), st.sampled_from(LEVELS))
    def run(pilot, spare, level):
        with tempfile.TemporaryDirectory() as folder:
            path = pilot.save(Path(folder) / "pilot.npz")
            budget = 2 * pilot.n_prompts + spare
            code, out, err = run_cli(["allocate", path, "--budget", budget, "--level", level,
                                      "--json", Path(folder) / "a.json"])
            check_messages(code, out, err)
            assert code in (0, 2), f"I6 allocate exits 0 or 2, got {code}"
            if code == 0:
                check_allocation(json.loads((Path(folder) / "a.json").read_text()), out)
    return run


def test_allocate_invariants_on_generated_pilots():
    allocate_property(pilots())()


@_settings()
@given(pilots(), st.sampled_from(BUDGETS), st.booleans())
def test_rewards_invariants_on_generated_files(pilot, budget, dynamic):
    with tempfile.TemporaryDirectory() as folder:
        path = pilot.save(Path(folder) / "pilot.npz")
        argv = ["rewards", path, "--budget", budget, "--json", Path(folder) / "r.json"]
        code, out, err = run_cli(argv + (["--dynamic-sampling"] if dynamic else []))
        check_messages(code, out, err)
        assert code in (0, 2), f"I6 rewards exits 0 or 2, got {code}"
        if code == 0:
            check_rewards(json.loads((Path(folder) / "r.json").read_text()), out)


# ------------------------------------------------------------------------------ bad options
BAD_OPTIONS = [
    ["gstar", "{pilot}", "--budget", "-4"],
    ["gstar", "{pilot}", "--budget", "13"],
    ["gstar", "{pilot}", "--budget", "64", "--level", "1.5"],
    ["gstar", "{pilot}", "--budget", "64", "--max-gen-batches", "3"],
    ["gstar", "{pilot}", "--budget", "64", "--dynamic-sampling", "--max-gen-batches", "0"],
    ["gstar", "{pilot}", "--budget", "64", "--json", "{folder}/missing/g.json"],
    ["gstar", "{folder}/none.npz", "--budget", "64"],
    ["allocate", "{pilot}", "--budget", "1"],
    ["allocate", "{pilot}", "--budget", "64", "--estimator", "no_such_rule"],
    ["rewards", "{pilot}", "--budget", "64", "--group-size", "1"],
    ["verify", "--only", "C1", "--json", "{folder}/missing/v.json"],
    ["verify", "--only", "C999"],
    ["conformance", "{folder}/none.py:f", "--estimator", "grpo"],
    ["conformance", "{targets}:correct", "--estimator", "grpo", "--max-examples", "0"],
    ["conformance", "{targets}:correct", "--estimator", "grpo", "--weights", "1"],
]


@_settings(examples=max(N, len(BAD_OPTIONS)))
@given(st.sampled_from(BAD_OPTIONS), pilots())
def test_usage_errors_are_one_line_exit_2(argv, pilot):
    with tempfile.TemporaryDirectory() as folder:
        paths = {"pilot": pilot.save(Path(folder) / "p.npz"), "folder": folder,
                 "targets": _targets(Path(folder), "grpo")}
        code, out, err = run_cli([a.format(**paths) for a in argv])
        assert code == 2, (argv, code, out, err)
        check_messages(code, out, err)


# ------------------------------------------------------------------------------ conformance
TARGETS = '''
import numpy as np
from ustat_rl.advantages.conventions import advantages
from ustat_rl.advantages.multichannel import get_multichannel_rule, multichannel_rule_names

RULE = {rule!r}

def correct(rewards, group_ids, weights=None):
    if RULE in multichannel_rule_names():
        return get_multichannel_rule(RULE).advantages(rewards, group_ids, weights)
    return advantages(RULE, rewards, group_ids)

def mutating(rewards, group_ids, weights=None):
    out = correct(rewards, group_ids, weights)
    rewards[...] = 0
    return out

def constant(rewards, group_ids, weights=None):
    return np.zeros(np.shape(rewards)[0])

def raising(rewards, group_ids, weights=None):
    raise RuntimeError("boom")

def one_argument(rewards):
    return np.zeros(np.shape(rewards)[0])
'''

#: What each target's run must exit with (I6): a usage error is 2, a wrong answer 1.
EXPECTED_EXIT = {"correct": 0, "mutating": 1, "constant": 1, "raising": 2, "one_argument": 2}
RULES = ("grpo", "fullmean", "trl_group", "verl_grpo", "openrlhf_rloo", "trl_sum_then_normalize",
         "verl_gdpo")


def _targets(folder: Path, rule: str) -> str:
    path = folder / "targets.py"
    path.write_text(TARGETS.format(rule=rule))
    return str(path)


@_settings(examples=max(N // 2, 6))
@given(st.sampled_from(RULES), st.sampled_from(sorted(EXPECTED_EXIT)))
def test_conformance_exit_codes_follow_the_target(rule, target):
    with tempfile.TemporaryDirectory() as folder:
        path = _targets(Path(folder), rule)
        code, out, err = run_cli(["conformance", f"{path}:{target}", "--estimator", rule,
                                  "--max-examples", 25 if LONG else 10])
        check_messages(code, out, err)
        assert code == EXPECTED_EXIT[target], (rule, target, code, out, err)
        if code == 1:
            assert out.startswith("DOES NOT CONFORM") and "smallest failing batch" in out
            assert err == ""


# -------------------------------------------------------------------------------- the API
@_settings(examples=N * 4)
@given(st.tuples(*[st.floats(-2.0, 2.0)] * 3), st.booleans(),
       st.floats(1.0, 600.0, exclude_min=True), st.sampled_from(BUDGETS))
def test_the_api_answers_or_says_undefined(constants, estimated, group_size, budget):
    c = ScalingConstants(*constants, estimated=estimated)
    try:
        value = c.fixed_budget_mse(group_size, budget)
    except ValueError as exc:  # I5: undefined, named
        assert group_size > budget or (not estimated and min(constants) < 0), exc
        assert "`group_size`" in str(exc) or "`c" in str(exc)
    else:
        assert math.isfinite(value) and group_size <= budget
        assert estimated or value >= 0.0, "I1 an MSE of a policy's constants is >= 0"
    try:
        g = c.optimal_group_size()
    except ValueError as exc:
        assert (c.c1 <= 0 and c.c3 <= 0) or c.c3 < 0, exc
    else:
        assert g >= 1.0 and (math.isfinite(g) or (c.c1 <= 0 < c.c3)), "I5 G* is inf only when " \
            "the MSE falls without end"


# -------------------------------------------------------------------- planted-bug controls
CONTROL_EXAMPLES = 60  # enough drawn inputs for the harness to meet each planted bug


def _fails(run) -> str:
    with pytest.raises(AssertionError) as caught:
        run()
    return str(caught.value)


def test_control_a_grpo_verdict_from_a_point_estimate_is_caught(monkeypatch):
    import ustat_rl.pilot.report as report

    monkeypatch.setattr(report, "margin_verdict",
                        lambda low, high: "wins" if low + high > 0 else "loses")
    message = _fails(gstar_property(pilots(large=True), CONTROL_EXAMPLES,
                                    dynamic=st.just(False), caps=st.just(None), shrink=False))
    assert "I3" in message


def test_control_b_an_allocation_verdict_from_a_point_estimate_is_caught(monkeypatch):
    import ustat_rl.pilot.allocation as allocation

    monkeypatch.setattr(allocation, "ratio_verdict",
                        lambda est, low, high, ref: "gain shown" if est < 1 else "within the noise")
    message = _fails(allocate_property(pilots(large=True), CONTROL_EXAMPLES, shrink=False))
    assert "I3" in message


def test_control_c_intervals_left_unclipped_are_caught(monkeypatch):
    import ustat_rl.pilot.uncertainty as uncertainty

    monkeypatch.setattr(uncertainty, "_in_range", lambda part: part)
    message = _fails(gstar_property(pilots(), CONTROL_EXAMPLES, dynamic=st.just(False),
                                    caps=st.just(None), shrink=False))
    assert "I1" in message


def test_control_d_a_cap_ignored_is_caught(monkeypatch):
    import ustat_rl.pilot.dynamic_sampling as dynamic_sampling

    monkeypatch.setattr(dynamic_sampling, "CAP_RISK", 1.0)
    binary = pilots(large=True).filter(lambda p: bool(np.all((p.reward == 0) | (p.reward == 1))))
    message = _fails(gstar_property(binary, CONTROL_EXAMPLES, dynamic=st.just(True),
                                    caps=st.sampled_from([1, 2]), shrink=False))
    assert "I4" in message
