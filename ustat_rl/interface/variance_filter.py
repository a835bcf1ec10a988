"""``ustat-rl gstar --group-filter reward_variance_top_p|reward_variance_top_k``: the text.

Formatting only: every number comes from
:class:`ustat_rl.pilot.variance_filter.VarianceFilterReport`.
"""

from __future__ import annotations

from ..formatting import format_number

__all__ = ["format_variance_filter"]


def _fmt(value) -> str:
    return "-" if value is None else format_number(value)


def _point(value) -> str:
    """A point estimate that should be positive: ``<= 0`` when the pilot's is not."""
    return "-" if value is None else (format_number(value) if value > 0.0 else "<= 0")


def format_variance_filter(report) -> str:
    """The plain-text section of the reward-variance filter."""
    f = report.filter
    what = (f"top_p {f['top_p']:g}" if f["strategy"] == "top_p" else f"top_k {f['top_k']}")
    lines = [f"reward-variance filter (RAGEN-2's SNR-aware filtering, {what}; sample variance "
             f"ddof {f['ddof']}, kept sum divided by the {f['divisor']} count; {report.estimator}"
             f"; binary rewards; point estimates from the pilot, no interval):",
             f"  {'G':>5} {'B':>6} {'keep rate':>10} {'mean factor':>12} {'bias/|g|':>9} "
             f"{'MSE':>11} {'unfiltered':>11}"]
    g_sq = report.grad_norm_sq
    bias = [None if b is None else (b / g_sq) ** 0.5 if b > 0 and g_sq > 0 else -1.0
            for b in report.bias_sq]  # ||E g_F - g|| / ||g||; -1 prints as <= 0
    for i, G in enumerate(report.group_sizes):
        lines.append(f"  {G:>5} {report.batch_sizes[i]:>6} {_fmt(report.keep_rate[i]):>10} "
                     f"{_fmt(report.mean_factor[i]):>12} {_point(bias[i]):>9} "
                     f"{_point(report.mse[i]):>11} {_point(report.unfiltered_mse[i]):>11}")
    lines.append("  The filter reads the whole batch: a group's chance of being kept depends on "
                 "the other groups drawn with it. A mean factor above 1 is a step longer than "
                 "the gradient's (the kept groups are averaged); below 1, shorter.")
    if report.left_out:
        lines.append(f"  Not computed at G = {', '.join(map(str, report.left_out))}: too many "
                     "batch compositions to enumerate exactly.")
    return "\n".join(lines)
