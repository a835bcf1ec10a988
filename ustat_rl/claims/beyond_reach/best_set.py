"""The advice study's best-G set keeps a truly best size at its level, on planted tables (C64).

:func:`ustat_rl.stats.best_set.best_set` (what ``simulations/advice_study.py`` reports as its
best-G confidence set) claims to miss a truly best group size with probability at most
``alpha``. On planted tables where every size is truly best (the same mean reward, each size its
own spread and its own number of seeds, as failed runs leave them), any size the set excludes is
a miss. Over many independent tables the rate at which each fixed size is excluded must not
exceed ``alpha``; the rate at which the set declares a single winner must not exceed
``2 alpha`` (a singleton excludes the first size unless it wins, and then the second).

Each rate is compared with the binomial law at its bound, one-sided and exact: a count ``c`` of
``R`` tables fails when ``P(Binomial(R, bound) >= c) < 3.2e-5``. Negative control: the same sets
without Bonferroni's correction (each test at ``alpha``) are rejected by the same comparison; and
on a table where one size is truly worse by far, it is excluded (the set can tell sizes apart).
The tables are summarised once and their sets computed by :func:`~ustat_rl.stats.best_set.best_sets`;
:func:`~ustat_rl.stats.best_set.best_set` on the first tables' raw rewards must give the same sets.
"""

from __future__ import annotations

import numpy as np

from ...tolerances import FALSE_FAILURE_ONE_SIDED
from ..registry import check_true, register

__all__ = ["STUDY_SIZES", "STUDY_SEEDS", "STUDY_SPREADS", "STUDY_ALPHA", "STUDY_TABLES",
           "planted_tables", "excess_rate"]

#: The advice study's grid, seeds per size (unequal) and each size's seed-to-seed spread.
STUDY_SIZES = (2, 4, 8, 16, 32)
STUDY_SEEDS = (10, 7, 12, 8, 10)
STUDY_SPREADS = (0.05, 0.10, 0.08, 0.15, 0.06)
STUDY_ALPHA = 0.05
#: Planted tables in the quick and the full run.
STUDY_TABLES = (4000, 40000)
#: Raw tables handed to ``best_set`` one by one (the same sets as ``best_sets``).
ROUTE_TABLES = 40


def planted_tables(rng, n_tables: int, shift=None) -> list:
    """``n_tables`` tables of final rewards, one array per size of :data:`STUDY_SIZES`: normal
    around 0.5 with the sizes' spreads, plus ``shift`` (per size, default 0: all truly best)."""
    shift = np.zeros(len(STUDY_SIZES)) if shift is None else np.asarray(shift, dtype=np.float64)
    return [[0.5 + d + s * rng.standard_normal((n_tables, n))
             for n, s, d in zip(STUDY_SEEDS, STUDY_SPREADS, shift)]]


def _summaries(tables):
    columns = tables[0]
    means = np.stack([c.mean(axis=1) for c in columns], axis=1)  # (R, k)
    variances = np.stack([c.var(axis=1, ddof=1) for c in columns], axis=1)  # (R, k)
    return means, variances, np.array(STUDY_SEEDS)


def excess_rate(count: int, n: int, bound: float, rate: float = FALSE_FAILURE_ONE_SIDED) -> bool:
    """Whether ``count`` events in ``n`` tables are too many for a rate at most ``bound``:
    ``P(Binomial(n, bound) >= count) < rate``."""
    from scipy.stats import binom

    return bool(binom.sf(count - 1, n, bound) < rate)


def _rate_checks(name: str, inside: np.ndarray, bound_note: str) -> list:
    R, k = inside.shape
    checks = []
    for j, G in enumerate(STUDY_SIZES):
        count = int(np.sum(~inside[:, j]))
        checks.append(check_true(
            f"{name}: G = {G} (truly best) excluded in {count} of {R} tables "
            f"({count / R:.2%}; at most {STUDY_ALPHA:g})",
            not excess_rate(count, R, STUDY_ALPHA), count / R, evidence="monte-carlo",
            note=f"one-sided exact binomial at {STUDY_ALPHA:g}, false-failure rate "
                 f"{FALSE_FAILURE_ONE_SIDED:.1e}. {bound_note}"))
    winners = int(np.sum(inside.sum(axis=1) == 1))
    checks.append(check_true(
        f"{name}: a single winner declared in {winners} of {R} tables ({winners / R:.2%}; at "
        f"most 2 x {STUDY_ALPHA:g})", not excess_rate(winners, R, 2 * STUDY_ALPHA), winners / R,
        evidence="monte-carlo", note=f"one-sided exact binomial at {2 * STUDY_ALPHA:g}, "
                                     f"false-failure rate {FALSE_FAILURE_ONE_SIDED:.1e}"))
    return checks


@register("C64", "Beyond the paper: the advice study's best-G set misses a truly best group "
          "size at most alpha = 5% of the time, and declares a single winner among equal sizes "
          "at most 2 alpha, on planted tables of unequal seeds and spreads",
          "derived (docs/theory.md C64; simulations/advice_study.py's summary)",
          "best_sets on planted tables where every G is truly best (normal rewards, 5 sizes, 7 "
          "to 12 seeds, spreads 0.05 to 0.15), exclusion and single-winner counts against "
          "Binomial(R, bound) one-sided at 3.2e-5; best_set on raw tables gives the same sets")
def check_c64(ctx) -> list:
    from ...stats.best_set import best_set, best_sets

    rng = np.random.default_rng(ctx.seed_for("C64"))
    n_tables = ctx.reps(*STUDY_TABLES)
    tables = planted_tables(rng, n_tables)
    inside, _ = best_sets(*_summaries(tables), STUDY_ALPHA)  # (R, k)
    checks = _rate_checks("all sizes equal", inside, "Bonferroni over the 4 other sizes")
    one_by_one = np.array([[best_set({G: c[r] for G, c in zip(STUDY_SIZES, tables[0])},
                                     STUDY_ALPHA).contains(G) for G in STUDY_SIZES]
                           for r in range(ROUTE_TABLES)])
    checks.append(check_true(f"best_set on the first {ROUTE_TABLES} tables' raw rewards gives "
                             f"best_sets' sets", bool(np.array_equal(one_by_one,
                                                                     inside[:ROUTE_TABLES])),
                             float(ROUTE_TABLES)))
    # negative controls: each test at alpha (no Bonferroni) exceeds the level on some size;
    # a size truly worse by 0.2 (more than 2 spreads) is excluded in nearly every table
    loose, _ = best_sets(*_summaries(tables), STUDY_ALPHA * (len(STUDY_SIZES) - 1))
    counts = (~loose).sum(axis=0)
    caught = [excess_rate(int(c), n_tables, STUDY_ALPHA) for c in counts]
    checks.append(check_true("negative control: without Bonferroni (each test at alpha) some "
                             "size's exclusion rate is rejected", any(caught),
                             float(counts.max() / n_tables), evidence="monte-carlo",
                             note="a power check: it excludes sizes 9-15% of the time"))
    worse = np.zeros(len(STUDY_SIZES))
    worse[-1] = -0.2
    far, _ = best_sets(*_summaries(planted_tables(rng, 200, worse)), STUDY_ALPHA)
    checks.append(check_true("negative control: a size truly worse by 0.2 is excluded in at "
                             "least 95% of 200 tables", np.mean(~far[:, -1]) >= 0.95,
                             float(np.mean(~far[:, -1])), evidence="monte-carlo",
                             note="the set tells sizes apart"))
    # the boundary of the test: rewards equal within and across sizes (se = 0, difference 0),
    # as a grid where no run learned anything leaves them; every size stays in the set
    flat = best_set({G: np.full(n, 0.25) for G, n in zip(STUDY_SIZES, STUDY_SEEDS)}, STUDY_ALPHA)
    checks.append(check_true("boundary: equal rewards everywhere (se = 0, difference 0) keep "
                             "every size", flat.members == STUDY_SIZES, float(len(flat.members))))
    return checks
