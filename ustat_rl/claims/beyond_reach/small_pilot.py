"""The pilot's intervals on pilots under 32 prompts cover at their level (C63).

Below :data:`~ustat_rl.pilot.small_sample.SMALL_PILOT_PROMPTS` prompts the pilot reports the
cautious intervals of :mod:`ustat_rl.pilot.small_sample`; C32 measures coverage at 32 prompts
and more only. Here independent pilots of full scores of policies with exact constants each
give nominal 90% intervals (:func:`ustat_rl.pilot.pilot_intervals`), and the count covering the
exact ``c1``, ``c2``, ``c3'`` and ``G*`` among the pilots ``ustat-rl gstar`` answers is compared
with the binomial law at the level: a count ``k`` of ``n`` fails when
``P(Binomial(n, 0.9) <= k) < 3.2e-5`` (one-sided, exact: the false-failure rate of each
comparison is at most 3.2e-5 whenever the true coverage is at least 90%).

The quick run takes one cell, ``one_answer_bandit(0)`` at 8 prompts x 8 answers, the policy and
size where the jackknife-t interval alone covers ``c1`` least (69%): that interval on the same
pilots is the negative control the same comparison must reject. The full run adds three cells
(3 x 3, 16 x 8 and 31 x 8, one size below the threshold). At the threshold itself, 31 prompts
get the cautious intervals and 32 do not (its boundary).

:func:`coverage_cell` is also the cell of ``simulations/small_pilot_coverage.py``.
"""

from __future__ import annotations

import numpy as np

from ...tolerances import FALSE_FAILURE_ONE_SIDED
from ..registry import check_true, register

__all__ = ["COVERAGE_LEVEL", "COVERED", "QUICK_CELLS", "FULL_CELLS", "jackknife_only",
           "coverage_cell", "coverage_passes", "smallest_passing_count", "power_at"]

#: The intervals' level and the constants whose coverage is counted.
COVERAGE_LEVEL = 0.9
COVERED = ("c1", "c2", "c3")
#: ``(policy, prompts, answers per prompt, pilots)`` of the quick and the full run; the policies
#: are :mod:`ustat_rl.policies.examples` names (called with the argument after a colon).
QUICK_CELLS = (("one_answer_bandit:0", 8, 8, 300),)
FULL_CELLS = QUICK_CELLS + (("small_bandit", 3, 3, 1000), ("interior_optimum_bandit", 16, 8, 1000),
                            ("arithmetic_bandit:2", 31, 8, 1000))


def _policy(name: str):
    from ...policies import examples

    func, _, arg = name.partition(":")
    make = getattr(examples, func)
    return make(float(arg)) if arg else make()


def jackknife_only(out, name: str) -> tuple[float, float]:
    """The jackknife-t interval of one constant alone (estimate +- t se): the package's interval
    at 32 prompts and above, and the small pilots' before their cautious intervals."""
    from ...pilot.uncertainty import student_quantile

    part = getattr(out, name)
    t = student_quantile(out.level, part.prompt_std_error**2, part.sketch_std_error**2,
                         out.n_prompts, out.sketch_units)
    return part.estimate - t * part.std_error, part.estimate + t * part.std_error


def coverage_cell(bandit, n_prompts, group_size, n_pilots, rng, level=COVERAGE_LEVEL) -> dict:
    """Counts of covering intervals over ``n_pilots`` pilots of one size (refusals apart).

    Returns ``prompts``, ``samples``, ``pilots`` (answered), ``refused``, and per constant of
    :data:`COVERED` and ``gstar`` the number of answered pilots whose interval covers the exact
    value, ``<name>_jackknife`` the same for the jackknife-t interval alone, and ``unbounded``.
    """
    from ...pilot.report import check_degenerate, check_resolved
    from ...pilot.uncertainty import pilot_intervals
    from ...scores.bandit import bandit_pilot

    exact = bandit.scaling_constants()
    truth = {"c1": exact.c1, "c2": exact.c2, "c3": exact.c3, "gstar": exact.optimal_group_size()}
    keys = (*COVERED, "gstar", *(f"{n}_jackknife" for n in COVERED), "unbounded")
    count = dict.fromkeys(keys, 0)
    refused = 0
    for _ in range(n_pilots):
        pilot = bandit_pilot(bandit, n_prompts, group_size, rng)
        try:
            check_degenerate(pilot)
            out = pilot_intervals(pilot, level)
            check_resolved(out)
        except ValueError:  # a refusal is an answer, not a miss
            refused += 1
            continue
        for name in COVERED:
            count[name] += getattr(out, name).covers(truth[name])
            low, high = jackknife_only(out, name)
            count[f"{name}_jackknife"] += low <= truth[name] <= high
        count["gstar"] += out.optimal_group_size.covers(truth["gstar"])
        count["unbounded"] += not out.bounded
    return {"prompts": n_prompts, "samples": group_size, "pilots": n_pilots - refused,
            "refused": refused, **{key: int(value) for key, value in count.items()}}


def coverage_passes(count: int, n: int, level: float = COVERAGE_LEVEL,
                    rate: float = FALSE_FAILURE_ONE_SIDED) -> bool:
    """Whether ``count`` covering intervals of ``n`` are consistent with coverage >= ``level``:
    ``P(Binomial(n, level) <= count) >= rate``."""
    from scipy.stats import binom

    return bool(n > 0 and binom.cdf(count, n, level) >= rate)


def smallest_passing_count(n: int, level: float = COVERAGE_LEVEL,
                           rate: float = FALSE_FAILURE_ONE_SIDED) -> int:
    """The smallest count of ``n`` that :func:`coverage_passes` accepts."""
    from scipy.stats import binom

    return int(binom.ppf(rate, n, level))  # the smallest k with P(Binomial <= k) >= rate


def _cell_checks(ctx, index: int, policy: str, prompts: int, answers: int, pilots: int) -> list:
    bandit = _policy(policy)
    rng = np.random.default_rng(ctx.seed_for("C63", index))
    cell = coverage_cell(bandit, prompts, answers, pilots, rng)
    n = cell["pilots"]
    least = smallest_passing_count(n)
    where = f"{policy} at {prompts} x {answers}"
    checks = [check_true(f"{where}: most of {pilots} pilots answered (refused {cell['refused']})",
                         n >= pilots // 2, float(n))]
    for name in (*COVERED, "gstar"):
        checks.append(check_true(
            f"{where}: {COVERAGE_LEVEL:.0%} interval for {name} covers in {cell[name]} of {n} "
            f"({cell[name] / max(n, 1):.1%}); at least {least} needed",
            coverage_passes(cell[name], n), cell[name] / max(n, 1), evidence="monte-carlo",
            note=f"one-sided exact binomial at {COVERAGE_LEVEL:g}, false-failure rate "
                 f"{FALSE_FAILURE_ONE_SIDED:.1e}"))
    return checks, cell


@register("C63", "Beyond the paper: on pilots under 32 prompts, the pilot's nominal 90% "
          "intervals for c1, c2, c3' and G* cover the exact values in at least 90% of the "
          "pilots it answers (for the policies measured), and 31 prompts is a small pilot, 32 "
          "is not",
          "derived (docs/theory.md C63; C32's intervals below its range, "
          "ustat_rl.pilot.small_sample)",
          "independent full-score pilots of bandits with exact constants, coverage counts "
          "against Binomial(n, 0.9) one-sided at 3.2e-5; the jackknife-t interval alone on the "
          "same pilots as the negative control")
def check_c63(ctx) -> list:
    from ...pilot.small_sample import SMALL_PILOT_PROMPTS
    from ...pilot.uncertainty import pilot_intervals
    from ...scores.bandit import bandit_pilot

    checks = []
    cells = QUICK_CELLS if ctx.quick else FULL_CELLS
    first = None
    for index, cell in enumerate(cells):
        part, counts = _cell_checks(ctx, index, *cell)
        checks += part
        first = counts if first is None else first
    n = first["pilots"]
    checks.append(check_true(
        f"negative control: the jackknife-t interval alone covers c1 in "
        f"{first['c1_jackknife']} of {n} of the first cell's pilots, and is rejected",
        not coverage_passes(first["c1_jackknife"], n), first["c1_jackknife"] / max(n, 1),
        evidence="monte-carlo", note="a power check: it covers about 69% there"))
    bandit = _policy(QUICK_CELLS[0][0])
    rng = np.random.default_rng(ctx.seed_for("C63", 99))
    at = {P: pilot_intervals(bandit_pilot(bandit, P, 8, rng), COVERAGE_LEVEL).small_pilot
          for P in (SMALL_PILOT_PROMPTS - 1, SMALL_PILOT_PROMPTS)}
    checks.append(check_true(f"the threshold's boundary: {SMALL_PILOT_PROMPTS - 1} prompts get "
                             f"the small-pilot intervals, {SMALL_PILOT_PROMPTS} do not",
                             at[SMALL_PILOT_PROMPTS - 1] and not at[SMALL_PILOT_PROMPTS],
                             float(SMALL_PILOT_PROMPTS)))
    return checks


def power_at(coverage: float, n: int) -> float:
    """Probability that the comparison rejects intervals whose true coverage is ``coverage``."""
    from scipy.stats import binom

    return float(binom.cdf(smallest_passing_count(n) - 1, n, coverage))

