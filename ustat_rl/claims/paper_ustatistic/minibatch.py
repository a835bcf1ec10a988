"""Proposition 3: the minibatch MSE (C6), measured through the torch backend too (C6.torch),
and the Monte Carlo machinery every MSE check relies on (C6.engine): results do not depend on the
worker count, distinct blocks (numba) and sub-blocks (torch) draw distinct replicates, and a
change of block size changes the numba estimate only within its standard errors (a stream shared
across blocks fails).

Exact comparisons have rounding tolerances; the statistical ones state their rates.
"""

from __future__ import annotations

import copy

import numpy as np

from ...montecarlo import Backend, bandit_squared_errors, bandit_statistics, run_monte_carlo
from ...policies.enumeration import enumerate_prompt_estimates
from ...policies.examples import arithmetic_bandit, small_bandit
from ...policies.softmax import SoftmaxBandit
from ...stats.rates import loglog_slope
from ...tolerances import Z_CHECK, Z_STRICT, strict_reps
from .._common import SLOPE_LEVEL, mc_errors
from ..registry import check_close, check_exact, check_interval, check_true, register
from .mse import ESTS


@register("C6", "Minibatch MSE = E||g(X) - g||^2/B + E tr Sigma_oracle(X)/(BG) + "
          "E[E||W||^2 Var(Z|X) + ||g(X)||^2]/(BG(G-1)); the prompt-variance term is shared by "
          "every estimator and does not depend on G; the MSE scales as 1/B.", "Proposition 3",
          "enumeration of minibatches, Monte Carlo over B and G")
def check_c6(ctx):
    small = small_bandit()
    checks = []
    for est in ("vanilla", "grpo", "oracle", "fullmean"):
        checks.append(check_exact(f"minibatch MSE == enumeration, {est}, G=2, B=2",
                                  _enumerated_minibatch_mse(small, est, 2, 2),
                                  small.exact_mse(est, 2, 2)))
    bandit = arithmetic_bandit(2.8)
    c = bandit.scaling_constants()
    checks.append(check_exact("exact GRPO minibatch MSE == (c1 + c2/G + c3/(G(G-1)))/B, G=8, B=4",
                              (c.c1 + c.c2 / 8 + c.c3 / 56) / 4, bandit.exact_mse("grpo", 8, 4)))
    batches = np.array([1, 2, 4, 8])
    n_reps = ctx.reps(strict_reps(20_000), strict_reps(200_000))  # 24 comparisons at Z_STRICT
    per_b = []
    for i, b in enumerate(batches):
        est = mc_errors(ctx, "C6", bandit, (4, 16), n_reps, batch_size=int(b), stream=i)
        per_b.append(est)
        for name in ESTS:
            for g in (4, 16):
                m, se = est.get((name, g))
                within = bandit.prompt_averaged_mse(name, g)
                checks.append(check_close(f"B x MSE - E_X MSE(X) == c1, {name}, G={g}, B={b}",
                                          c.c1, b * m - within, b * se, z=Z_STRICT))
    means = np.array([e.get(("grpo", 16))[0] for e in per_b])
    ses = np.array([e.get(("grpo", 16))[1] for e in per_b])
    fit = loglog_slope(batches, means, std_error=ses, level=SLOPE_LEVEL)
    checks.insert(0, check_interval("log-log slope of GRPO MSE in B (1/B scaling), G=16", -1.0,
                                    fit.slope, fit.ci_low, fit.ci_high,
                                    note="99.99% WLS interval; false-failure rate 1e-4"))
    return checks


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
    from ...montecarlo.torch_backend import TorchBanditStatistic

    statistic, _ = bandit_statistics(bandit, ("grpo",), (4,), 2, backend=Backend("torch", "cpu"))
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


@register("C6.torch", "Proposition 3's exact minibatch MSE, measured with the torch Monte Carlo "
          "backend (CPU): every estimator, G = 4 and 16, B = 2.", "Proposition 3",
          "Monte Carlo through backend='torch' (the same law drawn by other code than the numba "
          "kernel) against the exact minibatch MSE")
def check_c6_torch(ctx):
    return _torch_backend_checks(ctx, arithmetic_bandit(2.8))


def _torch_backend_checks(ctx, bandit: SoftmaxBandit) -> list:
    """The torch Monte Carlo backend (on CPU) against the exact minibatch MSE, every estimator.

    The same law as the numba kernel drawn by other code, so a bug in either backend turns this
    claim; ``Z_STRICT`` standard errors at ``strict_reps`` replicates, false-failure rate 6.8e-6
    per comparison (ustat_rl.tolerances: eight at ``Z_CHECK`` would exceed a claim's budget).
    """
    names = ("vanilla", "grpo", "oracle", "fullmean")
    stat, labels = bandit_squared_errors(bandit, names, (4, 16), batch_size=2,
                                         backend=Backend("torch", "cpu"))
    est = run_monte_carlo(stat, ctx.reps(strict_reps(20_000), strict_reps(200_000)),
                          ctx.seed_for("C6.torch"),
                          labels=labels, n_jobs=ctx.n_jobs)
    checks = []
    for name, g in labels:
        m, se = est.get((name, g))
        checks.append(check_close(f"torch backend MC MSE == exact, {name}, G={g}, B=2",
                                  bandit.exact_mse(name, g, 2), m, se, z=Z_STRICT))
    return checks


def _enumerated_minibatch_mse(bandit: SoftmaxBandit, estimator: str, group_size: int,
                              batch_size: int) -> float:
    # Every (prompt, group) outcome of one draw, in the full P*K space, then all B-tuples.
    values, probs = [], []
    k = bandit.n_actions
    for x in range(bandit.n_prompts):
        est, prob = enumerate_prompt_estimates(bandit, x, group_size, estimator)
        full = np.zeros((len(prob), bandit.dim))
        full[:, x * k:(x + 1) * k] = est
        values.append(full)
        probs.append(prob * bandit.prompt_prob[x])
    values, probs = np.concatenate(values), np.concatenate(probs)
    mean_vec = np.zeros((1, bandit.dim))
    weight = np.ones(1)
    for _ in range(batch_size):  # build the B-fold product distribution of the batch mean
        mean_vec = (mean_vec[:, None, :] + values[None, :, :] / batch_size).reshape(-1, bandit.dim)
        weight = (weight[:, None] * probs[None, :]).ravel()
    return float(weight @ np.sum((mean_vec - bandit.grad) ** 2, axis=1))
