"""The ``ustat-rl gstar`` report: G* and the noise budget at a fixed budget (C10, C17, C32).

:func:`gstar_report` turns a pilot into everything a practitioner needs to choose the group size
at ``N = B G`` samples per step: the scaling constants and ``G*`` with intervals, the predicted
minibatch MSE of each estimator over the divisors of ``N`` (Proposition 3, docs/theory.md C6),
where GRPO loses to vanilla (C10), for binary rewards the fraction of groups with all-equal
rewards, and how many more pilot prompts would halve the interval for ``G*``. It computes; the
CLI prints and plots.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import gammaln

from .._validation import as_int
from ..advantages.registry import ESTIMATORS, get_rule
from ..formatting import json_ready
from ..theory import group_size as owner
from ..theory import per_prompt_mse, scaling_constants
from ..theory.advantage import all_equal_probability, binary_projection
from .advice import pilot_advice, regret_interval
from .critical_rollouts import critical_rollout_intervals
from .estimate import estimate_moments, pilot_statistics
from .replicates import block_labels, check_pilot_rule
from .report_text import format_report
from .rollouts import Rollouts
from .uncertainty import (
    PilotIntervals,
    jackknife,
    pilot_intervals,
    prompts_to_halve_width,
    student_interval,
)

__all__ = ["GStarReport", "gstar_report", "format_report", "REPORT_ESTIMATORS", "all_equal_fraction",
           "all_equal_by_prompt",
           "check_degenerate", "check_signal", "check_resolved", "margin_verdict"]

#: Estimators whose predicted MSE the report lists (Algorithm 1; docs/theory.md C5, C6).
REPORT_ESTIMATORS = ESTIMATORS


@dataclass(frozen=True)
class GStarReport:
    """What ``ustat-rl gstar`` prints (docs/theory.md C6, C10, C17, C32).

    Attributes
    ----------
    budget : int
        ``N``, samples per step.
    estimator : str
        The estimator whose best group size is reported.
    level : float
        Interval level.
    n_prompts, n_samples, n_columns : int
        Pilot size: prompts, rows, score columns.
    sketch_kind : str
    constants : dict
        ``c1``, ``c2``, ``c3``: each ``{"estimate", "low", "high", "std_error", ...}`` (intervals
        are absent for weighted prompt sets).
    gstar : dict
        ``G*`` with its interval.
    best_group_size : int
        The divisor ``G >= 2`` of ``N`` with the smallest predicted MSE of ``estimator``.
    best_group_size_any : int or None
        For GRPO, the best integer ``G`` in ``2..N`` by the fixed-budget law of C17 (the batch
        ``N/G`` then need not be whole); ``None`` for the other estimators.
    group_sizes : list of int
        The divisors of ``N`` (at least 2) the curves are evaluated at.
    mse : dict
        Per estimator, ``{"estimate": [...], "low": [...], "high": [...]}`` over ``group_sizes``.
    grpo_loses : list of int
        Group sizes where the point estimate of GRPO's predicted minibatch MSE exceeds
        vanilla's (C10); a point estimate, not a verdict (see ``grpo_verdict``).
    prompts_grpo_loses : list of float
        Per group size, the fraction of pilot prompts whose estimated per-prompt margin
        ``MSE_vanilla - MSE_GRPO`` is negative (noisy: one estimate per prompt).
    binary : bool
        Whether every reward is 0 or 1.
    all_equal : list of float or None
        For binary rewards, per group size, the prompt average of ``p^G + (1 - p)^G``.
    all_equal_unbiased : list of bool or None
        Whether each ``all_equal`` entry is unbiased (``G <=`` the smallest pilot group) or a
        plug-in ``V_hat^G + (1 - V_hat)^G`` (larger ``G``).
    prompts_to_halve : float
        Pilot prompts needed to halve the width of the interval for ``c1/c3'`` (hence, to first
        order, of ``G*``); ``inf`` when the projection noise alone prevents it; ``nan`` when the
        interval is unbounded (there is no width to halve) or absent.
    recommended_group_size : int
        The advice: the point argmin when the pilot has no intervals, otherwise the minimax-regret
        size of :func:`ustat_rl.pilot.advice.robust_group_size` (for GRPO; for another
        ``estimator`` its point argmin).
    worst_excess : float
        The largest relative excess MSE of the recommendation over the best admissible size
        that the pilot's interval for ``c1/c3'`` allows (``nan`` without intervals).
    bounded : bool
        Whether the pilot bounds ``G*`` from above.
    prompts_to_bound : float
        Pilot prompts in all that would bound ``G*`` (:func:`~ustat_rl.pilot.advice.prompts_to_bound`).
    gstar_errors : dict or None
        The standard errors and covariance ``G*``'s interval was built from
        (:meth:`~ustat_rl.pilot.uncertainty.PilotIntervals.fieller_inputs`), so that it can be
        rebuilt at another level; ``None`` without intervals.
    grpo_margin : dict or None
        ``MSE_vanilla - MSE_GRPO`` over ``group_sizes``: ``{"estimate", "low", "high"}`` (its
        jackknife interval at ``level``); ``None`` when the pilot has no intervals.
    grpo_verdict : list of str
        Per group size, what ``grpo_margin``'s interval says: ``"wins"`` (it lies above 0),
        ``"loses"`` (below 0) or ``"cannot tell"`` (it holds 0, or there is no interval, or the
        pilot is small: fewer than
        :data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` prompts).
    small_pilot : bool
        Whether the pilot has fewer than
        :data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` prompts: its constants get the
        cautious intervals of :mod:`ustat_rl.pilot.small_sample` and its verdicts on GRPO
        against vanilla read "cannot tell" (its predicted MSEs keep the jackknife's intervals).
    group_size : GroupSizeAnswer or None
        The answer the group-size fields are read from (:func:`~.group_size_answer`; not in JSON).
    critical_rollouts : dict or None
        GRPO's critical rollout count ``B_noise = tr(Sigma_G)/||g||^2`` (docs/theory.md, "The
        critical rollout count"): ``"run"`` at the run's ``G`` (``run_group_size``, else the
        recommended ``G``; ``"run_label"`` says which) and ``"gstar"`` at ``min(G*, N)``, each
        :meth:`~ustat_rl.pilot.critical_rollouts.CriticalRolloutIntervals.to_dict` (intervals
        NaN for a weighted prompt set; ``None`` for ``"gstar"`` where ``G*`` is undefined).
    target : str
        What the advice minimises (:data:`~ustat_rl.theory.group_size.ADVICE_TARGETS`):
        ``"mse"``, or ``"scale_free"``, the error left after the best rescaling of the
        estimate, which an optimiser that removes the gradient's scale (Adam) is left with.
    scale_free : list of float or None
        With ``target="scale_free"``, ``estimator``'s plug-in scale-free error over
        ``group_sizes`` (:func:`~ustat_rl.theory.group_size.scale_free_curve`), the curve the
        best size and, for rules other than GRPO, the advice are read from; else ``None``.
    """

    budget: int
    estimator: str
    level: float
    n_prompts: int
    n_samples: int
    n_columns: int
    sketch_kind: str
    constants: dict
    gstar: dict
    best_group_size: int
    best_group_size_any: int | None
    group_sizes: list
    mse: dict
    grpo_loses: list
    prompts_grpo_loses: list
    binary: bool
    all_equal: list | None
    all_equal_unbiased: list | None
    prompts_to_halve: float
    recommended_group_size: int
    worst_excess: float
    bounded: bool
    prompts_to_bound: float
    gstar_errors: dict | None = None
    grpo_margin: dict | None = None
    grpo_verdict: list = field(default_factory=list)
    small_pilot: bool = False
    group_size: owner.GroupSizeAnswer | None = field(default=None, repr=False, compare=False)
    critical_rollouts: dict | None = None
    target: str = "mse"
    scale_free: list | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict: NaN as ``null``, ``inf`` as a string (:func:`ustat_rl.formatting.json_ready`)."""
        out = asdict(self)
        out.pop("group_size")  # its fields are the report's own
        return _json_ready(out)


_json_ready = json_ready


def all_equal_fraction(successes, group_size: np.ndarray, sizes: np.ndarray):
    """Prompt average of ``p^G + (1 - p)^G``, unbiased where possible
    (:func:`all_equal_by_prompt` averaged over the prompts).

    Parameters
    ----------
    successes : ndarray (P,)
        ``m_a``, successes among ``n_a`` pilot samples of prompt ``a``.
    group_size : ndarray (P,)
        ``n_a``.
    sizes : ndarray (n_G,)
        Group sizes ``G``.

    Returns
    -------
    fraction : ndarray (n_G,)
    unbiased : ndarray of bool (n_G,)

    Notes
    -----
    For ``G <= n_a``, ``C(m, G)/C(n, G)`` is the U-statistic of the kernel "all of ``G``
    distinct samples succeed", unbiased for ``p^G``; no unbiased estimator of ``p^G`` exists
    from ``n < G`` samples (its expectation would be a polynomial in ``p`` of degree ``<= n``),
    so larger ``G`` fall back to the plug-in ``(m/n)^G``.
    """
    per_prompt, unbiased = all_equal_by_prompt(successes, group_size, sizes)
    return per_prompt.mean(axis=0), np.all(unbiased, axis=0)


def all_equal_by_prompt(successes, group_size, sizes):
    """Each prompt's estimate of ``p^G + (1 - p)^G`` ``(P, n_G)`` and whether it is the
    U-statistic ``(C(m, G) + C(n - m, G))/C(n, G)`` (``G <= n_a``) or the plug-in ``(P, n_G)``;
    arguments as :func:`all_equal_fraction`'s."""
    m = np.asarray(successes, dtype=np.float64)[:, None]
    n = np.asarray(group_size, dtype=np.float64)[:, None]
    G = np.asarray(sizes, dtype=np.float64)[None, :]

    def log_choose(a, b):
        return gammaln(a + 1.0) - gammaln(b + 1.0) - gammaln(a - b + 1.0)

    def ratio(k):  # C(k, G)/C(n, G), zero where k < G
        with np.errstate(invalid="ignore"):
            out = np.exp(log_choose(k, np.minimum(G, k)) - log_choose(n, G))
        return np.where(k >= G, out, 0.0)

    unbiased = G <= n  # (P, n_G)
    plug = np.column_stack([all_equal_probability(m[:, 0] / n[:, 0], int(g))
                            for g in np.ravel(sizes)])  # (P, n_G)
    exact = ratio(m) + ratio(n - m)
    return np.where(unbiased, exact, plug), unbiased


def gstar_report(rollouts: Rollouts, budget, estimator: str = "grpo",
                 level: float = 0.9, *, extra_estimators=(),
                 run_group_size=None, target: str = "mse") -> GStarReport:
    """Everything ``ustat-rl gstar`` reports for a pilot at budget ``N`` (C6, C10, C17, C32).

    Parameters
    ----------
    rollouts : Rollouts
    budget : int or BudgetGrid
        ``N = B G`` samples per step, at least 2 (a checked grid passes: :func:`~.budget_grid`).
    estimator : str or AdvantageRule
        The rule whose best group size is reported: one of :data:`REPORT_ESTIMATORS` (all four
        are always reported) or any registered rule (:func:`ustat_rl.advantages.get_rule`).
    level : float
        Two-sided interval level.
    extra_estimators : sequence of str or AdvantageRule
        Further rules whose predicted MSE curves ``mse`` lists too, without changing whose
        group size, advice and interval for ``G*`` are reported (the training monitor's window
        asks for GRPO's advice and the run rule's curve in one report).
    run_group_size : int, optional
        The ``G`` a run uses (at least 2), at which the critical rollout count is reported
        beside ``G*``'s; by default the recommended ``G``.
    target : {"mse", "scale_free"}
        What the advice minimises (docs/theory.md, "What a step's progress depends on"): the
        predicted MSE, or the plug-in scale-free error of ``estimator`` (a rule that scales its
        advantages read from the pilot's binary projection, as its MSE is). GRPO's two targets
        give the same advice.

    Returns
    -------
    GStarReport
    """
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a Rollouts, got {type(rollouts).__name__}")
    grid = owner.budget_grid(budget)  # checked once (a BudgetGrid passes as it is), grid built once
    budget, sizes = grid.budget, grid.group_sizes  # sizes (n_G,): the divisors >= 2 of N
    rule = get_rule(estimator, "estimator")
    estimator = rule.name
    if run_group_size is not None:
        run_group_size = as_int(run_group_size, "run_group_size", 2)
    target = owner.check_advice_target(target)
    rules = {name: get_rule(name) for name in REPORT_ESTIMATORS}
    for extra in (rule,) + tuple(get_rule(e, "extra_estimators") for e in extra_estimators):
        rules.setdefault(extra.name, extra)
    names = tuple(rules)
    binary = bool(np.all((rollouts.reward == 0.0) | (rollouts.reward == 1.0)))
    for name, spec in rules.items():
        check_pilot_rule(name, spec, binary)
    check_degenerate(rollouts)
    stats = pilot_statistics(rollouts)
    moments = estimate_moments(stats)

    # the jackknife needs a statistic affine in the moments: the affine rules' MSEs are; a
    # scaled rule's plug-in MSE (binary rewards, section 7) is reported without an interval
    affine = tuple(e for e in names if rules[e].is_affine)
    scaled = tuple(e for e in names if not rules[e].is_affine)

    def curves(m, chosen=affine):
        out = [owner.fixed_budget_curve(m, rules[e], budget, sizes) for e in chosen]
        if chosen is affine:  # MSE_vanilla - MSE_GRPO, affine too: its own interval (C10)
            out.append(owner.fixed_budget_curve(m, rules["vanilla"], budget, sizes)
                       - owner.fixed_budget_curve(m, rules["grpo"], budget, sizes))
        return np.concatenate(out)

    n_G = sizes.size
    iid = stats.prompt_prob is None and stats.n_prompts >= 3
    intervals: PilotIntervals | None = pilot_intervals(stats, level) if iid else None
    if iid:
        check_resolved(intervals)
        est, p_se, s_se = jackknife(stats, curves)
        # degrees of freedom of the projection part: its resampled units (blocks of a factored
        # sketch, else columns), as in pilot_intervals
        k = block_labels(stats).shape[1] if stats.sketched else None
        parts = [student_interval(e, p, s, level, stats.n_prompts, k) for e, p, s in zip(est, p_se, s_se)]
        low, high = np.array([p.low for p in parts]), np.array([p.high for p in parts])
    else:
        est = curves(moments)
        low = high = np.full(est.shape, math.nan)
    grpo_margin = {"estimate": est[-n_G:].tolist(), "low": low[-n_G:].tolist(),
                   "high": high[-n_G:].tolist()}
    est, low, high = est[:-n_G], low[:-n_G], high[:-n_G]
    # a verdict needs an interval that covers: below SMALL_PILOT_PROMPTS prompts the jackknife's
    # may not (docs/theory.md C32), so a small pilot's reads "cannot tell"
    small = intervals is not None and intervals.small_pilot
    verdict = ["cannot tell" if small else margin_verdict(lo, hi)
               for lo, hi in zip(grpo_margin["low"], grpo_margin["high"])]
    if scaled:
        plug_in = curves(binary_projection(moments), scaled)
        est, nan = np.concatenate([est, plug_in]), np.full(plug_in.shape, math.nan)
        low, high = np.concatenate([low, nan]), np.concatenate([high, nan])
    mse = {e: {"estimate": est[i * n_G:(i + 1) * n_G].tolist(),
               "low": low[i * n_G:(i + 1) * n_G].tolist(),
               "high": high[i * n_G:(i + 1) * n_G].tolist()}
           for i, e in enumerate(affine + scaled)}
    mse = {e: mse[e] for e in names}
    point = scaling_constants(moments)
    vanilla, grpo = np.array(mse["vanilla"]["estimate"]), np.array(mse["grpo"]["estimate"])
    margin = per_prompt_mse(moments, "vanilla", sizes) - per_prompt_mse(moments, "grpo", sizes)
    all_equal = unbiased = None
    if binary:
        _, index = rollouts.groups()
        successes = np.bincount(index, rollouts.reward, stats.n_prompts)
        frac, flags = all_equal_fraction(successes, stats.group_size, sizes)
        all_equal, unbiased = frac.tolist(), flags.tolist()
    constants = _constants_dict(point, intervals)
    advised = intervals is not None and estimator == "grpo"
    free = None
    if target == "scale_free":
        free = owner.scale_free_curve(moments if rule.is_affine else binary_projection(moments),
                                      rule, budget, sizes)
    answer = owner.group_size_answer(
        grid, point, curve=mse[estimator]["estimate"] if free is None else free, estimator=rule,
        ratio=regret_interval(intervals) if advised else None,
        gstar_interval=((constants["gstar"]["low"], constants["gstar"]["high"])
                        if intervals is not None else None),
        grad_norm_sq=moments.grad_norm_sq, target=target)
    advice = pilot_advice(intervals, answer) if advised else None
    bounded = advice.bounded if advised else bool(np.isfinite(constants["gstar"]["estimate"]))
    halve = (prompts_to_halve_width(intervals.ratio, stats.n_prompts)
             if intervals is not None and intervals.bounded else math.nan)
    return GStarReport(
        budget=budget, estimator=estimator, level=level, n_prompts=stats.n_prompts,
        n_samples=rollouts.n_samples, n_columns=stats.n_columns,
        sketch_kind=rollouts.sketch_kind, constants=constants["constants"],
        gstar=constants["gstar"], best_group_size=answer.best_group_size,
        best_group_size_any=answer.best_group_size_any, group_sizes=sizes.tolist(), mse=mse,
        grpo_loses=sizes[grpo > vanilla].tolist(),
        prompts_grpo_loses=np.mean(margin < 0.0, axis=0).tolist(), binary=binary,
        all_equal=all_equal, all_equal_unbiased=unbiased,
        prompts_to_halve=halve, recommended_group_size=answer.recommended_group_size,
        worst_excess=answer.worst_excess, bounded=bounded,
        prompts_to_bound=advice.prompts_to_bound if advised else math.nan,
        gstar_errors=intervals.fieller_inputs() if intervals is not None else None,
        grpo_margin=grpo_margin if intervals is not None else None, grpo_verdict=verdict,
        small_pilot=bool(intervals is not None and intervals.small_pilot), group_size=answer,
        critical_rollouts=_critical_rollouts(stats if iid else None, answer, point,
                                             run_group_size, level),
        target=target, scale_free=None if free is None else free.tolist())


def _critical_rollouts(stats, answer: owner.GroupSizeAnswer, constants, run_group_size,
                       level) -> dict:
    """The report's ``critical_rollouts``: at the run's (or the recommended) ``G`` and at
    ``min(G*, N)``, with the pilot's intervals
    (:func:`~ustat_rl.pilot.critical_rollouts.critical_rollout_intervals`) when it has them,
    else the answer's point counts with NaN intervals (a weighted prompt set)."""
    at_recommended, at_gstar = answer.critical_rollouts
    out = {"run_label": "recommended" if run_group_size is None else "run"}
    cells = (("run", at_recommended, run_group_size or at_recommended.group_size),
             ("gstar", at_gstar, at_gstar.group_size))
    sizes = [G for _, _, G in cells if not math.isnan(G)]
    found = iter(critical_rollout_intervals(stats, sizes, level)
                 if stats is not None else ())  # one jackknife for both G
    for key, point, G in cells:
        if math.isnan(G):
            out[key] = None
        elif stats is not None:
            out[key] = next(found).to_dict()
        else:
            if G != point.group_size:  # the run's G: the same formula at the answer's inputs
                point = owner.critical_rollouts(constants.c1, constants.c2, constants.c3,
                                                point.grad_norm_sq, G)
            out[key] = _point_dict(point)
    return out


def _point_dict(point: owner.CriticalRollouts) -> dict:
    """A count without intervals, laid out as
    :meth:`~ustat_rl.pilot.critical_rollouts.CriticalRolloutIntervals.to_dict`."""
    nan = math.nan
    out = {"group_size": point.group_size, "note": point.note}
    for name in ("inter", "intra", "total"):
        out[name] = {"estimate": getattr(point, name), "low": nan, "high": nan, "std_error": nan}
    out["grad_norm_sq"] = {"estimate": point.grad_norm_sq, "low": nan, "high": nan,
                           "std_error": nan}
    out["noise"] = {"estimate": point.noise, "low": nan, "high": nan, "std_error": nan}
    return out


def margin_verdict(low: float, high: float) -> str:
    """GRPO against vanilla at one ``G`` from the interval ``[low, high]`` for
    ``MSE_vanilla - MSE_GRPO``: ``"wins"`` above 0, ``"loses"`` below 0, else ``"cannot tell"``
    (an interval holding 0, a missing one (NaN) or a zero-width one)."""
    if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
        return "cannot tell"
    return "wins" if low > 0.0 else "loses" if high < 0.0 else "cannot tell"


def check_resolved(intervals: PilotIntervals) -> None:
    """Refuse, in one ``ValueError``, a pilot whose interval for a constant has zero width before
    it is cut at 0 (no standard error, nothing widening it): such a pilot cannot tell that
    constant from its estimate, so no verdict or advice may rest on it."""
    for name, label in (("c1", "c1"), ("c2", "c2"), ("c3", "c3'")):
        part = getattr(intervals, name)
        if not (part.std_error > 0.0 or part.high > max(part.estimate, 0.0)):
            raise ValueError(
                f"`rollouts`: the pilot cannot tell {label} from {max(part.estimate, 0.0):.3g}: "
                f"its interval has zero width (the {intervals.n_prompts} prompts' estimates "
                "leave no spread to measure), so G* and the advice cannot be estimated; pilot "
                "prompts whose rewards vary within their group are needed")


def check_signal(rollouts: Rollouts, consequence: str) -> None:
    """Raise one ``ValueError`` when a pilot carries no gradient signal, saying ``consequence``.

    With all rewards equal every advantage is 0, and with all scores 0 every score is: either
    way every group's gradient estimate is 0 at every group size, so nothing that depends on
    the group size (``G*``, an allocation) can be estimated. The same holds when each group's
    rewards are equal within the group (some all 0, some all 1): every group-relative
    advantage is then 0 and the pilot shows no within-prompt reward variance. One rule for ``ustat-rl gstar``
    (:func:`check_degenerate`) and ``ustat-rl allocate``
    (:func:`ustat_rl.pilot.allocation.pilot_allocation`).
    """
    reward = rollouts.reward
    if np.all(reward == reward[0]):
        raise ValueError(f"`rollouts`: all rewards are equal (every reward equals {reward[0]:g}), "
                         f"so the pilot carries no gradient signal and {consequence}; pilot "
                         "prompts whose rewards vary are needed")
    if not np.any(rollouts.score):
        raise ValueError(f"`rollouts`: every score is 0, so the pilot carries no gradient signal "
                         f"and {consequence}; check that the scores were recorded")
    ids, index = rollouts.groups()
    first = np.empty(ids.size)
    first[index[::-1]] = reward[::-1]  # (P,) each group's first reward
    spread = np.bincount(index, np.abs(reward - first[index]), ids.size)  # (P,)
    if not np.any(spread > 0.0):
        raise ValueError(f"`rollouts`: every group's rewards are all equal (each of the "
                         f"{spread.size} prompts got one reward on all its samples), so every "
                         f"group-relative advantage in the pilot is 0 and {consequence}; pilot "
                         "prompts whose rewards vary within their group are needed")


def check_degenerate(rollouts: Rollouts) -> None:
    """Raise one ``ValueError`` naming what a pilot lacks for ``G*`` (C32), before any work.

    Equal rewards everywhere or all-zero scores leave no gradient signal (``c1 = c3' = 0``,
    :func:`check_signal`), and i.i.d. prompts need at least 3 for the jackknife over prompts.
    """
    check_signal(rollouts, "G* cannot be estimated")
    n_prompts = np.unique(rollouts.prompt_id).size
    if rollouts.prompt_weight is None and n_prompts < 3:
        raise ValueError(f"`rollouts` must hold >= 3 i.i.d. prompts for intervals (the "
                         f"jackknife over prompts), got {n_prompts}")


def _constants_dict(point, intervals: PilotIntervals | None) -> dict:
    if intervals is None:
        g = owner.gstar_or_nan(point.c1, point.c3)
        return {"constants": {name: {"estimate": getattr(point, name)}
                              for name in ("c1", "c2", "c3")},
                "gstar": {"estimate": g}}
    return {"constants": {name: asdict(getattr(intervals, name)) for name in ("c1", "c2", "c3")},
            "gstar": asdict(intervals.optimal_group_size)}
