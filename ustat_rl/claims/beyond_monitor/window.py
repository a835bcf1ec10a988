"""A monitored window is ``ustat-rl gstar`` on the batches it pools (docs/theory.md C48).

Generation batches drawn from a bandit with known moments (each a pilot of B groups of G binary
rewards with their full scores) are pooled as the TRL monitor pools them
(:func:`ustat_rl.frameworks.window.window_record`): the record's constants, G*, intervals and
advice must equal :func:`ustat_rl.pilot.report.gstar_report` on exactly those batches' rows,
every group its own prompt draw, its MSE and variance at the run's G (estimated without a moment
model, C53) their pairwise definitions on the pooled batches, and the window must hold every
pooled batch's rows once, the newest last. Deterministic: the same numbers by two routes.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_exact, check_true, register
from ..verdict_words import trajectory_words_checks

#: Batches pooled, groups per batch and group size of the check (N = B G per batch).
WINDOW_BATCHES, WINDOW_GROUPS, WINDOW_G = 3, 12, 4


def _batches(seed: int):
    from ...frameworks.window import Batch
    from ...policies.examples import small_bandit
    from ...scores.bandit import bandit_pilot
    from ...seeding import child_seed

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
          "window_record on batches drawn from small_bandit against gstar_report on their rows "
          "and the run estimates' pairwise definitions; the pooled rows against the batches")
def check_c48(ctx) -> list:
    from ...frameworks.config import EstimatorConfig, MonitorConfig
    from ...frameworks.window import window_record, window_rollouts
    from ...pilot.report import gstar_report
    from ...pilot.rollouts import Rollouts

    bandit, batches = _batches(ctx.seed)
    budget = WINDOW_GROUPS * WINDOW_G
    meta = dict(sketch_kind="none", param_dim=int(bandit.dim), model_name="small_bandit")
    record, rollouts = window_record(batches, meta, budget, MonitorConfig(
        level=0.9, estimator=EstimatorConfig("trl_none", "check")))
    rows = np.concatenate([b.score for b in batches])
    ids = np.concatenate([b.first_id + np.repeat(np.arange(WINDOW_GROUPS), WINDOW_G)
                          for b in batches])
    direct = Rollouts(prompt_id=ids, reward=np.concatenate([b.reward for b in batches]),
                      score=rows, **meta)
    from ...pilot.run_noise_definition import window_noise_by_definition

    report = gstar_report(direct, budget, "grpo", 0.9)
    names = ("c1", "c2", "c3")
    want = [report.constants[n][e] for n in names for e in ("estimate", "low", "high")]
    got = [getattr(getattr(record, n), e) for n in names for e in ("estimate", "low", "high")]
    var, mse = window_noise_by_definition(batches, "trl_none")
    ends = [report.gstar[e] for e in ("estimate", "low", "high")]
    finite = [math.isfinite(v) for v in ends]
    pooled = window_rollouts(batches, meta)
    return [
        check_true("the window pools every batch's rows once, in order, the newest last",
                   np.array_equal(pooled.score, rows) and np.array_equal(pooled.prompt_id, ids)
                   and record.windows_pooled == WINDOW_BATCHES
                   and record.n_prompts == WINDOW_BATCHES * WINDOW_GROUPS,
                   float(record.n_prompts),
                   note=f"{WINDOW_BATCHES} batches of {WINDOW_GROUPS} groups"),
        check_exact("c1, c2, c3' and their intervals equal gstar's", want, got, rtol=1e-12,
                    atol=0.0),
        check_true("G*'s unbounded ends are gstar's",
                   [math.isfinite(getattr(record.gstar, e)) for e in ("estimate", "low", "high")]
                   == finite, note=f"finite ends: {finite}"),
        check_exact("G* and its interval equal gstar's (finite ends; 0 when none is)",
                    [v for v, f in zip(ends, finite) if f] or [0.0],
                    [getattr(record.gstar, e) for e, f in zip(("estimate", "low", "high"), finite)
                     if f] or [0.0], rtol=1e-12, atol=0.0),
        check_true("the advice and GRPO against vanilla equal gstar's",
                   record.recommended_group_size == report.recommended_group_size
                   and record.grpo_beats_vanilla == (WINDOW_G not in report.grpo_loses)),
        check_exact("the run rule's variance and MSE at the run's G equal their pairwise "
                    "definitions on the pooled batches", [var, mse],
                    [record.var_run.estimate, record.mse_run.estimate],
                    rtol=1e-10, atol=0.0),
        check_true("their intervals hold the estimates and do not go below 0",
                   all(0.0 <= i.low <= i.estimate <= i.high
                       for i in (record.var_run, record.mse_run))),
        check_true("the rollouts the window returns are the pooled rows",
                   np.array_equal(rollouts.score, rows)),
    ]


#: Runs, windows per run and the stated simultaneous level of the trajectory check (C49).
TRAJECTORY_RUNS, TRAJECTORY_WINDOWS, TRAJECTORY_LEVEL = 1000, 10, 0.9


def false_alarm_rate(rng, with_errors: bool = True, pooled: bool = False,
                     n_runs: int = TRAJECTORY_RUNS, n_windows: int = TRAJECTORY_WINDOWS) -> float:
    """Share of simulated runs with a constant G* = 8 (c1 = 1, c3' = 49) whose trajectory
    verdict (:func:`ustat_rl.frameworks.universality.gstar_universality` at
    ``TRAJECTORY_LEVEL``) says no single G fits every window.

    Each window's c1 and c3' are normal around the truth with standard errors 0.1 and 4 from 200
    prompts. ``pooled``: each window averages two consecutive batches, as a monitor pooling the
    last two generation batches does, so neighbouring windows correlate by 1/2.
    ``with_errors=False`` writes no Fieller inputs, so the verdict can only take each window's
    own 90% interval for the family's (the wrong level, the negative control).
    """
    from ...frameworks.synthetic import SyntheticErrors, SyntheticWindow, synthetic_record
    from ...frameworks.universality import gstar_universality

    se1, se3, alarms = 0.1, 4.0, 0
    for _ in range(n_runs):
        if pooled:
            z = np.sqrt(2.0) * rng.standard_normal((2, n_windows + 1))  # (2, K + 1) batches
            z = 0.5 * (z[:, :-1] + z[:, 1:])  # (2, K), unit variance, neighbours share a batch
        else:
            z = rng.standard_normal((2, n_windows))  # (2, K)
        c1, c3 = 1.0 + se1 * z[0], 49.0 + se3 * z[1]  # (K,) each
        records = [synthetic_record(10 * (i + 1), a, 2.0, b,
                                    SyntheticErrors(se1, se3, stored=with_errors),
                                    window=SyntheticWindow(n_prompts=200))
                   for i, (a, b) in enumerate(zip(c1, c3))]
        alarms += not gstar_universality(records, TRAJECTORY_LEVEL).consistent
    return alarms / n_runs


@register("C49", "Beyond the paper: with G* constant along a run, the trajectory's 'no single G "
          "fits every window' is wrong at most 1 - level of the time (Bonferroni over windows, "
          "also when neighbouring windows share a batch), and its verdict's words are what the "
          "windows' intervals allow",
          "derived (docs/theory.md C49; section 7, \"Estimates inside a training run\")",
          "1000 simulated runs of 10 windows, independent and pooled; the per-window level taken "
          "as the family's as the negative control; the printed verdict on runs of each kind")
def check_c49(ctx) -> list:
    from ...seeding import child_seed
    from ...tolerances import Z_STRICT

    n = TRAJECTORY_RUNS
    bound = 1.0 - TRAJECTORY_LEVEL
    se = math.sqrt(bound * (1.0 - bound) / n)
    limit = bound + Z_STRICT * se
    rates = {kind: false_alarm_rate(np.random.default_rng(child_seed(ctx.seed, 49, j)),
                                    with_errors=kind != "unadjusted", pooled=kind == "pooled")
             for j, kind in enumerate(("independent", "pooled", "unadjusted"))}
    note = (f"rate <= {bound:g} + {Z_STRICT:g} se = {limit:.3f} (se {se:.4f} at the bound; "
            f"one-sided 3.4e-6 when the rate is exactly {bound:g})")
    return [
        check_true("independent windows: false 'no single G' within 1 - level",
                   rates["independent"] <= limit, rates["independent"], evidence="monte-carlo",
                   note=note),
        check_true("windows sharing a batch: false 'no single G' within 1 - level",
                   rates["pooled"] <= limit, rates["pooled"], evidence="monte-carlo", note=note),
        check_true("negative control: each window's own 90% taken as simultaneous exceeds it",
                   rates["unadjusted"] > limit, rates["unadjusted"], evidence="monte-carlo",
                   note=note),
    ] + trajectory_words_checks()
