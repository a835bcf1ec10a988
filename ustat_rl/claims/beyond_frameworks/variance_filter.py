"""RAGEN-2's reward-variance filter: its kept batch, exact, and where it helps or biases
(docs/theory.md C58).

Four kinds of check:

* **the filter as defined**: the reference mask against a literal reading of the definition in
  exact rational arithmetic (each group's sample variance by ``statistics.variance`` of
  fractions, Python's stable ``sorted``, the smallest prefix found by trying every length) on
  random ragged batches of rewards 0 and 1, so a population variance or a prefix cut one group
  late fails here;
* **exact moments**: the kept batch's MSE and mean projection from the level counts
  (:func:`~ustat_rl.theory.variance_filter.variance_filtered_moments`) against enumerating every
  batch (:func:`~ustat_rl.training.batch_study.batch_enumeration` with the filter's weights) to
  1e-12, at ``G = 2, B = 2``, four filters;
* **Monte Carlo**: the same moments against both samplers at ``G = 4, B = 3``, at
  ``Z_STRICT = 4.5`` standard errors (6.8e-6 two-sided each; eight comparisons, 5.4e-5);
  negative control: the late prefix's exact MSE, rejected by the same comparison;
* **where it helps and where it biases** (exact, no sampling): on the known-value bandit with
  ``p = (0.05, 0.3, 0.6, 0.95)``, averaging over the kept groups (``divisor="kept"``, a loss
  averaged over the kept samples) scales the mean step by more than 1 and raises the MSE against
  ``g`` above the unfiltered batch's at ``top_p = 0.9``; with a constant normaliser
  (``divisor="batch"``) ``top_p = 1`` is the unfiltered batch and ``top_p = 0.5`` shrinks the
  step (mean factor below 1 for leave-one-out), lowering the MSE of the std-normalised rule and
  raising leave-one-out's at ``G = 8, B = 16``.
"""

from __future__ import annotations

import statistics
from fractions import Fraction

import numpy as np

from ...tolerances import Z_STRICT, strict_reps
from ..registry import check_close, check_exact, check_true, register

#: Exact comparisons: ``(G, B)`` enumerated batch by batch (tests/theory/test_variance_filter.py
#: adds ``G = 3``).
ENUMERATED = ((2, 2),)
#: The Monte Carlo case, and steps per backend at ``Z_CHECK`` (quick, full).
MC_CASE = (4, 3)
REPS = (4_000, 40_000)
#: The known-value bandit's success probabilities for the help/bias map.
VALUES = (0.05, 0.3, 0.6, 0.95)
#: Random ragged batches the literal definition is compared on.
N_LITERAL = 400


def _specs():
    from ...theory.variance_filter import VarianceFilter

    return (VarianceFilter("top_p", 0.9), VarianceFilter("top_p", 0.5),
            VarianceFilter("top_k", top_k=1), VarianceFilter("top_p", 0.6, include_zero=True,
                                                             divisor="batch"))


def literal_mask(rewards, group_ids, top_p: float) -> list:
    """The definition read literally, in exact rational arithmetic: sample variances, a stable
    descending sort, and the shortest prefix whose sum reaches ``top_p`` of the total (the
    batch whole when the total is 0)."""
    order, members = [], {}
    for i, g in enumerate(group_ids):
        if g not in members:
            order.append(g)
            members[g] = []
        members[g].append(Fraction(float(rewards[i])))
    var = {g: (statistics.variance(members[g]) if len(members[g]) > 1 else Fraction(0))
           for g in order}
    ranked = sorted(order, key=lambda g: var[g], reverse=True)
    total = sum(var.values())
    if total <= 0:
        return [True] * len(group_ids)
    target = Fraction(top_p) * total
    length = next(n for n in range(1, len(ranked) + 1) if sum(var[g] for g in ranked[:n]) >= target)
    kept = set(ranked[:length])
    return [g in kept for g in group_ids]


def literal_checks(seed: int) -> list:
    """The reference mask against the literal definition on ragged batches."""
    from ...theory.variance_filter import VarianceFilter, variance_filter_mask

    rng = np.random.default_rng(seed)
    worst = 0
    for _ in range(N_LITERAL):
        B = int(rng.integers(1, 7))
        ids = np.repeat(np.arange(B), rng.integers(1, 6, size=B))
        rewards = rng.choice((0.0, 1.0), size=len(ids))
        top_p = float(rng.choice((0.3, 0.5, 0.7, 0.9, 1.0)))
        got = variance_filter_mask(rewards, ids, VarianceFilter("top_p", top_p))
        worst += int(got.tolist() != literal_mask(rewards, ids.tolist(), top_p))
    return [check_true(f"the reference mask is the definition read literally on {N_LITERAL} "
                       "ragged batches (sample variance, stable sort, shortest prefix)",
                       worst == 0, worst, note="measured: batches that differ")]


def exact_checks() -> list:
    """Level-count moments against batch-by-batch enumeration."""
    from ...policies.examples import small_bandit
    from ...theory.variance_filter import batch_group_weights, variance_filtered_moments
    from ...training.batch_study import batch_enumeration

    bandit = small_bandit()
    moments, g_sq = bandit.moments(), float(bandit.grad @ bandit.grad)
    checks = []
    for G, B in ENUMERATED:
        for spec in _specs():
            want = batch_enumeration(bandit, "grpo", G, B,
                                     group_weights=lambda r, s=spec: batch_group_weights(r, s))
            got = variance_filtered_moments(moments, "grpo", G, B, spec)
            checks.append(check_exact(
                f"{spec.strategy} {spec.top_p if spec.strategy == 'top_p' else spec.top_k}, "
                f"{spec.divisor}, G = {G}, B = {B}: MSE and <E g_F, g>",
                [want.mse, want.projection], [got.mse, got.mean_factor * g_sq],
                note=f"enumerating {want.n_batches} batches"))
    return checks


def monte_carlo_checks(ctx) -> list:
    """Exact moments against both samplers, and the late prefix as negative control."""
    from ...montecarlo import Backend, run_monte_carlo
    from ...montecarlo.variance_filter import variance_filter_statistics
    from ...policies.examples import small_bandit
    from ...theory import variance_filter as vf

    bandit = small_bandit()
    moments, g_sq = bandit.moments(), float(bandit.grad @ bandit.grad)
    G, B = MC_CASE
    n = strict_reps(ctx.reps(*REPS))
    specs = _specs()[1:3]  # top_p 0.5 and top_k 1
    checks, controls = [], []
    for i, backend in enumerate(("numba", "torch")):
        for j, spec in enumerate(specs):
            exact = vf.variance_filtered_moments(moments, "grpo", G, B, spec)
            stat, labels = variance_filter_statistics(bandit, "grpo", G, B, spec,
                                                      backend=Backend(backend, "cpu"))
            est = run_monte_carlo(stat, n, ctx.seed_for("C58", 2 * i + j),
                                  n_jobs=ctx.n_jobs, labels=labels)
            mse, se = est.get(("sq", labels[0][1], G))
            proj, proj_se = est.get(("proj", labels[0][1], G))
            where = f"{backend} backend, {n} steps, G = {G}, B = {B}"
            checks += [check_close(f"{labels[0][1]} {spec.strategy}: MSE ({backend})", exact.mse,
                                   mse, se, z=Z_STRICT, note=where),
                       check_close(f"{labels[0][1]} {spec.strategy}: <g_F, g> ({backend})",
                                   exact.mean_factor * g_sq, proj, proj_se, z=Z_STRICT,
                                   note=where)]
            if spec.strategy == "top_p":
                late = _late_prefix_mse(vf, moments, G, B, spec)
                controls.append(abs(mse - late) / se)
    weakest = float(min(controls))
    checks.append(check_true(f"negative control: the prefix cut one group late, outside "
                             f"{Z_STRICT:g} se on both backends", weakest > Z_STRICT, weakest,
                             evidence="monte-carlo",
                             note="measured: the smallest |z|; a power check, no rate stated"))
    return checks


def late_level_kept(real):
    """``_level_kept`` with the top_p prefix cut one group late: one more group, from the first
    level (in decreasing variance) with a group with spread left (the planted control)."""
    def late(counts, level_var, spec):
        kept = real(counts, level_var, spec)
        desc = np.argsort(-level_var, kind="stable")
        room = (counts > kept)[:, desc] & (level_var[desc] > spec.epsilon)  # (M, J)
        first = np.argmax(room, axis=1)
        rows = np.flatnonzero(room.any(axis=1) & (kept.sum(axis=1) < counts.sum(axis=1)))
        kept = kept.copy()
        kept[rows, desc[first[rows]]] += 1
        return kept
    return late


def _late_prefix_mse(vf, moments, G, B, spec) -> float:
    """The exact MSE had the top_p prefix been cut one group late."""
    real = vf._level_kept
    vf._level_kept = late_level_kept(real)
    try:
        return vf.variance_filtered_moments(moments, "grpo", G, B, spec).mse
    finally:
        vf._level_kept = real


def map_checks() -> list:
    """Where the filter helps and where it biases, exact on the known-value bandit."""
    from ...policies.examples import known_value_bandit
    from ...theory.variance_filter import VarianceFilter, variance_filtered_moments

    m = known_value_bandit(list(VALUES)).moments()
    G, B = 8, 16

    def at(rule, **kw):
        return variance_filtered_moments(m, rule, G, B, VarianceFilter("top_p", **kw))

    kept = at("grpo", top_p=0.9)
    whole = at("grpo", top_p=1.0, divisor="batch")
    loo_half = at("grpo", top_p=0.5, divisor="batch")
    std_half = at("verl_grpo", top_p=0.5, divisor="batch")
    where = f"known-value bandit p = {VALUES}, G = {G}, B = {B}"
    return [
        check_true("averaged over the kept groups, top_p = 0.9 scales the mean step by more "
                   "than 1 (biased along g)", kept.mean_factor > 1.05, kept.mean_factor,
                   note=f"{where}; measured: <E g_F, g>/||g||^2, keep rate {kept.keep_rate:.3f}"),
        check_true("averaged over the kept groups, top_p = 0.9 has a larger MSE than the "
                   "unfiltered batch", kept.mse > kept.unfiltered_mse,
                   kept.mse / kept.unfiltered_mse, note=f"{where}; measured: the MSE ratio"),
        check_exact("with the batch's normaliser, top_p = 1 is the unfiltered batch",
                    whole.unfiltered_mse, whole.mse, note=where),
        check_true("with the batch's normaliser, top_p = 0.5 shrinks leave-one-out's step "
                   "and raises its MSE", loo_half.mean_factor < 0.9
                   and loo_half.mse > loo_half.unfiltered_mse, loo_half.mse / loo_half.unfiltered_mse,
                   note=f"{where}; measured: the MSE ratio; mean factor {loo_half.mean_factor:.3f}"),
        check_true("with the batch's normaliser, top_p = 0.5 lowers the std-normalised rule's "
                   "MSE", std_half.mse < std_half.unfiltered_mse,
                   std_half.mse / std_half.unfiltered_mse, note=f"{where}; measured: the MSE ratio"),
    ]


@register("C58", "Beyond the paper: RAGEN-2's reward-variance filter (top_p, top_k) "
          "keeps the groups its definition names; the kept batch's exact MSE and mean equal "
          "enumeration of every batch and Monte Carlo on both backends; averaged over the kept "
          "groups it scales the step by more than 1 and raises the MSE against g, while with a "
          "constant normaliser top_p < 1 shrinks the step, which lowers the std-normalised "
          "rule's MSE and raises leave-one-out's",
          "derived (docs/theory.md C58; section 7, \"The reward-variance filter\")",
          "a literal reading of the definition on ragged batches; level-count moments against "
          "batch enumeration (1e-12) and the numba and torch samplers; exact moments on the "
          "known-value bandit; the late prefix as the negative control")
def check_c58(ctx) -> list:
    return (literal_checks(ctx.seed_for("C58", 9)) + exact_checks()
            + monte_carlo_checks(ctx) + map_checks())
