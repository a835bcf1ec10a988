"""One monitored window of a training run: grouped rewards and sketched scores to a record.

A *batch* is one generation step of a GRPO trainer: ``B`` groups of ``G`` completions, each
group's rows contiguous, each row with its reward (as the trainer combined its reward functions)
and its sketched score ``R grad log pi(completion | prompt)`` at the parameters that sampled it.
A *window* pools the last few batches into one :class:`~ustat_rl.pilot.rollouts.Rollouts`, every
group its own prompt draw, and reports what ``ustat-rl gstar`` reports for it
(:func:`ustat_rl.pilot.report.gstar_report`, docs/theory.md C17, C32): the estimates are those of
``ustat-rl gstar`` on the same groups written out as a rollouts file, by construction.

Pooling batches taken at different steps mixes slightly different policies; the record states
how many were pooled. The predicted all-equal fraction of a window is computed from the batches
*before* its newest one, so that it is a prediction of the newest batch's observed fraction
rather than a restatement of it (from a group of exactly ``G`` samples the only unbiased
estimate of ``p^G`` is the group's own indicator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import as_int
from ..advantages import get_rule
from ..pilot.estimate import rule_moments
from ..pilot.report import all_equal_fraction, gstar_report
from ..pilot.rollouts import MIN_GROUP_SIZE, Rollouts
from ..theory import ScalingConstants, minibatch_variance
from ..theory.dynamic_sampling_cost import cost_at_keep_probability
from .grouped import all_equal_by_group
from .multichannel_window import is_multichannel, multichannel_fields
from .trajectory import TRAJECTORY_FIELDS, TRAJECTORY_VERSION, gstar_errors_of

__all__ = ["Batch", "batch_problem", "window_rollouts", "window_record", "skipped_record",
           "observed_all_equal"]


@dataclass(frozen=True)
class Batch:
    """One generation batch: ``n = B G`` rows, group ``b`` in rows ``b G .. (b + 1) G - 1``.

    Attributes
    ----------
    step : int
        The trainer's global step when the batch was generated.
    group_size : int
        ``G``.
    reward : ndarray (n,)
    score : ndarray (n, k)
    first_id : int
        Prompt id of the batch's first group in a pooled window (ids are consecutive).
    channels : ndarray (n, K), optional
        Each reward function's reward, before the trainer combined them (a multi-reward rule's
        MSE needs them, :mod:`ustat_rl.frameworks.multichannel_window`).
    """

    step: int
    group_size: int
    reward: np.ndarray
    score: np.ndarray
    first_id: int
    channels: np.ndarray | None = None

    @property
    def n_groups(self) -> int:
        """``B``."""
        return self.reward.size // self.group_size


def batch_problem(prompt_keys, reward, group_size: int) -> str | None:
    """Why a batch cannot be estimated, in one line, or ``None``.

    ``prompt_keys`` (one per row: anything comparable, e.g. a hash of the prompt's tokens) must
    be equal inside each block of ``group_size`` consecutive rows: the groups are contiguous, as
    the trainer's own per-group statistics assume. Rewards must be finite.
    """
    keys = np.asarray(prompt_keys)
    reward = np.asarray(reward, dtype=np.float64)
    n = reward.size
    if group_size < MIN_GROUP_SIZE:
        return (f"groups of {group_size} completions: the unbiased estimates need >= "
                f"{MIN_GROUP_SIZE} per group (num_generations >= {MIN_GROUP_SIZE})")
    if keys.shape[0] != n or n % group_size:
        return (f"{n} rewards for {keys.shape[0]} prompts do not form whole groups of "
                f"{group_size}")
    bad = np.flatnonzero(~np.isfinite(reward))
    if bad.size:
        return (f"reward is NaN or infinite for {bad.size} of {n} completions (first: row "
                f"{int(bad[0])}); such rows have no defined advantage")
    blocks = keys.reshape(n // group_size, group_size, *keys.shape[1:])
    mixed = [b for b in range(blocks.shape[0])
             if not np.all(blocks[b] == blocks[b, :1])]
    if mixed:
        return (f"groups are not contiguous: rows {mixed[0] * group_size}.."
                f"{(mixed[0] + 1) * group_size - 1} hold more than one prompt ({len(mixed)} of "
                f"{blocks.shape[0]} groups mixed)")
    if np.unique(reward).size == 1:
        return f"every reward in the batch equals {reward[0]:g}: no gradient signal"
    return None


def observed_all_equal(reward, group_size: int) -> float:
    """Fraction of the batch's groups whose rewards are all equal (TRL's
    ``frac_reward_zero_std`` for one generation batch)."""
    reward = np.asarray(reward, dtype=np.float64)
    n_groups = reward.size // group_size
    return float(np.mean(all_equal_by_group(np.arange(reward.size) // group_size, reward,
                                            n_groups)))


def window_rollouts(batches, meta: dict) -> Rollouts:
    """The pooled :class:`Rollouts` of ``batches`` (each group its own prompt id).

    ``meta`` holds the sketch metadata (``sketch_kind``, ``sketch_seed``, ``param_dim``,
    ``model_name``, ``sketch_blocks``, ``sketch_route``).
    """
    ids = [b.first_id + np.repeat(np.arange(b.n_groups), b.group_size) for b in batches]
    return Rollouts(prompt_id=np.concatenate(ids),
                    reward=np.concatenate([b.reward for b in batches]),
                    score=np.concatenate([b.score for b in batches]), **meta)


def _interval(part: dict) -> dict:
    return {k: float(part[k]) for k in ("estimate", "low", "high")}


def _predicted_all_equal(batches) -> float:
    """All-equal fraction at ``G`` predicted from every batch but the newest (NaN if none, or
    if their rewards are not binary)."""
    earlier = batches[:-1]
    if not earlier:
        return math.nan
    reward = np.concatenate([b.reward for b in earlier])
    if not np.all((reward == 0.0) | (reward == 1.0)):
        return math.nan
    G = batches[-1].group_size
    successes = reward.reshape(-1, G).sum(axis=1)
    frac, _ = all_equal_fraction(successes, np.full(successes.size, G), np.array([G]))
    return float(frac[0])


def _base(step, group_size, budget, level, sketch_dim, rule, rule_source, estimator) -> dict:
    record = dict.fromkeys(TRAJECTORY_FIELDS)
    record.update(version=TRAJECTORY_VERSION, step=int(step), group_size=int(group_size),
                  budget=int(budget), level=float(level), sketch_dim=int(sketch_dim),
                  rule=rule, rule_source=rule_source, estimator=estimator)
    return record


def skipped_record(step, reason: str, group_size, budget, level, sketch_dim, rule,
                   rule_source, observed: float = math.nan) -> dict:
    """A trajectory record for a window the monitor could not estimate, saying why."""
    record = _base(step, group_size, budget, level, sketch_dim, rule, rule_source, None)
    record.update(status="skipped", reason=str(reason), windows_pooled=0, n_prompts=0,
                  n_samples=0, all_equal_observed=float(observed))
    return record


def window_record(batches, meta: dict, budget, level: float, rule, rule_source: str,
                  units: str | None = None, weights=None) -> tuple[dict, Rollouts]:
    """The trajectory record of a window pooling ``batches`` (oldest first), and its rollouts.

    Parameters
    ----------
    batches : sequence of Batch
        Checked batches (:func:`batch_problem` returned ``None`` for each), one group size.
    meta : dict
        Sketch metadata for :func:`window_rollouts`.
    budget : int
        The run's ``N = B G`` completions per generation batch.
    level : float
        Two-sided interval level.
    rule : str or None
        The run's advantage rule (a registry name), ``None`` when the run's rule is not in the
        registry. Its minibatch MSE is reported when it is affine or the rewards are binary;
        otherwise the paper's GRPO rule's is (``estimator`` in the record).
    rule_source : str
        The trainer option the rule was read from, in words.
    weights : array_like (K,), optional
        The reward functions' weights, for a multi-reward ``rule``
        (:func:`~ustat_rl.frameworks.multichannel_window.multichannel_fields`).
    """
    G = {b.group_size for b in batches}
    if len(G) != 1:
        raise ValueError(f"`batches` mix group sizes {sorted(G)}")
    G = G.pop()
    budget = as_int(budget, "budget", 2)
    rollouts = window_rollouts(batches, meta)
    binary = bool(np.all((rollouts.reward == 0.0) | (rollouts.reward == 1.0)))
    estimator, spread, limit = "grpo", 1.0, None
    multi = is_multichannel(rule)
    if rule is not None and not multi:
        limit = _group_limit(get_rule(rule))
        if limit is not None:  # batch statistics: the large-B limit, a constant spread
            estimator, spread = limit.name, _batch_spread(rollouts.reward, get_rule(rule))
        elif get_rule(rule).is_affine or binary:
            estimator = rule
    # G*, the constants, the advice and GRPO against vanilla are the paper's GRPO rule's; the
    # MSE at the run's G is the run's rule's (a second report when the two differ)
    report = gstar_report(rollouts, budget, "grpo", level)
    own = report if estimator == "grpo" else gstar_report(rollouts, budget, estimator, level)
    sizes = report.group_sizes
    record = _base(batches[-1].step, G, budget, level, rollouts.score.shape[1], rule,
                   rule_source, estimator)
    consts = {name: report.constants[name]["estimate"] for name in ("c1", "c2", "c3")}
    g_star = float(report.gstar["estimate"])
    mse_gstar = math.nan
    if math.isfinite(g_star) and g_star > 1.0 and consts["c3"] >= 0.0:
        mse_gstar = float(ScalingConstants(**consts).fixed_budget_mse(min(g_star, budget),
                                                                     budget))
    run = sizes.index(G) if G in sizes else None
    pick = own.mse[estimator]
    variance = None
    if run is not None:
        variance = float(minibatch_variance(rule_moments(rollouts, estimator), estimator, G,
                                            budget // G)) / spread ** 2
    scaled = limit is not None  # a batch rule's MSE against g is not its group rule's
    predicted = _predicted_all_equal(batches)
    record.update(
        status="ok", reason=None, windows_pooled=len(batches), n_prompts=report.n_prompts,
        n_samples=report.n_samples,
        **{name: _interval({"low": math.nan, "high": math.nan, **report.constants[name]})
           for name in ("c1", "c2", "c3")},
        gstar=_interval({"low": math.nan, "high": math.nan, **report.gstar}),
        bounded=bool(report.bounded),
        recommended_group_size=int(report.recommended_group_size),
        mse_run=(None if run is None or scaled else
                 {k: float(pick[k][run]) for k in ("estimate", "low", "high")}),
        mse_gstar=mse_gstar,
        mse_best=math.nan if scaled else float(min(pick["estimate"])),
        grpo_beats_vanilla=None if run is None else bool(G not in report.grpo_loses),
        all_equal_predicted=predicted,
        **_dynamic_sampling(predicted, G, budget),
        all_equal_observed=observed_all_equal(batches[-1].reward, G),
        gstar_errors=gstar_errors_of(report), var_run=variance, units=units)
    if scaled:
        record["estimator"] = f"{rule}: {estimator} / {spread:.6g}^2 (large-B limit)"
    if multi:  # G* stays the GRPO rule's on the combined reward; the run's MSE is the rule's
        record.update(multichannel_fields(batches, rule, weights, budget))
    return record, rollouts


def _dynamic_sampling(all_equal: float, G: int, budget: int) -> dict:
    """What DAPO's dynamic sampling (verl's ``filter_groups``) would cost at the run's ``G``:
    the keep probability ``r`` (one minus the all-equal fraction predicted from the earlier
    batches, unbiased: each group has exactly ``G`` samples) and the expected generation
    batches of ``B = N/G`` prompts until ``B`` groups are kept, no cap
    (:func:`ustat_rl.theory.dynamic_sampling_cost.cost_at_keep_probability`)."""
    if not math.isfinite(all_equal) or budget % G:
        return dict(ds_keep_prob=None, ds_gen_batches=None)
    keep = 1.0 - all_equal
    cost = cost_at_keep_probability(keep, G, budget // G)
    return dict(ds_keep_prob=keep, ds_gen_batches=cost.expected_gen_batches)


def _group_limit(rule):
    """For a rule that divides by a statistic of the whole batch (TRL ``scale_rewards="batch"``):
    the registered group rule with the same centring and no scaling, whose estimator divided by
    the batch's spread it becomes as ``B`` grows (the spread converges to a constant); ``None``
    for a rule of group statistics, or a batch rule that also re-centres (whitening)."""
    from ..advantages.registry import RULES

    if rule.statistics == "group" or rule.scaling.kind != "batch std":
        return None
    return next((r for r in RULES.values() if r.statistics == "group"
                 and r.scaling.kind == "none" and r.centring == rule.centring), None)


def _batch_spread(reward, rule) -> float:
    """The batch rule's divisor on the pooled rewards, where its constant limit is estimated:
    their std (with Bessel's correction when the rule has it) through the rule's own
    :meth:`~ustat_rl.advantages.parts.Scaling.divisor`."""
    ddof = 1 if rule.scaling.bessel else 0
    return float(rule.scaling.divisor(np.std(reward, ddof=ddof)))
