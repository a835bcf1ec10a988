"""The plain-text ``ustat-rl gstar`` report (C6, C10, C17, C32).

Formatting only: every number comes from :class:`ustat_rl.pilot.report.GStarReport`. The advice
follows the pilot's uncertainty: when ``c1``'s interval reaches 0 the text says that the pilot
cannot bound ``G*`` from above, gives the minimax-regret recommendation with the excess it can
promise, and how many prompts would bound ``G*``; a predicted MSE whose estimate is not positive
is printed as the upper end of its interval (``<x``), never as a negative or zero value.
"""

from __future__ import annotations

import math

from ..formatting import format_number
from .small_sample import SMALL_PILOT_PROMPTS

__all__ = ["format_report", "format_mse", "format_percent", "critical_rollout_lines"]


_fmt = format_number


def format_percent(fraction: float) -> str:
    """A relative excess as a whole percent, ``1%`` for anything below it."""
    return "1%" if fraction < 0.01 else f"{100 * fraction:.0f}%"


def format_mse(estimate: float, high: float) -> str:
    """An MSE entry: the estimate when positive, else ``<high`` (or ``unresolved`` when there is
    no positive finite upper end, e.g. no interval)."""
    if estimate > 0.0:
        return _fmt(estimate)
    return f"<{high:.3g}" if high > 0.0 and math.isfinite(high) else "unresolved"


#: What a trainer has shown of the advice (docs/advice_wins.md, "The second study: results"):
#: printed under every advice, because the gradient's error is exact but the reward is not.
ADVICE_CAVEAT = ("this G minimises the gradient's error; that it also trains best is not "
                 "confirmed (docs/advice_wins.md: with TRL, no better than G = 8 or G = 4)")


def _advice_lines(report) -> list[str]:
    pct = f"{100 * report.level:g}%"
    g, G = report.gstar, report.recommended_group_size
    if "low" not in g:
        return [f"use G = {G} (the argmin at the point estimates; a fixed weighted prompt set has "
                "no intervals, so the pilot's uncertainty is not assessed)"]
    lines = []
    if report.bounded:
        lines.append(f"the pilot bounds G*: {_fmt(g['low'])} <= G* <= {_fmt(g['high'])} ({pct})")
    else:
        if math.isfinite(g["low"]) and g["low"] > 1.0 + 1e-9:
            low = f"G* >= {_fmt(g['low'])}"
        else:
            low = "nor from below: every G* > 1 is allowed"
        lines.append(f"the pilot cannot bound G* from above: the {pct} interval for c1 reaches 0 "
                     f"({low})")
    if report.estimator == "grpo":
        lines.append(f"use G = {G}: for every c1 the {pct} interval allows, its predicted MSE is "
                     f"within {format_percent(report.worst_excess)} of the best divisor's")
    else:
        what = ("scale-free error" if report.target == "scale_free" else "MSE")
        lines.append(f"use G = {G} ({report.estimator}: the argmin of its {what} at the point "
                     "estimates)")
    if report.target == "scale_free":
        lines.append("target: the scale-free error (the MSE after the best rescaling of the "
                     "estimate, what an optimiser that removes the gradient's scale sees)")
    lines.append(f"(argmin at the point estimates: G = {report.best_group_size}"
                 + (f"; best integer G = {report.best_group_size_any}"
                    if report.best_group_size_any is not None else "") + ")")
    lines.append(ADVICE_CAVEAT)
    more = report.prompts_to_bound
    if not report.bounded and math.isfinite(more):
        ref = "its estimate" if report.constants["c1"]["estimate"] > 0 else \
            "the upper end of its interval (a lower bound: a smaller c1 needs more)"
        lines.append(f"about {math.ceil(more)} pilot prompts in all "
                     f"({max(0, math.ceil(more) - report.n_prompts)} more) would bound G* from "
                     f"above if c1 is near {ref}")
    elif not report.bounded:
        c1 = report.constants["c1"]
        lines.append("the pilot names no number of prompts that would bound G*: "
                     + ("the projection noise in c1 is too large; use more score columns"
                        if report.sketch_kind != "none" and c1["estimate"] > 0 and
                        c1["std_error"] > 0 else
                        "its prompts leave no spread in c1's estimate to scale from"
                        if not c1["std_error"] > 0 else
                        "c1's interval lies below 0, so the pilot cannot tell c1 from 0"))
    elif math.isfinite(report.prompts_to_halve):
        lines.append(f"about {math.ceil(report.prompts_to_halve)} pilot prompts in all "
                     f"({max(0, math.ceil(report.prompts_to_halve) - report.n_prompts)} more) "
                     "would halve the G* interval (width ~ 1/sqrt(P))")
    elif report.sketch_kind != "none":
        lines.append("more prompts alone cannot halve the G* interval: the projection noise "
                     "dominates; use more score columns")
    return lines


def _count(part: dict) -> str:
    """One part of the critical rollout count: the estimate (``<high`` when it is not positive)
    and its interval, ``[low, inf)`` when unbounded."""
    value = part["estimate"]
    text = (_fmt(value) if value > 0.0 and math.isfinite(value) else
            "inf" if value == math.inf else format_mse(value, part["high"]))
    low, high = part["low"], part["high"]
    if math.isnan(low):
        return text
    if not high > 0.0:  # the numerator's interval lies below 0: an interval [0, 0] says nothing
        return "0 (cannot tell it from 0)"
    return f"{text} [{_fmt(low)}, {_fmt(high) if math.isfinite(high) else 'inf)'}" + \
        ("]" if math.isfinite(high) else "")


def critical_rollout_lines(counts: dict | None, level: float) -> list[str]:
    """The report's lines on the critical rollout count (docs/theory.md, "The critical rollout
    count"): at the run's (or the recommended) ``G`` and at ``G*``, each split in two."""
    if counts is None:
        return []
    pct = f"{100 * level:g}%"
    shown = [counts[key] for key in ("run", "gstar") if counts[key] is not None]
    which = (f"{pct} intervals" if shown and not math.isnan(shown[0]["total"]["low"]) else
             "no intervals: fixed weighted prompt set")
    lines = [f"critical rollout count B_noise = tr(Sigma_G)/||g||^2 (McCandlish et al. 2018; "
             f"{which}): rollouts per step at which GRPO's gradient noise equals ||g||^2"]
    signal = None
    for key, label in (("run", counts["run_label"]), ("gstar", "G*")):
        part = counts[key]
        if part is None:
            lines.append("  at G*: none (G* is undefined: c3' <= 0)")
            continue
        signal = part["grad_norm_sq"]
        G = part["group_size"]
        where = f"G = {G:g} ({label})" if key == "run" else f"G* = {_fmt(G)}"
        lines.append(f"  at {where}: {_count(part['total'])} = inter-prompt "
                     f"{_count(part['inter'])} + intra-prompt {_count(part['intra'])}")
        if part["note"]:
            lines.append(f"    ({part['note']})")
    if signal is not None:
        interval = "" if math.isnan(signal["low"]) else \
            f" [{_fmt(signal['low'])}, {_fmt(signal['high'])}]"
        lines.append(f"  ||g||^2 = {_fmt(signal['estimate'])}{interval} (mean of <g_a, g_b> over "
                     "pairs of distinct prompts, unbiased)")
        if not signal["low"] > 0.0 and not math.isnan(signal["low"]):
            lines.append(f"  the pilot cannot tell ||g||^2 from 0 at {pct}: the count has no upper "
                         "end, and more rollouts per step may keep paying")
    lines.append("  well below B_noise rollouts a step is noise-bound (doubling N about halves the "
                 "steps); well above it, more rollouts per step stop paying")
    return lines


def format_report(report) -> str:
    """The plain-text table ``ustat-rl gstar`` prints."""
    pct = f"{100 * report.level:g}%"
    lines = [f"pilot: {report.n_prompts} prompts, {report.n_samples} samples, "
             f"{report.n_columns} score columns ({report.sketch_kind}); budget N = {report.budget}",
             f"scaling constants (Theorem 7, docs/theory.md C17), {pct} intervals:"]
    below = []
    for name, part in report.constants.items():
        if "low" not in part:
            interval = "(no interval: fixed weighted prompt set)"
        elif not part["high"] > 0.0:
            interval = "(its interval lies below 0: cannot tell it from 0)"
        else:
            interval = f"[{_fmt(part['low'])}, {_fmt(part['high'])}]"
        if part["estimate"] < 0.0:
            below.append(name)
        lines.append(f"  {name:<3} {_fmt(part['estimate']):>11}  {interval}")
    if below and any("low" in part for part in report.constants.values()):
        lines.append(f"  ({', '.join(below)}: an unbiased estimate below 0 is noise around a "
                     "value >= 0; every interval is cut at 0)")
    if report.small_pilot:
        lines.append(f"  (a small pilot: {report.n_prompts} prompts < {SMALL_PILOT_PROMPTS}, so "
                     "each interval is the more cautious of the jackknife's and a chi-square "
                     "model's, docs/theory.md C32)")
    g = report.gstar
    interval = (f"[{_fmt(g['low'])}, {_fmt(g['high'])}]"
                + (" (Fieller)" if not report.small_pilot else "")) if "low" in g else ""
    point = (_fmt(g["estimate"]) if math.isfinite(g["estimate"]) and
             report.constants["c1"]["estimate"] > 0 else "no point estimate (c1's estimate is "
             "not above 0)")
    lines.append(f"G* = 1 + sqrt(c3/c1) = {point}  {interval}".rstrip())
    lines += _advice_lines(report)
    lines += critical_rollout_lines(getattr(report, "critical_rollouts", None), report.level)
    lines.append(f"predicted minibatch MSE at N = {report.budget} (Proposition 3, C6):")
    header = f"  {'G':>5} {'B':>6} " + " ".join(f"{e:>11}" for e in report.mse) + \
        f" {'GRPO':>11}" + (f" {'all-equal':>10}" if report.binary else "")
    lines.append(header)
    for i, G in enumerate(report.group_sizes):
        row = f"  {G:>5} {report.budget // G:>6} " + " ".join(
            f"{format_mse(report.mse[e]['estimate'][i], report.mse[e]['high'][i]):>11}"
            for e in report.mse)
        row += f" {report.grpo_verdict[i]:>11}"
        if report.binary:
            mark = "" if report.all_equal_unbiased[i] else "*"
            row += f" {_fmt(report.all_equal[i]) + mark:>10}"
        lines.append(row)
    if any(min(curve["estimate"]) <= 0 for curve in report.mse.values()):
        lines.append("<x: the unbiased estimate is not positive there (the MSE is below what the "
                     f"pilot resolves); x is the upper end of its {pct} interval"
                     + ("; 'unresolved': no interval to bound it"
                        if report.grpo_margin is None else "") + ".")
    lines.append(f"GRPO: 'wins' where the {pct} interval for MSE_vanilla - MSE_GRPO lies above "
                 "0, 'loses' where it lies below 0, 'cannot tell' where it holds 0"
                 + (f" or the pilot has fewer than {SMALL_PILOT_PROMPTS} prompts"
                    if report.small_pilot else
                    " or there is no interval" if report.grpo_margin is None else "") + ".")
    if report.binary:
        lines.append("all-equal: prompt average of p^G + (1-p)^G, the fraction of groups whose "
                     "rewards are all equal; unbiased where G <= the pilot group size, "
                     "* = plug-in (biased upward).")
    return "\n".join(lines)
