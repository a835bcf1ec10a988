"""A monitored window is ``ustat-rl gstar`` on the batches it pools (docs/theory.md C48).

Generation batches drawn from a bandit with known moments (each a pilot of B groups of G binary
rewards with their full scores) are pooled as the TRL monitor pools them
(:func:`ustat_rl.frameworks.window.window_record`): the record's constants, G*, intervals, advice
and MSE at the run's G must equal :func:`ustat_rl.pilot.report.gstar_report` on exactly those
batches' rows, every group its own prompt draw, and the window must hold every pooled batch's
rows once, the newest last. Deterministic: the same numbers by two routes (rel 1e-12).
"""

from __future__ import annotations

import math

import numpy as np

from .registry import check_exact, check_true, register

#: Batches pooled, groups per batch and group size of the check (N = B G per batch).
WINDOW_BATCHES, WINDOW_GROUPS, WINDOW_G = 3, 12, 4


def _batches(seed: int):
    from ..frameworks.window import Batch
    from ..pilot.bandit import bandit_pilot
    from ..policies.examples import small_bandit
    from ..seeding import child_seed

    bandit, out, first = small_bandit(), [], 0
    for b in range(WINDOW_BATCHES):
        pilot = bandit_pilot(bandit, WINDOW_GROUPS, WINDOW_G,
                             np.random.default_rng(child_seed(seed, 48, b)))
        out.append(Batch(10 * b, WINDOW_G, pilot.reward, pilot.score, first))
        first += WINDOW_GROUPS
    return bandit, out


@register("C48", "Beyond the paper: a monitored window's estimates are ustat-rl gstar's on the "
          "generation batches it pools, every pooled row once and the newest batch last",
          "derived (docs/theory.md C48; section 7, \"Estimates inside a training run\")",
          "window_record on batches drawn from small_bandit against gstar_report on their rows; "
          "the pooled rows against the batches")
def check_c48(ctx) -> list:
    from ..frameworks.window import window_record, window_rollouts
    from ..pilot.report import gstar_report
    from ..pilot.rollouts import Rollouts

    bandit, batches = _batches(ctx.seed)
    budget = WINDOW_GROUPS * WINDOW_G
    meta = dict(sketch_kind="none", param_dim=int(bandit.dim), model_name="small_bandit")
    record, rollouts = window_record(batches, meta, budget, 0.9, "trl_none", "check")
    rows = np.concatenate([b.score for b in batches])
    ids = np.concatenate([b.first_id + np.repeat(np.arange(WINDOW_GROUPS), WINDOW_G)
                          for b in batches])
    direct = Rollouts(prompt_id=ids, reward=np.concatenate([b.reward for b in batches]),
                      score=rows, **meta)
    report = gstar_report(direct, budget, "grpo", 0.9)
    own = gstar_report(direct, budget, "trl_none", 0.9)
    names = ("c1", "c2", "c3")
    want = [report.constants[n][e] for n in names for e in ("estimate", "low", "high")]
    got = [record[n][e] for n in names for e in ("estimate", "low", "high")]
    run = report.group_sizes.index(WINDOW_G)
    ends = [report.gstar[e] for e in ("estimate", "low", "high")]
    finite = [math.isfinite(v) for v in ends]
    pooled = window_rollouts(batches, meta)
    return [
        check_true("the window pools every batch's rows once, in order, the newest last",
                   np.array_equal(pooled.score, rows) and np.array_equal(pooled.prompt_id, ids)
                   and record["windows_pooled"] == WINDOW_BATCHES
                   and record["n_prompts"] == WINDOW_BATCHES * WINDOW_GROUPS,
                   float(record["n_prompts"]),
                   note=f"{WINDOW_BATCHES} batches of {WINDOW_GROUPS} groups"),
        check_exact("c1, c2, c3' and their intervals equal gstar's", want, got, rtol=1e-12,
                    atol=0.0),
        check_true("G*'s unbounded ends are gstar's",
                   [math.isfinite(record["gstar"][e]) for e in ("estimate", "low", "high")]
                   == finite, note=f"finite ends: {finite}"),
        check_exact("G* and its interval equal gstar's (finite ends; 0 when none is)",
                    [v for v, f in zip(ends, finite) if f] or [0.0],
                    [record["gstar"][e] for e, f in zip(("estimate", "low", "high"), finite)
                     if f] or [0.0], rtol=1e-12, atol=0.0),
        check_true("the advice and GRPO against vanilla equal gstar's",
                   record["recommended_group_size"] == report.recommended_group_size
                   and record["grpo_beats_vanilla"] == (WINDOW_G not in report.grpo_loses)),
        check_exact("the run rule's MSE at the run's G equals gstar's for that rule",
                    [own.mse["trl_none"][e][run] for e in ("estimate", "low", "high")],
                    [record["mse_run"][e] for e in ("estimate", "low", "high")], rtol=1e-12,
                    atol=0.0),
        check_true("the rollouts the window returns are the pooled rows",
                   np.array_equal(rollouts.score, rows)),
    ]
