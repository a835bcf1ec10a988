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

from ..advantages import get_rule
from ..advantages.multichannel import MULTI_CHANNEL_RULES, get_multichannel_rule
from ..pilot.report import all_equal_fraction, gstar_report
from ..pilot.rollouts import MIN_GROUP_SIZE, Rollouts
from ..pilot.run_noise import group_terms, run_noise
from ..theory.dynamic_sampling_cost import cost_at_keep_probability
from ..theory.group_size import ADVICE_TARGETS, budget_grid, law_at_gstar
from .flat_groups import REASONS, window_flat_groups
from .grouped import all_equal_by_group
from .trajectory import RecordInterval, WindowRecord, gstar_errors_of

#: The paper's leave-one-out rule, whose per-group terms are unbiased for the policy gradient.
_LOO = get_rule("grpo")

__all__ = ["Batch", "batch_problem", "window_rollouts", "window_record", "skipped_record",
           "observed_all_equal", "run_advantages", "window_noise", "is_multichannel",
           "advice_line"]

#: What each target's advice is for, in the monitor's summary line.
_TARGET_WORDS = {"scale_free": "scale-free: an Adam-type step", "mse": "MSE: a fixed-size step"}


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
        advantages need them, :func:`run_advantages`).
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


def is_multichannel(estimator) -> bool:
    """Whether ``estimator`` names a multi-reward rule (not a single-reward rule of the
    registry)."""
    return isinstance(estimator, str) and estimator in MULTI_CHANNEL_RULES


def _interval(part: dict) -> RecordInterval:
    return RecordInterval(**{k: float(part.get(k, math.nan)) for k in ("estimate", "low", "high")})


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


def _base(step, group_size, budget, config, sketch_dim) -> dict:
    """The fields every record of the monitor holds, skipped or not."""
    return dict(step=int(step), group_size=int(group_size), budget=int(budget),
                level=float(config.level), sketch_dim=int(sketch_dim),
                estimator=config.estimator.name, estimator_source=config.estimator.source)


def skipped_record(step, reason: str, config, budget, observed: float = math.nan) -> WindowRecord:
    """A trajectory record for a window the monitor could not estimate, saying why.

    ``config`` is the monitor's :class:`~ustat_rl.frameworks.config.MonitorConfig` (its group
    size, level, sketch dimension and rule are recorded); ``observed`` the batch's all-equal
    fraction, when it has whole groups."""
    return WindowRecord(status="skipped", reason=str(reason), all_equal_observed=float(observed),
                        advice_target=_advice_target(config),
                        **_base(step, config.group_size, budget, config,
                                config.sketch.dimension))


def _advice_target(config) -> str:
    """The advice target a monitor's records say to follow: ``config.estimator.advice_target``,
    ``"scale_free"`` (an Adam-type optimiser) when it is ``None``."""
    target = config.estimator.advice_target
    return "scale_free" if target is None else target


def _run_rule_advice(rollouts: Rollouts, budget, rule, level: float,
                    run_group_size: int) -> tuple[dict, str | None]:
    """The advice for the run's own ``rule`` under each target of :data:`ADVICE_TARGETS` on a
    window's groups, and why any is missing (``None`` when none is).

    Each is the ``recommended_group_size`` of :func:`~ustat_rl.pilot.report.gstar_report` with
    ``estimator=rule`` and that ``target``: what ``ustat-rl gstar ROLLOUTS --budget N
    --estimator <rule> --target <target>`` answers for the window's rollouts. Returns
    ``({target: G or None}, note)``; a rule the pilot cannot advise for (not in the registry, a
    multi-reward rule, a rule that scales its advantages under non-binary rewards, a rule with
    a baseline drawn apart from the group) gets ``None`` and the reason in words, never another
    rule's number.
    """
    none = dict.fromkeys(ADVICE_TARGETS)
    if rule is None:
        return none, "the run's rule is not in the registry: no advice for it"
    if is_multichannel(rule):
        return none, f"{rule} is a multi-reward rule: gstar advises single-reward rules only"
    out, why = {}, {}
    for target in ADVICE_TARGETS:
        try:
            report = gstar_report(rollouts, budget, rule, level, run_group_size=run_group_size,
                                  target=target)
        except ValueError as exc:
            out[target] = None
            why[target] = str(exc).splitlines()[0]
            continue
        out[target] = int(report.recommended_group_size)
    if len(why) == len(ADVICE_TARGETS) and len(set(why.values())) == 1:
        return out, f"no target: {next(iter(why.values()))}"  # one reason for both
    return out, "; ".join(f"{target}: {reason}" for target, reason in why.items()) or None


def _flat_fields(batches, G: int, advised: int | None, level: float) -> dict:
    """The record's flat-group fields (:func:`~.flat_groups.window_flat_groups` of the pooled
    batches): the observed share by reason, and the expected share at the run's ``G`` and at
    ``advised`` with their intervals (``None`` without binary rewards)."""
    sizes = sorted({G} | ({advised} if advised is not None else set()))
    window = window_flat_groups(batches, sizes, level)
    share = {name: window.counts[name] / window.n_groups for name in REASONS}

    def at(size):
        if size is None or size not in window.group_sizes:
            return None
        i = window.group_sizes.index(size)
        return RecordInterval(window.expected[i], window.low[i], window.high[i])

    return dict(flat_share=share, flat_expected_run=at(G), flat_expected_advised=at(advised))


def advice_line(record: WindowRecord) -> str:
    """The monitor's summary of one window, in one short line: the ``G`` to follow, for which
    rule and target, the paper's GRPO advice beside it, and the flat groups."""
    head = f"step {record.step}, G = {record.group_size}"
    if not record.ok:
        return f"{head}: window skipped ({record.reason})"
    target = _TARGET_WORDS.get(record.advice_target, record.advice_target)
    own = getattr(record, f"run_rule_advice_{record.advice_target}", None)
    if own is not None:
        line = (f"{head}: advice G = {own} for {record.estimator} ({target}); paper's GRPO "
                f"advice G = {record.recommended_group_size}")
    else:
        line = (f"{head}: advice G = {record.advised_group_size}, the paper's GRPO advice (none "
                f"for {record.estimator or 'a rule outside the registry'}: see "
                f"run_rule_advice_note)")
    if record.flat_share is not None:
        line += f"; flat groups {sum(record.flat_share.values()):.0%}"
        expected = record.flat_expected_advised
        if expected is not None:
            line += (f", expected {expected.estimate:.0%} [{expected.low:.0%}, "
                     f"{expected.high:.0%}] at G = {record.advised_group_size}")
    return line


def run_advantages(batch: Batch, estimator, weights=None) -> tuple[np.ndarray | None, str]:
    """The advantages ``(n,)`` the run's rule gives one batch's rows, and the rule's label.

    Batch statistics (a batch std, whitening) are the batch's own, as the trainer takes them.
    ``estimator`` ``None`` (a rule the registry does not hold) gives the paper's GRPO rule's.
    Returns
    ``(None, why)`` when the rule cannot be evaluated on what the batch carries (a multi-reward
    rule without finite per-function rewards, a rule that needs a reference value).
    """
    ids = np.repeat(np.arange(batch.n_groups), batch.group_size)
    if is_multichannel(estimator):
        if batch.channels is None or not np.all(np.isfinite(batch.channels)):
            return None, f"grpo ({estimator}: finite per-function rewards were not captured)"
        spec = get_multichannel_rule(estimator)
        return spec.advantages(batch.channels, ids, weights), estimator
    name = "grpo" if estimator is None else estimator
    spec = get_rule(name)
    if spec.centring.reference_source is not None:
        return None, f"grpo ({estimator} needs {spec.centring.reference_source}, which a run lacks)"
    return spec.advantages(batch.reward, ids), name


def window_noise(batches, estimator, level: float, weights=None, column_group=None):
    """The run rule's variance, squared bias and MSE at the run's ``G`` and ``B = N/G``, pooled
    over ``batches`` (:func:`ustat_rl.pilot.run_noise.run_noise`), and the rule's label.

    Each batch's rows get the rule's advantages with that batch's own statistics and the paper's
    GRPO (leave-one-out) advantages of the combined reward, whose terms are unbiased for the
    policy gradient; no moment model is used, so the estimates are unbiased for every rule at
    the run's ``G`` (docs/theory.md section 8).
    """
    evaluated = [run_advantages(b, estimator, weights) for b in batches]
    missing = [label for advantage, label in evaluated if advantage is None]
    if missing:  # the paper's GRPO rule stands in, and the label says why
        evaluated = [(run_advantages(b, None)[0], missing[0]) for b in batches]
    terms = [group_terms(a, b.score, b.group_size) for (a, _), b in zip(evaluated, batches)]
    target = [group_terms(_LOO.grouped(b.reward.reshape(-1, b.group_size)).reshape(-1), b.score,
                          b.group_size) for b in batches]
    noise = run_noise(np.concatenate(terms), np.concatenate(target), batches[-1].n_groups,
                      batches[-1].group_size, level, column_group)
    return noise, evaluated[-1][1]


def window_record(batches, meta: dict, budget, config) -> tuple[WindowRecord, Rollouts]:
    """The trajectory record of a window pooling ``batches`` (oldest first), and its rollouts.

    Parameters
    ----------
    batches : sequence of Batch
        Checked batches (:func:`batch_problem` returned ``None`` for each), one group size.
    meta : dict
        Sketch metadata for :func:`window_rollouts`.
    budget : int
        The run's ``N = B G`` completions per generation batch.
    config : MonitorConfig
        The monitor's settings (:mod:`ustat_rl.frameworks.config`): the interval ``level``;
        ``estimator.name``, the run's advantage rule (a registry name, single- or multi-reward),
        ``None`` when the run's rule is not in the registry (the paper's GRPO rule stands in),
        and ``estimator.source``, where it was read; ``loss.reward_weights``, the reward functions'
        weights for a multi-reward rule, and ``loss.units``, the records' units note;
        ``estimator.group_filter``, a dynamic-sampling group filter
        (:data:`~ustat_rl.theory.group_filters.GROUP_FILTERS`; beyond the paper): ``ds_keep_prob``
        and ``ds_gen_batches`` are then under that filter and the record adds ``ds_group_filter``
        and ``ds_filtered_mse`` (:func:`_group_filter_figures`); ``None``: verl's all-equal
        filter, without the MSE.

    Notes
    -----
    ``var_run`` and ``mse_run`` are the run rule's at the run's ``G``, estimated without a
    moment model (:func:`window_noise`): unbiased for every rule, with intervals. G*, the
    constants, the advice and GRPO against vanilla are the paper's GRPO rule's; ``mse_best``
    (the run rule's MSE at the best divisor of ``N``) comes from the moment model, exact for an
    affine rule and a plug-in for one that scales its advantages (``mse_best_estimator`` names
    the rule that curve is for). The run rule's own advice under both targets
    (:func:`_run_rule_advice`, the route of ``ustat-rl gstar --estimator <rule> --target <t>``)
    and the flat groups of the window (:func:`~.flat_groups.window_flat_groups`) come last;
    ``advised_group_size`` is the advice under ``config.estimator.advice_target``
    (:func:`_advice_target`), the paper's where the run rule has none.
    """
    G = {b.group_size for b in batches}
    if len(G) != 1:
        raise ValueError(f"`batches` mix group sizes {sorted(G)}")
    G = G.pop()
    grid = budget_grid(budget)  # checked once here; the report takes the grid as it is
    budget = grid.budget
    level, rule, group_filter = config.level, config.estimator.name, config.estimator.group_filter
    units, weights = config.loss.units, config.loss.weights
    rollouts = window_rollouts(batches, meta)
    binary = bool(np.all((rollouts.reward == 0.0) | (rollouts.reward == 1.0)))
    estimator, scaled = "grpo", False
    if rule is not None and not is_multichannel(rule):
        spec = get_rule(rule)
        scaled = spec.statistics != "group"  # a batch rule's curve against g is not a group's
        if not scaled and spec.centring.reference_source is None and (spec.is_affine or binary):
            estimator = rule
    # one report: GRPO's constants, G* and advice, and the run rule's curve beside them
    report = gstar_report(rollouts, grid, "grpo", level,
                          extra_estimators=() if estimator == "grpo" else (estimator,),
                          run_group_size=G)
    sizes = report.group_sizes
    noise, label = window_noise(batches, rule, level, weights,
                                rollouts.column_groups() if rollouts.is_sketched else None)
    consts = {name: report.constants[name]["estimate"] for name in ("c1", "c2", "c3")}
    mse_gstar = law_at_gstar(consts["c1"], consts["c2"], consts["c3"], budget)
    run = sizes.index(G) if G in sizes else None
    predicted = _predicted_all_equal(batches)
    target = _advice_target(config)
    advice, note = _run_rule_advice(rollouts, grid, rule, level, G)
    advised = advice[target]
    if advised is None:  # the paper's advice stands in, and the note says so
        advised = int(report.recommended_group_size)
        note = f"{note}; advised_group_size is the paper's GRPO advice"
    record = WindowRecord(
        status="ok", windows_pooled=len(batches), n_prompts=report.n_prompts,
        n_samples=report.n_samples,
        **{name: _interval(report.constants[name]) for name in ("c1", "c2", "c3")},
        gstar=_interval(report.gstar),
        bounded=bool(report.bounded),
        recommended_group_size=int(report.recommended_group_size),
        mse_run=_noise_interval(noise.mse), var_run=_noise_interval(noise.variance),
        run_method=f"{label} at the run's G = {G}, B = {budget // G}: unbiased, no moment "
                      f"model" + (" (batch statistics held at each batch's value)" if scaled
                                  else ""),
        mse_gstar=mse_gstar,
        mse_best=math.nan if scaled else float(min(report.mse[get_rule(estimator).name]
                                                   ["estimate"])),
        grpo_beats_vanilla=None if run is None else bool(G not in report.grpo_loses),
        all_equal_predicted=predicted,
        **(_dynamic_sampling(predicted, G, budget) if group_filter is None
           else _group_filter_figures(batches, rollouts, G, budget, group_filter)),
        all_equal_observed=observed_all_equal(batches[-1].reward, G),
        gstar_errors=gstar_errors_of(report), units=units, mse_best_estimator=estimator,
        **_critical_fields(report.critical_rollouts),
        advice_target=target, run_rule_advice_mse=advice["mse"],
        run_rule_advice_scale_free=advice["scale_free"], run_rule_advice_note=note,
        advised_group_size=advised, **_flat_fields(batches, G, advised, level),
        **_base(batches[-1].step, G, budget, config, rollouts.score.shape[1]))
    return record, rollouts


def _critical_fields(counts: dict) -> dict:
    """The record's critical rollout count (:data:`~.trajectory.CRITICAL_FIELDS`) from the
    report's: at the run's ``G`` and at ``G*`` (``None`` there where ``G*`` is undefined)."""
    out = {"grad_norm_sq": _interval(counts["run"]["grad_norm_sq"])}
    for key in ("run", "gstar"):
        part = counts[key]
        for name, field in (("total", "critical_rollouts"), ("inter", "critical_inter"),
                            ("intra", "critical_intra")):
            out[f"{field}_{key}"] = None if part is None else _interval(part[name])
    return out


def _noise_interval(interval) -> RecordInterval:
    return _interval(vars(interval))


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


def optional_group_filter(group_filter):
    """``group_filter`` as a checked :class:`~ustat_rl.theory.group_filters.GroupFilter` (a name of
    ``GROUP_FILTERS`` or a filter), a reward-variance filter of the batch
    (:class:`~ustat_rl.theory.variance_filter.VarianceFilter`), or ``None`` for none (verl's
    filter without the MSE)."""
    from ..theory.group_filters import get_group_filter
    from ..theory.variance_filter import VARIANCE_FILTERS, VarianceFilter, get_variance_filter

    if isinstance(group_filter, VarianceFilter) or (isinstance(group_filter, str)
                                                    and group_filter in VARIANCE_FILTERS):
        return get_variance_filter(group_filter)  # a filter of the batch (variance_window)
    return None if group_filter is None else get_group_filter(group_filter)


def _group_filter_figures(batches, rollouts: Rollouts, G: int, budget: int, group_filter) -> dict:
    """A group filter's figures at the run's ``G`` (binary rewards; ``None`` where they do not apply).

    ``ds_keep_prob``: the fraction of the groups of the batches before the newest that the filter
    keeps, unbiased for ``r`` (each group has exactly ``G`` samples; for verl's filter it is
    ``1 - all_equal_predicted``); ``ds_gen_batches``: verl's loop at that ``r`` with ``b = B``;
    ``ds_filtered_mse``: GRPO's kept batch of ``B = N/G`` groups
    (:func:`~ustat_rl.theory.dynamic_sampling.filtered_batch_moments`) at the window's moments
    made binary, a point estimate biased like a plug-in ``r``.
    """
    from ..pilot.estimate import estimate_moments, pilot_statistics
    from ..theory.advantage import binary_projection
    from ..theory.dynamic_sampling import filtered_batch_moments
    from ..theory.group_filters import get_group_filter, keep_mask
    from ..theory.variance_filter import VarianceFilter

    if isinstance(group_filter, VarianceFilter):
        from .variance_window import variance_filter_figures

        return variance_filter_figures(batches, rollouts, G, budget, group_filter)
    kept = get_group_filter(group_filter)
    out = dict(ds_group_filter=kept.name, ds_keep_prob=None, ds_gen_batches=None,
               ds_filtered_mse=None)
    earlier = [b.reward for b in batches[:-1]]
    binary = bool(np.all((rollouts.reward == 0.0) | (rollouts.reward == 1.0)))
    if not binary or budget % G:
        return out
    if earlier:
        k = np.rint(np.concatenate(earlier).reshape(-1, G).sum(axis=1)).astype(np.int64)
        keep = float(np.mean(keep_mask(kept, G)[k]))
        cost = cost_at_keep_probability(keep, G, budget // G)
        out.update(ds_keep_prob=keep, ds_gen_batches=cost.expected_gen_batches)
    try:
        moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
        out["ds_filtered_mse"] = float(filtered_batch_moments(moments, "grpo", G, budget // G,
                                                              kept).mse)
    except ValueError:  # the filter keeps no group at the window's success rates
        pass
    return out
