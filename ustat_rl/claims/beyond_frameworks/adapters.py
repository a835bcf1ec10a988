"""The framework adapters' groups and the rewards-only report on known groups (docs/theory.md C45).

A verl batch, a verl rollout dump and a TRL completion log (claim ``C45.trl``, which needs the
``parquet`` extra: TRL writes its log as Parquet) are built here as the frameworks
write them (``ustat_rl/frameworks/verl.py``, ``dumps.py`` give the formats), from groups chosen
in advance: the same prompt at two steps, a prompt drawn twice in one step, and a prompt whose
two draws are not adjacent in TRL's log. The adapters must rebuild exactly those groups and
rewards, and the report's reward-only numbers must equal their definitions computed from the
known groups by brute force (every ``G``-subset of a group). Deterministic: exact comparisons,
no false-failure rate.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import numpy as np

from ..registry import check_exact, check_true, register, require_extra

#: The run's group size (verl's ``rollout.n``, TRL's ``num_generations``) and the report budget.
ADAPTER_GROUP_SIZE, ADAPTER_BUDGET = 4, 8
#: Known groups: (step, prompt, rewards). Prompt "A" is at steps 1 and 2 (two groups); "D" is
#: drawn twice at step 1 (two groups under one text); rewards are binary.
ADAPTER_GROUPS = (
    (1, "A", (1, 0, 1, 1)),
    (1, "B", (0, 0, 0, 0)),
    (1, "D", (1, 0, 0, 0)),
    (1, "C", (1, 1, 1, 1)),
    (1, "D", (1, 1, 0, 1)),
    (2, "A", (0, 0, 1, 0)),
    (2, "B", (1, 1, 1, 1)),
)
#: Row permutation of the verl dump (``_balance_batch`` reorders responses across the batch),
#: fixed so that the check is deterministic.
DUMP_SEED = 4502


def _known_rows():
    """Rows ``(step, prompt, reward, group)`` of ``ADAPTER_GROUPS`` in group order."""
    return [(step, prompt, float(z), g) for g, (step, prompt, rewards) in
            enumerate(ADAPTER_GROUPS) for z in rewards]


def partition(ids) -> frozenset:
    """The partition of row indices that group labels ``ids`` (n,) define, label names aside."""
    ids = np.asarray(ids).astype(str)
    return frozenset(frozenset(np.flatnonzero(ids == label).tolist()) for label in np.unique(ids))


def _verl_batch():
    """One step of a verl batch (``uid`` repeated ``rollout.n`` times, interleaved), each reward
    spread over two response tokens, with the known partition and rewards."""
    groups = [g for g in ADAPTER_GROUPS if g[0] == 1]
    rows = [(f"uid-{g}", float(z)) for g, (_, _, rewards) in enumerate(groups) for z in rewards]
    n, t = len(rows), 5
    lengths = 2 + np.arange(n) % 3  # (b,) response lengths 2..4
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int64)  # (b, t)
    tlr = np.zeros((n, t))
    for i, (_, z) in enumerate(rows):  # a KL-style share on one token, the rest on the last
        tlr[i, 0], tlr[i, lengths[i] - 1] = 0.25 * z, 0.75 * z
    uid = np.array([u for u, _ in rows], dtype=object)
    batch = {"uid": uid, "token_level_rewards": tlr, "response_mask": mask}
    return batch, partition(uid), np.array([z for _, z in rows])


def _write_verl_dump(folder: Path):
    """``{step}.jsonl`` files as verl's ``_write_generations`` writes them, rows shuffled within
    each step; returns the rows in the order a reader sees them (files by step)."""
    rng = np.random.default_rng(DUMP_SEED)
    seen = []
    for step in sorted({s for s, *_ in ADAPTER_GROUPS}):
        rows = [r for r in _known_rows() if r[0] == step]
        with open(folder / f"{step}.jsonl", "w", encoding="utf-8") as handle:
            for i in rng.permutation(len(rows)):
                s, prompt, z, g = rows[i]
                handle.write(json.dumps({"input": prompt, "output": f"answer {len(seen)}",
                                         "gts": "42", "score": z, "step": s}) + "\n")
                seen.append(rows[i])
    return seen


def _dump_labels(rows, group_size: int) -> list:
    """The group of each of a dump's rows: a prompt's rows within a step, a run of ``k G`` of
    them split into ``k`` groups in file order (``ustat_rl/frameworks/dumps.py``; the draws of
    one prompt are exchangeable, so this split is as good as the trainer's)."""
    ids = []
    counter: dict = {}
    for step, prompt, _, _ in rows:
        rank = counter.get((step, prompt), 0)
        counter[(step, prompt)] = rank + 1
        ids.append(f"{step}/{prompt}/{rank // group_size}")
    return ids


def _dump_partition(rows, group_size: int) -> frozenset:
    return partition(_dump_labels(rows, group_size))


def _trl_rows():
    """TRL's log order: each prompt's completions contiguous; "D"'s two draws are apart (the
    order of ``ADAPTER_GROUPS``). Two reward functions with weights 1 and 0.5, NaN where a
    function returned None."""
    rows = _known_rows()
    first = np.array([z if i % 3 else np.nan for i, (_, _, z, _) in enumerate(rows)])
    second = np.array([2.0 * z if not i % 3 else 0.0 for i, (_, _, z, _) in enumerate(rows)])
    return rows, first, second  # reward = nansum(1 * first, 0.5 * second) = z


def _trl_group_advantage(reward, group):
    """TRL ``scale_rewards="group"`` by hand: (z - mean) / (Bessel std + 1e-4) per group."""
    out = np.empty_like(reward)
    for g in np.unique(group):
        idx = group == g
        out[idx] = (reward[idx] - reward[idx].mean()) / (reward[idx].std(ddof=1) + 1e-4)
    return out


def subset_all_equal(rewards, size: int) -> float:
    """The fraction of ``size``-subsets of one group's rewards that are all equal (brute force)."""
    subsets = list(itertools.combinations(rewards, size))
    return sum(len(set(s)) == 1 for s in subsets) / len(subsets)


@register("C45", "Beyond the paper: the verl batch and verl dump adapters rebuild known groups "
          "exactly, and the rewards-only report's numbers equal their definitions on them",
          "derived (docs/theory.md C45; what ustat-rl rewards reports from a run's logs)",
          "verl_rewards and read_verl_dump on tables written with chosen groups; rewards_report "
          "against brute force over each group's G-subsets")
def check_c45(ctx) -> list:
    from ...frameworks import read_verl_dump, verl_rewards

    checks = []
    batch, groups, reward = _verl_batch()
    table = verl_rewards(batch, step=1)
    checks += [
        check_true("verl batch: the groups are the uids'", partition(table.group_id) == groups,
                   float(table.n_groups), note=f"{len(groups)} groups expected"),
        check_exact("verl batch: rewards = token_level_rewards summed over the response",
                    reward, table.reward, rtol=0.0, atol=1e-15),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "verl").mkdir()
        seen = _write_verl_dump(folder / "verl")
        dump = read_verl_dump(folder / "verl", group_size=ADAPTER_GROUP_SIZE)
        loose = read_verl_dump(folder / "verl")  # without rollout.n: "D" stays one group of 8
    seen_reward = np.array([z for _, _, z, _ in seen])
    checks += [
        check_true("verl dump (rollout.n given): the known groups, rebuilt from shuffled rows",
                   partition(dump.group_id) == _dump_partition(seen, ADAPTER_GROUP_SIZE),
                   float(dump.n_groups), note=f"{len(ADAPTER_GROUPS)} groups expected"),
        check_true("verl dump (no rollout.n): a prompt drawn twice in a step is one group",
                   partition(loose.group_id) == _dump_partition(seen, 10**6),
                   float(loose.n_groups), note=f"{len(ADAPTER_GROUPS) - 1} groups expected"),
        check_exact("verl dump: rewards in file order", seen_reward, dump.reward, rtol=0.0,
                    atol=0.0),
    ]
    checks += _report_checks(dump, seen)
    return checks


def _report_checks(table, rows) -> list:
    """``rewards_report`` on the dump against each quantity's definition on the known groups."""
    from ...frameworks import rewards_report

    report = rewards_report(table, ADAPTER_BUDGET)
    by_group = {}
    for (step, _, z, _), label in zip(rows, _dump_labels(rows, ADAPTER_GROUP_SIZE)):
        by_group.setdefault((step, label), []).append(z)
    sizes = report.by_group_size["group_size"]
    checks = [check_exact("report: groups, samples and steps", [len(by_group), len(rows), 2],
                          [report.n_groups, report.n_samples, report.n_steps], rtol=0.0,
                          atol=0.0)]
    usable = [i for i, size in enumerate(sizes) if size <= ADAPTER_GROUP_SIZE]
    predicted = [np.mean([subset_all_equal(z, sizes[i]) for z in by_group.values()])
                 for i in usable]
    checks.append(check_exact(f"report: predicted all-equal fraction at G = "
                              f"{[sizes[i] for i in usable]} = the groups' all-equal "
                              f"G-subsets", predicted,
                              [report.by_group_size["all_equal_predicted"][i] for i in usable],
                              rtol=1e-12, atol=1e-15))
    at_run = sizes.index(ADAPTER_GROUP_SIZE)
    whole = np.mean([len(set(z)) == 1 for z in by_group.values()])
    checks.append(check_exact(f"report: observed all-equal fraction at G = {ADAPTER_GROUP_SIZE}",
                              whole, report.by_group_size["all_equal_observed"][at_run],
                              rtol=1e-12, atol=0.0))
    for entry in report.steps:
        mine = [z for (s, _), z in by_group.items() if s == entry["step"]]
        checks.append(check_exact(f"report: step {entry['step']} groups, mean reward and "
                                  f"all-equal fraction",
                                  [len(mine), np.mean([np.mean(z) for z in mine]),
                                   np.mean([len(set(z)) == 1 for z in mine])],
                                  [entry["groups"], entry["mean_reward"], entry["all_equal"]],
                                  rtol=1e-12, atol=1e-15))
    return checks


@register("C45.trl", "Beyond the paper: the TRL completion-log adapter rebuilds known groups and "
          "combined rewards exactly, and the logged advantages identify TRL's rule",
          "derived (docs/theory.md C45; what ustat-rl rewards reads from TRL's "
          "completions_*.parquet)",
          "read_trl_completions on a log written with chosen groups, two reward functions and "
          "a prompt drawn twice apart; rewards_report's matching rules on the logged advantages "
          "(needs the parquet extra: TRL writes its log as Parquet)")
def check_c45_trl(ctx) -> list:
    require_extra("parquet", "pyarrow")
    import pandas as pd

    from ...frameworks import read_trl_completions, rewards_report

    rows = _known_rows()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trl_rows, first, second = _trl_rows()
        trl_reward = np.array([z for _, _, z, _ in trl_rows])
        trl_group = np.array([g for *_, g in trl_rows])
        frame = pd.DataFrame({"step": [s for s, *_ in trl_rows],
                              "prompt": [p for _, p, _, _ in trl_rows],
                              "completion": [f"c{i}" for i in range(len(trl_rows))],
                              "correct": first, "format": second,
                              "advantage": _trl_group_advantage(trl_reward, trl_group)})
        (folder / "trl").mkdir()
        frame.to_parquet(folder / "trl" / "completions_00001.parquet", index=False)
        trl = read_trl_completions(folder / "trl", reward_weights=[1.0, 0.5])
        trl_sized = read_trl_completions(folder / "trl", reward_weights=[1.0, 0.5],
                                         group_size=ADAPTER_GROUP_SIZE)
    known = partition([g for *_, g in rows])
    return [
        check_true("TRL log: contiguous runs are the known groups (with and without "
                   "num_generations)", partition(trl.group_id) == known
                   and partition(trl_sized.group_id) == known, float(trl.n_groups),
                   note=f"{len(ADAPTER_GROUPS)} groups expected; 'D' is drawn twice, apart"),
        check_exact("TRL log: reward = nansum of weighted reward columns", trl_reward,
                    trl.reward, rtol=0.0, atol=1e-15),
        check_true("TRL log: the logged advantages identify trl_group",
                   "trl_group" in (rewards_report(trl, ADAPTER_BUDGET).logged_rule_matches
                                   or []), note="matching_rules on the logged column"),
    ]
