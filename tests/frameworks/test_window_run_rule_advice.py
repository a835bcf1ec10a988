"""A monitor's window advises for the run's own rule under both targets, and records its flat
groups (window_record's run_rule_advice_* and flat_* fields).

Windows cut from a pilot of the interior-optimum bandit (200 prompts, the run's ``G`` = 4 or 8
at ``N`` = 64), where ``trl_group``'s MSE advises another ``G`` than GRPO's while its scale-free
error agrees with GRPO (docs/theory.md, "What a step's progress depends on"). The record's
advice for the run's rule must equal what ``ustat-rl gstar --estimator <rule> --target <t>``
answers for the window's rollouts written to a file (exact: an integer); negative control: the
answer for a planted wrong rule (``grpo`` while the run trains ``trl_group``) fails the same
comparison. The flat-group fields must equal :func:`~ustat_rl.frameworks.flat_groups.
flat_group_report` of the same groups (shares exact, expected shares and intervals to 1e-15,
the same arithmetic); negative control: the report of the window without its oldest batch
fails the same comparison. No check is random: the pilot is drawn once at a fixed seed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ustat_rl.frameworks.config import EstimatorConfig, MonitorConfig
from ustat_rl.frameworks.flat_groups import REASONS, flat_group_report
from ustat_rl.frameworks.grouped import GroupedRewards
from ustat_rl.frameworks.trajectory import append_record, read_trajectory
from ustat_rl.frameworks.window import Batch, advice_line, window_record
from ustat_rl.interface.cli import main
from ustat_rl.policies.examples import interior_optimum_bandit
from ustat_rl.scores.bandit import bandit_pilot

pytestmark = pytest.mark.fast

N, PROMPTS = 64, 200
META = dict(sketch_kind="none", sketch_seed=None, sketch_blocks=None, sketch_route="dense",
            model_name="bandit", param_dim=None)


def _batches(G: int) -> list:
    """The pilot's groups cut into generation batches of ``N/G`` groups (oldest first)."""
    pilot = bandit_pilot(interior_optimum_bandit(), PROMPTS, G, rng=3)
    order = np.argsort(pilot.prompt_id, kind="stable")
    reward, score = pilot.reward[order], pilot.score[order]
    B = N // G
    return [Batch(b, G, reward[b * N:(b + 1) * N], score[b * N:(b + 1) * N], b * B)
            for b in range(PROMPTS // B)]


def _record(batches, rule, target=None):
    config = MonitorConfig(batches[0].group_size, estimator=EstimatorConfig(
        rule, source="test", advice_target=target))
    return window_record(batches, dict(META, param_dim=batches[0].score.shape[1]), N, config)


def _gstar(tmp_path, rollouts, rule: str, target: str) -> int:
    """``ustat-rl gstar``'s advice for ``rollouts`` written to a file."""
    path, out = tmp_path / "window.npz", tmp_path / f"{rule}_{target}.json"
    rollouts.save(path)
    assert main(["gstar", str(path), "--budget", str(N), "--estimator", rule, "--target",
                 target, "--json", str(out)]) == 0
    return json.loads(out.read_text())["recommended_group_size"]


def _matches(record, answers: dict) -> bool:
    return (record.run_rule_advice_mse, record.run_rule_advice_scale_free) == (
        answers["mse"], answers["scale_free"])


def test_the_record_advises_for_the_run_rule_as_gstar_does(tmp_path, capsys):
    record, rollouts = _record(_batches(8), "trl_group")
    answers = {t: _gstar(tmp_path, rollouts, "trl_group", t) for t in ("mse", "scale_free")}
    capsys.readouterr()
    assert _matches(record, answers) and record.run_rule_advice_note is None
    # the window tells the two targets apart for trl_group, as the theory notes' bandit does
    assert record.run_rule_advice_mse != record.run_rule_advice_scale_free
    # the followed advice is the Adam-type target's by default, the paper's stays beside it
    assert record.advice_target == "scale_free"
    assert record.advised_group_size == record.run_rule_advice_scale_free
    grpo = {t: _gstar(tmp_path, rollouts, "grpo", t) for t in ("mse", "scale_free")}
    assert record.recommended_group_size == grpo["mse"]
    # negative control: advising grpo while the run trains trl_group fails the comparison
    assert not _matches(record, grpo)
    line = advice_line(record)
    assert f"advice G = {record.advised_group_size} for trl_group (scale-free" in line
    assert f"paper's GRPO advice G = {record.recommended_group_size}" in line


def test_a_fixed_step_follows_the_mse_advice():
    record, _ = _record(_batches(8), "trl_group", "mse")
    assert record.advice_target == "mse"
    assert record.advised_group_size == record.run_rule_advice_mse
    assert "(MSE: a fixed-size step)" in advice_line(record)


@pytest.mark.parametrize("rule, words", [
    (None, "not in the registry"),
    ("trl_normalize_then_sum", "multi-reward rule"),
    ("trl_batch", "batch statistics"),
])
def test_a_rule_gstar_cannot_advise_for_gets_no_number_and_a_reason(rule, words):
    record, _ = _record(_batches(8), rule)
    assert record.run_rule_advice_mse is None and record.run_rule_advice_scale_free is None
    assert words in record.run_rule_advice_note
    assert "paper's GRPO advice" in record.run_rule_advice_note
    assert record.advised_group_size == record.recommended_group_size
    assert "the paper's GRPO advice (none for" in advice_line(record)


def _flat_matches(record, batches, G: int) -> bool:
    """The record's flat-group fields against flat_group_report of ``batches`` as one table."""
    ids = np.concatenate([[f"{b.first_id + i // G}" for i in range(b.reward.size)]
                          for b in batches])
    table = GroupedRewards(ids, np.concatenate([b.reward for b in batches]))
    sizes = sorted({G, record.advised_group_size})
    report = flat_group_report(table, sizes, record.level)[0]
    share = {name: report.counts[name] / report.n_groups for name in REASONS}
    ok = share == record.flat_share
    for size, field in ((G, record.flat_expected_run),
                        (record.advised_group_size, record.flat_expected_advised)):
        i = report.group_sizes.index(size)
        want = (report.expected[i], report.low[i], report.high[i])
        got = (field.estimate, field.low, field.high)
        ok = ok and all(math.isclose(a, b, rel_tol=1e-15, abs_tol=1e-15)
                        for a, b in zip(got, want))
    return ok


def test_the_record_carries_the_flat_groups_of_its_window(tmp_path):
    G = 4  # the advice (8) lies above the run's G: a second expected share, a plug-in there
    batches = _batches(G)
    record, _ = _record(batches, "trl_group")
    assert record.advised_group_size != G
    assert _flat_matches(record, batches, G)
    assert sum(record.flat_share.values()) > 0.0  # the window has flat groups to count
    # at the run's G each group's unbiased estimate is its own indicator: the observed share
    assert record.flat_expected_run.estimate == pytest.approx(sum(record.flat_share.values()),
                                                              abs=1e-15)
    # negative control: the report of the window without its oldest batch is rejected
    assert not _flat_matches(record, batches[1:], G)
    # the fields survive the trajectory file
    append_record(tmp_path / "t.jsonl", record)
    back = read_trajectory(tmp_path / "t.jsonl")[0]
    assert back == record


def test_non_binary_rewards_give_shares_but_no_expected_share():
    batches = [Batch(b.step, b.group_size, b.reward * 0.5 + 0.25, b.score, b.first_id)
               for b in _batches(8)]
    record, _ = _record(batches, "grpo")
    assert record.flat_share["equal rewards"] > 0.0 and record.flat_share["all wrong"] == 0.0
    assert record.flat_expected_run is None and record.flat_expected_advised is None


def test_a_bad_advice_target_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="`advice_target` must be one of"):
        EstimatorConfig(advice_target="adam")


@pytest.mark.parametrize("optim, target", [
    ("adamw_torch", "scale_free"), ("adamw_torch_fused", "scale_free"), ("adafactor", "scale_free"),
    ("sgd", "mse"), ("schedule_free_sgd", "mse"), ("lomo", "mse"),
])
def test_trl_s_optimiser_names_the_target(optim, target):
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from ustat_rl.frameworks.trl_monitor import _optimizer_target

    assert _optimizer_target(SimpleNamespace(optim=optim)) == target
    assert _optimizer_target(SimpleNamespace()) == "scale_free"  # TrainingArguments' adamw_torch
