"""The exact mean of a group's gradient under each loss aggregation, against every group (C78).

:func:`~ustat_rl.frameworks.aggregation.exact_aggregation_mean` gives ``E g_hat(x)`` of one
group of ``G`` under a framework's loss reduction in closed form (sums over the successes ``M``
and, for ``token-mean``, over the pmf of the other draws' total length); the aggregation-bias
simulation reads its answers from it. Here it is set against the sum over all ``K^G`` ordered
groups of a small output list (``K = 5`` outputs of lengths 1 to 4, three of them correct, with
3-column scores), each group's estimate ``sum_i c_i A_i W_i`` formed with the reduction's weight
``c_i`` and the advantages written out in this module or C71's (never read from a rule or from
:func:`~ustat_rl.frameworks.aggregation.aggregation_weights`), for the leave-one-out rule and
TRL's group-standardised one, every mode, G = 2 and 3. A negative control: the ``token-mean``
answer set against the enumeration of ``seq-mean-token-mean`` (the two differ whenever lengths
differ) is rejected by the same comparison. All exact (rtol 1e-10), no sampling: no false-failure
rate.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..registry import check_exact, check_true, register
from .enumerated_routes import ROUTE_RTOL, loo, trl_group

__all__ = ["OUTPUT_PROB", "OUTPUT_REWARD", "OUTPUT_LENGTHS", "HORIZON", "output_scores",
           "written_weights", "enumerated_mean"]

#: The output list: probabilities, 0/1 rewards and lengths (tokens) of K = 5 outputs.
OUTPUT_PROB = (0.3, 0.1, 0.25, 0.15, 0.2)
OUTPUT_REWARD = (1.0, 0.0, 1.0, 0.0, 1.0)
OUTPUT_LENGTHS = (1, 4, 2, 3, 4)
#: ``L`` of ``seq-mean-token-sum-norm``.
HORIZON = 6.0
#: Group sizes enumerated (5^G ordered groups each).
SIZES = (2, 3)


def output_scores() -> np.ndarray:
    """Fixed 3-column scores of the five outputs ``(5, 3)`` (any fixed values: the mean is
    linear in them)."""
    return np.array([[0.4, -1.0, 0.3], [-0.7, 0.2, 1.1], [0.9, 0.5, -0.6],
                     [-0.2, -0.8, 0.4], [0.1, 0.6, -0.9]])


def written_weights(T: np.ndarray, mode: str) -> np.ndarray:
    """``c_i`` of the groups' lengths ``T (M, G)``, as the module table of
    :mod:`ustat_rl.frameworks.aggregation` states each reduction (``N = G``, one group)."""
    G = T.shape[1]
    if mode == "seq-mean-token-sum":
        return np.full(T.shape, 1.0 / G)
    if mode == "token-mean":
        return np.repeat(1.0 / T.sum(axis=1, keepdims=True), G, axis=1)
    if mode == "seq-mean-token-mean":
        return 1.0 / (G * T)
    if mode == "seq-mean-token-sum-norm":
        return np.full(T.shape, 1.0 / HORIZON)
    raise ValueError(f"unknown mode {mode!r}")


def enumerated_mean(G: int, estimator, mode: str) -> np.ndarray:
    """``E sum_i c_i A_i W_i`` over every ordered group of ``G`` outputs ``(3,)``."""
    p, z = np.array(OUTPUT_PROB), np.array(OUTPUT_REWARD)
    T, W = np.array(OUTPUT_LENGTHS, dtype=np.float64), output_scores()
    groups = np.array(list(itertools.product(range(p.size), repeat=G)))  # (M, G)
    prob = np.prod(p[groups], axis=1)
    c = written_weights(T[groups], mode)
    a = estimator(z[groups])
    return np.einsum("m,mg,mgk->k", prob, c * a, W[groups])


@register("C78", "Beyond the paper: the exact mean of one group's gradient under each loss "
          "aggregation (exact_aggregation_mean: seq-mean-token-sum, token-mean, "
          "seq-mean-token-mean, seq-mean-token-sum-norm) equals the sum over every group of "
          "outputs with the reduction's weights and the advantages written out",
          "derived (docs/theory.md C78; section 2's loss aggregations, C25)",
          "exact_aggregation_mean for the leave-one-out rule and TRL's group-standardised rule "
          "at G = 2, 3 on 5 outputs of lengths 1-4 against enumeration of all 5^G ordered "
          "groups; token-mean against seq-mean-token-mean's enumeration as the negative control")
def check_c78(ctx) -> list:
    from ...frameworks.aggregation import AGGREGATIONS, exact_aggregation_mean

    p, z, T, W = (np.array(OUTPUT_PROB), np.array(OUTPUT_REWARD), np.array(OUTPUT_LENGTHS),
                  output_scores())
    checks = []
    for name, written in (("grpo", loo), ("trl_group", trl_group)):
        for G in SIZES:
            for mode in AGGREGATIONS:
                checks.append(check_exact(
                    f"{name}, G = {G}, {mode}: exact_aggregation_mean = every group",
                    enumerated_mean(G, written, mode),
                    exact_aggregation_mean(p, z, T, W, name, G, mode, horizon=HORIZON),
                    rtol=ROUTE_RTOL, atol=1e-13))
    answer = exact_aggregation_mean(p, z, T, W, "grpo", 3, "token-mean")
    other = enumerated_mean(3, loo, "seq-mean-token-mean")
    control = check_exact("control", other, answer, rtol=ROUTE_RTOL, atol=1e-13)
    checks.append(check_true(
        "negative control: token-mean's answer at G = 3 against seq-mean-token-mean's "
        "enumeration is rejected by the same comparison", not control.passed,
        float(np.max(np.abs(answer - other))), note="measured: the largest gap"))
    return checks
