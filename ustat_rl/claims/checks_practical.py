"""Appendix A, the practical algorithm (docs/theory.md C24-C27).

Registers ``C24`` (Lemma 11: the estimator with the group standard error in the denominator
approaches the U-statistic normalised by the true std, and how often a group is all-equal),
``C26`` (symbolic: the std-normalised gradient is the gradient of the arcsin objective),
``C26.train`` (training with std-normalised advantages goes to the arcsin objective's maximiser,
through the exact finite-G fixed point of docs/theory.md section 7), ``C27`` (symbolic: K3 and
its gradient) and ``C27.mc`` (the expected per-sample K3 gradient under the policy is the
gradient of KL(pi_ref || pi_theta), by Monte Carlo).
"""

from __future__ import annotations

import numpy as np

from ..conventions import _grouped, get_convention
from ..examples import std_normalisation_bandit
from ..theory.advantage import AdvantageTable, advantage_moments, all_equal_probability
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


def lemma11_difference_table(value: float, group_size: int) -> AdvantageTable:
    """``a(z, m)`` of ``g_se - g_std``: Algorithm 2's advantage minus leave-one-out over ``sigma``.

    Algorithm 2 (docs/theory.md section 2): ``(z - Z_bar_{-g})/se_m`` with
    ``se_m = sqrt(m (G - m)/(G (G - 1)))`` and all-equal groups zeroed; the limit of Lemma 11
    divides the same leave-one-out difference by ``sigma = sqrt(V (1 - V))``. For binary rewards
    ``z - Z_bar_{-g}`` is ``(G - m)/(G - 1)`` for a success and ``-m/(G - 1)`` for a failure
    (docs/theory.md section 7). O(G), so usable at ``G = 16384``.
    """
    G = int(group_size)
    m = np.arange(G + 1, dtype=np.float64)
    sigma = np.sqrt(value * (1.0 - value))
    se = np.sqrt(m * (G - m) / (G * (G - 1.0)))
    inv_se = np.where(se > 0, 1.0 / np.where(se > 0, se, 1.0), 0.0)
    loo_success, loo_failure = (G - m) / (G - 1.0), -m / (G - 1.0)
    success = loo_success * (inv_se - 1.0 / sigma)
    failure = loo_failure * (inv_se - 1.0 / sigma)
    success[0], failure[G] = 0.0, 0.0
    return AdvantageTable(G, success, failure)


def lemma11_constant(moments) -> float:
    """``lim G E||g_se - g_std||^2 = ||g||^2 (1 - 2V)^2 / (4 V^2 (1 - V)^2)`` (derived, C24).

    Delta method: ``g_se - g_std = g_loo (1/se - 1/sigma)``, ``g_loo -> g`` and
    ``G Var(se^2) -> mu_4 - sigma^4 = V (1 - V) (1 - 2V)^2`` for Bernoulli rewards, with
    ``1/se - 1/sigma ~ -(se^2 - sigma^2)/(2 sigma^3)``.
    """
    V, gsq = float(moments.value[0]), float(moments.grad_sq[0])
    return gsq * (1.0 - 2.0 * V) ** 2 / (4.0 * V**2 * (1.0 - V) ** 2)


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
    diff = (_grouped(get_convention("paper_algorithm2"), sample.reward)
            - _grouped(get_convention("grpo"), sample.reward) / sigma)  # (n, G)
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
        diff = (_grouped(get_convention("paper_algorithm2"), groups)
                - _grouped(get_convention("grpo"), groups) / sigma)
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


# ------------------------------------------------------------------------------- C26.train
C26_GROUP = 8


C26_LIMIT_SIZES = (512, 2048, 8192)


def trl_group_rule(z, m, G):
    """TRL's ``scale_rewards="group"`` advantage for binary rewards as ``a(z, m, G)``: O(G).

    ``(z - m/G)/(s_m + 1e-4)`` with the Bessel-corrected ``s_m = sqrt(m (G - m)/(G (G - 1)))``
    (docs/conventions.md); equal to the named convention's table (checked in ``check_c26_train``).
    """
    m = np.asarray(m, dtype=np.float64)
    s = np.sqrt(m * (G - m) / (G * (G - 1.0)))
    return (np.asarray(z, dtype=np.float64) - m / G) / (s + 1e-4)


def _binary_part(bandit):
    """The same bandit without the KL penalty: its moments describe the binary rewards."""
    from ..policies.loglinear import LogLinearBandit

    return LogLinearBandit(bandit.features, bandit.reward_prob, bandit.prompt_prob,
                           bandit.reward_values, 0.0, bandit.ref_theta)


def kl_penalty_gradient(bandit, theta) -> np.ndarray:
    """``-tau grad E_X KL(pi_theta || pi_ref)`` at each row of ``theta (R, d)``, shape ``(R, d)``.

    Per prompt ``grad KL = sum_a pi(a) w(x, a) log(pi/pi_ref)(a)``, since ``E w = 0``.
    """
    from scipy.special import log_softmax

    theta = np.atleast_2d(theta)
    log_pi = log_softmax(np.einsum("pkd,rd->rpk", bandit.features, theta), axis=2)  # (R, P, K)
    pi = np.exp(log_pi)
    w = bandit.features[None] - np.einsum("rpk,pkd->rpd", pi, bandit.features)[:, :, None, :]
    ratio = log_pi - bandit.ref_log_policy[None]  # (R, P, K)
    return -bandit.kl_weight * np.einsum("p,rpk,rpkd->rd", bandit.prompt_prob, pi * ratio, w)


def mean_field(bandit, theta: float, factor) -> float:
    """Expected update direction at scalar ``theta``: ``sum_x f c(x) g(x) - tau grad KL``.

    ``factor``: ``"value"`` (``c = 1``, the gradient of ``E V - tau KL``), ``"arcsin"``
    (``c = 1/sqrt(V(1-V))``, Proposition 13's objective) or an :class:`AdvantageTable`, whose
    exact mean factor ``c_G(x)`` (docs/theory.md section 7) makes this the mean of the
    std-normalised update at group size ``G``.
    """
    from ..theory.advantage import arcsin_weight

    theta_vec = np.array([float(theta)])
    moments = _binary_part(bandit).moments(theta_vec, matrices=True)
    if isinstance(factor, str):
        c = np.ones(bandit.n_prompts) if factor == "value" else arcsin_weight(moments.value)
    else:
        c = advantage_moments(moments, factor).mean_factor
    reward_part = bandit.prompt_prob @ (c[:, None] * moments.grad_per_prompt)
    return float(reward_part[0] + kl_penalty_gradient(bandit, theta_vec)[0, 0])


def mean_field_root(bandit, factor, bracket=(-4.0, 6.0)) -> float:
    """The root of :func:`mean_field` in ``bracket`` (one shared parameter, ``d = 1``)."""
    from scipy.optimize import brentq

    if bandit.dim != 1:
        raise ValueError(f"mean_field_root needs a one-parameter bandit, got d = {bandit.dim}")
    return float(brentq(lambda t: mean_field(bandit, t, factor), *bracket, xtol=1e-13))


def train_std_normalised(bandit, convention: str, group_size: int, batch_size: int,
                         n_iter: int, n_runs: int, rng, beta: float = 30.0,
                         offset: float = 30.0) -> np.ndarray:
    """Stochastic gradient ascent with a named advantage convention; Polyak averages ``(R, d)``.

    Each step draws ``B`` prompts from ``f`` and ``G`` responses per prompt from ``pi_theta``
    for each of ``R`` independent runs, forms ``(1/B) sum_b (1/G) sum_g A_g W_g`` with
    ``convention``'s advantages, adds the exact penalty gradient ``-tau grad KL`` and steps
    ``beta/(i + offset)`` (``beta`` times the mean field's slope exceeds 1/2, as the 1/i rate
    of Lemma 6 needs). Returns each run's average of its iterates over the second half.
    """
    spec = get_convention(convention)
    theta = np.tile(bandit.ref_theta, (n_runs, 1))  # (R, d)
    total = np.zeros_like(theta)
    feats = bandit.features
    B, G = batch_size, group_size
    for i in range(1, n_iter + 1):
        x = rng.choice(bandit.n_prompts, size=(n_runs, B), p=bandit.prompt_prob)  # (R, B)
        phi = feats[x]  # (R, B, K, d)
        logits = np.einsum("rbkd,rd->rbk", phi, theta)
        pi = np.exp(logits - logits.max(axis=2, keepdims=True))
        pi /= pi.sum(axis=2, keepdims=True)  # (R, B, K)
        cum = np.cumsum(pi, axis=2)
        cum[..., -1] = 1.0
        u = rng.random((n_runs, B, G))
        action = np.sum(u[..., None] >= cum[:, :, None, :], axis=3)  # (R, B, G)
        reward = (rng.random((n_runs, B, G))
                  < bandit.reward_prob[x[..., None], action]).astype(np.float64)
        mean_phi = np.einsum("rbk,rbkd->rbd", pi, phi)
        score = np.take_along_axis(phi, action[..., None], axis=2) - mean_phi[:, :, None, :]
        adv = _grouped(spec, reward.reshape(n_runs * B, G)).reshape(n_runs, B, G)
        g_hat = np.einsum("rbg,rbgd->rd", adv, score) / (B * G)
        theta = theta + beta / (i + offset) * (g_hat + kl_penalty_gradient(bandit, theta))
        if i > n_iter // 2:
            total += theta
    return total / (n_iter - n_iter // 2)


@register("C26.train", "Training with std-normalised advantages converges to the root of its "
          "exact mean field, which tends to the maximiser of E[2 arcsin sqrt V] - tau KL as G "
          "grows, not to that of E V - tau KL (leave-one-out training converges there)",
          "Proposition 13, Appendix A; docs/theory.md section 7",
          "exact roots of the section 7 mean field (Richardson to G = 8192); 256 training runs "
          "of TRL's group normalisation and of leave-one-out at G = 8")
def check_c26_train(ctx) -> list:
    from ..examples import arcsin_conflict_bandit
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
    table = advantage_table("trl_group", G)
    closed = advantage_table(trl_group_rule, G)
    checks.append(check_exact(f"closed-form TRL group table == named convention, G={G}",
                              np.r_[table.success[1:], table.failure[:-1]],
                              np.r_[closed.success[1:], closed.failure[:-1]]))
    roots = [mean_field_root(bandit, advantage_table(trl_group_rule, g))
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
        final = train_std_normalised(bandit, convention, G, 2, n_iter, n_runs, rng)[:, 0]
        mean, se = final.mean(), final.std(ddof=1) / np.sqrt(n_runs)
        checks.append(check_close(f"{convention} training at G={G}: averaged iterate == "
                                  f"predicted fixed point", predicted, mean, se,
                                  note=f"{n_runs} runs x {n_iter} steps, B = 2; predicted "
                                       f"from the exact mean field (section 7)"))
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
