"""Multi-reward rules: summing then normalising against normalising then summing (C52).

On :func:`~ustat_rl.policies.multichannel.multireward_bandit` (two binary channels of different
difficulty, weights ``w = (1, 0.5)``) the exact finite-G moments of TRL's two
``multi_objective_aggregation`` orders (:mod:`ustat_rl.theory.multichannel`) are checked against
enumeration of every group, against the single-reward theory of each channel, and against Monte
Carlo at B = 4; then the orders are compared at their best step size, exactly and by a paired
Monte Carlo. The multireward-grpo package's Theorem 3 (``proofs.md`` at commit 95fc4137) is
checked on :func:`~ustat_rl.policies.multichannel.reward_independent_bandit`, whose channels do
not depend on the action (the theorem's premise): its exact identity holds with the package
harness's sample correlation (a channel with no spread in a group gives a zero row), and the
printed unit-diagonal form is off by exactly ``sum_l w_l^2 P(channel l all equal)``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...policies.enumeration import enumerate_multichannel_moments
from ..registry import check_close, check_exact, check_true, register

#: The weights of the comparison and its group and batch sizes.
WEIGHTS, COMPARE_G, COMPARE_B = (1.0, 0.5), 4, 4
SUM, NORMALIZE = "trl_sum_then_normalize", "trl_normalize_then_sum"
#: Group sizes of the exact checks and of Theorem 3's finite-G identity.
EXACT_SIZES, THEOREM3_SIZES = (2, 3, 4), (2, 3, 4, 8)
#: Monte Carlo replicates (quick, full).
REPS = (40_000, 400_000)




def group_stage(name: str):
    """A batch rule without its batch step: the per-channel normalised weighted sum, which the
    step divides by one number per batch (TRL's normalised sum has batch mean 0)."""
    from ...advantages.multichannel import get_multichannel_rule

    rule = get_multichannel_rule(name)
    return replace(rule, name=f"{rule.name}:group stage", final=None)


def _exact_checks(bandit, moments) -> list:
    from ...theory.advantage import advantage_moments
    from ...theory.multichannel import multichannel_moments

    nu = np.einsum("xa,xao,xab->xob", bandit.policy, bandit.outcome_prob,
                   np.eye(bandit.n_actions)[None] - bandit.policy[:, None, :])  # (P, O, A)
    checks = []
    for name in (SUM, NORMALIZE):
        want, got = [], []
        for G in EXACT_SIZES:
            out = multichannel_moments(moments, name, G, WEIGHTS)
            mean, mse = enumerate_multichannel_moments(bandit, name, G, WEIGHTS)
            blocks = [mean[x].reshape(bandit.n_prompts, -1)[x] for x in range(bandit.n_prompts)]
            want += [*np.ravel(blocks), *mse]
            got += [*np.einsum("xo,xob->xb", out.mean_coefficients, nu).ravel(),
                    *out.mse_per_prompt]
        checks.append(check_exact(f"{name}: exact mean and MSE per prompt equal enumeration of "
                                  f"every group, G = {EXACT_SIZES}", want, got, rtol=1e-12,
                                  note="large-batch limit" if name == NORMALIZE else ""))
    want, got = [], []
    for G in (4, 8):
        out = multichannel_moments(moments, NORMALIZE, G, WEIGHTS)
        d = float(get_rule_scaling(NORMALIZE).divisor(out.spread))
        per_channel = sum(wk * advantage_moments(moments.channel(k), "trl_group", G)
                          .mean_factor[:, None] * bandit.channel_bandit(k).grad_per_prompt
                          for k, wk in enumerate(WEIGHTS)) / d
        want += list(per_channel.ravel())
        got += list(np.einsum("xo,xob->xb", out.mean_coefficients, nu).ravel())
    checks.append(check_exact("normalize_then_sum's mean is sum_k w_k c_k(x) g_k(x) / d with "
                              "c_k channel k's single-reward trl_group factor (section 7), "
                              "G = 4, 8", want, got, rtol=1e-11, atol=1e-15))
    checks.append(_direction_check(bandit, moments))
    return checks


def _direction_check(bandit, moments):
    """The mean's factor <E g_hat, t>/||t||^2 and cosine along the target, as the moments report
    them (``mean_factor``, ``mean_cosine``), against the enumerated mean and the target
    ``t = sum_x f(x) sum_k w_k g_k(x)`` from each channel's single-reward bandit, at G = 3 for
    both orders."""
    from ...theory.multichannel import multichannel_moments

    f = bandit.prompt_prob
    target = (f[:, None] * sum(wk * bandit.channel_bandit(k).grad_per_prompt
                               for k, wk in enumerate(WEIGHTS))).ravel()  # (P A,)
    want, got = [], []
    for name in (SUM, NORMALIZE):
        mean = f @ enumerate_multichannel_moments(bandit, name, 3, WEIGHTS)[0]  # (P A,)
        out = multichannel_moments(moments, name, 3, WEIGHTS)
        want += [mean @ target / (target @ target),
                 mean @ target / np.sqrt((mean @ mean) * (target @ target))]
        got += [out.mean_factor, out.mean_cosine]
    return check_exact("mean_factor and mean_cosine of both orders at G = 3 = the enumerated "
                       "mean against the target written out", want, got, rtol=1e-11)


def get_rule_scaling(name):
    """The final stage's scaling of a registered multi-channel rule."""
    from ...advantages.multichannel import get_multichannel_rule

    return get_multichannel_rule(name).final.scaling


def _monte_carlo_checks(ctx, bandit, moments) -> list:
    from ...montecarlo import run_monte_carlo
    from ...montecarlo.multichannel import multichannel_statistics
    from ...theory.multichannel import multichannel_moments, scale_free_mse

    stage = group_stage(NORMALIZE)
    G, B = COMPARE_G, COMPARE_B
    stat, labels = multichannel_statistics(bandit, (SUM, stage), (G,), B, WEIGHTS)
    est = run_monte_carlo(stat, ctx.reps(*REPS), ctx.seed_for("C52"), n_jobs=ctx.n_jobs,
                          labels=labels)
    checks, exact = [], {}
    for rule in (SUM, stage):
        name = rule if isinstance(rule, str) else rule.name
        out = multichannel_moments(moments, rule, G, WEIGHTS, B)
        exact[name] = out
        for kind, value in (("sq", out.mse), ("proj", out.mean_projection)):
            mean, se = est.get((kind, name, G))
            what = "MSE against the weighted gradient" if kind == "sq" else "<g_hat_B, t>"
            checks.append(check_close(f"{name}: {what} at G = {G}, B = {B} (Monte Carlo)",
                                      value, mean, se))
    checks.append(_swapped_control(exact, est, stage.name, G))
    target_sq = exact[SUM].target_norm_sq
    predicted = exact[stage.name].scale_free_mse - exact[SUM].scale_free_mse  # the same t
    keys = [("proj", stage.name, G), ("second", stage.name, G), ("proj", SUM, G),
            ("second", SUM, G)]
    sub = est.subset(keys)
    p1, s1, p2, s2 = sub.mean
    measured = scale_free_mse(p1, s1, target_sq) - scale_free_mse(p2, s2, target_sq)
    grad = np.array([-2 * p1 / (s1 * target_sq), p1**2 / (s1**2 * target_sq),
                     2 * p2 / (s2 * target_sq), -p2**2 / (s2**2 * target_sq)])
    se = math.sqrt(max(float(grad @ sub.cov @ grad), 0.0))
    checks.append(check_close(f"best-step MSE, normalize_then_sum less sum_then_normalize, at "
                              f"G = {G}, B = {B} (paired Monte Carlo, delta method)", predicted,
                              measured, se,
                              note="normalize_then_sum's large-B limit has its group stage's "
                                   "best-step MSE (one constant divisor)"))
    return checks


def _swapped_control(exact, est, stage_name: str, G: int):
    """Negative control: each rule's Monte Carlo MSE against the other order's exact one, through
    the same comparison (|z| > ``Z_CHECK`` in both directions); a power check, no rate stated."""
    from ...tolerances import Z_CHECK

    z = []
    for measured, other in ((SUM, stage_name), (stage_name, SUM)):
        mean, se = est.get(("sq", measured, G))
        z.append(abs(mean - exact[other].mse) / se)
    weakest = float(min(z))
    return check_true(f"negative control: each order's Monte Carlo MSE is outside {Z_CHECK:g} se "
                      "of the other order's exact MSE", weakest > Z_CHECK, weakest,
                      evidence="monte-carlo",
                      note="measured: the smaller |z| of the two swaps; a power check, no rate "
                           "stated")


def _comparison_checks(moments) -> list:
    from ...theory.multichannel import multichannel_moments

    def gap(weights, G):
        both = [multichannel_moments(moments, r, G, weights, COMPARE_B).scale_free_mse
                for r in (NORMALIZE, SUM)]
        return both[0] - both[1]

    sizes = (2, 3, 4, 6, 8, 12, 16)
    unequal = [gap(WEIGHTS, G) for G in sizes]
    equal = [gap((1.0, 1.0), G) for G in sizes]
    flip = next((G for G, d in zip(sizes, equal) if d > 0), None)
    return [
        check_true(f"w = {WEIGHTS}: normalize_then_sum has the lower best-step MSE at every G in "
                   f"{sizes} (B = {COMPARE_B})", max(unequal) < 0, max(unequal),
                   note="gaps " + ", ".join(f"{d:.4f}" for d in unequal)),
        check_true("w = (1, 1): sum_then_normalize has the lower best-step MSE from G = 6 on, "
                   "normalize_then_sum below it: neither order dominates", flip == 6
                   and all(d < 0 for G, d in zip(sizes, equal) if G < 6)
                   and all(d > 0 for G, d in zip(sizes, equal) if G >= 6), float(flip or 0),
                   note="gaps " + ", ".join(f"{d:.4f}" for d in equal)),
    ]


def theorem3_rules():
    """The package's NA and AN orders with ``delta -> 0`` (its proof drops the guard): a channel
    with no spread in a group gives 0, which the guard gives up to ``delta/sigma``."""
    from ...advantages.multichannel import get_multichannel_rule

    out = []
    for name in ("multireward_grpo_na", "multireward_grpo_an"):
        rule = get_multichannel_rule(name)
        stage = rule.channel or rule.final
        exact = replace(stage, scaling=replace(stage.scaling, epsilon=0.0, all_equal="zero"))
        out.append(replace(rule, name=f"{name}:delta 0",
                           **({"channel": exact} if rule.channel else {"final": exact})))
    return tuple(out)


def _theorem3_checks() -> list:
    from ...policies.multichannel import reward_independent_bandit
    from ...theory.advantage import all_equal_probability
    from ...theory.multichannel import multichannel_moments
    from ...theory.sample_correlation import expected_sample_correlation, population_correlation

    bandit = reward_independent_bandit()
    moments = bandit.channel_moments()
    w = np.asarray(WEIGHTS)
    tau_sq = float(moments.score_sq.sum())
    na, an = theorem3_rules()
    law, printed, harness, gaps, floor = [], [], [], [], []
    V = moments.outcome_prob[0] @ moments.outcomes  # (K,) channel success probabilities
    for G in THEOREM3_SIZES:
        law.append(G * multichannel_moments(moments, na, G, w).mse / tau_sq)
        harness.append(w @ expected_sample_correlation(moments, G)[0] @ w)
        printed.append(w @ expected_sample_correlation(moments, G, unit_diagonal=True)[0] @ w)
        gaps.append(float(w**2 @ all_equal_probability(V, G)))
        floor.append(G * multichannel_moments(moments, an, G, w).mse / tau_sq)
    C = population_correlation(moments)[0]
    bias = [m * (expected_sample_correlation(moments, m)[0][0, 1] - C[0, 1]) for m in (32, 64)]
    fisher = -C[0, 1] * (1 - C[0, 1] ** 2) / 2
    return [
        check_exact(f"multireward-grpo Theorem 3, G MSE_NA / tau^2 = w' E[C_hat] w with the "
                    f"harness's C_hat (a channel with no spread gives 0), G = {THEOREM3_SIZES}",
                    harness, law, rtol=1e-12,
                    note=f"reproduced; w' C w = {w @ C @ w:.6f}; at G = 8, {law[-1]:.6f}"),
        check_exact("the printed form (C_hat_ll = 1) exceeds it by sum_l w_l^2 P(channel l all "
                    "equal in the group), exactly", gaps, np.subtract(printed, law), rtol=1e-10,
                    note="refutes 'exact for all m >= 2' for binary channels: relative excess "
                         + ", ".join(f"{g / v:.1%}" for g, v in zip(gaps, law))
                         + f" at G = {THEOREM3_SIZES}"),
        check_exact("AN's G MSE / tau^2 is P(the weighted sums are not all equal): the orders "
                    "differ in scale, under a premise that makes g = 0",
                    [1.0 - _sums_all_equal(moments, G, w) for G in THEOREM3_SIZES], floor,
                    rtol=1e-12),
        check_true("Step 3's bias coefficient m(E C_hat_12 - C_12) -> -C(1 - C^2)/2 (the "
                   "bivariate normal's) does not hold for binary channels", all(
                       abs(b - fisher) > 0.5 * abs(fisher) for b in bias), bias[-1],
                   note=f"exact {bias[0]:.4f} at m = 32 and {bias[1]:.4f} at m = 64; the normal "
                        f"formula gives {fisher:.4f}"),
    ]


def _sums_all_equal(moments, G, w) -> float:
    """``P(the G weighted sums of a group are all equal)`` at the first prompt: the probability
    of each distinct sum value raised to the power ``G``, summed."""
    q, sums = np.asarray(moments.outcome_prob[0]), moments.outcomes @ w
    return float(sum(q[sums == v].sum() ** G for v in np.unique(sums)))


@register("C52", "Beyond the paper: multi-reward rules have exact finite-G moments for binary "
          "channels (sum_then_normalize at every B, normalize_then_sum in the large-B limit); "
          "neither order has the lower best-step MSE in general; the multireward-grpo Theorem 3 "
          "identity holds only with a zeroed correlation for channels without spread",
          "derived (docs/theory.md C52; TRL f2cd5771 grpo_trainer.py; multireward-grpo "
          "proofs.md 95fc4137)",
          "multichannel_moments against enumeration of every group and each channel's "
          "section-7 theory; Monte Carlo at G = 4, B = 4; Theorem 3 on a bandit whose rewards "
          "do not depend on the action")
def check_c52(ctx) -> list:
    from ...policies.multichannel import multireward_bandit

    bandit = multireward_bandit()
    moments = bandit.channel_moments()
    return (_exact_checks(bandit, moments) + _monte_carlo_checks(ctx, bandit, moments)
            + _comparison_checks(moments) + _theorem3_checks())


def looped_channel_moments(prompt_id, channels, score):
    """``(q, t, gram)`` of C52.pilot by loops: per prompt (in order of first draw) the share of
    each outcome ``o`` (channel ``k`` is bit ``k``), the mean of ``||W||^2 1{O = o}``, and
    ``<nu_o(x), nu_o'(y)>``: the average over ordered pairs of distinct draws within a prompt,
    the product of the two prompts' means across prompts."""
    ids = list(dict.fromkeys(int(i) for i in prompt_id))
    K = channels.shape[1]
    O = 2**K
    draws = {x: [i for i in range(len(prompt_id)) if int(prompt_id[i]) == x] for x in ids}
    outcome = [int(sum(int(channels[i, k]) << k for k in range(K))) for i in range(len(prompt_id))]
    P = len(ids)
    q, t = np.zeros((P, O)), np.zeros((P, O))
    nu = np.zeros((P, O, score.shape[1]))
    for a, x in enumerate(ids):
        n = len(draws[x])
        for i in draws[x]:
            q[a, outcome[i]] += 1.0 / n
            t[a, outcome[i]] += float(score[i] @ score[i]) / n
            nu[a, outcome[i]] += score[i] / n
    gram = np.zeros((P, O, P, O))
    for a, x in enumerate(ids):
        for b in range(P):
            if a != b:
                gram[a, :, b, :] = nu[a] @ nu[b].T
                continue
            n = len(draws[x])
            for i in draws[x]:
                for j in draws[x]:
                    if i != j:
                        gram[a, outcome[i], a, outcome[j]] += float(score[i] @ score[j]) / (
                            n * (n - 1))
    return q, t, gram


@register("C52.pilot", "Beyond the paper: the multi-reward pilot's moment estimates "
          "(estimate_channel_moments) equal their U-statistics written out: outcome shares, "
          "the mean of ||W||^2 per outcome, and inner products of outcome means over ordered "
          "pairs of distinct draws within a prompt and across prompts",
          "derived (docs/theory.md C52; section 7's kernels for binary channels)",
          "estimate_channel_moments on three prompts of 3, 4 and 6 interleaved draws, two "
          "channels, 3-column scores, against loops over the draws; all exact (rtol 1e-10)")
def check_c52_pilot(ctx) -> list:
    from ...pilot.channels import estimate_channel_moments

    rng = np.random.default_rng(ctx.seed_for("C52.pilot"))
    prompt_id = rng.permutation(np.repeat([7, 2, 5], [3, 4, 6]))  # interleaved, unsorted ids
    channels = (rng.random((prompt_id.size, 2)) < 0.5).astype(float)
    score = rng.normal(size=(prompt_id.size, 3))
    got = estimate_channel_moments(prompt_id, channels, score)
    q, t, gram = looped_channel_moments(prompt_id, channels, score)
    return [check_exact("outcome shares q_o(x), prompts in order of first draw", q,
                        got.outcome_prob, rtol=1e-10),
            check_exact("t_o(x), the mean of ||W||^2 1{O = o}", t, got.score_sq, rtol=1e-10),
            check_exact("<nu_o(x), nu_o'(y)>: distinct pairs within a prompt, means across", gram,
                        got.mean_gram, rtol=1e-10, atol=1e-12),
            check_exact("prompt weights 1/P", np.full(3, 1.0 / 3), got.prompt_prob, rtol=1e-12)]
