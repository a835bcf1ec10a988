"""The reward-variance filter's conformance kit and its answer from a pilot (C68).

A user checks a framework's reward-variance filter with
:func:`ustat_rl.theory.variance_filter_kit.check_variance_filter` (against the reference on the
batches of :func:`~ustat_rl.theory.variance_filter_kit.filter_cases`, smallest first) and reads
the filter's kept batch at a budget from a pilot with
:func:`ustat_rl.pilot.variance_filter.pilot_variance_filter` (``ustat-rl gstar --group-filter``).
The checks, all exact (no sampling, no false-failure rate):

* the kit on filters written here: C58's literal reading of the definition (exact rational
  arithmetic, sample variances, a stable sort, the shortest prefix) passes at ``top_p = 0.9``
  and ``0.5``; two planted wrong filters, the population variance and the prefix cut one group
  late, are rejected, each with a batch where the written-out correct and wrong masks differ
  and no batch of the kit's list before it on which they differ (the smallest failing batch);
  the cases are ordered by samples, then groups, and a seed gives the same list;
* the pilot's report on a pilot of four prompts (1, 3, 6 and 7 successes of 8): its grid is the
  budget's divisors with ``B = N/G``, a ``G`` is left out exactly when its level-count vectors
  exceed ``MAX_REPORTED``; its figures at every ``G`` are the kept batch's exact moments
  (:func:`~ustat_rl.theory.variance_filter.variance_filtered_moments`, which C58 checks against
  enumeration and Monte Carlo) at the pilot's moments made binary, with ``B = N/G`` and the
  option it was given (rtol 1e-10); and with ``top_p = 1`` and a constant normaliser, which
  drops only groups whose advantages are all 0, the kept batch's MSE is the unfiltered one.
  The pilot's figures are plug-ins: on this small pilot the unfiltered MSE of the level-count
  route is not the closed-form fixed-budget MSE of the same moments (the two read different
  estimated moments, which agree only for a policy's exact ones), so no such comparison is
  made here.
"""

from __future__ import annotations

import math

import numpy as np

from ..beyond_frameworks.variance_filter import literal_mask
from ..registry import check_exact, check_true, register

__all__ = ["PILOT_SUCCESSES", "PILOT_SAMPLES", "PILOT_BUDGET", "KIT_RANDOM", "literal_filter",
           "population_filter", "late_filter", "pilot_rollouts"]

#: The pilot: successes of each prompt's group of :data:`PILOT_SAMPLES`, and the budget.
PILOT_SUCCESSES = (1, 3, 6, 7)
PILOT_SAMPLES = 8
PILOT_BUDGET = 32
#: Random batches of the kit beside its fixed ones.
KIT_RANDOM = 120


def literal_filter(top_p: float):
    """C58's literal reading of the definition, in the kit's signature."""
    return lambda r, g: np.array(literal_mask(r, g.tolist(), top_p))


def _groups(rewards, group_ids):
    order, members = [], {}
    for r, g in zip(rewards, group_ids.tolist()):
        if g not in members:
            order.append(g)
            members[g] = []
        members[g].append(float(r))
    return order, members


def population_filter(top_p: float):
    """Planted: each group's population variance (divisor ``n``) in place of the sample's."""
    def fn(rewards, group_ids):
        order, members = _groups(rewards, group_ids)
        var = {g: float(np.var(members[g])) for g in order}
        return _prefix_mask(order, var, top_p, group_ids, 0)
    return fn


def late_filter(top_p: float):
    """Planted: the prefix cut one group after the shortest that reaches ``top_p``."""
    def fn(rewards, group_ids):
        order, members = _groups(rewards, group_ids)
        var = {g: float(np.var(members[g], ddof=1)) if len(members[g]) > 1 else 0.0
               for g in order}
        return _prefix_mask(order, var, top_p, group_ids, 1)
    return fn


def _prefix_mask(order, var, top_p, group_ids, late: int) -> np.ndarray:
    ranked = sorted(order, key=lambda g: var[g], reverse=True)
    total = sum(var.values())
    if total <= 0:
        return np.ones(len(group_ids), dtype=bool)
    length = next(n for n in range(1, len(ranked) + 1)
                  if sum(var[g] for g in ranked[:n]) >= top_p * total * (1 - 1e-12))
    kept = set(ranked[:length + late])
    return np.array([g in kept for g in group_ids.tolist()])


def pilot_rollouts(seed):
    """A pilot of :data:`PILOT_SUCCESSES` (binary rewards) with normal scores shifted by the
    reward, three columns."""
    from ...pilot.rollouts import Rollouts

    rng = np.random.default_rng(seed)
    reward = np.concatenate([np.repeat([1.0, 0.0], [m, PILOT_SAMPLES - m])
                             for m in PILOT_SUCCESSES])
    ids = np.repeat(np.arange(len(PILOT_SUCCESSES)), PILOT_SAMPLES)
    return Rollouts(ids, reward, rng.normal(size=(ids.size, 3)) + reward[:, None])


def _kit_checks() -> list:
    from ...theory.variance_filter import VarianceFilter
    from ...theory.variance_filter_kit import check_variance_filter, filter_cases

    cases = filter_cases(KIT_RANDOM, seed=0)
    sizes = [(len(r), len(np.unique(g))) for r, g in cases]
    checks = [check_true(f"filter_cases: {len(cases)} batches ordered by samples then groups, "
                         "the same list again at the same seed",
                         sizes == sorted(sizes) and all(
                             np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                             for a, b in zip(cases, filter_cases(KIT_RANDOM, seed=0))),
                         float(len(cases)))]
    for top_p in (0.9, 0.5):
        verdict = check_variance_filter(literal_filter(top_p), VarianceFilter("top_p", top_p),
                                        KIT_RANDOM)
        checks.append(check_true(f"the kit passes the definition read literally, top_p = "
                                 f"{top_p}", verdict.passed and verdict.n_cases == len(cases),
                                 float(verdict.n_cases)))
    for name, planted in (("population variance", population_filter),
                          ("prefix one group late", late_filter)):
        top_p = 0.5
        verdict = check_variance_filter(planted(top_p), VarianceFilter("top_p", top_p),
                                        KIT_RANDOM)
        right, wrong = literal_filter(top_p), planted(top_p)
        first = next((i for i, (r, g) in enumerate(cases)
                      if not np.array_equal(right(r, g), wrong(r, g))), -1)
        shown = (not verdict.passed and first >= 0
                 and np.array_equal(verdict.rewards, cases[first][0])
                 and np.array_equal(verdict.group_ids, cases[first][1])
                 and np.array_equal(verdict.expected, right(*cases[first]))
                 and np.array_equal(verdict.got, wrong(*cases[first])))
        checks.append(check_true(f"the kit rejects the planted {name} (top_p = {top_p}) with "
                                 "the first batch of its list where the masks differ, and "
                                 "both masks", shown, float(first)))
    return checks


def _pilot_checks(seed) -> list:
    from ...pilot.estimate import estimate_moments, pilot_statistics
    from ...pilot.variance_filter import MAX_REPORTED, pilot_variance_filter
    from ...theory.advantage import binary_projection
    from ...theory.variance_filter import VarianceFilter, variance_filtered_moments

    rollouts = pilot_rollouts(seed)
    N = PILOT_BUDGET
    report = pilot_variance_filter(rollouts, N, "reward_variance_top_p", 0.5)
    divisors = [G for G in range(2, N + 1) if N % G == 0]
    left = [G for G in divisors if math.comb(N // G + G // 2, G // 2) > MAX_REPORTED]
    checks = [check_true(f"the report's grid is the divisors of N = {N}, B = N/G, none left "
                         "out but by the level-count rule",
                         report.group_sizes == divisors
                         and report.batch_sizes == [N // G for G in divisors]
                         and report.left_out == left, float(len(divisors)))]
    moments = binary_projection(estimate_moments(pilot_statistics(rollouts)))
    spec = VarianceFilter("top_p", 0.5)
    owned = [variance_filtered_moments(moments, "grpo", G, N // G, spec) for G in divisors]
    checks.append(check_exact("the report at every G is the kept batch's exact moments "
                              "(C58's route) at the pilot's binary moments: keep rate, mean "
                              "factor, MSE, unfiltered MSE",
                              [[o.keep_rate, o.mean_factor, o.mse, o.unfiltered_mse]
                               for o in owned],
                              np.column_stack([report.keep_rate, report.mean_factor, report.mse,
                                               report.unfiltered_mse])))
    whole = pilot_variance_filter(rollouts, N, VarianceFilter("top_p", 1.0, divisor="batch"))
    checks.append(check_exact("top_p = 1 over a constant normaliser: the kept batch's MSE is "
                              "the unfiltered one at every G", whole.unfiltered_mse, whole.mse))
    return checks


@register("C68", "Beyond the paper: the reward-variance filter's conformance kit passes the "
          "definition written out and rejects a population variance and a late prefix with the "
          "smallest batch where they differ; the pilot's filter report is the kept batch's exact "
          "moments at the pilot at every G of the budget, and top_p = 1 over the batch is the "
          "unfiltered batch",
          "derived (docs/theory.md C68; section 7, 'The reward-variance filter')",
          "check_variance_filter on C58's literal filter and on two planted wrong ones over "
          "filter_cases (6 fixed and 120 random batches); pilot_variance_filter on a 4-prompt "
          "pilot at N = 32 against variance_filtered_moments per G (1e-10), exact")
def check_c68(ctx) -> list:
    return _kit_checks() + _pilot_checks(ctx.seed_for("C68"))
