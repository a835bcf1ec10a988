"""Numeric bridge: symbolic results lambdified and compared with ``ustat_rl`` and Monte Carlo.

Exact twins (``SoftmaxBandit`` quantities, the estimators) must agree within ``RTOL`` relative
error at random parameter points; stochastic twins must agree with a Monte Carlo estimate within
``Z`` standard errors (two-sided false-failure rate 6.3e-5 per comparison). Symbolic bandit
results are lambdified *through the logits* (``pi = softmax(theta)`` substituted symbolically),
so the softmax map is exercised too. Every function returns :class:`~proofs_check.comparison.
Comparison` objects; ``ustat_rl.claims.symbolic`` turns them into registry checks.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from ustat_rl.advantages.gradients import (
    fullmean_gradient,
    grpo_gradient,
    grpo_gradient_pairwise,
    oracle_gradient,
    vanilla_gradient,
)
from ustat_rl.policies.softmax import SoftmaxBandit

from . import baselines, hoeffding, scaling, ustatistic
from .bandit_model import symbolic_bandit
from .comparison import Comparison

__all__ = ["RTOL", "random_bandit", "bandit_function", "exact_checks", "monte_carlo_checks",
           "mse_monte_carlo", "sgd_limit_monte_carlo", "k3_monte_carlo"]

#: Relative agreement demanded between a lambdified expression and its numeric twin.
RTOL = 1e-12


def random_bandit(rng: np.random.Generator, n_actions: int, n_prompts: int = 1) -> SoftmaxBandit:
    """A bandit at a random parameter point: normal logits, success probabilities in
    (0.05, 0.95), reward values ``lo < hi`` drawn at random."""
    logits = rng.normal(size=(n_prompts, n_actions))
    prob = rng.uniform(0.05, 0.95, size=(n_prompts, n_actions))
    lo = float(rng.uniform(-1.0, 0.5))
    hi = lo + float(rng.uniform(0.5, 2.0))
    return SoftmaxBandit(logits, prob, reward_values=(lo, hi))


@lru_cache(maxsize=None)
def _lambdified(n_actions: int, key: str, builder):
    bd = symbolic_bandit(n_actions)
    expr = bd.in_logits(bd.to_sympy(builder(bd)))
    args = list(bd.logits) + list(bd.symbols[n_actions - 1:])
    return sp.lambdify(args, expr, modules="numpy")


def bandit_function(n_actions: int, key: str, builder):
    """``f(bandit, prompt, G=..., b=...)`` evaluating ``builder(symbolic_bandit) `` numerically.

    ``key`` names the quantity (the cache key, since builders are closures).
    """
    func = _lambdified(n_actions, key, builder)

    def evaluate(bandit: SoftmaxBandit, prompt: int = 0, group_size=2, baseline=0.0):
        lo, hi = bandit.reward_values
        args = (list(bandit.logits[prompt]) + list(bandit.reward_prob[prompt])
                + [lo, hi, group_size, 1.0 / group_size, baseline])
        out = np.asarray(func(*args), dtype=np.float64)
        return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out  # (K, 1) column -> (K,)

    return evaluate


def _h1(bd):
    return np.array(hoeffding.components(bd.n_actions)["h1"])


def _h2(bd):
    comp = hoeffding.components(bd.n_actions)
    n = len(bd.outcomes)
    return np.array([[comp["h2"][i, j] for j in range(n)] for i in range(n)]).reshape(n * n, -1)


def _mse(name):
    return lambda bd: hoeffding.derived_mse_grpo(hoeffding.components(bd.n_actions)) \
        if name == "grpo" else hoeffding.claimed_mse(bd, name)


def _baseline_mse(bd):
    return hoeffding._iid_mse(bd, lambda a, z, w: w * (z - bd.baseline))[0]


def exact_checks(seed: int = 0, n_points: int = 3) -> list[Comparison]:
    """Lambdified symbolic results vs ``SoftmaxBandit`` and the estimators, exact to ``RTOL``."""
    rng = np.random.default_rng(seed)
    checks = []
    for k in (2, 3):
        funcs = {
            "h0": bandit_function(k, "h0", lambda bd: hoeffding.components(bd.n_actions)["h0"]),
            "h1": bandit_function(k, "h1", _h1),
            "h2": bandit_function(k, "h2", _h2),
            "zeta1": bandit_function(k, "zeta1", lambda bd: hoeffding.components(bd.n_actions)["zeta1"]),
            "zeta2": bandit_function(k, "zeta2", lambda bd: hoeffding.components(bd.n_actions)["zeta2"]),
            "grpo": bandit_function(k, "grpo", _mse("grpo")),
            "vanilla": bandit_function(k, "vanilla", _mse("vanilla")),
            "oracle": bandit_function(k, "oracle", _mse("oracle")),
            "baseline": bandit_function(k, "baseline", _baseline_mse),
        }
        for _ in range(n_points):
            bandit = random_bandit(rng, k)
            comp = bandit.hoeffding(0)
            pairs = comp.h2.reshape(-1, k)
            for name, numeric in (("h0", comp.h0), ("h1", comp.h1), ("h2", pairs),
                                  ("zeta1", comp.zeta1), ("zeta2", comp.zeta2)):
                checks.append(Comparison.exact(
                    f"C4 {name} symbolic vs SoftmaxBandit.hoeffding, K={k}",
                    numeric, funcs[name](bandit), rtol=RTOL))
            for size in (2, 3, 7, 40):
                for name in ("grpo", "vanilla", "oracle"):
                    checks.append(Comparison.exact(
                        f"C5 MSE_{name}(G={size}) symbolic vs exact_mse_per_prompt, K={k}",
                        bandit.exact_mse_per_prompt(name, size)[0],
                        funcs[name](bandit, group_size=size), rtol=RTOL))
            base = float(rng.normal())
            checks.append(Comparison.exact(
                f"C8 MSE(b) symbolic vs baseline_mse_per_prompt, K={k}",
                bandit.baseline_mse_per_prompt(base, 5)[0],
                funcs["baseline"](bandit, group_size=5, baseline=base), rtol=RTOL))
    checks += _estimator_checks(rng) + _scaling_checks(rng) + _witness_checks()
    return checks


def _estimator_checks(rng) -> list[Comparison]:
    """C1 and C2 at G = 2..8: the symbolic group expressions vs the library's estimators."""
    checks = []
    for size in range(2, 9):
        scores, rewards = ustatistic._vector_group(size)
        symbols = [s for w in scores for s in w] + list(rewards)
        lhs = sp.lambdify(symbols, ustatistic._grpo_explicit(scores, rewards), "numpy")
        score = rng.normal(size=(size, 2))
        reward = rng.normal(size=size)
        value = np.ravel(lhs(*score.ravel(), *reward))
        checks.append(Comparison.exact(f"C1 symbolic GRPO (G={size}) vs grpo_gradient",
                                       grpo_gradient(score, reward), value, rtol=RTOL))
        checks.append(Comparison.exact(f"C1 symbolic GRPO (G={size}) vs grpo_gradient_pairwise",
                                       grpo_gradient_pairwise(score, reward), value, rtol=RTOL))
        factor = float(((ustatistic.G - 1) / ustatistic.G).subs(ustatistic.G, size))
        checks.append(Comparison.exact(
            f"C2 (G-1)/G x symbolic GRPO (G={size}) vs fullmean_gradient",
            fullmean_gradient(score, reward), factor * value, rtol=RTOL))
    return checks


def _scaling_checks(rng) -> list[Comparison]:
    """C17: the symbolic minimisers and exact fixed-budget MSE vs the bandit's scaling law."""
    bandit = random_bandit(rng, 3, n_prompts=4)
    const = bandit.scaling_constants()
    values = {scaling.c1: const.c1, scaling.c2: const.c2, scaling.c3: const.c3,
              scaling.c3e: const.c3}
    exact_root = float(sp.N((1 + sp.sqrt(scaling.c3e / scaling.c1)).subs(values), 30))
    paper_root = float(sp.N(sp.sqrt(scaling.c3 / scaling.c1).subs(values), 30))
    mse = sp.lambdify([scaling.G, scaling.N], scaling.exact_fixed_budget_mse().subs(values))
    checks = [Comparison.exact("C17 symbolic 1 + sqrt(c3'/c1) vs optimal_group_size(exact=True)",
                               bandit.optimal_group_size(exact=True), exact_root, rtol=RTOL),
              Comparison.exact("C17 symbolic sqrt(c3/c1) vs optimal_group_size(exact=False)",
                               bandit.optimal_group_size(exact=False), paper_root, rtol=RTOL)]
    for size, batch in ((2, 8), (4, 3), (16, 1)):
        checks.append(Comparison.exact(
            f"C17 exact fixed-budget MSE (G={size}, B={batch}) vs exact_mse",
            bandit.exact_mse("grpo", size, batch), mse(size, size * batch), rtol=RTOL))
    return checks


def _witness_checks() -> list[Comparison]:
    """C9: the exact witness gap vs the library, evaluated at the witness bandit."""
    w = baselines.WITNESS
    pi1 = float(w["pi1"])
    bandit = SoftmaxBandit([[np.log(pi1), np.log(1 - pi1)]], [[float(w["p1"]), float(w["p2"])]],
                           reward_values=(float(w["lo"]), float(w["hi"])))
    gap = (bandit.baseline_mse_per_prompt(bandit.value, 4)
           - bandit.baseline_mse_per_prompt(bandit.optimal_constant_baseline, 4))[0]
    symbolic = float(baselines.value_baseline_counterexample().expression)
    return [Comparison.exact("C9 witness gap MSE(V) - MSE(b*) symbolic vs SoftmaxBandit", gap,
                             symbolic, rtol=RTOL)]


# ------------------------------------------------------------------------------ Monte Carlo
def mse_monte_carlo(bandit: SoftmaxBandit, group_size: int, n_groups: int, rng,
                    formula=None) -> list[Comparison]:
    """MC squared errors of GRPO / vanilla / oracle (``ustat_rl.advantages.gradients``) vs symbolic MSE.

    ``formula(name, G) -> float`` defaults to the lambdified symbolic exact MSE; pass a wrong
    one to see the same check reject it.
    """
    k = bandit.n_actions
    if formula is None:
        funcs = {name: bandit_function(k, name, _mse(name)) for name in ("grpo", "vanilla", "oracle")}

        def formula(name, size):
            return float(funcs[name](bandit, group_size=size))

    sample = bandit.sample_groups(group_size, n_groups, rng, prompt=0)
    score = bandit.scores(sample.prompt, sample.action)  # (n, G, K)
    reward = sample.reward  # (n, G)
    g = bandit.grad_per_prompt[0]
    value = np.full(n_groups, bandit.value[0])
    estimates = {"grpo": grpo_gradient(score, reward, per_prompt=True),
                 "vanilla": vanilla_gradient(score, reward, per_prompt=True),
                 "oracle": oracle_gradient(score, reward, value, per_prompt=True)}
    checks = []
    for name, est in estimates.items():
        err = np.sum((est - g) ** 2, axis=1)  # (n,)
        checks.append(Comparison.monte_carlo(
            f"C5 MC MSE_{name}(G={group_size}), K={k}, n={n_groups}",
            formula(name, group_size), err.mean(), err.std(ddof=1) / np.sqrt(n_groups)))
    return checks


def sgd_limit_monte_carlo(rng, n_iter: int = 2000, n_reps: int = 20000, beta=0.5, lam=3.0,
                          noise=1.0, weight=None) -> list[Comparison]:
    """C20 in 1-D: simulate ``theta_{i+1} = theta_i + (beta/i)(-lam theta_i + xi_i)``.

    The MC mean of ``n Delta_n`` is compared (``Z`` se) with the *exact* finite-n value
    from the second-moment recursion; that value is compared with the limit weight ``w``
    (default: the symbolic corrected ``lam beta^2 gamma/(2(2 beta lam - 1))``) within the
    recursion's own O(1/n) distance, computed, not assumed.
    """
    from .limit_law import beta as b_
    from .limit_law import corrected_omega, lyapunov_weight_1d
    from .limit_law import gamma as g_
    from .limit_law import lam as l_

    if weight is None:
        weight = float(lyapunov_weight_1d(corrected_omega()).subs({b_: beta, l_: lam, g_: noise}))
    theta = np.zeros(n_reps)  # (n_reps,)
    v = 0.0
    for i in range(1, n_iter):
        step = beta / i
        theta = theta + step * (-lam * theta + rng.normal(scale=np.sqrt(noise), size=n_reps))
        v = (1 - step * lam) ** 2 * v + step**2 * noise
    scaled_gap = n_iter * lam * theta**2 / 2  # (n_reps,) n Delta_n
    exact = n_iter * lam * v / 2
    # distance of the exact sequence from its limit: |u_n - u| shrinks like 1/n (2 beta lam > 2)
    halfway = _exact_scaled_gap(n_iter // 2, beta, lam, noise)
    drift = 2 * abs(exact - halfway)
    return [Comparison.monte_carlo(f"C20 MC n E Delta_n vs exact recursion (n={n_iter})", exact,
                                   scaled_gap.mean(), scaled_gap.std(ddof=1) / np.sqrt(n_reps)),
            Comparison.interval(f"C20 exact n E Delta_n vs limit weight (n={n_iter})", weight,
                                exact, exact - drift, exact + drift,
                                "tolerance: twice the change of n E Delta_n from n/2 to n "
                                "(the O(1/n) approach to the limit)")]


def _exact_scaled_gap(n_iter, beta, lam, noise) -> float:
    v = 0.0
    for i in range(1, n_iter):
        step = beta / i
        v = (1 - step * lam) ** 2 * v + step**2 * noise
    return n_iter * lam * v / 2


def k3_monte_carlo(rng, n_samples: int = 200000, estimator=None) -> list[Comparison]:
    """C27: the MC mean of K3 under ``pi`` vs the exact KL(pi || pi_ref)."""
    pi = np.array([0.5, 0.3, 0.2])
    ref = np.array([0.2, 0.3, 0.5])
    estimator = estimator or (lambda ratio: ratio - np.log(ratio) - 1)
    draws = rng.choice(3, size=n_samples, p=pi)
    values = estimator(ref[draws] / pi[draws])
    kl = float(np.sum(pi * np.log(pi / ref)))
    return [Comparison.monte_carlo("C27 MC mean of K3 vs KL(pi||pi_ref)", kl, values.mean(),
                                   values.std(ddof=1) / np.sqrt(n_samples))]


def monte_carlo_checks(seed: int = 0, quick: bool = True) -> list[Comparison]:
    """All Monte Carlo checks, with sizes for the quick or the full run."""
    rng = np.random.default_rng(seed)
    n_groups = 20000 if quick else 200000
    checks = []
    for k, size in ((2, 3), (3, 5)):
        checks += mse_monte_carlo(random_bandit(rng, k), size, n_groups, rng)
    checks += sgd_limit_monte_carlo(rng, n_reps=10000 if quick else 50000)
    checks += k3_monte_carlo(rng, n_samples=100000 if quick else 1000000)
    return checks

