"""Four answers a user reads off one number each, against a second route (C70).

* :func:`ustat_rl.stats.best_set.welch` (the advice study's two-sample comparison): its
  difference, standard error and degrees of freedom against scipy's Welch t-test
  (``scipy.stats.ttest_ind(equal_var=False)``: ``se = diff / t`` and its ``df``);
* :meth:`ustat_rl.theory.scaling.ScalingConstants.best_group_size`: the integer ``G`` with the
  smallest fixed-budget law ``(c1 G + c2 + c3'/(G - 1))/N``, over the divisors of ``N`` and over
  every integer ``2..N``, against the law written out here and evaluated at every candidate;
* :func:`ustat_rl.theory.group_size.budget_exponent`: the full mean's budget-optimal ``G`` at
  each budget against a brute force over every ``G`` in ``1..N`` of the relaxation
  ``G V(G)/N + D(G)``, with ``V`` and ``D`` read here off the exact minibatch MSE at ``B = 1``
  and ``B = 2`` (:func:`ustat_rl.theory.mse.minibatch_mse`, another owner), its log-log slope
  against a least-squares line and its saturation budget read off by hand;
* :meth:`ustat_rl.pilot.uncertainty.PilotIntervals.gstar_at`: at the pilot's own level it is the
  interval for ``G*`` the pilot reports, and its intervals are nested in the level (0.5, 0.9,
  0.99; the lower ends strictly, so a level that is not used is caught) from every level whose
  Fieller set for ``rho`` reaches above 0. Where a level's set lies wholly at or below 0,
  ``gstar_at`` answers ``(1, inf)`` by design (:func:`~ustat_rl.pilot.uncertainty.fieller_gstar`),
  which a higher level's bounded-below interval does not contain: measured on 12 of 240 pilots
  (seeds 65000-65239), so no nesting is claimed from such a level.

All exact (rtol 1e-10, or integer equality), no sampling but the pilot's draw: no false-failure
rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["LAW_CASES", "EXPONENT_BUDGETS", "EXPONENT_BANDIT", "GSTAR_PILOT", "law", "relaxed_brute_force"]

#: ``(c1, c2, c3', N)`` of the law's cases: an interior optimum, a large ``c3'`` (optimum near
#: ``N``), a tiny ``c1`` (G* past N) and a non-divisor optimum.
LAW_CASES = ((0.013, 0.41, 0.77, 96), (0.002, 0.3, 5.0, 64), (1e-6, 0.1, 0.9, 40),
             (0.05, 0.2, 2.3, 60))
#: Budgets of the exponent's check and its bandit's logits and success probabilities (the
#: full mean's optimum grows with ``N`` there: 3, 4, 5, 6).
EXPONENT_BUDGETS = (16, 32, 64, 128)
EXPONENT_BANDIT = (((0.0, 0.0), (0.5, 0.0)), ((1.0, 0.0), (0.2, 0.6)))
#: The pilot of ``gstar_at``: prompts and samples of the interior-optimum bandit.
GSTAR_PILOT = (256, 8)


def law(c1: float, c2: float, c3: float, budget: int, G) -> np.ndarray:
    """``(c1 G + c2 + c3'/(G - 1))/N``, written out."""
    G = np.asarray(G, dtype=np.float64)
    return (c1 * G + c2 + c3 / (G - 1.0)) / budget


def relaxed_brute_force(moments, estimator: str, budget: int) -> int:
    """The ``G`` in ``G_min..N`` (the rule's smallest group) minimising ``G V(G)/N + D(G)``,
    ``V = 2 (M_1 - M_2)`` and ``D = 2 M_2 - M_1`` from the exact minibatch MSE ``M_B``."""
    from ...advantages import get_rule
    from ...theory.mse import minibatch_mse

    best, value = 0, math.inf
    for G in range(get_rule(estimator).min_group_size, budget + 1):
        m1 = minibatch_mse(moments, estimator, G, 1)
        m2 = minibatch_mse(moments, estimator, G, 2)
        mse = G * 2.0 * (m1 - m2) / budget + (2.0 * m2 - m1)
        if mse < value:
            best, value = G, mse
    return best


def _welch_checks() -> list:
    from scipy.stats import ttest_ind

    from ...stats.best_set import welch

    checks = []
    rng = np.random.default_rng(0)
    for n_a, n_b in ((3, 2), (10, 7), (12, 30)):
        a, b = rng.normal(0.5, 0.1, n_a), rng.normal(0.45, 0.3, n_b)
        test = ttest_ind(a, b, equal_var=False)
        diff = a.mean() - b.mean()
        checks.append(check_exact(f"welch on samples of {n_a} and {n_b}: difference, se and df "
                                  "against scipy's Welch t-test",
                                  [diff, diff / test.statistic, test.df], list(welch(a, b))))
    flat = welch([0.25, 0.25, 0.25], [0.25, 0.25])
    checks.append(check_true("welch on equal rewards: difference 0, se 0, df inf",
                             flat == (0.0, 0.0, math.inf), flat[1]))
    return checks


def _law_checks() -> list:
    from ...theory.scaling import ScalingConstants

    checks = []
    for c1, c2, c3, N in LAW_CASES:
        constants = ScalingConstants(c1, c2, c3)
        divisors = np.array([G for G in range(2, N + 1) if N % G == 0])
        every = np.arange(2, N + 1)
        want = (int(divisors[np.argmin(law(c1, c2, c3, N, divisors))]),
                int(every[np.argmin(law(c1, c2, c3, N, every))]))
        got = (constants.best_group_size(N), constants.best_group_size(N, divisors_only=False))
        checks.append(check_true(f"best_group_size (c1 {c1:g}, c2 {c2:g}, c3' {c3:g}, N {N}): "
                                 f"{want[0]} over the divisors, {want[1]} over 2..N",
                                 got == want, float(got[1])))
    return checks


def _exponent_checks() -> list:
    from ...policies.softmax import SoftmaxBandit
    from ...theory.group_size import budget_exponent

    m = SoftmaxBandit(*EXPONENT_BANDIT).moments()
    out = budget_exponent(m, "fullmean", EXPONENT_BUDGETS)
    want = [relaxed_brute_force(m, "fullmean", N) for N in EXPONENT_BUDGETS]
    logs = np.log(np.asarray(EXPONENT_BUDGETS, dtype=np.float64))
    slope = np.polyfit(logs, np.log(np.asarray(want, dtype=np.float64)), 1)[0]
    last = [i for i in range(len(want)) if want[i] != want[-1]]
    start = last[-1] + 1 if last else 0
    saturation = None if start == len(want) - 1 else EXPONENT_BUDGETS[start]
    return [check_true(f"budget_exponent (full mean): G_opt {want} at N = {EXPONENT_BUDGETS}, "
                       "the brute force over 1..N", out.group_sizes.tolist() == want,
                       float(out.group_sizes[-1])),
            check_exact("budget_exponent's log-log slope is the least-squares line's",
                        slope, out.fit.slope, atol=1e-12),
            check_true(f"budget_exponent's saturation budget is {saturation}",
                       out.saturation_budget == saturation, float(saturation or math.nan))]


def _gstar_checks(seed) -> list:
    from ...pilot.uncertainty import pilot_intervals
    from ...policies.examples import interior_optimum_bandit
    from ...scores.bandit import bandit_pilot

    rollouts = bandit_pilot(interior_optimum_bandit(), *GSTAR_PILOT, np.random.default_rng(seed))
    intervals = pilot_intervals(rollouts, 0.9)
    own = intervals.optimal_group_size
    levels = (0.5, 0.9, 0.99)
    ends = [intervals.gstar_at(level) for level in levels]
    # (1, inf) is the documented answer where a level's Fieller set for rho lies wholly at or
    # below 0 (fieller_gstar): no nesting is claimed from such a level
    informative = [(i, j) for i in range(3) for j in range(i + 1, 3) if ends[i][0] > 1.0]
    nested = all(ends[j][0] < ends[i][0] and ends[j][1] >= ends[i][1] for i, j in informative)
    return [check_true(f"gstar_at(0.9) on a pilot of {GSTAR_PILOT[0]} x {GSTAR_PILOT[1]} is its "
                       f"reported interval for G* ({own.low:.4g}, {own.high:.4g})",
                       not intervals.small_pilot and ends[1] == (own.low, own.high), ends[1][0]),
            check_true(f"gstar_at's intervals at levels {levels} are nested, the lower ends "
                       f"strictly, from each level whose set for rho reaches above 0 "
                       f"({len(informative)} pairs)", nested, float(len(informative)))]


@register("C70", "Beyond the paper: welch equals scipy's Welch t-test, best_group_size the "
          "fixed-budget law's argmin written out, budget_exponent a brute force over every G "
          "of the relaxed MSE, and gstar_at the pilot's own interval for G* at its level",
          "derived (docs/theory.md C70; C17 and the advice study)",
          "welch against scipy.stats.ttest_ind(equal_var=False); best_group_size on 4 law "
          "cases and budget_exponent (full mean, N = 16..128) against brute force; gstar_at "
          "on a 256 x 8 pilot; all exact")
def check_c70(ctx) -> list:
    return (_welch_checks() + _law_checks() + _exponent_checks()
            + _gstar_checks(ctx.seed_for("C70")))
