"""verl batches, verl rollout dumps and TRL completion logs as grouped rewards, and the
reward-only report (docs/theory.md C24, C40).

Files are written here in the formats the frameworks' own code writes (verl's
``_write_generations``, TRL's ``GRPOTrainer.log``; see ustat_rl/frameworks/dumps.py), then read
back: groups must be rebuilt exactly, the numbers must equal direct computations, and bad input
must fail in one line naming the parameter.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ustat_rl.advantages import get_rule
from ustat_rl.frameworks import (
    GroupedRewards,
    read_rewards,
    read_trl_completions,
    read_verl_dump,
    rewards_report,
    verl_rewards,
    verl_rollouts,
)
from ustat_rl.frameworks.flat_groups import flat_group_report
from ustat_rl.frameworks.rewards_only import matching_rules, observed_all_equal
from ustat_rl.interface.cli import main
from ustat_rl.pilot.estimate import estimate_moments
from ustat_rl.pilot.report import all_equal_fraction
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.theory.allocation_baselines import BASELINE_ALLOCATIONS, baseline_allocation

pytestmark = pytest.mark.fast

#: Normal quantile of the Monte Carlo checks: a two-sided false-failure rate of 6.3e-5 each.
Z = 4.0


# ----------------------------------------------------------------------------- file writers
def write_verl_step(folder, step, groups, rng):
    """``{step}.jsonl`` as verl's ``_write_generations`` writes it; rows shuffled as
    ``_balance_batch`` leaves them. ``groups``: list of (prompt text, rewards)."""
    rows = [{"input": prompt, "output": f"answer {i}", "gts": "42", "score": float(z),
             "step": step, "acc": bool(z > 0)}
            for prompt, rewards in groups for i, z in enumerate(rewards)]
    order = rng.permutation(len(rows))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{step}.jsonl", "w") as handle:
        for i in order:
            handle.write(json.dumps(rows[i]) + "\n")
    return folder / f"{step}.jsonl"


def trl_advantage(reward, G):
    """TRL's scale_rewards="group" advantage, by hand: (z - mean) / (Bessel std + 1e-4)."""
    z = np.asarray(reward).reshape(-1, G)
    return ((z - z.mean(1, keepdims=True)) / (z.std(1, ddof=1, keepdims=True) + 1e-4)).ravel()


def write_trl_step(folder, step, prompts, funcs, weights, G):
    """``completions_{step:05d}.parquet`` with TRL's columns, groups contiguous."""
    combined = np.nansum(np.column_stack(list(funcs.values())) * np.asarray(weights), axis=1)
    table = {"step": [step] * len(prompts), "prompt": prompts,
             "completion": [f"c{i}" for i in range(len(prompts))], **funcs,
             "advantage": trl_advantage(combined, G)}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"completions_{step:05d}.parquet"
    pd.DataFrame(table).to_parquet(path)
    return path


def group_multisets(table):
    """{group id: sorted rewards} of a GroupedRewards."""
    ids, index = table.groups()
    return {g: sorted(table.reward[index == i].tolist()) for i, g in enumerate(ids)}


# ----------------------------------------------------------------------------- verl batch
def verl_batch():
    tlr = np.zeros((6, 4))
    tlr[0, 2], tlr[1, 1], tlr[3, 3], tlr[4, 0] = 1.0, 0.25, 1.0, 0.5
    tlr[0, 0] = -0.1  # a per-token KL penalty: part of verl's sum
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1],
                     [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]])
    uid = np.array(["u1", "u1", "u1", "u2", "u2", "u2"], dtype=object)
    return {"uid": uid, "token_level_rewards": tlr, "response_mask": mask}


def test_verl_batch_sums_tokens_and_groups_by_uid():
    out = verl_rewards(verl_batch(), step=3)
    np.testing.assert_array_equal(out.reward, [0.9, 0.25, 0.0, 1.0, 0.5, 0.0])
    assert group_multisets(out) == {"3:u1": [0.0, 0.25, 0.9], "3:u2": [0.0, 0.5, 1.0]}
    assert out.step.tolist() == [3] * 6


def test_verl_batch_accepts_torch_and_a_dataproto_like_object():
    torch = pytest.importorskip("torch")
    batch = verl_batch()
    proto = SimpleNamespace(
        batch={"token_level_rewards": torch.tensor(batch["token_level_rewards"],
                                                   dtype=torch.bfloat16),
               "response_mask": torch.tensor(batch["response_mask"])},
        non_tensor_batch={"uid": batch["uid"]})
    out = verl_rewards(proto)
    # bfloat16 holds 0.9 - 0.1 to its 8-bit mantissa: 2^-8 relative
    np.testing.assert_allclose(out.reward, verl_rewards(batch).reward, rtol=2.0**-7)
    assert group_multisets(out).keys() == {"u1", "u2"}


def test_verl_batch_with_scores_is_rollouts_and_without_says_what_needs_them():
    score = np.arange(12.0).reshape(6, 2)
    r = verl_rollouts(verl_batch(), score, model_name="tiny")
    assert isinstance(r, Rollouts) and r.n_prompts == 2 and r.model_name == "tiny"
    np.testing.assert_array_equal(r.score, score)
    with pytest.raises(ValueError, match=r"`score`.*c1, c2, c3' and G\*"):
        verl_rewards(verl_batch()).to_rollouts()


def test_verl_batch_bad_input():
    batch = verl_batch()
    batch["token_level_rewards"][1, 3] = 1.0  # outside the response
    with pytest.raises(ValueError, match="`token_level_rewards` row 1 has a reward outside"):
        verl_rewards(batch)
    with pytest.raises(ValueError, match="no field 'response_mask'"):
        verl_rewards({"uid": batch["uid"], "token_level_rewards": batch["token_level_rewards"]})
    with pytest.raises(TypeError, match="`batch` must be a dict"):
        verl_rewards(SimpleNamespace(non_tensor_batch={}))
    single = verl_batch()
    single["uid"] = np.array(["a", "a", "a", "b", "b", "c"], dtype=object)
    with pytest.raises(ValueError, match="`group_id`: group 'c' has 1 sample"):
        verl_rewards(single)


# ----------------------------------------------------------------------------- verl dumps
def test_verl_dump_rebuilds_groups_from_prompt_text(tmp_path):
    rng = np.random.default_rng(1)
    # step 1: "A" once, "B" drawn twice (8 rows under one text); step 2: "A" again
    write_verl_step(tmp_path, 1, [("A", [1, 0, 0, 1]), ("B", [1, 1, 1, 1]), ("B", [0, 0, 0, 0])],
                    rng)
    write_verl_step(tmp_path, 2, [("A", [1, 1, 0, 1]), ("C", [0, 0, 0, 1])], rng)
    merged = read_verl_dump(tmp_path)
    assert sorted(group_multisets(merged).values()) == sorted(
        [[0, 0, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1]])
    # "A" at two steps is two groups, each holding its own step's rows
    ids, index = merged.groups()
    a_groups = {merged.step[index == i][0] for i in range(ids.size)
                if merged.prompt[index == i][0] == "A"}
    assert a_groups == {1, 2}
    split = read_verl_dump(tmp_path, group_size=4)
    assert split.n_groups == 5 and set(split.group_sizes()) == {4}
    b = [g for g, rows in group_multisets(split).items()
         if split.prompt[split.group_id == g][0] == "B"]
    assert len(b) == 2 and all(split.step[split.group_id == g][0] == 1 for g in b)
    with pytest.raises(ValueError, match="`group_size` 3: the prompt of row"):
        read_verl_dump(tmp_path, group_size=3)


def test_verl_dump_other_reward_key_and_bad_records(tmp_path):
    path = write_verl_step(tmp_path, 5, [("A", [1, 0, 2])], np.random.default_rng(0))
    acc = read_verl_dump(path, reward_key="acc")
    assert sorted(acc.reward.tolist()) == [0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="no reward field 'missing' \\(`reward_key`\\)"):
        read_verl_dump(path, reward_key="missing")
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["score"] = float("nan")
    path.write_text("\n".join([json.dumps(record)] + lines[1:]) + "\n")
    with pytest.raises(ValueError, match=r"`reward` must be finite; row 0 \(group '5:0'\) is nan"):
        read_verl_dump(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="5.jsonl, line 1: not JSON"):
        read_verl_dump(path)


# ----------------------------------------------------------------------------- TRL logs
def test_trl_log_combines_rewards_like_trl_and_groups_are_its_blocks(tmp_path):
    G = 4
    prompts = ["p"] * G + ["q"] * G + ["p"] * G  # "p" drawn again later in the batch
    acc = np.array([1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], dtype=float)
    fmt = np.array([0.5, np.nan, 0.5, 0.0, 1, 1, 1, 1, 0, 0.5, 0.5, 0.5])
    write_trl_step(tmp_path, 7, prompts, {"acc": acc, "fmt": fmt}, [1.0, 0.2], G)
    table = read_trl_completions(tmp_path, reward_weights=[1.0, 0.2])
    np.testing.assert_allclose(table.reward, acc + 0.2 * np.nan_to_num(fmt), rtol=0, atol=1e-15)
    assert table.n_groups == 3 and set(table.group_sizes()) == {G}
    # the registry's trl_group rule on the rebuilt groups gives the logged advantage column
    logged = pd.read_parquet(tmp_path / "completions_00007.parquet")["advantage"].to_numpy()
    _, index = table.groups()
    again = get_rule("trl_group").advantages(table.reward, index)
    np.testing.assert_allclose(again, logged, rtol=1e-12, atol=1e-12)
    matches = rewards_report(table, 12).logged_rule_matches
    assert "trl_group" in matches and "verl_grpo" not in matches and "trl_none" not in matches
    # negative control: advantages without the std division match trl_none, not trl_group
    centred = GroupedRewards(table.group_id, table.reward, table.step,
                             advantage=get_rule("trl_none").advantages(table.reward, index))
    other = matching_rules(centred)
    assert "trl_none" in other and "trl_group" not in other


def test_trl_conversational_prompts_and_repeats(tmp_path):
    G = 3
    chat = [[{"role": "user", "content": "2+2?"}]] * (2 * G) + [[{"role": "user", "content": "1+1?"}]] * G
    write_trl_step(tmp_path, 1, chat, {"acc": np.array([1., 0, 1, 0, 0, 0, 1, 1, 1])}, [1.0], G)
    assert read_trl_completions(tmp_path).n_groups == 2  # two adjacent draws merge
    split = read_trl_completions(tmp_path, group_size=G)
    assert split.n_groups == 3
    assert group_multisets(split) == {"1:0": [0, 1, 1], "1:1": [0, 0, 0], "1:2": [1, 1, 1]}


def test_trl_bad_input(tmp_path):
    G = 2
    write_trl_step(tmp_path, 1, ["a", "a", "b", "b"],
                   {"acc": np.array([1.0, np.nan, 0, 1]), "fmt": np.array([0, np.nan, 1, 1])},
                   [1.0, 1.0], G)
    with pytest.raises(ValueError, match="`reward_columns`: row 1 .*unscorable"):
        read_trl_completions(tmp_path)
    with pytest.raises(ValueError, match="`reward_columns`: 'nope' is not a column"):
        read_trl_completions(tmp_path, reward_columns=["nope"])
    with pytest.raises(ValueError, match="`reward_weights` must be 2 finite numbers"):
        read_trl_completions(tmp_path, reward_weights=[1.0])
    pd.DataFrame({"step": [1, 1], "completion": ["x", "y"], "acc": [1.0, 0.0]}).to_parquet(
        tmp_path / "completions_00002.parquet")
    with pytest.raises(ValueError, match="completions_00002.parquet has no column 'prompt'"):
        read_trl_completions(tmp_path / "completions_00002.parquet")


# ----------------------------------------------------------------------------- the report
def binary_table(rng, p, G, step=0):
    P = p.size
    reward = (rng.uniform(size=(P, G)) < p[:, None]).astype(float).ravel()
    ids = np.repeat([f"{step}:{a}" for a in range(P)], G)
    return GroupedRewards(ids, reward, np.full(P * G, step))


def test_report_numbers_equal_direct_computation():
    reward = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1], dtype=float)
    table = GroupedRewards(np.repeat(["a", "b", "c", "d"], 4), reward)
    report = rewards_report(table, 16)
    by = report.by_group_size
    assert by["group_size"] == [2, 4, 8, 16]
    # at G = 4, the run's G: groups a and b are all equal
    assert by["all_equal_observed"][1] == 0.5 and report.steps[0]["all_equal"] == 0.5
    # G = 2 blocks by hand: a (1,1)(1,1) b (0,0)(0,0) c (1,0)(1,1) d (0,1)(0,1)
    assert by["all_equal_observed"][0] == pytest.approx((1 + 1 + 0.5 + 0) / 4, abs=1e-15)
    expected, flags = all_equal_fraction([4, 0, 3, 2], np.full(4, 4), np.array([2, 4, 8, 16]))
    np.testing.assert_allclose(by["all_equal_predicted"], expected, rtol=0, atol=1e-15)
    assert by["predicted_unbiased"] == flags.tolist() == [True, True, False, False]
    # G = 2 U-statistic by hand: C(m,2)+C(4-m,2) over C(4,2) per group
    u = np.mean([(math.comb(m, 2) + math.comb(4 - m, 2)) / 6 for m in (4, 0, 3, 2)])
    assert by["all_equal_predicted"][0] == pytest.approx(u, abs=1e-15)
    assert report.success_rate["histogram"] == {"0": 1, "(0, 1/4]": 0, "(1/4, 1/2]": 1,
                                                "(1/2, 3/4]": 1, "(3/4, 1)": 0, "1": 1}
    assert by["informative_groups"][1] == pytest.approx(4 * (1 - expected[1]), abs=1e-12)


def test_observed_and_predicted_all_equal_match_the_truth_and_reject_a_wrong_exponent():
    rng = np.random.default_rng(20261201)
    p = rng.uniform(size=400)  # known success rates
    table = binary_table(rng, p, 8)
    report = rewards_report(table, 512)
    by = report.by_group_size
    for i, G in enumerate(by["group_size"][:2]):  # G = 2, 4: several blocks per group
        truth = float(np.mean(p**G + (1 - p) ** G))
        se = by["observed_std_error"][i]
        assert abs(by["all_equal_observed"][i] - truth) <= Z * se
        # the U-statistic averages the blocks over every split (Rao-Blackwell), so its error is
        # no larger in distribution: the same band is conservative for it
        assert abs(by["all_equal_predicted"][i] - truth) <= Z * se
        # negative control: the all-equal probability of G + 1 draws is rejected
        wrong = float(np.mean(p ** (G + 1) + (1 - p) ** (G + 1)))
        assert abs(by["all_equal_observed"][i] - wrong) > Z * se


def test_reward_only_allocation_equals_the_full_moment_route():
    rng = np.random.default_rng(5)
    table = binary_table(rng, rng.uniform(size=6), 6)
    report = rewards_report(table, 48)
    # second route: attach arbitrary scores, estimate every moment, score the rules exactly
    r = table.to_rollouts(rng.normal(size=(table.n_samples, 3)))
    moments = estimate_moments(r)
    for rule in BASELINE_ALLOCATIONS:
        full = baseline_allocation(moments, rule, "grpo", 48).group_sizes.tolist()
        assert report.allocation[rule] == full and sum(full) == 48


def test_report_bad_input():
    table = GroupedRewards(np.array(["a", "a", "a", "b", "b"]), np.array([1., 0, 1, 1, 1]))
    with pytest.raises(ValueError, match="trl_group.*same size"):
        rewards_report(table, 8, estimator="trl_group")
    with pytest.raises(ValueError, match="`estimator`"):
        rewards_report(table, 8, estimator="no_such_rule")
    with pytest.raises(ValueError, match="`budget` 7 admits one group size"):
        rewards_report(table, 7)
    out = rewards_report(table, 2 * 2)  # budget 4 < 2 x 2 groups? no: 4 = 2 x 2 fits
    assert sum(out.allocation["uniform"]) == 4
    small = rewards_report(GroupedRewards(np.repeat(list("abc"), 2), np.ones(6)), 4)
    assert small.allocation == {} and "below 2 x 3 groups" in small.allocation_note


def test_observed_blocks_skip_groups_smaller_than_g():
    table = GroupedRewards(np.array(["a"] * 2 + ["b"] * 4), np.array([1., 1, 0, 0, 0, 1]))
    out = observed_all_equal(table, [2, 4, 8])
    assert out["groups"].tolist() == [2, 1, 0]
    assert out["fraction"][0] == pytest.approx((1 + 0.5) / 2) and out["fraction"][1] == 0.0
    assert math.isnan(out["fraction"][2]) and math.isnan(out["std_error"][1])


# ----------------------------------------------------------------------------- command line
def test_cli_rewards_end_to_end(tmp_path, capsys):
    rng = np.random.default_rng(3)
    p = rng.uniform(size=16)
    for step in (1, 2):
        groups = [(f"prompt {a}", (rng.uniform(size=4) < p[a]).astype(float)) for a in range(16)]
        write_verl_step(tmp_path / "dump", step, groups, rng)
    out = tmp_path / "r.json"
    assert main(["rewards", str(tmp_path / "dump"), "--budget", "64", "--group-size", "4",
                 "--estimator", "verl_grpo", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verl rollout dump: 128 completions in 32 groups over 2 step(s)" in text
    assert "needs scores" in text and "G*" in text and "reward-only allocation" in text
    data = json.loads(out.read_text())
    table = read_rewards(tmp_path / "dump", group_size=4)
    direct = rewards_report(table, 64, "verl_grpo")
    flat = data.pop("flat_groups")  # the flat-group section (tests/frameworks/test_flat_groups.py)
    assert data == json.loads(json.dumps(direct.to_dict()))
    assert [w["window"] for w in flat] == ["step 1", "step 2"]
    assert flat == json.loads(json.dumps([w.to_dict() for w in flat_group_report(table)]))
    assert data["allocation_step"] == 2 and sum(data["allocation"]["vip"]) == 64


@pytest.mark.parametrize("args, message", [
    (["missing.jsonl", "--budget", "8"], "`FILE` 'missing.jsonl' does not exist"),
    (["DUMP", "--budget", "7"], "`--budget` 7 admits one group size"),
    (["DUMP", "--budget", "8", "--estimator", "nope"], "`--estimator`"),
    (["DUMP", "--budget", "8", "--group-size", "1"], "`--group-size` must be an integer >= 2"),
    (["DUMP", "--budget", "8", "--group-size", "3"], "`--group-size` 3"),
    (["DUMP", "--budget", "8", "--json", "out.txt"], "`--json` must end in"),
    (["RAGGED", "--budget", "8", "--estimator", "trl_group"], "every group must have the same size"),
    (["NAN", "--budget", "8"], "`reward` must be finite; row"),
    (["SINGLE", "--budget", "8"], "has 1 sample; every group needs >= 2"),
    (["NOPROMPT", "--budget", "8"], "has no column 'prompt'"),
])
def test_cli_rewards_errors_are_one_line(tmp_path, capsys, args, message):
    rng = np.random.default_rng(0)
    files = {"DUMP": write_verl_step(tmp_path / "d", 1, [("A", [1, 0]), ("B", [1, 1])], rng),
             "RAGGED": write_verl_step(tmp_path / "r", 1, [("A", [1, 0, 1]), ("B", [1, 1])], rng),
             "NAN": write_verl_step(tmp_path / "n", 1, [("A", [1, float("nan")])], rng),
             "SINGLE": write_verl_step(tmp_path / "s", 1, [("A", [1, 0]), ("B", [1])], rng),
             "NOPROMPT": tmp_path / "completions_00001.parquet"}
    pd.DataFrame({"step": [1, 1], "completion": ["x", "y"], "acc": [1.0, 0.0]}).to_parquet(
        files["NOPROMPT"])
    args = [str(files.get(a, a)) for a in args]
    assert main(["rewards"] + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ustat-rl rewards: error: ") and message in err and "\n" not in err


# ----------------------------------------------------------------------------- real TRL run
def run_trl(out, **config):
    """Two steps of TRL's GRPOTrainer on the CPU with ``log_completions=True``: a one-layer
    GPT-2 from a config, a word-level tokenizer of digits built here (no download), and the
    reward "the completion starts with an even digit". Returns the completions folder and the
    logged metrics by step."""
    trl = pytest.importorskip("trl")
    pytest.importorskip("torch")
    datasets = pytest.importorskip("datasets")
    import warnings

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    symbols = {"[pad]": 0, "[end]": 1, **{str(d): d + 2 for d in range(10)}, "?": 12}
    core = Tokenizer(models.WordLevel(symbols, unk_token="[pad]"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[pad]", eos_token="[end]")
    torch.manual_seed(1)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(symbols), n_positions=16, n_embd=8,
                                       n_layer=1, n_head=1, bos_token_id=1, eos_token_id=1,
                                       pad_token_id=0))

    def even_start(completions, **kwargs):
        return [float(c[:1].isdigit() and int(c[0]) % 2 == 0) for c in completions]

    args = trl.GRPOConfig(output_dir=str(out), per_device_train_batch_size=TRL_G * TRL_B,
                          num_generations=TRL_G, max_completion_length=2, max_steps=2,
                          logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                          seed=3, disable_tqdm=True, log_completions=True,
                          num_completions_to_print=0, **config)
    data = datasets.Dataset.from_dict({"prompt": [f"{a}{b}?" for a in range(10) for b in range(10)]})
    trainer = trl.GRPOTrainer(model=model, reward_funcs=even_start, args=args,
                              train_dataset=data, processing_class=tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    logs = {h["step"]: h for h in trainer.state.log_history if "frac_reward_zero_std" in h}
    return out / "completions", logs


TRL_G, TRL_B = 4, 6


@pytest.fixture(scope="module")
def trl_log(tmp_path_factory):
    folder, logs = run_trl(tmp_path_factory.mktemp("trl_log"))
    return folder, logs, TRL_G, TRL_B


def test_a_real_trl_completion_log_is_read_into_its_groups(trl_log):
    folder, logs, G, B = trl_log
    files = sorted(folder.glob("completions_*.parquet"))
    assert [f.name for f in files] == ["completions_00001.parquet", "completions_00002.parquet"]
    table = read_trl_completions(folder, group_size=G)
    assert table.n_samples == 2 * G * B and set(table.group_sizes()) == {G}
    equal = []
    for step in (1, 2):
        part = table.select_step(step)
        _, idx = part.groups()
        logged = pd.read_parquet(folder / f"completions_{step:05d}.parquet")["advantage"]
        # the rebuilt groups reproduce the trainer's own advantages (float32 arithmetic there)
        again = get_rule("trl_group").advantages(part.reward, idx)
        np.testing.assert_allclose(again, logged.to_numpy(), rtol=1e-5, atol=1e-5)
        # negative control: groups one row out of place do not
        shifted = get_rule("trl_group").advantages(np.roll(part.reward, 1), idx)
        assert not np.allclose(shifted, logged.to_numpy(), rtol=1e-5, atol=1e-5)
        report = rewards_report(part, G * B, estimator="trl_group")
        equal.append(report.steps[0]["all_equal"])
        # TRL's frac_reward_zero_std is the fraction of completions in zero-std groups: with
        # equal groups it is the fraction of groups (float32 mean: 1e-7)
        assert equal[-1] == pytest.approx(logs[step]["frac_reward_zero_std"], abs=1e-6)
    assert rewards_report(table, G * B).steps[1]["all_equal"] == equal[1]
    assert "trl_group" in rewards_report(table, G * B).logged_rule_matches


def test_docstring_examples_run():
    import doctest

    import ustat_rl.frameworks.verl as module

    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0



def test_base_install_reads_verl_dumps_and_names_the_parquet_extra(tmp_path):
    """Under the base install (the extras hidden, tests/_base_install.py) a verl dump is read
    and a TRL log fails in one line naming the ``parquet`` extra."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    from _base_install import RUNNER, blocked_modules

    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    write_verl_step(tmp_path / "dump", 1, [("A", [1, 0, 1]), ("B", [0, 0, 0])],
                    np.random.default_rng(0))
    (tmp_path / "completions_00001.parquet").write_bytes(b"PAR1")  # pyarrow is missing first
    root = str(Path(__file__).resolve().parents[2])

    def run(target):
        command = [sys.executable, str(runner), ",".join(blocked_modules()), "-m",
                   "ustat_rl.interface.cli", "rewards", target, "--budget", "6"]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"})

    ok = run("dump")
    assert ok.returncode == 0 and "verl rollout dump: 6 completions in 2 groups" in ok.stdout, \
        ok.stderr[-2000:]
    missing = run("completions_00001.parquet")
    lines = missing.stderr.strip().splitlines()
    assert missing.returncode == 2 and len(lines) == 1 and "ustat-rl[parquet]" in lines[0], \
        missing.stderr[-2000:]


def test_verl_dump_uses_uid_when_a_reward_function_logged_it(tmp_path):
    rows = [{"input": "same", "score": z, "step": 1, "uid": u}
            for u, z in (("u1", 1.0), ("u2", 0.0), ("u1", 1.0), ("u2", 0.0), ("u1", 0.0))]
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = read_verl_dump(tmp_path)
    assert sorted(group_multisets(table).values()) == [[0.0, 0.0], [0.0, 1.0, 1.0]]


def test_trl_log_repeated_for_reused_generation_batches_is_read_once(tmp_path):
    acc = np.array([1.0, 0, 0, 0, 1, 1])
    for step in (1, 2):  # num_iterations = 2: step 2 logs the batch of step 1 again
        write_trl_step(tmp_path, step, ["a"] * 3 + ["b"] * 3, {"acc": acc}, [1.0], 3)
    write_trl_step(tmp_path, 3, ["c"] * 3 + ["b"] * 3, {"acc": acc}, [1.0], 3)
    table = read_trl_completions(tmp_path)
    assert table.n_samples == 12 and sorted(set(table.step.tolist())) == [1, 3]
    assert table.source == "TRL completion log (1 repeated file(s) skipped)"


def test_a_real_trl_run_reusing_its_batch_logs_it_twice_and_is_read_once(tmp_path):
    folder, _ = run_trl(tmp_path, num_iterations=2)  # one generation serves steps 1 and 2
    first, second = (pd.read_parquet(folder / f"completions_0000{s}.parquet") for s in (1, 2))
    assert first.drop(columns="step").equals(second.drop(columns="step"))
    table = read_trl_completions(folder)
    assert set(table.step.tolist()) == {1} and table.n_samples == TRL_G * TRL_B
    assert "1 repeated file(s) skipped" in table.source


def test_a_rollouts_file_with_scores_points_to_gstar(tmp_path, capsys):
    rng = np.random.default_rng(2)
    pilot = binary_table(rng, rng.uniform(size=5), 4).to_rollouts(rng.normal(size=(20, 2)))
    pilot.save(tmp_path / "pilot.npz")
    assert main(["rewards", str(tmp_path / "pilot.npz"), "--budget", "20"]) == 0
    text = capsys.readouterr().out
    assert "this file also has scores: `ustat-rl gstar`" in text and "needs scores" not in text
    table = read_rewards(tmp_path / "pilot.npz")
    np.testing.assert_array_equal(table.to_rollouts().score, pilot.score)
