"""The U-statistic, its zeta estimates and the GRPO kernel's exact zetas (C67).

Section 3's machinery as a user calls it: :func:`ustat_rl.stats.ustatistics.u_statistic` of a
kernel on a sample, :func:`~ustat_rl.stats.ustatistics.estimate_zetas` (unbiased ``zeta1``,
``zeta2`` and ``||h0||^2`` from one sample, from sums of the kernel matrix) and
:func:`ustat_rl.theory.hoeffding.kernel_zetas` (the GRPO kernel's ``zeta1 = tr Cov h1`` and
``zeta2 = tr Cov h`` at every prompt, from the moments). The checks:

* exact: every prompt's zetas of the GRPO kernel ``h(o, o') = (W - W')(Z - Z')/2`` summed here
  over every pair of outcomes ``o = (a, z)`` of a softmax bandit (``2K x 2K`` pairs), against
  ``kernel_zetas`` (rtol 1e-10); on one drawn sample, ``u_statistic`` against the mean over
  its pairs ``i < j`` looped here, and the zeta estimates against their definitions' means
  over the ordered distinct pairs, triples and quadruples of indices, looped here (rtol 1e-10);
  the unbiased variance as the U-statistic of ``(x - y)^2/2``;
* Monte Carlo: over ``R`` samples of ``n = 8`` outcomes of one prompt, the means of the
  estimates against the enumerated ``zeta1``, ``zeta2``, ``||h0||^2`` and of ``u_statistic``
  against ``h0 = g(x)``, within ``Z_STRICT = 4.5`` standard errors (two-sided false-failure
  rate 6.8e-6 each, 4 comparisons: 2.7e-5 for the claim). Negative control: ``||h0||^2``
  estimated by the plug-in ``||U||^2`` (biased by ``E||U - h0||^2``) is rejected by the same
  comparison.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...tolerances import Z_STRICT
from ..registry import check_close, check_exact, check_true, register

__all__ = ["ZETA_LOGITS", "ZETA_REWARD_PROB", "ZETA_PROMPT", "ZETA_SAMPLE", "ZETA_REPS",
           "outcomes", "grpo_kernel", "enumerated_zetas", "looped_statistics"]

#: A two-prompt, three-action softmax bandit with Bernoulli rewards.
ZETA_LOGITS = ((0.3, -0.2, 0.0), (1.0, 0.0, -1.0))
ZETA_REWARD_PROB = ((0.8, 0.3, 0.5), (0.2, 0.6, 0.9))
#: The prompt of the Monte Carlo comparisons, the sample size and the samples (quick, full).
ZETA_PROMPT = 1
ZETA_SAMPLE = 8
ZETA_REPS = (10_000, 100_000)


def outcomes(prompt: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows (2K, K + 1), prob (2K,))``: every outcome ``(W, z)`` of ``prompt``, its score
    ``W = e_a - pi`` written out beside its reward, and its probability ``pi(a) P(z | a)``."""
    logits = np.asarray(ZETA_LOGITS[prompt])
    q = np.asarray(ZETA_REWARD_PROB[prompt])
    pi = np.exp(logits - logits.max())
    pi = pi / pi.sum()
    K = pi.size
    rows, prob = [], []
    for a in range(K):
        for z, pz in ((0.0, 1.0 - q[a]), (1.0, q[a])):
            rows.append(np.concatenate([np.eye(K)[a] - pi, [z]]))
            prob.append(pi[a] * pz)
    return np.array(rows), np.array(prob)


def grpo_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``h(o, o') = (W - W')(Z - Z')/2`` on rows ``(W, z)``, broadcast over leading axes."""
    return (x[..., :-1] - y[..., :-1]) * (x[..., -1:] - y[..., -1:]) / 2.0


def enumerated_zetas(prompt: int) -> tuple[float, float, float, np.ndarray]:
    """``(zeta1, zeta2, ||h0||^2, h0)`` of the GRPO kernel at ``prompt``, summed over every
    pair of outcomes."""
    rows, prob = outcomes(prompt)
    pair = np.array([[grpo_kernel(r, s) for s in rows] for r in rows])  # (2K, 2K, K)
    weight = prob[:, None] * prob[None, :]
    h0 = np.einsum("ij,ijk->k", weight, pair)
    h1 = np.einsum("j,ijk->ik", prob, pair)  # (2K, K)
    zeta1 = float(prob @ np.sum(h1**2, axis=1) - h0 @ h0)
    zeta2 = float(np.einsum("ij,ij->", weight, np.sum(pair**2, axis=2)) - h0 @ h0)
    return zeta1, zeta2, float(h0 @ h0), h0


def looped_statistics(sample: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """``U`` over pairs ``i < j``, and the means over ordered distinct pairs, triples and
    quadruples of ``||h_ij||^2``, ``<h_ij, h_ik>`` and ``<h_ij, h_kl>``, looped."""
    n = sample.shape[0]
    h = {(i, j): grpo_kernel(sample[i], sample[j]) for i in range(n) for j in range(n)}
    u = np.mean([h[i, j] for i, j in itertools.combinations(range(n), 2)], axis=0)
    pairs = np.mean([h[i, j] @ h[i, j] for i, j in itertools.permutations(range(n), 2)])
    triples = np.mean([h[i, j] @ h[i, k] for i, j, k in itertools.permutations(range(n), 3)])
    quads = np.mean([h[i, j] @ h[k, m] for i, j, k, m in itertools.permutations(range(n), 4)])
    return u, float(pairs), float(triples), float(quads)


@register("C67", "Beyond the paper: the order-2 U-statistic and its unbiased zeta estimates equal "
          "their definitions looped over index tuples and are unbiased for the GRPO kernel's "
          "zetas, which kernel_zetas gives exactly at every prompt",
          "derived (docs/theory.md C67; section 3, Lemma 1)",
          "kernel_zetas against the 2K x 2K outcome enumeration of a 2-prompt bandit (1e-10); "
          "u_statistic and estimate_zetas on a sample of 6 against loops over pairs, triples "
          "and quadruples (1e-10); 10000 samples of 8 outcomes, means within 4.5 se of the "
          "enumerated zetas; the plug-in ||U||^2 as the negative control")
def check_c67(ctx) -> list:
    from ...policies.softmax import SoftmaxBandit
    from ...stats.ustatistics import estimate_zetas, u_statistic
    from ...theory.hoeffding import kernel_zetas

    P = len(ZETA_LOGITS)
    zetas = kernel_zetas(SoftmaxBandit(ZETA_LOGITS, ZETA_REWARD_PROB).moments())
    enum = [enumerated_zetas(x) for x in range(P)]
    checks = [check_exact("kernel_zetas' zeta1 at every prompt equals the enumeration",
                          [e[0] for e in enum], zetas.zeta1),
              check_exact("kernel_zetas' zeta2 at every prompt equals the enumeration",
                          [e[1] for e in enum], zetas.zeta2)]
    rng = np.random.default_rng(ctx.seed_for("C67"))
    rows, prob = outcomes(ZETA_PROMPT)
    small = rows[rng.choice(prob.size, size=6, p=prob)]  # (6, K + 1)
    u, pairs, triples, quads = looped_statistics(small)
    est = estimate_zetas(grpo_kernel, small)
    checks.append(check_exact("u_statistic on 6 outcomes equals the mean over pairs i < j",
                              u, u_statistic(grpo_kernel, small)))
    checks.append(check_exact("estimate_zetas on 6 outcomes: (zeta1, zeta2, ||h0||^2) from the "
                              "means over ordered pairs, triples, quadruples",
                              [triples - quads, pairs - quads, quads],
                              [est.zeta1, est.zeta2, est.h0_sq]))
    values = np.array([1.0, 2.0, 4.0, 7.0])
    checks.append(check_exact("u_statistic of (x - y)^2/2 is the unbiased variance",
                              np.var(values, ddof=1),
                              u_statistic(lambda x, y: 0.5 * (x - y) ** 2, values[:, None])))
    # Monte Carlo: unbiased for the enumerated values at the prompt of the draws
    zeta1, zeta2, h0_sq, h0 = enum[ZETA_PROMPT]
    R, n = ctx.reps(*ZETA_REPS), ZETA_SAMPLE
    draws = rows[rng.choice(prob.size, size=(R, n), p=prob)]  # (R, n, K + 1)
    found = np.array([[e.zeta1, e.zeta2, e.h0_sq] for e in
                      (estimate_zetas(grpo_kernel, s) for s in draws)])  # (R, 3)
    us = np.array([u_statistic(grpo_kernel, s) for s in draws])  # (R, K)
    for j, (name, exact) in enumerate((("zeta1", zeta1), ("zeta2", zeta2),
                                       ("||h0||^2", h0_sq))):
        checks.append(check_close(f"estimate_zetas' {name}, mean over {R} samples of {n}",
                                  exact, found[:, j].mean(),
                                  found[:, j].std(ddof=1) / np.sqrt(R), z=Z_STRICT))
    dist = np.einsum("rk,rk->r", us - h0, us - h0)  # (R,) ||U - h0||^2 (unbiased: mean Var U)
    proj = (us - h0) @ h0 / np.sqrt(h0 @ h0)  # (R,) U's error along h0, mean 0
    checks.append(check_close(f"u_statistic unbiased for h0 = g(x): its error along h0, mean "
                              f"over {R} samples", 0.0, proj.mean(),
                              proj.std(ddof=1) / np.sqrt(R), z=Z_STRICT))
    plug = np.einsum("rk,rk->r", us, us)  # (R,) ||U||^2, biased by E||U - h0||^2
    caught = abs(plug.mean() - h0_sq) > Z_STRICT * plug.std(ddof=1) / np.sqrt(R)
    checks.append(check_true("negative control: the plug-in ||U||^2 for ||h0||^2 is rejected "
                             "by the same comparison", bool(caught),
                             float(dist.mean()), evidence="monte-carlo",
                             note="a power check, no rate; measured is its bias E||U - h0||^2"))
    return checks
