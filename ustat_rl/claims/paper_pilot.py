"""Checks of the pilot estimators and their intervals (docs/theory.md C31, C32, section 7).

C31: the mean over independent pilots of every moment estimate and of c1, c2, c3' matches the
exact moments of ``interior_optimum_bandit`` and of the ``"medium"`` transformer policy on a
finite population of moderate questions, with full scores and with a k = 8 Gaussian projection,
plus the symbolic proofs of ``proofs_check.pilot``. Its 48 comparisons use ``Z_STRICT``
standard errors at ``strict_reps`` pilots (6.8e-6 each, 3.3e-4 for the claim; at ``Z_CHECK``
they would spend 3.0e-3 of a run's budget of 1e-2: ``ustat_rl.tolerances``).
C32: nominal 90% intervals cover the exact c1, c2, c3' and G* at 85-95% of pilots at the sizes
where the coverage study (simulations/pilot_coverage.py, docs/theory.md section 7) shows the
method reaching its level, on the bandit and (G*, full runs only) on the transformer population;
the same intervals without the projection noise fall below the band; G*'s interval is unbounded
above exactly when c1's reaches 0 (an honest answer, accepted), and one large pilot's interval
covers G* and excludes G = 2.
C31.group: the one-group entry :func:`~ustat_rl.pilot.estimate.group_moments` (power sums) equals
the average of each section-7 kernel over the group's distinct ordered tuples, written out here
as loops over the permutations of the group's indices (no package code on that side), on groups
of 3, 4 and 7.
"""

from __future__ import annotations

import math

import numpy as np

from ..pilot.estimate import SCORE_MOMENTS, estimate_moments, group_moments
from ..pilot.uncertainty import pilot_intervals
from ..policies.examples import interior_optimum_bandit
from ..policies.transformer import exact_moments, load_study_policy, make_splits
from ..scores.bandit import bandit_pilot
from ..scores.spec import drawn_spec
from ..scores.transformer import answer_population, population_pilot
from ..stats.coverage_band import COVERAGE_BAND
from ..stats.coverage_band import coverage_in_band as band_verdict
from ..theory import scaling_constants
from ..tolerances import (
    FALSE_FAILURE_ONE_SIDED,
    FALSE_FAILURE_TWO_SIDED,
    Z_ONE_SIDED,
    Z_STRICT,
    strict_reps,
)
from ..training.transformer import moderate_questions
from .registry import check_close, check_exact, check_true, register
from .symbolic import symbolic_checks

_FIELDS = ("value", "reward_var") + SCORE_MOMENTS


def _transformer_population(n_questions: int):
    """The first ``n_questions`` moderate test questions of the ``"medium"`` study policy.

    Returns the :class:`~ustat_rl.scores.transformer.AnswerPopulation` (the pilots' source) and
    the exact moments by enumeration (:func:`~ustat_rl.policies.transformer.exact_moments`),
    uniform weights on the questions.
    """
    policy, _ = load_study_policy("medium", device="cpu")
    questions = moderate_questions(policy, make_splits().test, limit=n_questions)
    return answer_population(policy, questions, "medium"), exact_moments(policy, questions)


def _mean_checks(prefix, truth, rows, names):
    """``check_close`` (``Z_STRICT`` se) of each column mean of ``rows`` (one row per pilot)."""
    se = rows.std(axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return [check_close(f"{prefix}: mean estimate of {name} = exact", t, m, s, z=Z_STRICT)
            for name, t, m, s in zip(names, truth, rows.mean(axis=0), se)]


def _summary(m) -> list[float]:
    c = scaling_constants(m)
    return [float(m.prompt_prob @ getattr(m, name)) for name in _FIELDS] + [
        float(m.grad_norm_sq), c.c1, c.c2, c.c3]


@register("C31", "U-statistic estimates of every per-prompt moment, of ||g||^2 and of c1, c2, "
          "c3' from a pilot are unbiased, with full or randomly projected scores (at quick "
          "sizes the means of ||g||^2 and c1, small differences of large terms, see only errors "
          "of tens of percent: docs/power.md)",
          "derived (docs/theory.md section 7)",
          "mean over independent 32 x 8 pilots vs exact moments of a bandit and of a transformer "
          "policy on a finite question population (full scores and k = 8); sympy expectation of "
          "each kernel")
def check_c31(ctx):
    bandit = interior_optimum_bandit()
    exact = bandit.moments()
    truth = _summary(exact)
    names = _FIELDS + ("grad_norm_sq", "c1", "c2", "c3")
    n_pilots = ctx.reps(strict_reps(300), strict_reps(3000))
    checks = []
    for j, sketch_dim in enumerate((None, 8)):
        rng = np.random.default_rng(ctx.seed_for("C31", j))
        rows = np.array([_summary(estimate_moments(bandit_pilot(bandit, 32, 8, rng,
                                                                drawn_spec(sketch_dim, rng))))
                         for _ in range(n_pilots)])  # (n_pilots, 12)
        label = "full scores" if sketch_dim is None else f"k={sketch_dim} projection"
        checks += _mean_checks(label, truth, rows, names)
    # the transformer: 32 draws with replacement from the population, so the target of c1 is
    # the population variance of g(X) with divisor M (docs/theory.md section 7)
    population, exact = _transformer_population(ctx.reps(2, 12))
    truth = _summary(exact)
    n_pilots = ctx.reps(strict_reps(200), strict_reps(1000))
    for j, sketch_dim in enumerate((None, 8)):
        rng = np.random.default_rng(ctx.seed_for("C31", 2, j))
        rows = np.array([_summary(estimate_moments(population_pilot(
                             population, 32, 8, rng, drawn_spec(sketch_dim, rng))))
                         for _ in range(n_pilots)])  # (n_pilots, 12)
        label = "full scores" if sketch_dim is None else f"k={sketch_dim} projection"
        checks += _mean_checks(f"transformer ({population.n_questions} questions), {label}",
                               truth, rows, names)
    return checks + symbolic_checks("C31")


def kernel_averages(reward, score) -> dict:
    """Each section-7 kernel averaged over the distinct ordered tuples of one group, by loops
    (the brute-force side of C31.group; ``s_i = ||W_i||^2``)."""
    from itertools import permutations

    z = [float(v) for v in reward]
    w = [np.asarray(row, dtype=np.float64) for row in score]
    s = [float(row @ row) for row in w]
    n = len(z)

    def mean(values):
        values = list(values)
        return sum(values) / len(values)

    pairs, triples = list(permutations(range(n), 2)), list(permutations(range(n), 3))
    return {
        "value": mean(z),
        "reward_var": mean((z[i] - z[j]) ** 2 / 2 for i, j in pairs),
        "score_sq": mean(s),
        "score_sq_reward": mean(s[i] * z[i] for i in range(n)),
        "score_sq_reward_sq": mean(s[i] * z[i] ** 2 for i in range(n)),
        "grad_sq": mean(float(w[i] @ w[j]) * z[i] * z[j] for i, j in pairs),
        "score_sq_reward_var": mean(s[i] * (z[j] - z[k]) ** 2 / 2 for i, j, k in triples),
        "score_sq_centred": mean(s[i] * (z[i] - z[j]) * (z[i] - z[k]) for i, j, k in triples),
    }


@register("C31.group", "The one-group moment estimates (group_moments, by power sums) equal the "
          "average of each section-7 kernel over the group's distinct ordered tuples",
          "derived (docs/theory.md section 7)",
          "group_moments against loops over itertools.permutations of random groups of 3, 4 and "
          "7 with 3-column scores and real-valued rewards")
def check_c31_group(ctx):
    rng = np.random.default_rng(ctx.seed_for("C31.group"))
    checks = []
    for n in (3, 4, 7):
        reward = rng.normal(0.5, 1.0, n)
        score = rng.normal(size=(n, 3))
        fast, loops = group_moments(reward, score), kernel_averages(reward, score)
        names = sorted(loops)
        checks.append(check_exact(
            f"group of {n}: every kernel average by power sums = by loops over ordered tuples",
            [loops[k] for k in names], [fast[k] for k in names], rtol=1e-10, atol=1e-12,
            note=f"the {len(names)} moments {', '.join(names)}"))
    return checks


def coverage_in_band(name: str, hits: int, n: int, note: str = ""):
    """C32's check of a measured coverage:
    :func:`ustat_rl.stats.coverage_band.coverage_in_band`'s verdict (the band of nominal 90% intervals, ``Z_ONE_SIDED`` binomial standard errors beyond
    it; false-failure rate per check at most ``FALSE_FAILURE_ONE_SIDED``) as a check."""
    verdict = band_verdict(hits, n)
    low, high = COVERAGE_BAND
    return check_true(
        f"{name}: coverage in [{low:g}, {high:g}] ({hits} of {n} pilots)",
        verdict.passed, verdict.rate, "monte-carlo",
        note=f"passes iff {verdict.lower_limit:.3f} <= {verdict.rate:.3f} <= "
             f"{verdict.upper_limit:.3f} ({Z_ONE_SIDED:g} binomial se beyond the band; "
             f"false-failure rate <= {FALSE_FAILURE_ONE_SIDED:.1e}). {note}".strip())


def _coverage_counts(bandit, truth, n_pilots, sketch_dim, include, rng):
    """Covering counts for (c1, c2, c3', G*) and the pilots where G*'s boundedness disagrees
    with c1's interval (``high = inf`` iff ``c1.low <= 0``)."""
    count, mismatch, unbounded = np.zeros(4, dtype=int), 0, 0
    for _ in range(n_pilots):
        out = pilot_intervals(bandit_pilot(bandit, 64, 16, rng, drawn_spec(sketch_dim, rng)),
                              0.9, include_sketch=include)
        parts = (out.c1, out.c2, out.c3, out.optimal_group_size)
        count += [p.covers(t) for p, t in zip(parts, truth)]
        mismatch += out.bounded != (out.c1.low > 0.0)
        unbounded += not out.bounded
    return count, mismatch, unbounded


@register("C32", "Jackknife intervals over prompts and projection rows cover c1, c2, c3' and "
          "(Fieller) G* at close to their nominal level; ignoring the projection noise "
          "under-covers; G* is unbounded above exactly when c1's interval reaches 0",
          "derived (docs/theory.md section 7)",
          "coverage of nominal 90% intervals over independent 64 x 16 pilots with k = 32 within "
          "the 85-95% band of the coverage study; projection noise ignored at k = 4 falls below "
          "it; one large pilot covers G* and excludes G = 2; G* coverage over 64 x 16 pilots of "
          "a transformer policy")
def check_c32(ctx):
    bandit = interior_optimum_bandit()
    exact = scaling_constants(bandit.moments())
    truth = (exact.c1, exact.c2, exact.c3, exact.optimal_group_size())
    n_pilots = ctx.reps(150, 1500)
    names = ("c1", "c2", "c3'", "G*")
    hits, mismatch, unbounded = _coverage_counts(
        bandit, truth, n_pilots, 32, True, np.random.default_rng(ctx.seed_for("C32", 0)))
    checks = [coverage_in_band(f"64 x 16, k=32: the 90% interval for {name}", int(h), n_pilots,
                               note=(f"{unbounded} of {n_pilots} G* intervals unbounded above "
                                     "(c1's interval reaches 0)" if name == "G*" else ""))
              for name, h in zip(names, hits)]
    checks.append(check_true(
        f"G*'s interval is unbounded above exactly when c1's interval reaches 0 ({mismatch} of "
        f"{n_pilots} pilots disagree)", mismatch == 0, mismatch, "exact-numeric"))
    control, _, _ = _coverage_counts(bandit, truth, n_pilots, 4, False,
                                     np.random.default_rng(ctx.seed_for("C32", 3)))
    for name, h in zip(names[1:3], control[1:3]):
        band = coverage_in_band("", int(h), n_pilots)
        checks.append(check_true(
            f"negative control (k=4, projection noise ignored): the {name} interval falls below "
            f"the band ({int(h)} of {n_pilots})", not band.passed and h / n_pilots < 0.85,
            h / n_pilots, "monte-carlo", note=band.note))
    level = 1.0 - FALSE_FAILURE_TWO_SIDED
    large = pilot_intervals(bandit_pilot(bandit, ctx.reps(2048, 8192), 16,
                                         np.random.default_rng(ctx.seed_for("C32", 1))), level)
    g = large.optimal_group_size
    checks.append(check_true(
        f"one large pilot: its {level:.5f} interval [{g.low:.3g}, {g.high:.3g}] covers "
        f"G* = {truth[3]:.3g} and excludes G = 2", g.covers(truth[3]) and g.low > 2.0,
        g.estimate, "monte-carlo",
        note=f"false-failure rate {FALSE_FAILURE_TWO_SIDED:.1e} at the nominal level; "
             + ("bounded" if large.bounded else "unbounded above, an accepted answer: c1's "
                f"interval [{large.c1.low:.3g}, {large.c1.high:.3g}] reaches 0")))
    checks += symbolic_checks("C32")  # Fieller's quadratic (proofs_check.pilot)
    if ctx.quick:  # the quick run leaves the transformer coverage to tests/ (about 20 s)
        return checks
    population, exact = _transformer_population(12)
    g_star = scaling_constants(exact).optimal_group_size()
    n_tf = 200
    rng = np.random.default_rng(ctx.seed_for("C32", 2))
    hits = sum(pilot_intervals(population_pilot(population, 64, 16, rng), 0.9)
               .optimal_group_size.covers(g_star) for _ in range(n_tf))
    checks.append(coverage_in_band(
        f"transformer ({population.n_questions} questions), 64 x 16 pilots: the 90% interval for "
        f"G* = {g_star:.3g}", int(hits), n_tf))
    return checks
