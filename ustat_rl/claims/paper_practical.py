"""Appendix A, the practical algorithm (docs/theory.md C24-C27).

Registers ``C25`` (Theorem 12: the off-policy bias of Algorithm 2's reused batch grows like
``(m eta)^2``, on a softmax bandit by enumeration of every batch), ``C24`` (Lemma 11: the estimator with the group standard error in the denominator
approaches the U-statistic normalised by the true std, and how often a group is all-equal),
``C26`` (symbolic: the std-normalised gradient is the gradient of the arcsin objective),
``C26.train`` (training with std-normalised advantages goes to the arcsin objective's maximiser,
through the exact finite-G fixed point of docs/theory.md section 7), ``C27`` (symbolic: K3 and
its gradient) and ``C27.mc`` (the expected per-sample K3 gradient under the policy is the
gradient of KL(pi_ref || pi_theta), by Monte Carlo).
"""

from __future__ import annotations

import numpy as np

from ..advantages.registry import get_rule
from ..policies.examples import std_normalisation_bandit
from ..theory.advantage import (
    AdvantageTable,
    advantage_moments,
    all_equal_probability,
)
from ..theory.lemma11 import lemma11_constant, lemma11_difference_table
from ..training.std import (
    StdTraining,
    mean_field_root,
    train_std_normalised,
)
from .registry import (
    EXACT_RTOL,
    Z_CHECK,
    Check,
    check_close,
    check_exact,
    check_interval,
    check_true,
    register,
)
from .symbolic import (
    SYMBOLIC_SOURCE,
    k3_checks,
    symbolic_checks,
)

#: Group sizes of the exact limit check: G, 4G and 16G for two Richardson extrapolations.
LIMIT_SIZES = (1024, 4096, 16384)


MC_SIZES = (4, 16, 64)


ALL_EQUAL_SIZES = (2, 4, 8)


def limit_check(moments, constant: float, name: str) -> list:
    """Exact ``G E||g_se - g_std||^2`` at ``LIMIT_SIZES`` against ``constant`` (C24).

    The finite-G correction is O(1/G) (``G D(G)/C - 1`` falls fourfold per fourfold ``G``), so
    the Richardson extrapolate ``R(G) = (4 x(4G) - x(G))/3`` of ``x(G) = G D(G)`` has an
    O(1/G^2) error. The check passes when ``C`` lies within ``|R(4096) - R(1024)|`` of
    ``R(4096)``: the extrapolate's own last change bounds its error.
    """
    V = float(moments.value[0])
    x = [G * advantage_moments(moments, lemma11_difference_table(V, G)).second_moment[0]
         for G in LIMIT_SIZES]
    r_small, r_large = (4 * x[1] - x[0]) / 3, (4 * x[2] - x[1]) / 3
    allowed = abs(r_large - r_small)
    return [check_interval(f"{name}: Richardson limit of G E||g_se - g_std||^2, G = "
                           f"{LIMIT_SIZES}", constant, r_large, r_large - allowed,
                           r_large + allowed, evidence="exact-numeric",
                           note=f"interval: the extrapolate's last change {allowed:.2g}; "
                                f"G D(G) = " + ", ".join(f"{v:.6g}" for v in x))]


def _monte_carlo(bandit, G: int, n: int, rng):
    """Per-group ``||g_se - g_std||^2`` and all-equal indicators at prompt 0."""
    sample = bandit.sample_groups(G, n, rng, prompt=0)
    sigma = np.sqrt(bandit.value[0] * (1.0 - bandit.value[0]))
    diff = (get_rule("paper_algorithm2").grouped(sample.reward)
            - get_rule("grpo").grouped(sample.reward) / sigma)  # (n, G)
    score = bandit.scores(sample.prompt, sample.action)  # (n, G, K)
    sq = np.sum((np.einsum("ng,ngk->nk", diff, score) / G) ** 2, axis=1)
    equal = np.all(sample.reward == sample.reward[:, :1], axis=1)
    return sq, equal


@register("C24", "Lemma 11: the estimator normalised by the group std error tends to the "
          "U-statistic normalised by the true std; E||g_se - g_std||^2 ~ C/G with "
          "C = ||g||^2 (1-2V)^2/(4V^2(1-V)^2); all-equal groups have probability p^G + (1-p)^G",
          "Lemma 11, Appendix A; docs/theory.md section 7",
          "exact O(G) moments (section 7) to G = 16384 with Richardson extrapolation; "
          "Monte Carlo at G = 4, 16, 64")
def check_c24(ctx) -> list:
    bandit = std_normalisation_bandit()
    moments = bandit.moments()
    V = float(bandit.value[0])
    checks = limit_check(moments, lemma11_constant(moments), "exact")
    # the closed-form table is the named conventions' difference (second route, exact)
    for G in (3, 8):
        sigma = np.sqrt(V * (1.0 - V))
        m = np.arange(G + 1)
        groups = (np.arange(G)[None, :] < m[:, None]).astype(float)  # (G+1, G), m ones
        diff = (get_rule("paper_algorithm2").grouped(groups)
                - get_rule("grpo").grouped(groups) / sigma)
        table = lemma11_difference_table(V, G)
        checks.append(check_exact(f"closed-form a(z, m) == conventions' difference, G={G}",
                                  np.r_[table.success[1:], table.failure[:-1]],
                                  np.r_[diff[1:, 0], diff[:-1, -1]], rtol=EXACT_RTOL,
                                  atol=1e-13))
    rng = np.random.default_rng(ctx.seed_for("C24"))
    n = ctx.reps(20000, 200000)
    for G in sorted(set(MC_SIZES) | set(ALL_EQUAL_SIZES)):
        sq, equal = _monte_carlo(bandit, G, n, rng)
        if G in MC_SIZES:
            exact = advantage_moments(moments, lemma11_difference_table(V, G)).second_moment[0]
            checks.append(check_close(f"MC E||g_se - g_std||^2 == exact, G={G}", exact,
                                      sq.mean(), sq.std(ddof=1) / np.sqrt(n)))
        if G in ALL_EQUAL_SIZES:
            p_hat = equal.mean()
            checks.append(check_close(f"MC P(all rewards equal) == V^G + (1-V)^G, G={G}",
                                      float(all_equal_probability(V, G)), p_hat,
                                      np.sqrt(p_hat * (1 - p_hat) / n),
                                      note=f"V = {V:.4f}"))
    return checks


def k3_gradient_checks(rng, n_samples: int, target: str = "reverse") -> list:
    """Monte Carlo mean of the per-sample K3 gradient ``(e_y - pi)(1 - pi_ref(y)/pi(y))``.

    ``y ~ pi_theta`` (softmax logits, 4 actions). Its expectation is
    ``-sum_y pi_ref(y) (e_y - pi) = pi - pi_ref = grad KL(pi_ref || pi_theta)`` (docs/theory.md
    C27). ``target="forward"`` compares with ``grad KL(pi_theta || pi_ref) =
    pi (log(pi/pi_ref) - KL)`` instead (the negative control, which must fail). Each coordinate
    is one ``Z_CHECK``-standard-error comparison; a final check requires the other direction's
    gradient to be rejected by at least one coordinate (the test has power).
    """
    logits = np.array([0.4, -0.2, 0.9, -0.6])
    ref_logits = np.array([-0.3, 0.5, 0.0, 0.2])
    pi = np.exp(logits - logits.max())
    pi /= pi.sum()
    ref = np.exp(ref_logits - ref_logits.max())
    ref /= ref.sum()
    draws = rng.choice(4, size=n_samples, p=pi)
    per_sample = (np.eye(4)[draws] - pi) * (1.0 - ref[draws] / pi[draws])[:, None]  # (n, K)
    mean = per_sample.mean(axis=0)
    se = per_sample.std(axis=0, ddof=1) / np.sqrt(n_samples)
    reverse = pi - ref
    forward = pi * (np.log(pi / ref) - np.sum(pi * np.log(pi / ref)))
    predicted, other = (reverse, forward) if target == "reverse" else (forward, reverse)
    label = "grad KL(pi_ref||pi)" if target == "reverse" else "grad KL(pi||pi_ref)"
    checks = [check_close(f"MC E[per-sample K3 gradient]_{k} == {label}_{k}", predicted[k],
                          mean[k], se[k]) for k in range(4)]
    rejected = int(np.sum(np.abs(mean - other) > Z_CHECK * se))
    checks.append(check_true("the same Monte Carlo rejects the other KL direction's gradient",
                             rejected > 0, measured=rejected, evidence="monte-carlo",
                             note=f"{rejected} of 4 coordinates outside {Z_CHECK:g} se"))
    return checks


@register("C27.mc", "The per-sample K3 gradient grad log pi (1 - pi_ref/pi), averaged over "
          "y ~ pi_theta, is grad KL(pi_ref || pi_theta), not grad KL(pi_theta || pi_ref)",
          "Appendix A (K3 penalty of Algorithm 2, kernel of Lemma 11); docs/theory.md C27",
          "Monte Carlo on a 4-action softmax, per coordinate, with a power check")
def check_c27_mc(ctx) -> list:
    rng = np.random.default_rng(ctx.seed_for("C27.mc"))
    return k3_gradient_checks(rng, ctx.reps(200000, 2000000))


#: C27.clamp's clips and the log ratios ``log(pi_ref/pi)`` it evaluates: verl's clips, and a pair
#: whose value clip is K3 at log ratio 1.5 exactly, so that points sit on each clamp's boundary.
K3_CLIP_CASES = (
    ((20.0, 10.0), (-25.0, -20.0, -11.0, -5.0, 0.3, 2.5, 20.0, 25.0)),
    ((2.0, float(np.exp(1.5) - 1.5 - 1.0)), (-2.5, -2.0, -1.0, 0.5, 1.5, 1.7, 2.0, 3.0)),
)


def k3_clamp_written_out(log_ratio, log_ratio_clip: float, value_clip: float):
    """verl's ``low_var_kl`` as torch computes it, ``(K3, d K3 / d log pi)``: the log ratio
    clamped, then K3 clamped (``torch.clamp`` passes the gradient on and inside its bounds)."""
    import torch

    log_pi = torch.zeros(len(log_ratio), dtype=torch.float64, requires_grad=True)
    ref = torch.as_tensor(np.asarray(log_ratio, dtype=np.float64))
    lr = torch.clamp(ref - log_pi, min=-log_ratio_clip, max=log_ratio_clip)
    k3 = torch.clamp(torch.exp(lr) - lr - 1.0, min=-value_clip, max=value_clip)
    (grad,) = torch.autograd.grad(k3.sum(), log_pi)
    return k3.detach().numpy(), grad.numpy()


#: Softmax policies (logits, reference logits) for the expected clamped-K3 gradient: one where
#: no clamp binds, one where the reference puts almost no mass on an action (|log r| > 20).
K3_SOFTMAX_CASES = (((0.3, -0.5, 1.1, 0.0), (0.1, 0.2, 0.7, -0.4)),
                    ((0.3, -0.5, 1.1, 0.0), (0.1, -30.0, 0.7, -0.4)))


def k3_expected_gradient_written_out(logits, ref_logits, log_ratio_clip: float,
                                     value_clip: float) -> np.ndarray:
    """``sum_y pi(y) grad_theta K3_clamped(y)`` by autograd through ``log_softmax`` and the
    clamps written out in torch, each sample's probability held fixed (a per-sample gradient)."""
    import torch

    theta = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    log_pi = torch.log_softmax(theta, dim=0)
    log_ref = torch.log_softmax(torch.tensor(ref_logits, dtype=torch.float64), dim=0)
    lr = torch.clamp(log_ref - log_pi, min=-log_ratio_clip, max=log_ratio_clip)
    k3 = torch.clamp(torch.exp(lr) - lr - 1.0, min=-value_clip, max=value_clip)
    (grad,) = torch.autograd.grad((log_pi.exp().detach() * k3).sum(), theta)
    return grad.numpy()


@register("C27.clamp", "verl's clamped K3 penalty (log ratio clipped at 20, K3 at 10) and its "
          "gradient factor equal torch.clamp's arithmetic, on each clamp's boundary too; the "
          "exact expected per-sample gradient on a softmax equals autograd's, and pi - pi_ref "
          "where no clamp binds",
          "Appendix A (K3 penalty of Algorithm 2); docs/theory.md C27; verl's low_var_kl",
          "k3_clamped and k3_clamped_gradient_factor against autograd on the clamps written "
          "out in torch, at log ratios inside, beyond and exactly on each clip; "
          "softmax_k3_expected_gradient against autograd through log_softmax")
def check_c27_clamp(ctx) -> list:
    from ..frameworks.aggregation import (
        K3_LOG_RATIO_CLIP,
        K3_VALUE_CLIP,
        k3_clamped,
        k3_clamped_gradient_factor,
        softmax_k3_expected_gradient,
    )

    checks, rejected = [], []
    for (clip, value_clip), log_ratio in K3_CLIP_CASES:
        log_ratio = np.array(log_ratio)
        value, factor = k3_clamp_written_out(log_ratio, clip, value_clip)
        zeros = np.zeros_like(log_ratio)
        where = f"clips ({clip:g}, {value_clip:.6g}), log ratios {log_ratio.tolist()}"
        checks.append(check_exact(f"K3 value, {where}", value,
                                  k3_clamped(zeros, log_ratio, clip, value_clip),
                                  rtol=1e-14, atol=0.0))
        checks.append(check_exact(f"d K3 / d log pi, {where}", factor,
                                  k3_clamped_gradient_factor(zeros, log_ratio, clip, value_clip),
                                  rtol=1e-14, atol=0.0,
                                  note="on a boundary the clamp passes the gradient"))
        k3 = np.exp(np.clip(log_ratio, -clip, clip)) - np.clip(log_ratio, -clip, clip) - 1.0
        strict = np.where((np.abs(log_ratio) < clip) & (k3 < value_clip),
                          1.0 - np.exp(np.clip(log_ratio, -clip, clip)), 0.0)
        rejected.append(not check_exact("", factor, strict, rtol=1e-14, atol=0.0).passed)
    checks.append(check_true("negative control: the clamps' bounds taken as exclusive (no "
                             "gradient on a boundary) are rejected where a point sits on a "
                             "boundary that binds alone (the second clips)", rejected[-1],
                             float(sum(rejected)),
                             note="with verl's clips K3 > 10 wherever |log r| >= 20, so only "
                                  "the value clip's boundary could matter there"))
    for i, (logits, ref) in enumerate(K3_SOFTMAX_CASES):
        got = softmax_k3_expected_gradient(logits, ref)
        checks.append(check_exact(
            f"softmax {i + 1} ({'no clamp binds' if i == 0 else 'a clamp binds'}): E_pi grad "
            f"K3_clamped = autograd's", k3_expected_gradient_written_out(
                logits, ref, K3_LOG_RATIO_CLIP, K3_VALUE_CLIP), got, rtol=1e-12, atol=1e-15))
        if i == 0:
            pi = np.exp(np.array(logits) - np.logaddexp.reduce(logits))
            pi_ref = np.exp(np.array(ref) - np.logaddexp.reduce(ref))
            checks.append(check_exact("softmax 1: E_pi grad K3 = pi - pi_ref (grad KL(pi_ref || "
                                      "pi))", pi - pi_ref, got, rtol=1e-12, atol=1e-15))
    return checks


# ------------------------------------------------------------------------------- C26.train
C26_GROUP = 8


C26_LIMIT_SIZES = (512, 2048, 8192)

#: Windows (fractions of the run) whose iterate averages extrapolate the step-size bias away.
C26_WINDOWS = ((1 / 8, 1 / 4), (1 / 4, 1 / 2), (1 / 2, 1.0))


def _step_extrapolation(windows: np.ndarray):
    """Per-run Richardson extrapolate of the averaged iterate in the step size (C26.train).

    With steps ``beta/(i + offset)`` the iterate's bias at step ``i`` is ``c/i + O(1/i^2)``
    (second order: the mean field's curvature times the iterate's variance, itself
    ``O(beta^2/i)`` when ``beta`` times its slope exceeds 1/2), so the average over
    ``(m, 2m]`` has bias ``c ln 2/m + O(1/m^2)``: the windows ``(n/8, n/4]``, ``(n/4, n/2]``,
    ``(n/2, n]`` (rows of ``windows``, shape ``(3, R)``) carry first-order biases in the ratio
    4 : 2 : 1. ``R1 = 2 x_3 - x_2`` cancels the first order, leaving ``-4d/n^2``;
    ``R0 = 2 x_2 - x_1`` leaves ``-16d/n^2``, so ``(R1 - R0)/3`` estimates ``R1``'s residual
    bias. Returns per run ``R1``, the removed bias ``x_3 - R1`` and that residual estimate.
    """
    first, second, last = windows
    r1, r0 = 2 * last - second, 2 * second - first
    return r1, last - r1, (r1 - r0) / 3


@register("C26.train", "Training with std-normalised advantages converges to the root of its "
          "exact mean field, which tends to the maximiser of E[2 arcsin sqrt V] - tau KL as G "
          "grows, not to that of E V - tau KL (leave-one-out training converges there)",
          "Proposition 13, Appendix A; docs/theory.md section 7",
          "exact roots of the section 7 mean field (Richardson to G = 8192); 256 training runs "
          "of TRL's group normalisation and of leave-one-out at G = 8")
def check_c26_train(ctx) -> list:
    from ..policies.examples import arcsin_conflict_bandit
    from ..theory.advantage import advantage_table

    bandit = arcsin_conflict_bandit()
    theta_value = mean_field_root(bandit, "value")
    theta_arcsin = mean_field_root(bandit, "arcsin")
    optimum = float(bandit.optimum().theta[0])
    checks = [check_exact("argmax E V - tau KL: root of the mean field == Newton optimum",
                          optimum, theta_value, rtol=1e-8, atol=1e-10),
              check_true("the two objectives have different maximisers",
                         abs(theta_arcsin - theta_value) > 0.1,
                         measured=theta_arcsin - theta_value,
                         note=f"argmax E V = {theta_value:.4f}, argmax E 2 arcsin sqrt V = "
                              f"{theta_arcsin:.4f}")]
    G = C26_GROUP
    table = advantage_table("trl_group", G)  # the rule's O(G) two-point table
    m = np.arange(G + 1)
    rows = get_rule("trl_group").grouped((np.arange(G)[None, :] < m[:, None]).astype(float))
    closed = AdvantageTable(G, np.where(m > 0, rows[:, 0], 0.0), np.where(m < G, rows[:, -1], 0.0))
    checks.append(check_exact(f"closed-form TRL group table == named convention, G={G}",
                              np.r_[table.success[1:], table.failure[:-1]],
                              np.r_[closed.success[1:], closed.failure[:-1]]))
    roots = [mean_field_root(bandit, advantage_table("trl_group", g))
             for g in C26_LIMIT_SIZES]
    r_small = (4 * roots[1] - roots[0]) / 3
    r_large = (4 * roots[2] - roots[1]) / 3
    allowed = abs(r_large - r_small)
    checks.insert(0, check_interval(
        f"std-normalised fixed point theta_G -> argmax of the arcsin objective, Richardson over "
        f"G = {C26_LIMIT_SIZES}", theta_arcsin, r_large, r_large - allowed, r_large + allowed,
        evidence="exact-numeric", note="theta_G = " + ", ".join(f"{r:.6f}" for r in roots)))
    theta_g = mean_field_root(bandit, table)
    rng = np.random.default_rng(ctx.seed_for("C26.train"))
    n_runs, n_iter = ctx.reps(256, 1024), ctx.reps(4000, 8000)
    for convention, predicted, other, label in (
            ("trl_group", theta_g, theta_value, "argmax E V - tau KL"),
            ("grpo", theta_value, theta_g, "the std-normalised fixed point")):
        setting = StdTraining(convention, G, 2, n_iter, windows=C26_WINDOWS)
        windows = train_std_normalised(bandit, setting, n_runs, rng)[:, :, 0]  # (3, R)
        final, bias, residual = _step_extrapolation(windows)
        mean, se = final.mean(), final.std(ddof=1) / np.sqrt(n_runs)
        checks.append(check_close(
            f"{convention} training at G={G}: averaged iterate, its O(1/n) step-size bias "
            f"extrapolated away, == predicted fixed point", predicted, mean, se,
            note=f"{n_runs} runs x {n_iter} steps, B = 2; predicted from the exact mean field "
                 f"(section 7); Richardson 2 x(n/2, n] - x(n/4, n/2] of the window averages: "
                 f"removed first-order bias {bias.mean():+.2g} (se "
                 f"{bias.std(ddof=1) / np.sqrt(n_runs):.1g}), residual O(1/n^2) bias estimate "
                 f"{residual.mean():+.2g} (se {residual.std(ddof=1) / np.sqrt(n_runs):.1g}) "
                 f"against the interval's se {se:.2g}"))
        checks.append(check_true(f"{convention} training rejects {label}",
                                 abs(mean - other) > Z_CHECK * se, measured=(mean - other) / se,
                                 evidence="monte-carlo",
                                 note=f"{label} = {other:.4f}, {abs(mean - other) / se:.0f} se "
                                      f"away"))
    return checks


@register("C26", "d/dV 2 arcsin sqrt V = 1/sqrt(V(1-V)); the std-normalised gradient is "
          "grad 2 arcsin sqrt V, parallel to g", "Proposition 13; " + SYMBOLIC_SOURCE,
          "symbolic: derivative; differentiation through softmax logits")
def check_c26(ctx) -> list[Check]:
    return symbolic_checks("C26")


@register("C27", "K3 is unbiased for KL, non-negative, with gradient grad log pi (1 - pi_ref/pi)",
          "Appendix A; " + SYMBOLIC_SOURCE, "symbolic: expectation, convexity, differentiation; "
          "Monte Carlo mean of K3")
def check_c27(ctx) -> list[Check]:
    n_samples = ctx.reps(100000, 1000000)
    return symbolic_checks("C27") + k3_checks(np.random.default_rng(ctx.seed_for("C27")), n_samples=n_samples)


# ------------------------------------------------------------------------------------- C25
#: The bandit of the C25 check: 3 actions, action 0 rewarded, kappa = 0.5, G = 4 (81 batches).
C25_LOGITS = (0.2, -0.3, 0.1)
C25_REF_LOGITS = (0.0, 0.4, -0.2)
C25_REWARD = (1.0, 0.0, 0.0)
C25_KL_WEIGHT = 0.5
C25_GROUP = 4
#: Updates before the estimate, and the learning rates (halving) of the exact slopes.
C25_UPDATES = (1, 2, 4)
C25_RATES = (0.04, 0.02, 0.01, 0.005)
#: (m, eta) of the Monte Carlo route: m eta = 0.64, where the bias is about 10 se at 20000 reps.
C25_MC_POINT = (4, 0.16)


def c25_bandit(kl_weight: float = C25_KL_WEIGHT):
    """The softmax bandit of the C25 check (docs/theory.md C25)."""
    from ..training.algorithm2 import OffPolicyBandit

    return OffPolicyBandit(np.array(C25_LOGITS), np.array(C25_REF_LOGITS), np.array(C25_REWARD),
                           kl_weight, C25_GROUP)


def c25_slope_checks(bandit, exponent: float = 2.0) -> list:
    """Exact squared bias ``||b_m||^2`` against ``(m eta)^exponent`` (docs/theory.md C25).

    For each ``m`` the local slope ``log2(||b(2 eta)||^2 / ||b(eta)||^2)`` at the two smallest
    rates is Richardson-extrapolated (its error is O(eta)), and the band allowed around the
    extrapolation is the change between the two local slopes (the size of the O(eta) term);
    ``exponent`` is the prediction, 2 for Theorem 12 (a test passes 1 and must fail). The
    constants ``||b||^2/(m eta)^2``, extrapolated the same way, must agree across ``m``: the
    squared bias depends on ``m`` and ``eta`` through ``m eta``.
    """
    from ..training.algorithm2 import minibatch_bias

    checks, constants = [], []
    rates = np.array(C25_RATES)
    for m in C25_UPDATES:
        sq = np.array([float(np.sum(minibatch_bias(bandit, eta, m) ** 2)) for eta in rates])
        slopes = np.log2(sq[:-1] / sq[1:])
        s_ext = 2.0 * slopes[-1] - slopes[-2]
        band = abs(slopes[-1] - slopes[-2])
        checks.append(check_interval(
            f"slope of log ||b_m||^2 against log eta, m={m}", exponent, s_ext, s_ext - band,
            s_ext + band, evidence="exact-numeric",
            note=f"exact (81 batches); local slopes {', '.join(f'{v:.4f}' for v in slopes)} at "
                 f"eta = {', '.join(f'{v:g}' for v in rates[1:])}; Richardson band"))
        c = sq / (m * rates) ** 2
        constants.append((m, 2.0 * c[-1] - c[-2], abs(c[-1] - c[-2])))
    m1, c1, band1 = constants[0]
    for m, c, band in constants[1:]:
        checks.append(check_interval(
            f"||b_m||^2/(m eta)^2 as eta -> 0: m={m} == m={m1}", c1, c, c - band - band1,
            c + band + band1, evidence="exact-numeric",
            note=f"constants {c:.6g} and {c1:.6g}, Richardson bands {band:.2g} and {band1:.2g}"))
    return checks


@register("C25", "Algorithm 2 with m minibatch updates from one batch (token ratio, no "
          "clipping, K3 penalty): the squared bias of the m-th gradient estimate grows like "
          "(m eta)^2 and vanishes as eta -> 0 (its Monte Carlo point sees only errors of tens "
          "of percent, docs/power.md: the exact enumeration carries the claim)",
          "Theorem 12, Appendix A; docs/theory.md C25",
          "exact enumeration of every batch on a 3-action softmax bandit (slopes, Richardson), "
          "Monte Carlo at one (m, eta), and the K3 direction's eta-independent part")
def check_c25(ctx) -> list:
    from ..training.algorithm2 import minibatch_bias, minibatch_bias_monte_carlo, on_policy_mean

    bandit = c25_bandit()
    checks = c25_slope_checks(bandit)
    b0 = minibatch_bias(bandit, 0.1, 0)
    checks.append(check_exact("no update yet (m = 0): b_0 == 0, the on-policy estimator's own "
                              "bias is not counted", np.zeros(3), b0, rtol=0.0, atol=1e-14))
    plain = c25_bandit(0.0)
    plain_checks = c25_slope_checks(plain)
    checks.append(check_true("without the penalty (kappa = 0), the importance-ratio part alone "
                             "also has slope 2", all(c.passed for c in plain_checks[:3]),
                             measured=plain_checks[0].measured,
                             note="; ".join(f"{c.name}: {c.measured:.4f}"
                                            for c in plain_checks[:3])))
    m, eta = C25_MC_POINT
    n = ctx.reps(20000, 200000)
    mean, se = minibatch_bias_monte_carlo(bandit, eta, m, n,
                                          np.random.default_rng(ctx.seed_for("C25")))
    exact = minibatch_bias(bandit, eta, m)
    for k in range(3):
        checks.append(check_close(f"MC b_m == exact b_m, coordinate {k}, m={m}, eta={eta:g}",
                                  exact[k], mean[k], se[k], note=f"{n} batches from pi_old"))
    z_zero = float(np.max(np.abs(mean) / se))
    checks.append(check_true("the same Monte Carlo rejects 'no bias' (b_m = 0)",
                             z_zero > Z_CHECK, measured=z_zero, evidence="monte-carlo",
                             note=f"largest |mean|/se = {z_zero:.1f} > {Z_CHECK:g}"))
    # the part that does not vanish as eta -> 0: K3's expected gradient is grad KL(pi_ref || pi)
    pi = np.exp(np.array(C25_LOGITS) - np.logaddexp.reduce(C25_LOGITS))
    ref = np.exp(np.array(C25_REF_LOGITS) - np.logaddexp.reduce(C25_REF_LOGITS))
    theta = np.array(C25_LOGITS)
    kl_part = on_policy_mean(bandit, theta)[0] - on_policy_mean(plain, theta)[0]
    checks.append(check_exact("on-policy K3 part of F == -kappa grad KL(pi_ref || pi) = "
                              "-kappa (pi - pi_ref) (C27)", -C25_KL_WEIGHT * (pi - ref), kl_part))
    forward = pi * (np.log(pi / ref) - np.sum(pi * np.log(pi / ref)))
    floor = float(np.sum((C25_KL_WEIGHT * (pi - ref - forward)) ** 2))
    checks.append(check_true(
        "against grad[V - kappa KL(pi_theta || pi_ref)], the squared bias vanishes as eta -> 0",
        floor < 1e-12, measured=floor, required=False,
        note=f"it does not: K3 on samples of pi gives grad KL(pi_ref || pi), so a squared bias "
             f"kappa^2 ||grad KL(pi_ref||pi) - grad KL(pi||pi_ref)||^2 = {floor:.3g} remains at "
             f"every eta, G and m (C27); Theorem 12's (m eta)^2 holds for the reuse bias b_m"))
    return checks
