"""Checks of the pilot estimators and their intervals (docs/theory.md C31, C32, section 7).

C31: the mean over independent pilots of every moment estimate and of c1, c2, c3' matches the
exact moments of ``interior_optimum_bandit`` and of the ``"medium"`` transformer policy on a
finite population of moderate questions (``Z_CHECK`` standard errors), with full scores and
with a k = 8 Gaussian projection, plus the symbolic proofs of ``proofs_check.pilot``.
C32: nominal 90% intervals cover the exact c1, c2, c3' and G* at close to 90% of pilots (a
binomial comparison), on the bandit and (G*, full sizes only) on the transformer population; the
same intervals without the projection noise do not, and one large pilot recovers G*.
"""

from __future__ import annotations

import math

import numpy as np

from ..pilot.bandit import bandit_pilot
from ..pilot.estimate import SCORE_MOMENTS, estimate_moments
from ..pilot.transformer import answer_population, population_pilot
from ..pilot.uncertainty import pilot_intervals
from ..policies.examples import interior_optimum_bandit
from ..policies.transformer import exact_moments, load_study_policy, make_splits
from ..theory import scaling_constants
from ..tolerances import FALSE_FAILURE_TWO_SIDED, Z_CHECK
from ..training.transformer import moderate_questions
from .registry import check_close, check_true, register
from .symbolic import symbolic_checks

_FIELDS = ("value", "reward_var") + SCORE_MOMENTS


def _transformer_population(n_questions: int):
    """The first ``n_questions`` moderate test questions of the ``"medium"`` study policy.

    Returns the :class:`~ustat_rl.pilot.transformer.AnswerPopulation` (the pilots' source) and
    the exact moments by enumeration (:func:`~ustat_rl.policies.transformer.exact_moments`),
    uniform weights on the questions.
    """
    policy, _ = load_study_policy("medium", device="cpu")
    questions = moderate_questions(policy, make_splits().test, limit=n_questions)
    return answer_population(policy, questions, "medium"), exact_moments(policy, questions)


def _mean_checks(prefix, truth, rows, names):
    """``check_close`` of each column mean of ``rows`` (one row per pilot) against ``truth``."""
    se = rows.std(axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return [check_close(f"{prefix}: mean estimate of {name} = exact", t, m, s)
            for name, t, m, s in zip(names, truth, rows.mean(axis=0), se)]


def _summary(m) -> list[float]:
    c = scaling_constants(m)
    return [float(m.prompt_prob @ getattr(m, name)) for name in _FIELDS] + [
        float(m.grad_norm_sq), c.c1, c.c2, c.c3]


@register("C31", "U-statistic estimates of every per-prompt moment, of ||g||^2 and of c1, c2, "
          "c3' from a pilot are unbiased, with full or randomly projected scores",
          "derived (docs/theory.md section 7)",
          "mean over independent 32 x 8 pilots vs exact moments of a bandit and of a transformer "
          "policy on a finite question population (full scores and k = 8); sympy expectation of "
          "each kernel")
def check_c31(ctx):
    bandit = interior_optimum_bandit()
    exact = bandit.moments()
    truth = _summary(exact)
    names = _FIELDS + ("grad_norm_sq", "c1", "c2", "c3")
    n_pilots = ctx.reps(300, 3000)
    checks = []
    for j, sketch_dim in enumerate((None, 8)):
        rng = np.random.default_rng(ctx.seed_for("C31", j))
        rows = np.array([_summary(estimate_moments(bandit_pilot(bandit, 32, 8, rng, sketch_dim)))
                         for _ in range(n_pilots)])  # (n_pilots, 12)
        label = "full scores" if sketch_dim is None else f"k={sketch_dim} projection"
        checks += _mean_checks(label, truth, rows, names)
    # the transformer: 32 draws with replacement from the population, so the target of c1 is
    # the population variance of g(X) with divisor M (docs/theory.md section 7)
    population, exact = _transformer_population(ctx.reps(2, 12))
    truth = _summary(exact)
    n_pilots = ctx.reps(200, 1000)
    for j, sketch_dim in enumerate((None, 8)):
        rng = np.random.default_rng(ctx.seed_for("C31", 2, j))
        rows = np.array([_summary(estimate_moments(population_pilot(population, 32, 8, rng,
                                                                    sketch_dim)))
                         for _ in range(n_pilots)])  # (n_pilots, 12)
        label = "full scores" if sketch_dim is None else f"k={sketch_dim} projection"
        checks += _mean_checks(f"transformer ({population.n_questions} questions), {label}",
                               truth, rows, names)
    return checks + symbolic_checks("C31")


@register("C32", "Jackknife intervals over prompts and projection rows cover c1, c2, c3' and G* "
          "at their nominal level; ignoring the projection noise under-covers",
          "derived (docs/theory.md section 7)",
          "coverage of nominal 90% intervals over independent 64 x 16 pilots with k = 32; "
          "projection noise ignored at k = 8 under-covers; one large pilot recovers G*; G* "
          "coverage over 64 x 16 pilots of a transformer policy")
def check_c32(ctx):
    bandit = interior_optimum_bandit()
    exact = scaling_constants(bandit.moments())
    truth = (exact.c1, exact.c2, exact.c3, exact.optimal_group_size())
    n_pilots = ctx.reps(150, 1500)
    hits = {}
    for j, (sketch_dim, include) in enumerate(((32, True), (8, False))):
        rng = np.random.default_rng(ctx.seed_for("C32", j))
        count = np.zeros(4)
        for _ in range(n_pilots if include else n_pilots // 2):
            out = pilot_intervals(bandit_pilot(bandit, 64, 16, rng, sketch_dim), 0.9,
                                  include_sketch=include)
            parts = (out.c1, out.c2, out.c3, out.optimal_group_size)
            count += [p.covers(t) for p, t in zip(parts, truth)]
        hits[include] = count
    se = math.sqrt(0.9 * 0.1 / n_pilots)  # binomial standard error at the nominal level
    checks = [check_close(f"k=32: coverage of the 90% interval for {name}", 0.9, h / n_pilots, se,
                          note=f"{int(h)} of {n_pilots} pilots")
              for name, h in zip(("c1", "c2", "c3'", "G*"), hits[True])]
    n_control = n_pilots // 2
    se_control = math.sqrt(0.9 * 0.1 / n_control)
    for name, h in zip(("c2", "c3'"), hits[False][1:3]):
        checks.append(check_true(
            f"negative control (k=8, projection noise ignored): the {name} interval under-covers "
            f"({int(h)} of {n_control} < 90% - {Z_CHECK:g} se)",
            h / n_control < 0.9 - Z_CHECK * se_control, h / n_control, "monte-carlo"))
    level = 1.0 - FALSE_FAILURE_TWO_SIDED
    large = pilot_intervals(bandit_pilot(bandit, ctx.reps(2048, 8192), 16,
                                         np.random.default_rng(ctx.seed_for("C32", 1))), level)
    g = large.optimal_group_size
    checks.append(check_true(
        f"one large pilot recovers G* = {truth[3]:.3g}: inside its {level:.5f} interval "
        f"[{g.low:.3g}, {g.high:.3g}], which excludes G = 2 and is bounded",
        g.covers(truth[3]) and g.low > 2.0 and math.isfinite(g.high), g.estimate, "monte-carlo"))
    if ctx.quick:  # the quick run leaves the transformer coverage to tests/ (about 20 s)
        return checks
    population, exact = _transformer_population(12)
    g_star = scaling_constants(exact).optimal_group_size()
    n_tf = 200
    rng = np.random.default_rng(ctx.seed_for("C32", 2))
    hits = sum(pilot_intervals(population_pilot(population, 64, 16, rng), 0.9)
               .optimal_group_size.covers(g_star) for _ in range(n_tf))
    checks.append(check_close(
        f"transformer ({population.n_questions} questions), 64 x 16 pilots: coverage of the 90% "
        f"interval for G* = {g_star:.3g}", 0.9, hits / n_tf, math.sqrt(0.9 * 0.1 / n_tf),
        note=f"{int(hits)} of {n_tf} pilots"))
    return checks
