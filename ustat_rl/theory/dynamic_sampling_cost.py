"""What dynamic sampling costs in generation batches, from the keep probability alone (section 7).

docs/theory.md section 7, "Dynamic sampling (beyond the paper)". Prompts are i.i.d., so every
generated group is kept independently with probability ``r``; how many generation batches of ``b``
prompts verl draws until ``B`` groups are kept depends on ``r``, ``B``, ``b`` and the cap alone
(:func:`cost_at_keep_probability`). :func:`ustat_rl.theory.dynamic_sampling.generation_cost`
computes ``r`` from a policy's values; the TRL monitor estimates it without bias from a run's
own all-equal groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from .._validation import as_float, as_int

__all__ = ["GenerationCost", "cost_at_keep_probability", "expected_gen_batches", "MIN_GROUP_REASON"]

#: Why ``G >= 2`` (for error messages).
MIN_GROUP_REASON = "(dynamic sampling filters groups whose G rewards are all equal)"


@dataclass(frozen=True)
class GenerationCost:
    """Generation batches and rollouts per accepted batch under ``filter_groups`` (section 7).

    Attributes
    ----------
    keep_prob : float
        ``r``: the probability that a generated group is kept.
    gen_batch_size, max_num_gen_batches : int
        ``b``, prompts per generation batch, and the cap ``K`` (0: none).
    expected_gen_batches : float
        ``E min(N, K)`` (``E N`` without a cap; ``math.inf`` when ``r = 0`` and no cap).
    cap_probability : float
        ``P(N > K) = P(Binomial(K b, r) < B)``, the chance verl raises "Generated too many";
        0 without a cap.
    expected_rollouts, expected_kept_groups : float
        ``G b E min(N, K)`` rollouts generated (discarded ones included) and ``r b E min(N, K)``
        kept groups (Wald's identity; the ``B`` used and the overflow).
    """

    keep_prob: float
    gen_batch_size: int
    max_num_gen_batches: int
    expected_gen_batches: float
    cap_probability: float
    expected_rollouts: float
    expected_kept_groups: float


def expected_gen_batches(r: float, B: int, b: int, K: int) -> tuple[float, float]:
    """``(E min(N, K), P(N > K))`` with ``N = min{n : Binomial(n b, r) >= B}``; ``K = 0``: no cap."""
    if K > 0:
        n = np.arange(K + 1)
        survival = binom.cdf(B - 1, n * b, r)  # P(N > n) = P(S_n < B), n = 0..K
        return float(survival[:-1].sum()), float(survival[-1])
    if r <= 0.0:
        return math.inf, 1.0
    if r >= 1.0:
        return float(math.ceil(B / b)), 0.0
    # N = ceil(T/b) with T ~ B + NegativeBinomial(B, r) the index of the B-th kept group:
    # b E N = E T + E[(-T) mod b], and the law of T mod b is the discrete Fourier transform of
    # the generating function E s^T = (r s/(1 - (1 - r) s))^B at the b-th roots of unity.
    s = np.exp(2j * np.pi * np.arange(b) / b)  # (b,)
    pgf = (r * s / ((1.0 - s) + r * s)) ** B
    pgf[0] = 1.0
    residue = np.clip(np.fft.fft(pgf).real / b, 0.0, 1.0)  # P(T = j mod b), j = 0..b-1
    overshoot = float(residue @ ((-np.arange(b)) % b))
    return (B / r + overshoot) / b, 0.0


def cost_at_keep_probability(keep_prob, group_size, batch_size, gen_batch_size=None,
                             max_num_gen_batches=0) -> GenerationCost:
    """:func:`generation_cost` from ``r`` itself: prompts are i.i.d., so each generated group is
    kept independently with probability ``r`` and the cost depends on nothing else."""
    r = as_float(keep_prob, "keep_prob", low=0.0, high=1.0)
    G, B = as_int(group_size, "group_size", 2, MIN_GROUP_REASON), as_int(batch_size, "batch_size", 1)
    b = B if gen_batch_size is None else as_int(gen_batch_size, "gen_batch_size", 1)
    K = as_int(max_num_gen_batches, "max_num_gen_batches", 0,
               "(0 for no cap, as verl reads any value <= 0)")
    batches, capped = expected_gen_batches(r, B, b, K)
    return GenerationCost(r, b, K, batches, capped, G * b * batches,
                          r * b * batches if math.isfinite(batches) else math.inf)
