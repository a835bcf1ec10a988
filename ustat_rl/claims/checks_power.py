"""Checks that turn on kinds of bug the theorem checks cannot see (docs/theory.md C1, C3, C6, C20).

A theorem check compares a Monte Carlo or exact value with its prediction; some bugs leave
every such value plausible. These checks test the machinery under the theorem checks directly:

* ``C6.engine``: Monte Carlo results do not depend on the worker count, distinct blocks (numba)
  and sub-blocks (torch) draw distinct replicates, and a change of block size changes the
  numba estimate only within its standard errors (a stream shared across blocks fails);
* ``C3.enum``: every exact enumeration's probabilities sum to one (softmax groups, the
  log-linear policy through its softmax bandit, the transformer's output list);
* ``C20.inv``: the weighted chi-square's ``ppf``/``isf`` against the reference, tails below
  1e-30, and Ruben's series on its own;
* ``C1.loo``: the leave-one-out baseline helper against its definition, sample by sample;
* ``C2.kit``: the conformance kit passes an independent implementation of a convention and
  rejects one with the population std, its batches keep their ties and all-equal groups
  (measured from outside, on the batches it hands to the function), and the loss
  aggregations agree token by token with their per-sequence form; its tolerance is its
  documented rounding bound, tight enough to reject a bug of 4 bounds, and each of its call
  signatures accepts a conforming implementation and rejects wrong ones
  (:mod:`ustat_rl.claims.kit_routes`).

Exact comparisons have rounding tolerances; the statistical ones state their rates.
"""

from __future__ import annotations

import copy

import numpy as np

from ..advantages.gradients import leave_one_out_baseline
from ..montecarlo import bandit_statistics, run_monte_carlo
from ..policies.examples import arithmetic_bandit, conflicting_prompts_bandit
from ..policies.loglinear import LogLinearBandit
from ..tolerances import Z_CHECK
from .kit_routes import signature_checks, tolerance_checks
from .registry import check_close, check_exact, check_true, register

#: Monte Carlo size of the engine checks: blocks of ``ENGINE_BLOCK`` replicates.
ENGINE_REPS, ENGINE_BLOCK = 8192, 512


def _numba_statistic(bandit):
    statistic, labels = bandit_statistics(bandit, ("grpo", "vanilla"), (4, 16), 2)
    return statistic, labels


@register("C6.engine", "Monte Carlo results do not depend on the worker count or the block size "
          "(numba and torch CPU), and distinct blocks draw independent replicates",
          "docs/theory.md C6 (the Monte Carlo behind C3-C11)",
          "the minibatch statistic of C6 at n_jobs 1 and 2, block sizes 512 and 2048; block means "
          "recorded one by one; torch sub-blocks of 64 groups")
def check_c6_engine(ctx) -> list:
    bandit = arithmetic_bandit(1.0, n_prompts=6, n_actions=8)
    statistic, labels = _numba_statistic(bandit)
    seed = ctx.seed_for("C6.engine")
    blocks = []

    def recorded(rng, n):
        values = statistic(rng, n)
        blocks.append(values.mean(axis=0))
        return values

    one = run_monte_carlo(recorded, ENGINE_REPS, seed, block_size=ENGINE_BLOCK, n_jobs=1)
    two = run_monte_carlo(statistic, ENGINE_REPS, seed, block_size=ENGINE_BLOCK, n_jobs=2)
    means = np.array(blocks)  # (n_blocks, m)
    distinct = len({row.tobytes() for row in means})
    wide = run_monte_carlo(statistic, ENGINE_REPS, child_key(seed), block_size=4 * ENGINE_BLOCK)
    checks = [
        check_exact("numba: n_jobs = 2 gives the n_jobs = 1 means", one.mean, two.mean,
                    rtol=0.0, atol=0.0),
        check_exact("numba: n_jobs = 2 gives the n_jobs = 1 covariance", one.cov, two.cov,
                    rtol=1e-12, atol=0.0),
        check_true(f"numba: the {len(means)} blocks drew distinct replicates",
                   distinct == len(means), float(distinct),
                   note="block means compared bit for bit; a stream shared across blocks "
                        "repeats them"),
    ]
    # independent seeds: the difference has variance se1^2 + se2^2
    for i in (0, len(labels) - 1):
        diff = float(wide.mean[i] - one.mean[i])
        se = float(np.hypot(wide.std_error[i], one.std_error[i]))
        checks.append(check_close(f"numba: block size {4 * ENGINE_BLOCK} vs {ENGINE_BLOCK}, "
                                  f"{labels[i]}", 0.0, diff, se, z=Z_CHECK))
    checks += _torch_checks(bandit, ctx)
    return checks


def child_key(seed):
    """A seed independent of ``seed`` (its first spawned child)."""
    return seed.spawn(1)[0]


def _torch_checks(bandit, ctx) -> list:
    from ..montecarlo.torch_backend import TorchBanditStatistic

    statistic, _ = bandit_statistics(bandit, ("grpo",), (4,), 2, backend="torch", device="cpu")
    if not isinstance(statistic, TorchBanditStatistic):  # kept under python -O, unlike assert
        raise TypeError(f"backend='torch' gave a {type(statistic).__name__}, not the torch "
                        "statistic whose sub-blocks this check varies")
    small = copy.copy(statistic)
    small.sub_block_size = 64  # many sub-blocks at a small cost (the unit of randomness)
    seed = ctx.seed_for("C6.engine", 1)
    a = run_monte_carlo(small, 1024, seed, n_jobs=1)
    b = run_monte_carlo(small, 1024, seed, n_jobs=2, block_size=7)
    rows = small(np.random.default_rng(seed), 1024)  # (1024, m) 16 sub-blocks in order
    sub_means = rows.reshape(16, 64, -1).mean(axis=1)
    distinct = len({row.tobytes() for row in sub_means})
    return [
        check_exact("torch CPU: n_jobs and block_size leave the means unchanged", a.mean, b.mean,
                    rtol=1e-13, atol=0.0),
        check_true("torch CPU: the 16 sub-blocks drew distinct replicates", distinct == 16,
                   float(distinct), note="sub-block means compared bit for bit"),
    ]


@register("C3.enum", "Every exact enumeration covers its outcomes: probabilities sum to 1 for "
          "softmax groups, the log-linear policy and the transformer's output list",
          "docs/theory.md C3 (enumeration routes of C3-C5, C11, C25)",
          "sums of the enumerated probabilities, in float64")
def check_c3_enum(ctx) -> list:
    from ..policies.transformer import (
        ArithmeticTask,
        enumerate_moments,
        load_study_policy,
        make_splits,
    )

    checks = []
    bandit = arithmetic_bandit(1.0, n_prompts=3, n_actions=8)
    for prompt, group in ((0, 2), (1, 3)):
        _, _, prob = bandit.enumerate_groups(prompt, group)
        checks.append(check_exact(f"softmax bandit: sum of (2K)^G group probabilities, x = "
                                  f"{prompt}, G = {group}", 1.0, prob.sum(), rtol=1e-12))
    loglinear = conflicting_prompts_bandit()  # shared parameters, a KL penalty
    theta = loglinear.ref_theta + 0.3
    checks.append(check_exact("log-linear bandit: sum_a pi(a|x) at every prompt",
                              np.ones(loglinear.n_prompts),
                              loglinear.state(theta).policy.sum(axis=1), rtol=1e-12))
    tabular = LogLinearBandit.tabular([[0.9, 0.2, 0.0], [0.1, 0.5, 0.7]])
    _, _, prob = tabular.as_softmax_bandit(np.linspace(-1.0, 1.0, 6)).enumerate_groups(1, 3)
    checks.append(check_exact("log-linear (tabular) bandit: sum of group probabilities, G = 3",
                              1.0, prob.sum(), rtol=1e-12))
    policy, _ = load_study_policy("medium", device="cpu")
    questions = list(make_splits(ArithmeticTask(), seed=0).test[:1])
    enum = enumerate_moments(policy, questions)
    # float32 log-probabilities summed over 111 outputs round by about 1e-7; 1e-6 misses
    # only a dropped output rarer than that
    checks.append(check_exact("transformer: sum of pi(y|x) over the enumerated outputs",
                              np.ones(len(questions)), enum.prob_total, rtol=1e-6))
    return checks


@register("C20.inv", "The weighted chi-square's inverse functions and deep tails match the "
          "reference: cdf(ppf(p)) = p and sf(isf(p)) = p by the reference, sf below 1e-30, and "
          "Ruben's series alone",
          "docs/theory.md C20 (Theorem 8 limit law)",
          "mpmath references (Gil-Pelaez contour, exact chi-square and two-weight integrals) at "
          "the toolkit's quantiles")
def check_c20_inv(ctx) -> list:
    from ..weighted_chi2 import WeightedChiSquare
    from ..weighted_chi2._reference import reference_chi2, reference_probability

    weights = np.array([2.0, 1.0, 0.5, 0.25])
    dist = WeightedChiSquare(weights)
    checks = []
    for p in (1e-12, 0.3):
        x = float(dist.ppf(p))
        ref = float(reference_probability(weights, x, "cdf")[0])
        checks.append(check_exact(f"reference cdf at ppf({p:g})", p, ref, rtol=1e-8, atol=0.0))
        x = float(dist.isf(p))
        ref = float(reference_probability(weights, x, "sf")[0])
        checks.append(check_exact(f"reference sf at isf({p:g})", p, ref, rtol=1e-8, atol=0.0))
    # below 1e-30, where the series has handed over to inversion; 1e-10 is the documented
    # accuracy of sf there (tests/test_weighted_chi2.py)
    for p in (1e-40, 1e-120):
        x = float(dist.isf(p))
        ref = float(reference_probability(weights, x, "sf")[0])
        checks.append(check_exact(f"deep tail: reference sf at isf({p:g})", p, ref, rtol=1e-8,
                                  atol=0.0))
        checks.append(check_exact(f"deep tail: sf at isf({p:g}) vs reference", ref,
                                  float(dist.sf(x)), rtol=1e-10, atol=0.0))
    one = WeightedChiSquare([0.7, 0.7, 0.7])
    x = float(one.isf(1e-40))
    checks.append(check_exact("chi-square(3) x 0.7: exact sf at isf(1e-40)", 1e-40,
                              float(reference_chi2(3, 0.7, x, "sf")), rtol=1e-8, atol=0.0))
    ruben = WeightedChiSquare(weights, method="ruben")
    for x in (0.5, 4.0, 20.0):
        for kind in ("cdf", "sf"):
            ref = float(reference_probability(weights, x, kind)[0])
            checks.append(check_exact(f"Ruben series alone: {kind}({x:g})", ref,
                                      float(getattr(ruben, kind)(x)), rtol=1e-10, atol=0.0))
    return checks


@register("C1.loo", "The leave-one-out baseline helper returns the mean of the other rewards, "
          "sample by sample, for every group size",
          "Lemma 1; docs/theory.md C1 (Eq. (4) with the intended index)",
          "estimators.leave_one_out_baseline against an explicit loop over k != g")
def check_c1_loo(ctx) -> list:
    rng = np.random.default_rng(ctx.seed_for("C1.loo"))
    checks = []
    for group in (2, 3, 8):
        reward = rng.normal(size=(5, group))  # (B, G)
        loop = np.array([[np.mean(np.delete(row, g)) for g in range(group)] for row in reward])
        checks.append(check_exact(f"Zbar_(-g) = mean of the other rewards, G = {group}", loop,
                                  leave_one_out_baseline(reward), rtol=1e-13, atol=1e-15))
    return checks


#: Smallest fraction of the kit's groups (size >= 2) that must be all-equal (size >= 3, at a
#: value other than 0 or 1), and that must hold a tie: the all-equal kind is one of the
#: generator's six (measured: 36 of 118 groups at 80 examples, derandomized), so 1/30 is a wide
#: margin; without that kind the count is 0 (measured 0 of 209).
KIT_MIN_FRACTION = 1 / 30
KIT_EXAMPLES = 80


def _trl_group_loop(rewards, group_ids, ddof: int = 1):
    """TRL ``scale_rewards="group"`` written independently: one group at a time, float64."""
    z = np.asarray(rewards, dtype=np.float64)
    out = np.empty_like(z)
    for gid in np.unique(group_ids):
        idx = np.flatnonzero(group_ids == gid)
        centre = z[idx].mean()
        spread = z[idx].std(ddof=ddof) if idx.size > ddof else 0.0
        out[idx] = (z[idx] - centre) / (spread + 1e-4)
    return out


@register("C2.kit", "The conformance kit accepts a correct convention implementation, rejects a "
          "wrong one (by as little as 4 of its rounding bounds), and draws ties and all-equal "
          "groups, under each call signature; loss aggregations equal their per-sequence form",
          "docs/theory.md C2 (the conventions of section 2); docs/conventions.md",
          "check_conformance on a loop implementation of trl_group and on a population-std "
          "negative control; tie frequencies of the batches it passes; its tolerance against "
          "the documented bound, with implementations 0.99 and 4 bounds off; verl- and "
          "TRL-style implementations right and wrong; aggregate_token_gradients vs "
          "aggregate_scores")
def check_c2_kit(ctx) -> list:
    from ..conformance.kit import check_conformance
    from ..frameworks.aggregation import AGGREGATIONS, aggregate_scores, aggregate_token_gradients

    seen = []

    def recording(rewards, group_ids):
        seen.append((np.asarray(rewards, dtype=np.float64).copy(), np.asarray(group_ids).copy()))
        return _trl_group_loop(rewards, group_ids)

    good = check_conformance(recording, "trl_group", max_examples=KIT_EXAMPLES)
    bad = check_conformance(lambda z, ids: _trl_group_loop(z, ids, ddof=0), "trl_group",
                            max_examples=KIT_EXAMPLES, shrink=False)
    equal = tied = total = 0
    for z, ids in seen:
        for gid in np.unique(ids):
            vals = z[ids == gid]
            if vals.size < 2:
                continue
            total += 1
            n_distinct = np.unique(vals).size
            # all-equal at a value hypothesis's own float strategy rarely repeats three times
            base = vals[0] - np.round(vals[0] / 1e6) * 1e6  # the offset of 0 or 1e6 removed
            equal += n_distinct == 1 and vals.size >= 3 and base not in (0.0, 1.0)
            tied += n_distinct < vals.size
    checks = [
        check_true("kit: a loop implementation of trl_group conforms", good.passed,
                   float(good.n_examples), note=f"{good.n_examples} batches"),
        check_true("kit: the population-std variant does not conform (negative control)",
                   not bad.passed, float(bad.n_examples),
                   note=bad.failure.message if bad.failure is not None else "no failure found"),
        check_true(f"kit batches: all-equal groups (size >= 3, value not 0 or 1) >= "
                   f"{KIT_MIN_FRACTION:.3f} of groups", total > 0 and equal / total
                   >= KIT_MIN_FRACTION, equal / max(total, 1),
                   note=f"{equal} of {total} groups of size >= 2; 0 when the generator's "
                        f"all-equal kind is lost"),
        check_true(f"kit batches: groups with a tie >= {KIT_MIN_FRACTION:.3f} of groups",
                   total > 0 and tied / total >= KIT_MIN_FRACTION, tied / max(total, 1),
                   note=f"{tied} of {total} groups of size >= 2; hypothesis's float strategy "
                        f"repeats values itself, so this guards against a generator that "
                        f"separates every value, not against the loss of the ties kind alone"),
    ]
    rng = np.random.default_rng(ctx.seed_for("C2.kit"))
    n, t_max, d = 5, 6, 3
    lengths = rng.integers(1, t_max + 1, size=n)  # (N,)
    mask = (np.arange(t_max)[None, :] < lengths[:, None]).astype(float)  # (N, T)
    token_scores = rng.normal(size=(n, t_max, d))  # (N, T, d)
    advantages = rng.normal(size=n)
    scores = (token_scores * mask[:, :, None]).sum(axis=1)  # (N, d) W_i
    for mode in AGGREGATIONS:
        horizon = t_max if mode == "seq-mean-token-sum-norm" else None
        checks.append(check_exact(
            f"aggregation {mode}: token-by-token == sum_i c_i A_i W_i",
            aggregate_scores(advantages, scores, lengths, mode, horizon),
            aggregate_token_gradients(advantages, token_scores, mask, mode, horizon),
            rtol=1e-12, atol=1e-14))
    paper = aggregate_scores(advantages, scores, lengths, "seq-mean-token-sum")
    checks.append(check_exact("seq-mean-token-sum is the paper's (1/N) sum_i A_i W_i",
                              advantages @ scores / n, paper, rtol=1e-12, atol=1e-14))
    return checks + tolerance_checks() + signature_checks()
