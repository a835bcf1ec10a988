"""Behaviour of the frameworks layer that the mutants of docs/mutation.md's fifth round found
untested: explicit formats, non-dict mappings and the smallest inputs of the readers, the
closed ends of an interval, the documented defaults, the file format's version, and frozen
results.

Every check here is exact (no sampling): no false-failure rate. Each test names the mutant it
was written against; its negative control is that mutant (benchmarks/mutation.py reports it
killed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ustat_rl.frameworks import (
    GroupedRewards,
    SyntheticErrors,
    append_record,
    read_rewards,
    read_trajectory,
    rewards_report,
    synthetic_record,
    verl_rewards,
)
from ustat_rl.frameworks.dumps import FORMATS, TRL_FIXED_COLUMNS, read_trl_completions
from ustat_rl.frameworks.grouped import NEEDS_SCORES
from ustat_rl.frameworks.rewards_only import RewardsReport, format_rewards_report
from ustat_rl.frameworks.trainer_units import LOSS_WEIGHTS, completion_weights, units_note
from ustat_rl.frameworks.trajectory import TRAJECTORY_VERSION
from ustat_rl.frameworks.universality import WindowInterval, gstar_universality
from ustat_rl.frameworks.verl import VERL_FIELDS
from ustat_rl.frameworks.window import Batch
from ustat_rl.interface.cli import main
from ustat_rl.pilot.rollouts import Rollouts

pytestmark = pytest.mark.fast


def small_verl_batch():
    """Two groups of two responses, rewards on the last response token."""
    tlr = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 1.0]])
    mask = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    return {"uid": np.array(["a", "a", "b", "b"], dtype=object), "token_level_rewards": tlr,
            "response_mask": mask}


# ----------------------------------------------------------------------------- trainer units
def test_constant_weight_losses_are_exact_in_the_units_note():
    # mutants: the "luspo" key decorated, the "exact" of "one" and "max_length" decorated
    np.testing.assert_array_equal(completion_weights("luspo", [1, 3, 7]), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(completion_weights("dr_grpo", [1, 3], 4), [0.25, 0.25])
    assert units_note("luspo") == "trainer (loss_type 'luspo': exact)"
    assert units_note("dr_grpo") == "trainer (loss_type 'dr_grpo': exact)"
    # a constant weight is exact, a batch or per-completion one is not
    exact = {name for name in LOSS_WEIGHTS if units_note(name).endswith(": exact)")}
    assert exact == {"luspo", "dr_grpo"}
    # mutants: the other kinds' texts decorated; each says how far from exact it is first
    assert units_note("dapo").startswith("trainer (loss_type 'dapo': first order in 1/B ")
    assert units_note("grpo").startswith("trainer (loss_type 'grpo': approximate ")


# ----------------------------------------------------------------------------- grouped rewards
def test_grouped_rewards_are_frozen_and_have_no_source_by_default():
    # mutants: frozen dropped; the default `source` decorated
    table = GroupedRewards(["a", "a", "b", "b"], [0.0, 1.0, 1.0, 1.0])
    assert table.source == "" and table.step is None and table.advantage is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.reward = np.zeros(4)


def test_what_needs_scores_names_a_command_that_exists(capsys):
    # mutants: each entry decorated with XX (its command no longer closes the entry)
    for entry in NEEDS_SCORES:
        found = re.search(r"\(ustat-rl (\w+)[^()]*\)$", entry)
        assert found, entry
        with pytest.raises(SystemExit) as exit_info:
            main([found.group(1), "--help"])
        assert exit_info.value.code == 0, entry
    capsys.readouterr()


# ----------------------------------------------------------------------------- verl batches
def test_a_missing_verl_field_names_every_field_a_batch_needs():
    # mutants: each name of VERL_FIELDS decorated (the message lists them)
    batch = small_verl_batch()
    del batch["uid"]
    message = "`batch` has no field 'uid'; a verl batch needs uid, token_level_rewards, response_mask"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        verl_rewards(batch)
    assert VERL_FIELDS == ("uid", "token_level_rewards", "response_mask")


def test_any_mapping_is_read_by_field_name():
    # mutants of the mapping test: `keys` or `non_tensor_batch` decorated, `and`/`or` swapped,
    # `not` dropped; a read-only mapping is not a dict but is read like one
    want = verl_rewards(small_verl_batch())
    got = verl_rewards(types.MappingProxyType(small_verl_batch()))
    np.testing.assert_array_equal(got.reward, want.reward)
    np.testing.assert_array_equal(got.group_id, want.group_id)


def test_a_dataproto_with_keys_is_read_through_its_batches():
    # verl's DataProto-like objects may expose keys(); their fields still live in .batch
    batch = small_verl_batch()
    proto = SimpleNamespace(
        batch={"token_level_rewards": batch["token_level_rewards"],
               "response_mask": batch["response_mask"]},
        non_tensor_batch={"uid": batch["uid"]}, keys=lambda: ["batch", "non_tensor_batch"])
    np.testing.assert_array_equal(verl_rewards(proto).reward, verl_rewards(batch).reward)


def test_a_batch_of_the_wrong_type_is_a_type_error_naming_batch():
    with pytest.raises(TypeError, match=r"^`batch` must be a dict of \('uid', "):
        verl_rewards(42)


# ----------------------------------------------------------------------------- log files
def _write_trl(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(frame).to_parquet(path)
    return path


def test_every_named_format_reads_what_auto_detects(tmp_path):
    # mutants: each name of FORMATS decorated (naming the format then fails)
    pytest.importorskip("pyarrow")
    prompts, reward = ["x"] * 3 + ["y"] * 3, [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    verl = tmp_path / "verl" / "3.jsonl"
    verl.parent.mkdir()
    verl.write_text("".join(json.dumps({"input": p, "score": z, "step": 3}) + "\n"
                            for p, z in zip(prompts, reward)))
    trl = _write_trl(tmp_path / "trl" / "completions_00003.parquet",
                     {"step": [3] * 6, "prompt": prompts, "completion": list("abcdef"),
                      "correct": reward})
    npz = tmp_path / "rewards.npz"
    np.savez(npz, prompt_id=np.array(prompts), reward=np.array(reward))
    parquet = Rollouts(prompts, reward, np.eye(6)[:, :2]).save(tmp_path / "rollouts.parquet")
    cases = {"verl-jsonl": verl, "trl-parquet": trl, "npz": npz, "rollouts-parquet": parquet}
    assert set(cases) == set(FORMATS) - {"auto"}
    for name, path in cases.items():
        auto, named = read_rewards(path), read_rewards(path, format=name)
        np.testing.assert_array_equal(named.reward, auto.reward)
        np.testing.assert_array_equal(named.group_id, auto.group_id)
        assert sorted(named.reward.tolist()) == sorted(reward), name


def test_a_trl_log_without_prompts_names_the_columns_trl_writes(tmp_path):
    # mutants: the names of TRL_FIXED_COLUMNS decorated (the message lists them)
    pytest.importorskip("pyarrow")
    path = _write_trl(tmp_path / "completions_00001.parquet",
                      {"step": [1, 1], "completion": ["a", "b"], "correct": [1.0, 0.0]})
    message = ("`path` completions_00001.parquet has no column 'prompt'; TRL's completion log "
               "has step, prompt, completion, advantage and one column per reward function")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        read_trl_completions(path)
    assert TRL_FIXED_COLUMNS == ("step", "prompt", "completion", "advantage")


# ----------------------------------------------------------------------------- rewards report
def _report():
    table = GroupedRewards(np.repeat(["a", "b"], 4), [1, 1, 0, 1, 0, 0, 0, 0])
    return rewards_report(table, 8)


def test_rewards_report_is_frozen():
    report = _report()
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.budget = 16


def test_rewards_report_defaults_say_nothing_logged_and_no_scores():
    # mutants: the defaults of logged_rule_matches ("" for None) and has_scores (True)
    report = _report()
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)
              if f.name not in ("logged_rule_matches", "has_scores")}
    bare = RewardsReport(**fields)
    assert bare.logged_rule_matches is None and bare.has_scores is False
    assert "logged advantages" not in format_rewards_report(bare)
    assert format_rewards_report(bare) == format_rewards_report(report)


# ----------------------------------------------------------------------------- trajectory
def test_records_carry_format_version_five(tmp_path):
    # mutants: TRAJECTORY_VERSION moved back to 4, to 6 or None; a reader of saved runs relies on
    # it (version 5 added the run rule's advice and the flat groups; version 4: the group filter
    # is `ds_group_filter`, version 3's `ds_keep_rule`; version 3: the run's rule is
    # `estimator`, version 2's `rule`)
    assert TRAJECTORY_VERSION == 5
    path = tmp_path / "t.jsonl"
    append_record(path, synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.01, 0.5)))
    assert json.loads(path.read_text())["version"] == 5
    assert read_trajectory(path)[0].estimator == "grpo"


def test_a_window_interval_is_closed_at_both_ends_and_frozen():
    # mutants: `<=` into `<` at either end of covers; frozen dropped (interval and verdict)
    record = synthetic_record(10, 1.0, 2.0, 49.0, SyntheticErrors(0.01, 0.5))
    window = WindowInterval(10, 8.0, 4.0, 12.0, 0.9, False, record)
    assert window.covers(4.0) and window.covers(12.0) and window.covers(8.0)
    assert not window.covers(3.999) and not window.covers(12.001)
    assert not WindowInterval(10, 8.0, 4.0, math.inf, 0.9, False, record).covers(3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        window.low = 0.0
    out = gstar_universality([record], 0.9)
    first = out.windows[0]
    assert first.covers(first.low) and first.covers(first.high)
    with pytest.raises(dataclasses.FrozenInstanceError):  # the verdict too
        out.level = 0.5


def test_a_batch_is_frozen():
    batch = Batch(3, 2, np.array([0.0, 1.0]), np.zeros((2, 1)), 0)
    assert batch.n_groups == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.step = 4


# ----------------------------------------------------------------------------- the demo
def test_demo_tokenizer_ids_are_the_vocabulary_and_unknown_characters_pad():
    # mutants of VOCAB (pad id 1, eos renamed, eos id 2 = the digit 0) and of unk_token
    pytest.importorskip("transformers")
    from ustat_rl.frameworks.demo import VOCAB, char_tokenizer

    assert len(set(VOCAB.values())) == len(VOCAB) == 14
    assert VOCAB["<pad>"] == 0 and VOCAB["<eos>"] == 1
    tok = char_tokenizer()
    assert tok.pad_token_id == 0 and tok.eos_token_id == 1
    assert tok("3+4=")["input_ids"] == [VOCAB["3"], VOCAB["+"], VOCAB["4"], VOCAB["="]]
    assert tok("3a")["input_ids"] == [VOCAB["3"], VOCAB["<pad>"]]  # outside the vocabulary
    assert tok.decode([VOCAB["1"], VOCAB["2"]]) == "12"
