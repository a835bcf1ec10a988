"""Lemma 6 and the PL lemmas behind it: the PL example and Hessian bound (C12, C13), the
constant and 1/i rates (C14, C15), Lemma 14 (C16) and Lemma 15 (C21), symbolically and numerically.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog

from .. import theory
from ..policies.examples import PL_START, pl_quadratic, realisable_kl_bandit
from ..theory.limit_law import scalar_limit_weight
from ..tolerances import Z_ONE_SIDED
from ..training.algorithm1 import (
    Algorithm1Config,
    NoisyQuadratic,
    quadratic_expected_gap,
    train,
)
from .registry import Check, check_close, check_exact, check_true, register
from .symbolic import SYMBOLIC_SOURCE, counterexample_check, symbolic_checks


def _constants(problem):
    """``L``, ``mu`` and the noise bound ``M = tr Gamma`` of a noisy PL quadratic."""
    return problem.smoothness, problem.pl_constant, float(np.trace(problem.noise_cov))


def constant_rate_bound(problem, beta, n) -> np.ndarray:
    """Lemma 6's constant-rate bound on ``problem`` from ``PL_START`` (C14)."""
    gap0 = problem.value - problem.objective(PL_START)
    return theory.lemma6_constant_bound(*_constants(problem), beta, gap0, n)


def inverse_rate_bound(problem, beta, n, sup_gap: float) -> np.ndarray:
    """Lemma 6's 1/i bound on ``problem`` with ``a = sup_n E Delta_n`` (C15)."""
    return theory.lemma6_inverse_bound(*_constants(problem), beta, sup_gap, n)


def _bound_checks(ctx, claim, problem, beta, schedule, marks, bound, n_runs):
    n_max = int(marks[-1])
    exact, _ = quadratic_expected_gap(problem, PL_START, n_max, learning_rate=beta, schedule=schedule)
    setting = Algorithm1Config(n_max, learning_rate=beta, schedule=schedule, checkpoints=marks)
    res = train(problem, PL_START, setting, n_runs=n_runs, seed=ctx.seed_for(claim, 1))
    gap = res.gap(problem.value)
    mean = gap.mean(axis=0)
    se = gap.std(axis=0, ddof=1) / math.sqrt(n_runs)
    b = np.concatenate([[np.inf], bound(marks[1:])])  # the bounds concern n >= 1
    checks = [check_true(f"exact E Delta_n <= Lemma 6 bound at every n = 1..{n_max}",
                         bool(np.all(exact[1:] <= bound(np.arange(1, n_max + 1)) * (1 + 1e-12))),
                         float(np.max(exact[1:] / bound(np.arange(1, n_max + 1)))),
                         note="measured: max ratio exact / bound")]
    ok = mean[1:] <= b[1:] + Z_ONE_SIDED * se[1:]
    checks.append(check_true(f"MC E Delta_n <= bound + {Z_ONE_SIDED:g} se at checkpoints "
                             f"{list(marks[1:])} ({n_runs} runs)", bool(np.all(ok)),
                             float(np.max((mean[1:] - b[1:]) / se[1:])), "monte-carlo",
                             "measured: max (MC - bound)/se; one-sided false-failure rate "
                             "3.2e-5 per checkpoint"))
    for j in (1, len(marks) - 1):
        checks.append(check_close(f"MC E Delta_n == exact recursion, n = {marks[j]}",
                                  exact[marks[j]], mean[j], se[j]))
    return checks


@register("C14", "Lemma 6 (constant rate beta < 1/(2L)): E Delta_n <= rho^n E Delta_0 + "
          "L beta^2 M/(4 mu beta - 2 L mu beta^2), rho = 1 - 2 mu beta + L mu beta^2; tight in 1-D.",
          "Lemma 6", "noisy PL quadratic with a null space: exact recursion and Monte Carlo runs")
def check_c14(ctx):
    problem, beta = pl_quadratic(), 0.2
    marks = np.array([0, 1, 2, 5, 10, 20, 50, 100, 200])
    checks = _bound_checks(ctx, "C14", problem, beta, "constant", marks,
                           lambda n: constant_rate_bound(problem, beta, n), ctx.reps(2000, 20000))
    # 1-D: the stationary exact E Delta equals the bound's floor (L = mu = lambda, M = gamma)
    lam, gam = 1.5, 0.8
    one = NoisyQuadratic([[lam]], [0.0], [[gam]])
    stationary = 0.5 * lam * beta**2 * gam / (2 * beta * lam - beta**2 * lam**2)
    exact, _ = quadratic_expected_gap(one, [0.0], 400, learning_rate=beta, schedule="constant")
    floor = lam * beta**2 * gam / (4 * lam * beta - 2 * lam**2 * beta**2)
    checks.append(check_exact("1-D: stationary E Delta == bound floor (tight)", floor, stationary))
    checks.append(check_exact("1-D: exact recursion reaches the floor (n = 400)", floor, exact[-1],
                              rtol=1e-9))
    checks.append(check_true("negative control: half the floor is violated by the exact 1-D E Delta",
                             bool(exact[-1] > floor / 2), exact[-1] / floor))
    return checks


@register("C15", "Lemma 6 (rate beta/i, beta > 1/(2 mu)): E Delta_n <= max{(1+eps) L beta^2 M/"
          "((4 mu beta - 2) n), c/n}; in 1-D n E Delta_n -> lambda beta^2 gamma/(2(2 beta lambda - 1)), "
          "so the bound is tight.", "Lemma 6, docs/theory.md C15 [derived]",
          "noisy PL quadratic: exact recursion, Monte Carlo runs; 1-D limit by exact recursion")
def check_c15(ctx):
    problem, beta = pl_quadratic(), 1.5
    marks = np.array([0, 1, 2, 5, 10, 20, 50, 100, 200, 500])
    exact, _ = quadratic_expected_gap(problem, PL_START, 500, learning_rate=beta, schedule="inverse")
    sup_gap = float(exact.max())
    checks = _bound_checks(ctx, "C15", problem, beta, "inverse", marks,
                           lambda n: inverse_rate_bound(problem, beta, n, sup_gap),
                           ctx.reps(2000, 20000))
    lam, gam, b1 = 1.0, 0.8, 1.5
    one = NoisyQuadratic([[lam]], [0.0], [[gam]])
    limit = scalar_limit_weight(lam, gam, b1)
    n_big = 100_000 if ctx.quick else 1_000_000
    e1, _ = quadratic_expected_gap(one, [0.0], n_big, learning_rate=b1, schedule="inverse")
    checks.append(check_exact(f"1-D: n E Delta_n at n = {n_big} == lambda beta^2 gamma/(2(2 beta "
                              "lambda - 1))", limit, n_big * e1[-1], rtol=1e-4,
                              note="finite-n correction O(1/n) (rtol 1e-4)"))
    bound_coef = lam * b1**2 * gam / (4 * lam * b1 - 2)  # eps -> 0; L = mu = lam, M = gam
    checks.append(check_exact("1-D: the bound's leading coefficient (eps -> 0) equals the limit",
                              bound_coef, limit))
    wrong = lam * gam / (2 * (2 * b1 * lam - 1))  # beta^2 dropped
    checks.append(check_true("negative control: the limit without beta^2 is off by > 1%",
                             abs(n_big * e1[-1] - wrong) > 0.01 * wrong, n_big * e1[-1] / wrong))
    return checks


@register("C12.num", "J = -theta_1^2 on R^2 is PL for every mu <= 2 (and no larger) and its "
          "Hessian is singular.", "Assumptions 3-5 example",
          "exact ratio ||g||^2 / (2 Delta) at random points; Hessian eigenvalues")
def check_c12_num(ctx):
    problem = NoisyQuadratic([[2.0, 0.0], [0.0, 0.0]], [0.0, 0.0], np.eye(2))
    rng = np.random.default_rng(ctx.seed_for("C12.num"))
    pts = rng.normal(0.0, 3.0, size=(1000, 2))
    ratio = np.array([problem.grad(p) @ problem.grad(p) / (2 * (problem.value - problem.objective(p)))
                      for p in pts])
    return [
        check_exact("||g||^2 / (2 Delta) == 2 at 1000 random points (so PL holds for mu <= 2)",
                    np.full(ratio.size, 2.0), ratio),
        check_exact("Hessian eigenvalues == (-2, 0): singular",
                    [-2.0, 0.0], np.linalg.eigvalsh(-problem.curvature)),
        check_true("negative control: mu = 2.5 violates PL at every point", bool(np.all(ratio < 2.5)),
                   float(ratio.max())),
    ]


def _pl_ratio(bandit, opt, theta) -> float:
    g = bandit.grad(theta)
    return float(g @ g / (2 * (opt.value - bandit.objective(theta))))


@register("C13.num", "Lemma 16: at a maximiser every positive eigenvalue of -grad g is >= any PL "
          "constant mu, and mu <= L.", "Lemma 16",
          "KL bandit with shared parameters: PL ratio near and away from Theta*, exact Hessian")
def check_c13_num(ctx):
    bandit, _ = realisable_kl_bandit()
    opt = bandit.optimum()
    lam = opt.curvature  # positive eigenvalues of -H(theta*)
    full = np.linalg.eigvalsh(-bandit.hessian(opt.theta))
    vec = opt.basis @ np.linalg.eigh(-opt.hessian)[1][:, 0]  # direction of lambda_min
    ratios = [_pl_ratio(bandit, opt, opt.theta + t * vec) for t in (1e-2, 1e-3)]
    rng = np.random.default_rng(ctx.seed_for("C13.num"))
    pts = opt.theta + rng.normal(0.0, 1.0, size=(ctx.reps(300, 3000), bandit.dim))
    sampled = np.array([_pl_ratio(bandit, opt, p) for p in pts])
    smooth = max(np.abs(np.linalg.eigvalsh(bandit.hessian(p))).max() for p in pts[:200])
    mu = float(sampled.min())
    return [
        check_exact("-H(theta*) has d - r zero eigenvalues (the null space)",
                    np.zeros(bandit.dim - lam.size), full[:bandit.dim - lam.size], atol=1e-12),
        check_exact("PL ratio along the lambda_min eigenvector -> lambda_min (t = 1e-3)",
                    lam[0], ratios[1], rtol=1e-2, note="ratio - lambda_min = O(t)"),
        check_true(f"sampled PL constant {mu:.4f} <= every positive eigenvalue {np.round(lam, 4)}",
                   bool(mu <= lam[0] * (1 + 1e-9)), mu),
        check_true(f"mu = {mu:.4f} <= L = {smooth:.4f} (sampled sup ||H||)", bool(mu <= smooth),
                   smooth),
        check_true("negative control: mu = 1.1 lambda_min violates PL near theta*",
                   bool(ratios[1] < 1.1 * lam[0]), ratios[1] / lam[0]),
    ]


def _lemma14_worst(A, B, C, a, eps, horizon):
    """Largest ``a_m / bound(m)`` over all sequences meeting Lemma 14's hypotheses (an LP)."""
    n0 = math.ceil(B * (1 + eps) / (eps * (A - 1))) + 1
    rows = np.zeros((horizon - 1, horizon))
    for n in range(1, horizon):
        rows[n - 1, n], rows[n - 1, n - 1] = 1.0, -(1 - A / n + B / n**2)
    rhs = C / np.arange(1, horizon) ** 2
    worst, where = 0.0, 0
    for m in range(1, horizon + 1):
        cost = np.zeros(horizon)
        cost[m - 1] = -1.0
        res = linprog(cost, A_ub=rows, b_ub=rhs, bounds=[(0.0, a)] * horizon, method="highs")
        ratio = -res.fun / max((1 + eps) * C / ((A - 1) * m), a * n0 / m)
        if ratio > worst:
            worst, where = ratio, m
    return worst, where


@register("C16.num", "Lemma 14: 0 <= a_n <= a and a_{n+1} <= (1 - A/n + B/n^2) a_n + C/n^2 with "
          "A > 1 give a_n <= max{(1+eps) C/((A-1) n), a n0/n}.", "Lemma 14",
          "exact worst case over all admissible sequences (linear programme, n <= 40)")
def check_c16_num(ctx):
    checks = []
    grid = [(1.5, 0.6, 1.0, 2.0, 1.0), (3.0, 2.25, 0.5, 0.3, 0.5), (2.0, 4.0, 2.0, 1.0, 0.1),
            (6.0, 9.0, 1.0, 0.05, 1.0)]
    for A, B, C, a, eps in grid:
        worst, where = _lemma14_worst(A, B, C, a, eps, 40)
        checks.append(check_true(f"B >= A^2/4 (A={A}, B={B}, C={C}, a={a}, eps={eps}): worst "
                                 f"a_m / bound = {worst:.4f} <= 1 (at m = {where})",
                                 worst <= 1 + 1e-9, worst))
    # Without 1 - A/n + B/n^2 >= 0 the statement fails: a_1..a_5 = 0, a_6 = C/25, then 0.
    A, B, C, a, eps = 10.0, 0.01, 1.0, 0.1, 1.0
    seq = np.zeros(12)
    seq[5] = C / 25
    coef = 1 - A / np.arange(1, 12) + B / np.arange(1, 12) ** 2
    admissible = bool(np.all(seq[1:] <= coef * seq[:-1] + C / np.arange(1, 12) ** 2 + 1e-15))
    n0 = math.ceil(B * (1 + eps) / (eps * (A - 1))) + 1
    bound6 = max((1 + eps) * C / ((A - 1) * 6), a * n0 / 6)
    checks.append(check_true(
        f"counterexample to the lemma as stated (B < A^2/4 allowed): A={A}, B={B}, C={C}, a={a}, "
        f"eps={eps}, sequence 0,0,0,0,0,{C / 25:g},0,... is admissible ({admissible}) and "
        f"a_6 = {seq[5]:.4f} > bound {bound6:.4f}", admissible and seq[5] > bound6, seq[5] / bound6,
        note="the proof needs 1 - A/n + B/n^2 >= 0 for n >= n0; Lemma 6 satisfies it since "
             "B = L mu beta^2 >= mu^2 beta^2 = A^2/4", refutes=True))
    return checks


@register("C21.num", "Lemma 15: Q^T Theta* is a single point; weak strong concavity with mu and "
          "L-smoothness give PL with constant mu^2/L.", "Lemma 15",
          "KL bandit: Newton from several starts; WSC, L and PL measured at sampled points")
def check_c21_num(ctx):
    bandit, _ = realisable_kl_bandit()
    rng = np.random.default_rng(ctx.seed_for("C21.num"))
    starts = bandit.ref_theta + rng.normal(0.0, 0.5, size=(4, bandit.dim))
    opts = [bandit.optimum(theta_init=s) for s in starts]
    q = opts[0].basis
    ident = np.array([q.T @ o.theta for o in opts])
    nulls = np.array([o.null_basis.T @ o.theta for o in opts])
    opt = opts[0]
    n_pts = ctx.reps(300, 3000)
    pts = (opt.theta + rng.normal(0.0, 0.7, size=(n_pts, q.shape[1])) @ q.T
           + rng.normal(0.0, 1.0, size=(n_pts, bandit.dim - q.shape[1])) @ opt.null_basis.T)
    u = (pts - opt.theta) @ q @ q.T  # theta - Pi(theta)
    grads = np.array([bandit.grad(p) for p in pts])
    dist2 = np.sum(u**2, axis=1)
    wsc = float(np.min(-np.sum(grads * u, axis=1) / dist2))
    seg = [opt.theta + s * (p - opt.theta) for p in pts[:100] for s in (0.25, 0.5, 0.75, 1.0)]
    smooth = max(np.abs(np.linalg.eigvalsh(bandit.hessian(p))).max() for p in seg)
    gaps = opt.value - bandit.objective_many(pts)
    pl = np.sum(grads**2, axis=1) / (2 * gaps)
    return [
        check_exact("Q^T theta* equal from 4 starts", np.tile(ident[0], (4, 1)), ident, atol=1e-9),
        check_true("while the null-space components differ", bool(np.ptp(nulls, axis=0).max() > 0.1),
                   float(np.ptp(nulls, axis=0).max())),
        check_true(f"WSC holds on the sampled ball: mu = {wsc:.4f} > 0", wsc > 0, wsc),
        check_true(f"PL with mu^2/L = {wsc**2 / smooth:.4f} at every sampled point "
                   f"(min ratio {pl.min():.4f})", bool(np.all(pl >= wsc**2 / smooth)), pl.min()),
        check_true(f"negative control: PL with mu = {wsc:.4f} itself (L dropped) fails at some "
                   "sampled point", bool(np.any(pl < wsc)), float(pl.min() / wsc)),
    ]


@register("C12", "J = -theta1^2 on R^2 is PL exactly for mu <= 2 and has a singular Hessian",
          "Example after Assumption 4; " + SYMBOLIC_SOURCE, "symbolic: ||g||^2/(2 Delta) and det Hessian")
def check_c12(ctx) -> list[Check]:
    return symbolic_checks("C12")


@register("C13", "At maximisers every positive eigenvalue of -grad g is >= mu, and mu <= L",
          "Lemma 16; " + SYMBOLIC_SOURCE, "symbolic: limit of ||g||^2/(2 Delta) along eigenvectors; "
          "discriminant of rho(beta)")
def check_c13(ctx) -> list[Check]:
    return symbolic_checks("C13")


@register("C16", "Lemma 14: a_n <= max{(1+eps)C/((A-1)n), a n0/n}",
          "Lemma 14; " + SYMBOLIC_SOURCE, "symbolic induction step (premise 1 - A/n + B/n^2 >= 0) and an "
          "exact witness sequence for the statement as transcribed")
def check_c16(ctx) -> list[Check]:
    return symbolic_checks("C16") + [counterexample_check(
        "Lemma 14 as transcribed (C16)", "exact witness sequence violates Lemma 14 as transcribed",
        "The statement needs 1 - A/n + B/n^2 >= 0 for n >= n0 (e.g. n0 >= A); with it the "
        "induction step above is proved.")]


@register("C21", "Weak strong concavity + L-smoothness imply PL with mu^2/L; Q^T Theta* is a point",
          "Lemma 15; " + SYMBOLIC_SOURCE, "symbolic: non-negativity certificate; quadratic example")
def check_c21(ctx) -> list[Check]:
    return symbolic_checks("C21")
