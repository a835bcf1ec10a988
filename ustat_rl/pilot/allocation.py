"""Group sizes from a pilot, with their MSE ratio to uniform (docs/theory.md C40, C42).

A pilot (:class:`~ustat_rl.pilot.Rollouts`) gives unbiased per-prompt moments
(:func:`~ustat_rl.pilot.estimate_moments`), so every allocation of
:mod:`ustat_rl.theory.allocation` and :mod:`ustat_rl.theory.allocation_baselines` can be computed
and scored on them. Two numbers come out:

* the **plug-in** group sizes and MSE of each allocation, from the whole pilot: the sizes to use;
* the **cross-fitted ratio** ``MSE(allocation)/MSE(uniform)`` with an interval. Scoring an allocation
  on the moments it was fitted to is optimistic (it fits their noise), so each prompt's
  rollouts are split in two halves (alternate samples): the sizes come from half A, the ratio
  is estimated on half B, whose moments are independent of the sizes and unbiased for them.

For an unbiased advantage rule the batch MSE is ``sum_x f^2 MSE_x(G_x)``, a sum over prompts, so with
``t_x`` and ``u_x`` the half-B terms of the allocation and of uniform the ratio is
``R = sum t / sum u``. Its standard error is the delta method over prompts drawn i.i.d. (as a
pilot's are): ``se^2 = sum_x (t_x - R u_x)^2 / (P (P - 1) u_bar^2)``, and the interval uses the
Student quantile of :func:`ustat_rl.pilot.uncertainty.student_quantile` with ``m - 1`` degrees of
freedom, ``m`` the prompts whose rewards vary within the scoring half (a prompt whose rewards
are all equal there adds a term the sizes barely move, so the spread comes from the others;
``m = P`` when every prompt's rewards vary). With ``m < 2`` the interval is ``[0, inf)``: the
pilot cannot tell. (The pilot's jackknife, :func:`ustat_rl.pilot.jackknife`, covers statistics affine in
the prompt averages; a ragged allocation's MSE is not one, so it does not apply.) The interval
is for the sizes fitted on half the pilot, which can only be noisier than the plug-in sizes.
A ratio of MSEs is positive, so the interval's lower end is clipped at 0; when either half-B sum
is not positive (the unbiased per-prompt terms can be negative, and are noise then) the ratio is
undefined (NaN). Its verdict is :func:`ustat_rl.stats.intervals.ratio_verdict`'s: a gain is shown
only by an interval below 1, and an interval above 1 says the allocation is worse than uniform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stats.intervals import ratio_verdict
from ..theory.allocation import per_prompt_terms, rule_is_unbiased, rule_min_group_size
from ..theory.allocation_baselines import BASELINE_ALLOCATIONS, compare_allocations

__all__ = ["RatioInterval", "PilotAllocation", "MIN_SPLIT_GROUP", "split_rollouts",
           "pilot_allocation", "format_pilot_allocation", "loglinear_pilot"]

#: Samples per prompt needed for two halves of at least three (the order-3 kernels).
MIN_SPLIT_GROUP = 6



@dataclass(frozen=True)
class RatioInterval:
    """Cross-fitted ``MSE(allocation)/MSE(uniform)``: estimate, standard error and interval (all NaN
    when the ratio is undefined, module docstring)."""

    estimate: float
    std_error: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        """``"gain shown"``, ``"worse than uniform"``, ``"within the noise"`` or ``"undefined"``
        (:func:`ustat_rl.stats.intervals.ratio_verdict`)."""
        return ratio_verdict(self.estimate, self.low, self.high, "uniform")

    @property
    def within_noise(self) -> bool:
        """Whether the interval holds 1 (neither a gain nor a loss shown at this level)."""
        return self.verdict == "within the noise"


@dataclass(frozen=True)
class PilotAllocation:
    """What ``ustat-rl allocate`` reports.

    Attributes
    ----------
    prompt_ids : ndarray (P,)
        The pilot's prompt ids, sorted; every size array is in this order.
    estimator : str
    budget : int
    level : float
    allocations : dict of str to Allocation
        ``"optimal"`` and each reward-only allocation, from the whole pilot (plug-in MSEs).
    ratios : dict of str to RatioInterval
        Cross-fitted ratio to uniform for ``"optimal"`` and each non-uniform allocation; empty
        when the advantage rule is biased or a prompt has fewer than :data:`MIN_SPLIT_GROUP` samples.
    note : str
        Why ``ratios`` is empty, if it is.
    """

    prompt_ids: np.ndarray
    estimator: str
    budget: int
    level: float
    allocations: dict
    ratios: dict
    note: str = ""

    def to_dict(self) -> dict:
        """JSON-ready: sorted prompt ids, and each allocation's group sizes in that order (an
        undefined ratio's numbers as ``null``, :func:`ustat_rl.formatting.json_ready`)."""
        from ..formatting import json_ready

        return json_ready({
            "estimator": self.estimator, "budget": self.budget, "level": self.level,
            "prompt_ids": [p.item() for p in self.prompt_ids],
            "group_sizes": {k: a.group_sizes.tolist() for k, a in self.allocations.items()},
            "predicted_mse": {k: a.mse for k, a in self.allocations.items()},
            "ratio_to_uniform": {k: {"estimate": r.estimate, "std_error": r.std_error,
                                     "low": r.low, "high": r.high,
                                     "within_noise": r.within_noise, "verdict": r.verdict}
                                 for k, r in self.ratios.items()},
            "note": self.note,
        })


def split_rollouts(rollouts):
    """Two :class:`Rollouts` holding alternate samples of every prompt (ranks 0, 2, ... and
    1, 3, ... within each group, in file order)."""
    from .rollouts import Rollouts

    ids, index = rollouts.groups()
    order = np.argsort(index, kind="stable")
    rank = np.empty(index.size, dtype=np.int64)
    starts = np.searchsorted(index[order], np.arange(ids.size))
    rank[order] = np.arange(index.size) - starts[index[order]]
    halves = []
    for parity in (0, 1):
        keep = rank % 2 == parity
        weight = None if rollouts.prompt_weight is None else rollouts.prompt_weight[keep]
        halves.append(Rollouts(rollouts.prompt_id[keep], rollouts.reward[keep],
                               rollouts.score[keep], weight, rollouts.sketch_kind,
                               rollouts.sketch_seed, rollouts.param_dim, rollouts.model_name))
    return halves


def _ratio(terms, terms_uniform, level, varied: int) -> RatioInterval:
    """The cross-fitted ratio with ``m - 1 = varied - 1`` degrees of freedom (module docstring)."""
    from .uncertainty import student_quantile

    P = terms.size
    if not (terms.sum() > 0.0 and terms_uniform.sum() > 0.0):  # noise, or NaN: no ratio
        return RatioInterval(math.nan, math.nan, math.nan, math.nan)
    ratio = float(terms.sum() / terms_uniform.sum())
    resid = terms - ratio * terms_uniform
    se = float(math.sqrt(np.sum(resid**2) / (P * (P - 1.0))) / terms_uniform.mean())
    if varied < 2:  # no spread over prompts to judge the ratio by
        return RatioInterval(ratio, se, 0.0, math.inf)
    t = student_quantile(level, se**2, 0.0, varied, None)
    return RatioInterval(ratio, se, max(0.0, ratio - t * se), ratio + t * se)


def pilot_terms(moments, estimator, sizes):
    """``f^2 MSE_x(G_x)`` for each prompt, ``(P,)``, for an unbiased advantage rule."""
    low = rule_min_group_size(estimator)
    _, h, _ = per_prompt_terms(moments, estimator, low, int(sizes.max()))
    return h[np.arange(sizes.size), sizes - low]


def pilot_allocation(rollouts, budget, estimator: str = "grpo", level: float = 0.9,
                     allocations=BASELINE_ALLOCATIONS) -> PilotAllocation:
    """Every allocation's group sizes from a pilot, with cross-fitted ratios to uniform (C40).

    Parameters
    ----------
    rollouts : Rollouts
        i.i.d. prompts, each with at least 3 samples (6 for the ratio intervals).
    budget : int
        Rollouts per batch over the pilot's prompts.
    estimator : str
        The advantage rule (:func:`ustat_rl.theory.allocation.rule_terms`).
    level : float
        Two-sided level of the ratio intervals.
    allocations : sequence of str
        The reward-only allocations scored beside ``"optimal"`` (names of
        :data:`~ustat_rl.theory.allocation_baselines.BASELINE_ALLOCATIONS`).

    Examples
    --------
    >>> from ustat_rl.policies.examples import heterogeneous_score_bandit
    >>> bandit, theta = heterogeneous_score_bandit()
    >>> pilot = loglinear_pilot(bandit, theta, 8, rng=0)
    >>> out = pilot_allocation(pilot, 48)
    >>> int(out.allocations["optimal"].group_sizes.sum()), sorted(out.ratios)
    (48, ['neyman', 'optimal', 'sgpo', 'vip'])
    """
    from .estimate import pilot_statistics, rule_moments
    from .report import check_signal

    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must lie strictly between 0 and 1, got {level}")
    stats = pilot_statistics(rollouts)
    check_signal(rollouts, "there is nothing to allocate (every group size gives the same zero "
                           "gradient)")
    scored = compare_allocations(rule_moments(stats, estimator), estimator, budget, allocations)
    ratios, note = {}, ""
    if not rule_is_unbiased(estimator):
        note = f"no ratio intervals: {estimator!r} is biased, so its MSE is not a sum over prompts"
    elif stats.n_prompts < 3:
        note = "no ratio intervals: they need at least 3 prompts"
    elif stats.group_size.min() < MIN_SPLIT_GROUP:
        note = (f"no ratio intervals: cross-fitting needs >= {MIN_SPLIT_GROUP} samples per "
                f"prompt, the smallest group has {stats.group_size.min()}")
    else:
        halves = split_rollouts(rollouts)
        varied = _varied_prompts(halves[1])
        half_a, half_b = (rule_moments(h, estimator) for h in halves)
        fitted = compare_allocations(half_a, estimator, budget, allocations)
        uniform = pilot_terms(half_b, estimator, fitted["uniform"].group_sizes)
        for name, alloc in fitted.items():
            if name != "uniform":
                ratios[name] = _ratio(pilot_terms(half_b, estimator, alloc.group_sizes), uniform,
                                      level, varied)
        if varied < stats.n_prompts:
            note = (f"{varied} of {stats.n_prompts} prompts have rewards that vary within the "
                    "half of their group the ratios are scored on: the intervals take "
                    f"{max(varied - 1, 0)} degrees of freedom"
                    + (", so they cannot tell" if varied < 2 else ""))
    return PilotAllocation(stats.prompt_ids, estimator, int(budget), float(level), scored,
                           ratios, note)


def _varied_prompts(rollouts) -> int:
    """How many prompts have rewards that are not all equal within their group."""
    _, index = rollouts.groups()
    low = np.full(index.max() + 1, np.inf)
    high = np.full(index.max() + 1, -np.inf)
    np.minimum.at(low, index, rollouts.reward)
    np.maximum.at(high, index, rollouts.reward)
    return int(np.sum(high > low))


#: The last line of the table, by the verdict on the optimal sizes' cross-fitted ratio.
_ADVICE = {
    "gain shown": "the pilot shows a gain: use the optimal sizes",
    "within the noise": "the pilot does not show a gain over uniform at this level: keep "
                        "uniform, or collect more samples per prompt",
    "worse than uniform": "the optimal sizes fitted on half the pilot are worse than uniform on "
                          "the other half: keep uniform (the pilot's moments are too noisy to "
                          "allocate by), or collect more samples per prompt",
    "undefined": "the pilot cannot compare the optimal sizes with uniform (a cross-fitted MSE "
                 "estimate is not positive): keep uniform, or collect more samples per prompt",
    "zero width": "the pilot cannot compare the optimal sizes with uniform (the cross-fitted "
                  "ratio's interval has zero width): keep uniform, or collect more samples per "
                  "prompt",
    None: "the pilot cannot tell whether the optimal sizes beat uniform (no cross-fitted "
          "ratio): keep uniform",
}


def format_pilot_allocation(report: PilotAllocation, max_rows: int = 40) -> str:
    """Plain-text table: sizes per prompt for every allocation, then predicted MSEs and ratios.

    A plug-in MSE that is not positive (an unbiased estimate below what the pilot resolves) is
    shown as ``<= 0`` with no ratio to uniform; a cross-fitted ratio carries the verdict of
    :func:`ustat_rl.stats.intervals.ratio_verdict`, and an undefined one no numbers.
    """
    names = list(report.allocations)
    lines = [f"allocation of N = {report.budget} rollouts over {report.prompt_ids.size} prompts, "
             f"estimator {report.estimator!r}",
             "prompt".ljust(14) + "".join(n.rjust(9) for n in names)]
    for i, pid in enumerate(report.prompt_ids[:max_rows]):
        lines.append(str(pid.item())[:13].ljust(14)
                     + "".join(str(report.allocations[n].group_sizes[i]).rjust(9) for n in names))
    if report.prompt_ids.size > max_rows:
        lines.append(f"... {report.prompt_ids.size - max_rows} more prompts (see --json)")
    uniform = report.allocations["uniform"].mse
    lines += ["", f"{'allocation':<11}{'plug-in MSE':>13}{'/uniform':>10}   cross-fitted ratio "
                  f"({report.level:.0%} interval)",
              "(plug-in: scored on the moments it was fitted to, optimistic for 'optimal'; "
              "cross-fitted: sizes from half the pilot, scored on the other half)"]
    for name in names:
        mse = report.allocations[name].mse
        shown = f"{mse:.4g}" if mse > 0.0 else "<= 0"
        versus = f"{mse / uniform:.3f}" if mse > 0.0 and uniform > 0.0 else "-"
        r = report.ratios.get(name)
        if r is None:
            extra = "-" if name == "uniform" else "not available"
        elif r.verdict == "undefined":
            extra = ("undefined: a cross-fitted MSE estimate is not positive"
                     if not r.estimate > 0 else "undefined: its interval has zero width "
                     f"({r.estimate:.3g} at both ends)")
        else:
            extra = f"{r.estimate:.3f} [{r.low:.3f}, {r.high:.3f}]  {r.verdict}"
        lines.append(f"{name:<11}{shown:>13}{versus:>10}   {extra}")
    if any(a.mse <= 0.0 for a in report.allocations.values()):
        lines.append("<= 0: the unbiased estimate of that MSE is not positive (the MSE is below "
                     "what the pilot resolves); '/uniform' is shown only where both are positive")
    if report.note:
        lines.append(report.note)
    best = report.ratios.get("optimal")
    key = None if best is None else best.verdict
    if key == "undefined" and best.estimate > 0:  # a positive ratio whose interval is a point
        key = "zero width"
    lines.append(_ADVICE[key])
    return "\n".join(lines)


def loglinear_pilot(bandit, theta, group_size, rng):
    """A pilot with one group of ``group_size`` per prompt of a log-linear bandit (i.i.d. ids).

    The groups are the bandit's prompts in order (ids ``0..P-1``), full scores; a worked
    example for ``ustat-rl allocate`` and for the tests.
    """
    from .._validation import as_int, as_rng
    from ..montecarlo.allocation import draw_groups
    from .rollouts import Rollouts

    group_size = as_int(group_size, "group_size", 3)
    rng = as_rng(rng)
    state = bandit.state(theta)
    lo, hi = bandit.reward_values
    ids, rewards, scores = [], [], []
    for x in range(bandit.n_prompts):
        action, success = draw_groups(rng, state.policy[x], bandit.reward_prob[x], 1, group_size)
        ids.append(np.full(group_size, x))
        rewards.append(lo + (hi - lo) * success[0])
        scores.append(state.score[x][action[0]])
    return Rollouts(np.concatenate(ids), np.concatenate(rewards), np.concatenate(scores),
                    param_dim=bandit.dim, model_name=repr(bandit))

