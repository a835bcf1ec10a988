"""The monitor's noise at the run's own group size is unbiased for every rule (docs/theory.md C53).

Windows of generation batches are drawn from bandits with exact moments (a softmax bandit for
the single-reward rules, a two-channel bandit for TRL's multi-reward orders) and estimated by the
monitor's route, :func:`ustat_rl.frameworks.window.window_noise` (each batch's advantages by the
run's rule, the leave-one-out terms as the target, :func:`ustat_rl.pilot.run_noise.run_noise`).
Over many windows the mean estimates of the step's variance and MSE must equal the exact values
(:func:`ustat_rl.theory.minibatch_variance`, :func:`~ustat_rl.theory.minibatch_mse`,
:func:`ustat_rl.theory.multichannel.multichannel_moments`) within ``Z_STRICT`` standard errors,
TRL's default ``trl_group`` (group std) included; the plug-in (the rule's exact formulas at the
window's estimated moments, what the monitor reported before) must be rejected by the same
comparison (the negative control), and the exact binomial interval of the 90% intervals'
measured coverage must hold 0.9. The pairwise definitions of the estimates
(:mod:`ustat_rl.pilot.run_noise_definition`) are the exact second route that C48 and the tests use.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from ...tolerances import Z_STRICT
from ..registry import check_close, check_interval, check_true, register

__all__ = ["single_rule_windows", "multi_rule_windows", "plug_in_windows", "RUN_NOISE_RULES",
           "RUN_NOISE_MULTI_RULES"]

#: Single-reward rules whose run estimates are checked: TRL's default and its "none", the paper's
#: leave-one-out, NeMo-RL's leave-one-out std and verl's default (group std, epsilon 1e-6).
RUN_NOISE_RULES = ("trl_group", "trl_none", "grpo", "nemo_rl_grpo", "verl_grpo")
#: TRL's two orders with several reward functions (weights below), both group rules.
RUN_NOISE_MULTI_RULES = ("trl_normalize_then_sum", "trl_sum_then_normalize")
RUN_NOISE_WEIGHTS = (1.0, 0.5)
#: G, groups per generation batch (B) and batches per window: TRL's default-sized groups of 4.
RUN_G, RUN_B, RUN_POOL = 4, 16, 4
#: Two-sided rate of the exact (Clopper-Pearson) interval of a measured coverage.
COVERAGE_RATE = 1e-4
#: ``Phi^{-1}(0.8)``: a bias of ``(z + POWER_Z) se`` is detected 80% of the time.
POWER_Z = 0.8416
LEVEL = 0.9


# ---------------------------------------------------------------------- windows
def single_rule_windows(estimator, rng, n_windows):
    """``(n, 4)``: variance and MSE estimates and whether their intervals cover the exact ones,
    over windows of a softmax bandit; and the exact ``(variance, MSE)``."""
    from ...frameworks.window import Batch, window_noise
    from ...policies.examples import small_bandit
    from ...scores.bandit import bandit_pilot
    from ...theory import minibatch_mse, minibatch_variance

    bandit = small_bandit()
    exact = bandit.moments()
    truth = (float(minibatch_variance(exact, estimator, RUN_G, RUN_B)),
             float(minibatch_mse(exact, estimator, RUN_G, RUN_B)))
    n = RUN_G * RUN_B
    rows = []
    for _ in range(n_windows):
        pilot = bandit_pilot(bandit, RUN_B * RUN_POOL, RUN_G, rng)
        batches = [Batch(j, RUN_G, pilot.reward[j * n:(j + 1) * n],
                         pilot.score[j * n:(j + 1) * n], j * RUN_B) for j in range(RUN_POOL)]
        noise, _ = window_noise(batches, estimator, LEVEL)
        rows.append((noise.variance.estimate, noise.mse.estimate,
                     noise.variance.covers(truth[0]), noise.mse.covers(truth[1])))
    return np.array(rows), truth


def plug_in_windows(estimator, rng, n_windows):
    """The negative control: the rule's exact formulas at each window's estimated moments."""
    from ...pilot.estimate import rule_moments
    from ...policies.examples import small_bandit
    from ...scores.bandit import bandit_pilot
    from ...theory import minibatch_mse, minibatch_variance

    bandit = small_bandit()
    rows = []
    for _ in range(n_windows):
        moments = rule_moments(bandit_pilot(bandit, RUN_B * RUN_POOL, RUN_G, rng), estimator)
        rows.append((float(minibatch_variance(moments, estimator, RUN_G, RUN_B)),
                     float(minibatch_mse(moments, estimator, RUN_G, RUN_B))))
    return np.array(rows)


def multi_rule_windows(estimator, rng, n_windows):
    """As :func:`single_rule_windows` for a multi-reward rule on the two-channel bandit."""
    from ...frameworks.window import Batch, window_noise
    from ...policies.multichannel import multireward_bandit
    from ...theory.multichannel import multichannel_moments

    bandit = multireward_bandit()
    w = np.array(RUN_NOISE_WEIGHTS)
    exact = multichannel_moments(bandit.channel_moments(), estimator, RUN_G, w, RUN_B)
    truth = (float(exact.second_moment - exact.mean_norm_sq), float(exact.mse))
    rows = []
    for _ in range(n_windows):
        batches = []
        for j in range(RUN_POOL):
            x, action, outcome = bandit.sample(RUN_G, RUN_B, rng)
            z = bandit.rewards(outcome).reshape(-1, bandit.n_channels)  # (n, K)
            score = bandit.scores(x, action).reshape(RUN_G * RUN_B, -1)
            batches.append(Batch(j, RUN_G, z @ w, score, j * RUN_B, z))
        noise, _ = window_noise(batches, estimator, LEVEL, w)
        rows.append((noise.variance.estimate, noise.mse.estimate,
                     noise.variance.covers(truth[0]), noise.mse.covers(truth[1])))
    return np.array(rows), truth


def _mean_and_se(values) -> tuple[float, float]:
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def _compare(name, rows, truth) -> list:
    checks = []
    for column, what, want in ((0, "variance", truth[0]), (1, "MSE", truth[1])):
        mean, se = _mean_and_se(rows[:, column])
        power = (Z_STRICT + POWER_Z) * se / abs(want)
        checks.append(check_close(f"{name}: mean {what} estimate = exact at G = {RUN_G}, "
                                  f"B = {RUN_B}", want, mean, se, z=Z_STRICT,
                                  note=f"{rows.shape[0]} windows of {RUN_POOL * RUN_B} groups; "
                                       f"detects a relative bias of {power:.1%} at 80% power"))
    return checks


@register("C53", "Beyond the paper: at the run's own G the monitor's variance and MSE of the "
          "run's rule are unbiased for every rule (TRL's default group std and the multi-reward "
          "orders included), with intervals that cover; the plug-in of the rule's exact "
          "formulas is not",
          "derived (docs/theory.md C53 and section 8; the monitor's var_run and mse_run)",
          "window_noise over many windows of bandits with exact moments against "
          "minibatch_variance/minibatch_mse and the multi-channel theory; the plug-in as the "
          "negative control; 90% interval coverage against a binomial band")
def check_c53(ctx) -> list:
    n_windows = ctx.reps(120, 800)
    checks = []
    coverage = None
    for i, rule in enumerate(RUN_NOISE_RULES):
        rows, truth = single_rule_windows(rule, np.random.default_rng(ctx.seed_for("C53", i)),
                                      n_windows)
        checks += _compare(rule, rows, truth)
        if rule == "trl_group":
            coverage = rows[:, 2:]
            plug = plug_in_windows(rule, np.random.default_rng(ctx.seed_for("C53", 50)),
                                    n_windows)
            mean, se = _mean_and_se(plug[:, 0])
            z = (mean - truth[0]) / se
            checks.append(check_true(
                "negative control: the plug-in variance of trl_group is rejected by the same "
                "comparison", abs(z) > Z_STRICT, z, evidence="monte-carlo",
                note=f"plug-in / exact = {mean / truth[0]:.3f}, z = {z:.1f}: low by about "
                     f"(G - 1)/G = {(RUN_G - 1) / RUN_G:.2f}"))
    for i, rule in enumerate(RUN_NOISE_MULTI_RULES):
        rows, truth = multi_rule_windows(rule, np.random.default_rng(ctx.seed_for("C53", 100 + i)),
                                     n_windows)
        checks += _compare(f"{rule} (weights {RUN_NOISE_WEIGHTS})", rows, truth)
    for column, what in ((0, "variance"), (1, "MSE")):
        count = int(coverage[:, column].sum())
        band = sps.binomtest(count, n_windows).proportion_ci(1.0 - COVERAGE_RATE)
        checks.append(check_interval(
            f"trl_group: {LEVEL:.0%} interval of the {what} covers the exact value at its level",
            LEVEL, count / n_windows, band.low, band.high,
            note=f"{count} of {n_windows} windows; exact binomial interval of the coverage, "
                 f"two-sided false-failure rate {COVERAGE_RATE:g}"))
    return checks
