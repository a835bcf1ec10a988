"""The dynamic-sampling and replace reports a user reads, against the routes they should equal (C72).

``ustat-rl gstar --dynamic-sampling`` and ``ustat-rl rewards --dynamic-sampling`` (with
``--replace-ratio``) print, at each ``G`` dividing the budget ``N`` (``B = N/G``), the columns of
:func:`ustat_rl.pilot.dynamic_sampling.pilot_dynamic_sampling` (or
:func:`~ustat_rl.pilot.dynamic_sampling.rewards_dynamic_sampling` from rewards alone) and
:func:`ustat_rl.pilot.replace_sampling.pilot_replace_sampling` (or
:func:`~ustat_rl.pilot.replace_sampling.replace_sampling_report`). On a pilot drawn from a
softmax bandit, every column is set against what it should equal:

* the plug-in keep probability ``1 - mean_x (p_hat^G + (1 - p_hat)^G)`` and the unbiased one
  ``1 - mean_x (C(m, G) + C(n - m, G))/C(n, G)`` (``G <= n`` only), ``p_hat = m/n`` counted here;
  GRPO's kept-batch scale ``1/r`` and relative bias ``1/r - 1`` from the ``r`` the report uses;
* the kept batch's MSE against :func:`ustat_rl.theory.advantage.dynamic_sampling_mse` (another
  module's formula: :mod:`ustat_rl.theory.dynamic_sampling` against section 7's batch terms),
  its squared bias against ``||sum_x s f(x) c(x) g(x) - g||^2`` with that route's scale ``s``
  and the pilot's Gram matrix (leave-one-out's mean factor ``c = 1`` where ``0 < p_hat < 1``;
  ``c = 0`` at a prompt whose pilot group was all-equal, where the made-binary ``V`` is 0 or 1
  and every group has advantage 0, though the estimated ``g(x)`` need not vanish), and the
  unfiltered MSE against :func:`~ustat_rl.theory.advantage.minibatch_advantage_mse`, the route
  it calls (its wiring only), all at the pilot's moments made binary;
* the rewards-only report: the pilot report's keep and cost columns, with no MSE;
* SkyRL's replace: ``pi = P(J > rho B)``, ``J ~ Binomial(B, r)``, and the copies
  ``E[B - J | J > rho B]`` summed here over ``J``; at ``B = 1`` a replaced batch is one kept
  group (``J = 1`` or a redraw), so its MSE and squared bias are the kept batch's at ``B = 1``.

All exact (rtol 1e-10) on one drawn pilot: no false-failure rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import check_exact, check_true, register

__all__ = ["REPORT_PILOT", "REPORT_BUDGET", "REPORT_RATIO", "REPORT_RTOL", "report_pilot",
           "hand_keep", "hand_replace"]

#: The pilot: prompts and samples per prompt (``G = 16`` exceeds the samples: plug-in only).
REPORT_PILOT = (64, 8)
#: The budget ``N`` (``G`` in 2, 4, 8, 16) and SkyRL's ``min_replace_ratio``.
REPORT_BUDGET = 16
REPORT_RATIO = 0.3
#: Closed forms of a few dozen terms each: rounding only.
REPORT_RTOL = 1e-10


def report_pilot(seed):
    """A pilot of :data:`REPORT_PILOT` from C71's bandit (both rewards at every prompt)."""
    from ...scores.bandit import bandit_pilot
    from .enumerated_routes import route_bandit

    return bandit_pilot(route_bandit(), *REPORT_PILOT, np.random.default_rng(seed))


def hand_keep(reward, prompt_id, sizes) -> tuple[list, list]:
    """``(plug-in r, unbiased r or None)`` per ``G``, prompts weighted equally."""
    groups = {}
    for pid, z in zip(prompt_id.tolist(), reward.tolist()):
        groups.setdefault(pid, []).append(z)
    m = np.array([sum(v) for v in groups.values()])
    n = np.array([len(v) for v in groups.values()])
    p = m / n
    plug, unbiased = [], []
    for G in sizes:
        plug.append(1.0 - float(np.mean(p**G + (1.0 - p) ** G)))
        if G <= n.min():
            equal = [(math.comb(int(a), G) + math.comb(int(b) - int(a), G)) / math.comb(int(b), G)
                     for a, b in zip(m, n)]
            unbiased.append(1.0 - float(np.mean(equal)))
        else:
            unbiased.append(None)
    return plug, unbiased


def hand_replace(keep: float, B: int, ratio: float) -> tuple[float, float | None]:
    """``(P(J > rho B), E[B - J | J > rho B])`` for ``J ~ Binomial(B, r)``, summed over ``J``."""
    pmf = [math.comb(B, j) * keep**j * (1.0 - keep) ** (B - j) for j in range(B + 1)]
    used = [j for j in range(B + 1) if j > ratio * B]
    pi = sum(pmf[j] for j in used)
    return pi, (sum((B - j) * pmf[j] for j in used) / pi if pi > 0.0 else None)


def _keep_checks(rollouts, report, rewards_only) -> list:
    plug, unbiased = hand_keep(np.asarray(rollouts.reward), np.asarray(rollouts.prompt_id),
                               report.group_sizes)
    keep = [u if u is not None else r for u, r in zip(unbiased, plug)]
    used = [u is not None for u in unbiased]
    return [
        check_exact(f"pilot_dynamic_sampling: plug-in r at G = {report.group_sizes}",
                    plug, report.keep_prob, rtol=REPORT_RTOL),
        check_true(f"pilot_dynamic_sampling: unbiased r where G <= n = {REPORT_PILOT[1]} "
                   "(U-statistic), none above",
                   [u is None for u in report.keep_prob_unbiased] == [u is None for u in unbiased]
                   and np.allclose([u for u in report.keep_prob_unbiased if u is not None],
                                   [u for u in unbiased if u is not None], rtol=REPORT_RTOL,
                                   atol=0.0) and report.cost_uses_unbiased == used,
                   float(sum(used))),
        check_exact("pilot_dynamic_sampling: GRPO's scale 1/r and relative bias 1/r - 1 from the "
                    "r it uses", [[1.0 / r for r in keep], [1.0 / r - 1.0 for r in keep]],
                    [report.grpo_mean_scale, report.grpo_relative_bias], rtol=REPORT_RTOL),
        check_true("rewards_dynamic_sampling on the pilot's rewards: the pilot report's keep "
                   "and cost columns, no MSE",
                   rewards_only.mse is None and rewards_only.best is None
                   and all(getattr(rewards_only, key) == getattr(report, key)
                           for key in ("group_sizes", "batch_sizes", "keep_prob",
                                       "keep_prob_unbiased", "expected_gen_batches",
                                       "expected_rollouts", "grpo_mean_scale")),
                   float(len(rewards_only.group_sizes))),
    ]


def _mse_checks(moments, report) -> list:
    from ...theory.advantage import binary_projection, dynamic_sampling_mse, minibatch_advantage_mse

    projected = binary_projection(moments)
    pairs = list(zip(report.group_sizes, report.batch_sizes))
    kept = [dynamic_sampling_mse(projected, "grpo", G, B) for G, B in pairs]
    f, gram = projected.prompt_prob, projected.grad_gram
    # leave-one-out's mean factor: 1 where the pilot's p_hat is inside (0, 1), 0 where every
    # group of that prompt is all-equal (its advantages are all 0)
    c = ((projected.value > 0.0) & (projected.value < 1.0)).astype(np.float64)  # (P,)
    g_sq = float(projected.grad_norm_sq)

    def bias_sq(scale):
        w = scale * f * c  # (P,) the kept batch's mean, sum_x w(x) g(x)
        return float(w @ gram @ w - 2.0 * w @ gram @ f + g_sq)

    return [
        check_exact("pilot_dynamic_sampling: the kept batch's MSE at every (G, B) is "
                    "dynamic_sampling_mse at the pilot's moments made binary",
                    [mse for _, mse in kept], report.mse["mse"], rtol=REPORT_RTOL),
        check_exact("pilot_dynamic_sampling: the kept batch's squared bias is ||sum_x s f c "
                    "g(x) - g||^2 with dynamic_sampling_mse's scale s and leave-one-out's c = 1 "
                    "where 0 < p_hat < 1, else 0",
                    [bias_sq(scale) for scale, _ in kept],
                    report.mse["bias_sq"], rtol=REPORT_RTOL, atol=1e-15),
        check_exact("pilot_dynamic_sampling: the unfiltered MSE is minibatch_advantage_mse of "
                    "B groups (the route it calls: a check of its wiring, G and B and the "
                    "moments passed)", [minibatch_advantage_mse(projected, "grpo", G, B)
                                 for G, B in pairs], report.mse["unfiltered_mse"],
                    rtol=REPORT_RTOL),
    ], kept


def _replace_checks(replace, report, kept, replace_only) -> list:
    keep = [u if u is not None else r for u, r in zip(report.keep_prob_unbiased,
                                                      report.keep_prob)]
    hand = [hand_replace(r, B, REPORT_RATIO) for r, B in zip(keep, report.batch_sizes)]
    one = report.batch_sizes.index(1)
    g_bias = report.mse["bias_sq"][one]
    return [
        check_exact(f"pilot_replace_sampling (rho {REPORT_RATIO}): pi = P(J > rho B) at B = "
                    f"{report.batch_sizes}, the binomial summed here",
                    [pi for pi, _ in hand], replace.replace_prob, rtol=REPORT_RTOL),
        check_true("pilot_replace_sampling: the copies E[B - J | used], summed here",
                   all((c is None and h is None) or (c is not None and h is not None
                                                     and math.isclose(c, h, rel_tol=REPORT_RTOL,
                                                                      abs_tol=1e-14))
                       for c, (_, h) in zip(replace.expected_copies, hand)),
                   float(len(hand))),
        check_exact(f"pilot_replace_sampling at B = 1 (G = {report.group_sizes[one]}): the "
                    "replaced batch is one kept group, its MSE and squared bias the kept batch's",
                    [kept[one][1], g_bias], [replace.mse[one], replace.bias_sq[one]],
                    rtol=REPORT_RTOL, atol=1e-15),
        check_true("replace_sampling_report from rewards alone: the pilot's pi and copies, no "
                   "MSE", replace_only.mse is None and replace_only.bias_sq is None
                   and replace_only.replace_prob == replace.replace_prob
                   and replace_only.expected_copies == replace.expected_copies,
                   float(len(replace_only.replace_prob))),
    ]


@register("C72", "Beyond the paper: the dynamic-sampling and replace reports a user reads (keep "
          "probabilities, GRPO's scale, the kept and unfiltered batch's MSE, SkyRL's replace "
          "probability, copies and replaced batch) equal the U-statistic and plug-in written "
          "out, the binomial summed by hand and section 7's exact batch routes",
          "derived (docs/theory.md C72; section 7, 'Dynamic sampling' and 'POLARIS's replace')",
          "pilot_dynamic_sampling, rewards_dynamic_sampling, pilot_replace_sampling and "
          "replace_sampling_report on a 64 x 8 bandit pilot at N = 16 against hand-written keep "
          "probabilities and binomial sums, dynamic_sampling_mse and minibatch_advantage_mse "
          "at the pilot's moments made binary; all exact (rtol 1e-10)")
def check_c72(ctx) -> list:
    from ...pilot.dynamic_sampling import pilot_dynamic_sampling, rewards_dynamic_sampling
    from ...pilot.estimate import estimate_moments, pilot_statistics
    from ...pilot.replace_sampling import pilot_replace_sampling, replace_sampling_report

    rollouts = report_pilot(ctx.seed_for("C72"))
    report = pilot_dynamic_sampling(rollouts, REPORT_BUDGET)
    _, index = rollouts.groups()
    rewards_only = rewards_dynamic_sampling(rollouts.reward, index, REPORT_BUDGET)
    checks = _keep_checks(rollouts, report, rewards_only)
    mse_checks, kept = _mse_checks(estimate_moments(pilot_statistics(rollouts)), report)
    replace = pilot_replace_sampling(rollouts, report, REPORT_RATIO)
    replace_only = replace_sampling_report(rewards_only, REPORT_RATIO)
    return checks + mse_checks + _replace_checks(replace, report, kept, replace_only)
