"""SkyRL's POLARIS ``replace`` at a budget, from a pilot or from rewards (beyond the paper).

docs/theory.md section 7, "POLARIS's replace (beyond the paper)". ``--dynamic-sampling
--replace-ratio RHO`` of ``ustat-rl gstar`` and ``ustat-rl rewards``: at each ``G`` of the
dynamic-sampling report (its ``B = N // G`` prompts per batch and its keep probability ``r``, the
unbiased one where the pilot's groups allow it, else the plug-in), the chance a batch is used
rather than redrawn, the batches and rollouts drawn per step, the chance of SkyRL's cap and the
copies in the batch used (:mod:`ustat_rl.theory.replace_sampling`, exact functions of ``r``); from
a pilot with scores, the replaced batch's squared bias and MSE for GRPO (leave-one-out, copies
merged by prompt id as SkyRL computes advantages), evaluated at the pilot's moments made binary,
point estimates biased like the plug-in ``r``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .._validation import as_float
from ..formatting import json_ready
from ..theory.advantage import binary_projection
from ..theory.replace_sampling import (
    MIN_REPLACE_RATIO,
    multiplicity_law,
    replace_batch_moments,
    replace_cost_at_keep_probability,
)

__all__ = ["ReplaceReport", "replace_sampling_report", "pilot_replace_sampling"]


@dataclass(frozen=True)
class ReplaceReport:
    """SkyRL's ``replace`` per group size of a :class:`~ustat_rl.pilot.dynamic_sampling.DynamicSamplingReport`.

    Attributes
    ----------
    min_replace_ratio : float
        ``rho`` (SkyRL's ``min_replace_ratio``).
    max_sample_batches : int
        The cap ``K`` (0: none), the dynamic-sampling report's.
    group_sizes, batch_sizes : list of int
        ``G`` and ``B = N // G``.
    keep_prob : list of float
        The ``r`` used: the report's unbiased one where it has one, else its plug-in.
    replace_prob : list of float
        ``pi = P(J > rho B)``; 0 where the batch is never used.
    expected_gen_batches, expected_rollouts, cap_probability, expected_copies : list of float
        ``E min(N, K)``, ``G B E min(N, K)``, ``P(N > K)`` (None without a cap) and ``E[B - J |
        used]`` (None where ``pi = 0``).
    bias_sq, mse : list of float or None
        GRPO's replaced batch (from a pilot with scores; None from rewards alone).
    """

    min_replace_ratio: float
    max_sample_batches: int
    group_sizes: list
    batch_sizes: list
    keep_prob: list
    replace_prob: list
    expected_gen_batches: list
    expected_rollouts: list
    cap_probability: list | None
    expected_copies: list
    bias_sq: list | None
    mse: list | None

    def to_dict(self) -> dict:
        """JSON-ready (:func:`ustat_rl.formatting.json_ready`)."""
        return json_ready(asdict(self))


def _expected_copies(keep_prob: float, batch_size: int, ratio: float) -> float:
    """``E[#copies | used] = sum_m (m - 1) counts[m]`` over the multiplicity law: a sum of
    non-negative terms, exactly 0 when no batch needs a copy (``B - sum_m counts[m]`` cancels to
    a rounding error of either sign there)."""
    counts = multiplicity_law(keep_prob, batch_size, ratio)[1]  # (top + 1,) E #{i : m_i = m}
    return float(sum((m - 1) * float(c) for m, c in enumerate(counts) if m >= 2))


def replace_sampling_report(report, min_replace_ratio=MIN_REPLACE_RATIO,
                            moments=None) -> ReplaceReport:
    """SkyRL's ``replace`` at every ``G`` of a dynamic-sampling report.

    Parameters
    ----------
    report : DynamicSamplingReport
        From :func:`~ustat_rl.pilot.dynamic_sampling.rewards_dynamic_sampling` or
        :func:`~ustat_rl.pilot.dynamic_sampling.pilot_dynamic_sampling`; its cap is SkyRL's
        ``max_sample_batches``.
    min_replace_ratio : float
        ``rho >= 0``; SkyRL's 0.3 by default.
    moments : PromptMoments, optional
        The pilot's estimated moments, for the replaced batch's bias and MSE.

    Returns
    -------
    ReplaceReport

    Examples
    --------
    >>> from ustat_rl.pilot.dynamic_sampling import rewards_dynamic_sampling
    >>> ds = rewards_dynamic_sampling([1, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1], 8)
    >>> out = replace_sampling_report(ds)
    >>> out.group_sizes, out.batch_sizes, [round(p, 4) for p in out.replace_prob]
    ([2, 4, 8], [4, 2, 1], [0.6875, 1.0, 0.8999])
    """
    ratio = as_float(min_replace_ratio, "min_replace_ratio", low=0.0)
    K = report.max_gen_batches
    keep = [u if u is not None else r for u, r in zip(report.keep_prob_unbiased, report.keep_prob)]
    rows = [replace_cost_at_keep_probability(r, G, B, ratio, K)
            for r, G, B in zip(keep, report.group_sizes, report.batch_sizes)]
    copies = [_expected_copies(row.keep_prob, B, ratio) if row.replace_prob > 0.0 else None
              for row, B in zip(rows, report.batch_sizes)]
    bias_sq = mse = None
    if moments is not None:
        projected = binary_projection(moments)
        batches = [replace_batch_moments(projected, "grpo", G, B, ratio)
                   if row.replace_prob > 0.0 else None
                   for G, B, row in zip(report.group_sizes, report.batch_sizes, rows)]
        bias_sq = [None if b is None else b.bias_sq for b in batches]
        mse = [None if b is None else b.mse for b in batches]
    return ReplaceReport(
        ratio, K, list(report.group_sizes), list(report.batch_sizes), keep,
        [row.replace_prob for row in rows], [row.expected_gen_batches for row in rows],
        [row.expected_rollouts for row in rows],
        [row.cap_probability for row in rows] if K else None, copies, bias_sq, mse)


def pilot_replace_sampling(rollouts, report, min_replace_ratio=MIN_REPLACE_RATIO) -> ReplaceReport:
    """:func:`replace_sampling_report` with the bias and MSE at the moments of a pilot with
    scores (``report`` from :func:`~ustat_rl.pilot.dynamic_sampling.pilot_dynamic_sampling` on
    the same ``rollouts``, which has refused a pilot it cannot use)."""
    from .estimate import estimate_moments, pilot_statistics

    return replace_sampling_report(report, min_replace_ratio,
                                   estimate_moments(pilot_statistics(rollouts)))
