"""What a training run's rewards say without scores (docs/theory.md C24, C40).

From grouped rewards alone (:class:`~ustat_rl.frameworks.GroupedRewards`, e.g. a verl dump or a
TRL completion log) three things follow; everything else needs the scores (:data:`NEEDS_SCORES`):

* the **success-rate distribution**: each group's mean reward ``p_hat_a = m_a / n_a``;
* the **all-equal fraction by G**, the share of groups whose rewards are all equal, which a
  group-normalised rule (TRL's ``frac_reward_zero_std``) turns into zero advantages. *Predicted*
  for binary rewards as the prompt average of ``p^G + (1 - p)^G`` by
  :func:`ustat_rl.pilot.report.all_equal_fraction` (unbiased for ``G <= n_a``, plug-in above).
  *Observed* by a second route: each group's rows cut into ``floor(n_a / G)`` disjoint blocks of
  ``G`` in row order and the all-equal blocks counted, averaged per group and then over the
  groups with ``n_a >= G``, with the standard error of that mean over groups. Both estimate the
  same quantity; at ``G = n_a`` they coincide by construction (one block, the group itself, and
  the U-statistic of one full group is its indicator), so the comparison carries information
  for ``G < n_a`` only, and ``G > n_a`` is a prediction with no observation. Also listed:
  ``(N/G)(1 - a(G))``, the expected number of groups with unequal rewards in a step of ``N``
  completions.
* the **reward-only allocations** of :mod:`ustat_rl.theory.allocation_baselines` (uniform,
  Neyman, VIP, sGPO), whose group sizes depend on ``p`` and ``Var(Z | x)`` only
  (:func:`~ustat_rl.theory.allocation_baselines.baseline_group_sizes`), for the groups of one step.
  Their predicted MSEs, and the MSE-optimal allocation, need scores.

Where the log has the trainer's advantages (TRL's ``advantage`` column), the registered rules
that reproduce them on the rebuilt groups are listed (:func:`matching_rules`): a check of the
group reconstruction and a reading of which rule the run used.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..formatting import json_ready
from ..pilot.estimate import reward_statistics
from ..pilot.report import all_equal_fraction
from ..theory.group_size import budget_grid
from .grouped import NEEDS_SCORES, GroupedRewards, all_equal_by_group

__all__ = ["RewardsReport", "rewards_report", "format_rewards_report", "observed_all_equal",
           "matching_rules", "SUCCESS_BINS"]

#: Bins of the success-rate histogram: exactly 0, four open quarters, exactly 1.
SUCCESS_BINS = ("0", "(0, 1/4]", "(1/4, 1/2]", "(1/2, 3/4]", "(3/4, 1)", "1")


@dataclass(frozen=True)
class _RewardMoments:
    """The fields of :class:`~ustat_rl.theory.PromptMoments` that reward-only allocations read."""

    prompt_prob: np.ndarray
    value: np.ndarray
    reward_var: np.ndarray

    @property
    def n_prompts(self) -> int:
        return int(self.value.size)


@dataclass(frozen=True)
class RewardsReport:
    """What ``ustat-rl rewards`` prints (module docstring).

    Attributes
    ----------
    source : str
    budget : int
        ``N``, completions per step, whose divisors are the ``G`` of ``by_group_size``.
    n_samples, n_groups, n_steps : int
    group_sizes : list of int
        The distinct group sizes in the table.
    run_group_size : int or None
        The run's ``G`` when every group has the same size.
    binary : bool
        Whether every reward is 0 or 1 (the predicted all-equal fraction needs it).
    success_rate : dict
        ``mean``, ``quantiles`` (10, 25, 50, 75, 90 %) and ``histogram`` over
        :data:`SUCCESS_BINS` (binary rewards) of the per-group mean reward.
    by_group_size : dict of lists
        Over the divisors ``G >= 2`` of ``budget``: ``group_size``, ``all_equal_predicted``
        (``None`` unless binary), ``predicted_unbiased``, ``all_equal_observed``,
        ``observed_std_error``, ``observed_groups``, ``informative_groups``.
    steps : list of dict
        Per training step: ``step``, ``groups``, ``mean_reward``, ``all_equal`` (the observed
        fraction of its groups whose rewards are all equal).
    allocation_step : int or None
        The step whose groups the allocations split ``budget`` over (``None``: all groups).
    allocation : dict
        Allocation name to group sizes, in the sorted order of ``allocation_groups``.
    allocation_groups : list of str
    allocation_note : str
        Why ``allocation`` is empty, if it is.
    estimator : str or None
        The run's advantage rule (registry name), checked against the groups.
    estimator_zero_variance : str
        What that rule gives an all-equal group.
    needs_scores : list of str
        What the rewards cannot tell (:data:`~ustat_rl.frameworks.grouped.NEEDS_SCORES`).
    logged_rule_matches : list of str or None
        Registered rules that reproduce the logged advantages (:func:`matching_rules`).
    has_scores : bool
        Whether the table carries per-sample scores (then ``ustat-rl gstar`` gives the rest).
    """

    source: str
    budget: int
    n_samples: int
    n_groups: int
    n_steps: int
    group_sizes: list
    run_group_size: int | None
    binary: bool
    success_rate: dict
    by_group_size: dict
    steps: list
    allocation_step: int | None
    allocation: dict
    allocation_groups: list
    allocation_note: str
    estimator: str | None
    estimator_zero_variance: str
    needs_scores: list
    logged_rule_matches: list | None = None
    has_scores: bool = False

    def to_dict(self) -> dict:
        """JSON-ready (:func:`ustat_rl.formatting.json_ready`)."""
        return json_ready(asdict(self))


def observed_all_equal(table: GroupedRewards, sizes) -> dict:
    """All-equal fraction of disjoint blocks of ``G`` rows within groups (module docstring).

    Returns ``fraction``, ``std_error`` (over groups; NaN with fewer than two) and ``groups``
    (groups with ``n_a >= G``), each ``(n_G,)``.
    """
    _, index = table.groups()
    order = np.argsort(index, kind="stable")  # rows by group, row order kept within a group
    counts = np.bincount(index)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(index.size, dtype=np.int64)
    rank[order] = np.arange(index.size) - starts[index[order]]
    frac, se, used = [], [], []
    for G in np.ravel(sizes).astype(int):
        full = counts // G  # (P,) blocks per group
        keep = rank < full[index] * G
        if not np.any(keep):
            frac.append(math.nan), se.append(math.nan), used.append(0)
            continue
        key = index[keep] * (int(full.max()) + 1) + rank[keep] // G
        labels, block = np.unique(key, return_inverse=True)
        equal = all_equal_by_group(block, table.reward[keep], labels.size)
        group = labels // (int(full.max()) + 1)  # (blocks,)
        per_group = np.bincount(group, equal, counts.size)[full > 0] / full[full > 0]
        frac.append(float(per_group.mean()))
        se.append(float(per_group.std(ddof=1) / math.sqrt(per_group.size))
                  if per_group.size > 1 else math.nan)
        used.append(int(per_group.size))
    return {"fraction": np.array(frac), "std_error": np.array(se), "groups": np.array(used)}


#: Agreement of recomputed and logged advantages: the trainer works in float32 (2^-24
#: relative per operation, a few operations per advantage).
ADVANTAGE_RTOL = ADVANTAGE_ATOL = 1e-5


def matching_rules(table: GroupedRewards) -> list | None:
    """The registered rules whose advantages on the table's groups, step by step (a batch-scaled
    rule's batch is one step), equal the logged ones to :data:`ADVANTAGE_RTOL`; ``None`` when
    nothing was logged. A rule needing a reference value, or whose group sizes the table breaks,
    does not match."""
    if table.advantage is None:
        return None
    from ..advantages import RULES

    parts = [table] if table.step is None else [table.select_step(s) for s in np.unique(table.step)]
    found = []
    for rule in RULES.values():
        if rule.centring.reference_source is not None:
            continue
        try:
            ok = all(np.allclose(rule.advantages(part.reward, part.groups()[1]), part.advantage,
                                 rtol=ADVANTAGE_RTOL, atol=ADVANTAGE_ATOL) for part in parts)
        except ValueError:
            ok = False
        if ok:
            found.append(rule.name)
    return found


def _success_rate(value: np.ndarray, binary: bool) -> dict:
    quantiles = {f"{int(q * 100)}%": float(np.quantile(value, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)}
    histogram = None
    if binary:
        cuts = [np.count_nonzero(value == 0.0)]
        for lo, hi in ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75)):
            cuts.append(np.count_nonzero((value > lo) & (value <= hi)))
        cuts += [np.count_nonzero((value > 0.75) & (value < 1.0)), np.count_nonzero(value == 1.0)]
        histogram = dict(zip(SUCCESS_BINS, map(int, cuts)))
    return {"mean": float(value.mean()), "quantiles": quantiles, "histogram": histogram}


def _allocation(table: GroupedRewards, budget: int, allocation_estimator: str, step):
    from ..theory.allocation import rule_min_group_size
    from ..theory.allocation_baselines import BASELINE_ALLOCATIONS, baseline_group_sizes

    if step is None and table.step is not None:
        step = int(table.step.max())
    part = table if step is None else table.select_step(step)
    ids, index = part.groups()
    stats = reward_statistics(index, ids.size, part.reward, "`FILE`")
    moments = _RewardMoments(np.full(ids.size, 1.0 / ids.size), stats["value"],
                             stats["reward_var"])
    low = rule_min_group_size(allocation_estimator)
    if budget < low * ids.size:
        where = "" if step is None else f" of step {step}"
        note = (f"no allocation: `budget` {budget} is below {low} x {ids.size} groups{where}; "
                f"each group needs at least {low}")
        return step, {}, ids.tolist(), note
    sizes = {name: baseline_group_sizes(moments, name, budget, low)[0].tolist()
             for name in BASELINE_ALLOCATIONS}
    return step, sizes, ids.tolist(), ""


def rewards_report(table: GroupedRewards, budget, estimator: str | None = None,
                   allocation_estimator: str = "grpo",
                   allocation_step: int | None = None) -> RewardsReport:
    """Everything the rewards alone say about a run's group size (module docstring).

    Parameters
    ----------
    table : GroupedRewards
    budget : int
        ``N = B G``, completions per step (:func:`~ustat_rl.theory.group_size.budget_grid`).
    estimator : str, optional
        The run's advantage rule (e.g. ``"trl_group"``, ``"verl_grpo"``), looked up in the
        registry and checked against the groups (a rule that reshapes to ``(-1, G)`` needs
        equal group sizes).
    allocation_estimator : str
        The advantage rule whose smallest group bounds the allocations' sizes
        (:func:`~ustat_rl.theory.allocation.rule_min_group_size`).
    allocation_step : int, optional
        The step whose groups are allocated (default: the last one).

    Returns
    -------
    RewardsReport
    """
    if not isinstance(table, GroupedRewards):
        raise TypeError(f"`table` must be GroupedRewards, got {type(table).__name__}")
    grid = budget_grid(budget)  # checked once, its grid built once
    budget = grid.budget
    zero_variance = ""
    ids, index = table.groups()
    if estimator is not None:
        from ..advantages import get_rule

        found = get_rule(estimator, "estimator")
        found.check_inputs(table.reward, index)
        estimator, zero_variance = found.name, found.zero_variance
    sizes = grid.group_sizes  # (n_G,) divisors of N, >= 2
    n = table.group_sizes()
    stats = reward_statistics(index, ids.size, table.reward, "`FILE`")
    binary = table.binary
    predicted = unbiased = None
    if binary:
        frac, flags = all_equal_fraction(stats["s1"], n, sizes)
        predicted, unbiased = frac.tolist(), flags.tolist()
    observed = observed_all_equal(table, sizes)
    basis = np.array(predicted) if binary else observed["fraction"]
    by_g = {"group_size": sizes.tolist(), "all_equal_predicted": predicted,
            "predicted_unbiased": unbiased,
            "all_equal_observed": observed["fraction"].tolist(),
            "observed_std_error": observed["std_error"].tolist(),
            "observed_groups": observed["groups"].tolist(),
            "informative_groups": ((budget // sizes) * (1.0 - basis)).tolist()}
    steps = []
    group_step = table.group_steps()
    equal = observed_all_equal_groups(table)
    for s in ([None] if group_step is None else np.unique(group_step)):
        mine = np.ones(ids.size, bool) if s is None else group_step == s
        steps.append({"step": None if s is None else int(s), "groups": int(mine.sum()),
                      "mean_reward": float(stats["value"][mine].mean()),
                      "all_equal": float(equal[mine].mean())})
    step, alloc, alloc_ids, note = _allocation(table, budget, allocation_estimator,
                                               allocation_step)
    distinct = np.unique(n)
    return RewardsReport(
        source=table.source, budget=budget, n_samples=table.n_samples, n_groups=ids.size,
        n_steps=len(steps), group_sizes=distinct.tolist(),
        run_group_size=int(distinct[0]) if distinct.size == 1 else None, binary=binary,
        success_rate=_success_rate(stats["value"], binary), by_group_size=by_g, steps=steps,
        allocation_step=step, allocation=alloc, allocation_groups=alloc_ids,
        allocation_note=note, estimator=estimator, estimator_zero_variance=zero_variance,
        needs_scores=list(NEEDS_SCORES), logged_rule_matches=matching_rules(table),
        has_scores=table.score is not None)


def observed_all_equal_groups(table: GroupedRewards) -> np.ndarray:
    """Whether each whole group's rewards are all equal ``(P,)``, in the order of ``groups()``."""
    _, index = table.groups()
    return all_equal_by_group(index, table.reward, table.n_groups)


def _num(value, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.{digits}f}"


def _reward(value) -> str:
    """A reward (mean, quantile): three decimals at ordinary scales, four significant digits
    beyond them (a reward of 1e100 is not printed as a 100-digit number, nor 1e-9 as 0.000)."""
    value = float(value)
    if value == 0.0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.3f}"
    return f"{value:.4g}"


def format_rewards_report(report: RewardsReport, max_steps: int = 20) -> str:
    """Plain-text summary of a :class:`RewardsReport`."""
    sizes = ", ".join(map(str, report.group_sizes))
    lines = [f"{report.source}: {report.n_samples} completions in {report.n_groups} groups "
             f"over {report.n_steps} step(s); group sizes {sizes}; "
             f"{'binary' if report.binary else 'non-binary'} rewards"]
    if report.estimator:
        lines.append(f"advantage rule {report.estimator!r}: an all-equal group gets "
                     f"{report.estimator_zero_variance}")
    if report.logged_rule_matches is not None:
        names = ", ".join(report.logged_rule_matches) or (
            "none registered (a rule outside the registry, or groups rebuilt differently)")
        lines.append(f"logged advantages reproduced by: {names}")
    sr = report.success_rate
    q = "  ".join(f"{k} {_reward(v)}" for k, v in sr["quantiles"].items())
    lines += ["", f"{'success rate' if report.binary else 'group mean reward'} per group: "
                  f"mean {_reward(sr['mean'])}; quantiles {q}"]
    if sr["histogram"]:
        lines.append("  groups by success rate: " + "  ".join(
            f"{k}: {v}" for k, v in sr["histogram"].items()))
    by = report.by_group_size
    lines += ["", f"all-equal groups by G at N = {report.budget} (predicted, binary rewards "
                  "only: average of p^G + (1-p)^G, * = plug-in; observed: disjoint blocks of G, "
                  "+- 1 s.e.)",
              f"{'G':>6}{'predicted':>11}{'observed':>10}{'s.e.':>8}{'groups':>8}"
              f"{'informative groups per step':>30}"]
    for i, G in enumerate(by["group_size"]):
        pred = "-" if by["all_equal_predicted"] is None else (
            _num(by["all_equal_predicted"][i]) + ("" if by["predicted_unbiased"][i] else "*"))
        lines.append(f"{G:>6}{pred:>11}{_num(by['all_equal_observed'][i]):>10}"
                     f"{_num(by['observed_std_error'][i]):>8}{by['observed_groups'][i]:>8}"
                     f"{_num(by['informative_groups'][i], 1):>30}")
    if report.run_group_size is not None and report.binary:
        lines.append(f"(at the run's G = {report.run_group_size} predicted and observed coincide "
                     "by construction)")
    if by["predicted_unbiased"] is not None and not all(by["predicted_unbiased"]):
        lines.append("(* plug-in (m/n)^G + (1 - m/n)^G above the group size: it counts a group "
                     "with all rewards equal as all-equal at every G, so it overstates)")
    lines += ["", f"{'step':>8}{'groups':>8}{'mean reward':>13}{'all-equal':>11}"]
    for row in report.steps[-max_steps:]:
        label = "-" if row["step"] is None else str(row["step"])
        lines.append(f"{label:>8}{row['groups']:>8}{_reward(row['mean_reward']):>13}"
                     f"{row['all_equal']:>11.3f}")
    if len(report.steps) > max_steps:
        lines.append(f"(last {max_steps} of {len(report.steps)} steps; see --json)")
    lines.append("")
    if report.allocation:
        where = "" if report.allocation_step is None else f" of step {report.allocation_step}"
        lines.append(f"reward-only allocation of N = {report.budget} over the "
                     f"{len(report.allocation_groups)} groups{where} (sizes min/median/max):")
        for name, got in report.allocation.items():
            got = np.array(got)
            lines.append(f"  {name:<8} {got.min()}/{int(np.median(got))}/{got.max()}")
    else:
        lines.append(report.allocation_note)
    if report.has_scores:
        lines += ["", "this file also has scores: `ustat-rl gstar` on it gives c1, c2, c3', G* "
                      "and the predicted MSEs"]
    else:
        lines += ["", "needs scores (not in this file):"] + [f"  {s}" for s in report.needs_scores]
    return "\n".join(lines)
