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

__all__ = ["format_report", "format_mse", "format_percent"]


_fmt = format_number


def format_percent(fraction: float) -> str:
    """A relative excess as a whole percent, ``1%`` for anything below it."""
    return "1%" if fraction < 0.01 else f"{100 * fraction:.0f}%"


def format_mse(estimate: float, high: float) -> str:
    """An MSE entry: the estimate when positive, else ``<high`` (or ``unresolved``)."""
    if estimate > 0.0:
        return _fmt(estimate)
    return f"<{high:.3g}" if high > 0.0 and math.isfinite(high) else "unresolved"


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
        low = (f"G* >= {_fmt(g['low'])}" if math.isfinite(g["low"])
               else "its lower end is beyond every admissible G")
        lines.append(f"the pilot cannot bound G* from above: the {pct} interval for c1 reaches 0 "
                     f"({low})")
    if report.estimator == "grpo":
        lines.append(f"use G = {G}: for every c1 the {pct} interval allows, its predicted MSE is "
                     f"within {format_percent(report.worst_excess)} of the best divisor's")
    else:
        lines.append(f"use G = {G} ({report.estimator}: the argmin at the point estimates)")
    lines.append(f"(argmin at the point estimates: G = {report.best_group_size}"
                 + (f"; best integer G = {report.best_group_size_any}"
                    if report.best_group_size_any is not None else "") + ")")
    more = report.prompts_to_bound
    if not report.bounded and math.isfinite(more):
        ref = "its estimate" if report.constants["c1"]["estimate"] > 0 else \
            "the upper end of its interval (a lower bound: a smaller c1 needs more)"
        lines.append(f"about {math.ceil(more)} pilot prompts in all "
                     f"({max(0, math.ceil(more) - report.n_prompts)} more) would bound G* from "
                     f"above if c1 is near {ref}")
    elif not report.bounded:
        lines.append("more prompts alone cannot bound G*: "
                     + ("the projection noise in c1 is too large; use more score columns"
                        if report.sketch_kind != "none" else
                        "c1's interval lies below 0 at its upper end"))
    elif math.isfinite(report.prompts_to_halve):
        lines.append(f"about {math.ceil(report.prompts_to_halve)} pilot prompts in all "
                     f"({max(0, math.ceil(report.prompts_to_halve) - report.n_prompts)} more) "
                     "would halve the G* interval (width ~ 1/sqrt(P))")
    elif report.sketch_kind != "none":
        lines.append("more prompts alone cannot halve the G* interval: the projection noise "
                     "dominates; use more score columns")
    return lines


def format_report(report) -> str:
    """The plain-text table ``ustat-rl gstar`` prints."""
    pct = f"{100 * report.level:g}%"
    lines = [f"pilot: {report.n_prompts} prompts, {report.n_samples} samples, "
             f"{report.n_columns} score columns ({report.sketch_kind}); budget N = {report.budget}",
             f"scaling constants (Theorem 7, docs/theory.md C17), {pct} intervals:"]
    for name, part in report.constants.items():
        interval = f"[{_fmt(part['low'])}, {_fmt(part['high'])}]" if "low" in part else \
            "(no interval: fixed weighted prompt set)"
        lines.append(f"  {name:<3} {_fmt(part['estimate']):>11}  {interval}")
    g = report.gstar
    interval = f"[{_fmt(g['low'])}, {_fmt(g['high'])}] (Fieller)" if "low" in g else ""
    lines.append(f"G* = 1 + sqrt(c3/c1) = {_fmt(g['estimate'])}  {interval}".rstrip())
    lines += _advice_lines(report)
    lines.append(f"predicted minibatch MSE at N = {report.budget} (Proposition 3, C6):")
    header = f"  {'G':>5} {'B':>6} " + " ".join(f"{e:>11}" for e in report.mse) + \
        f" {'GRPO':>6}" + (f" {'all-equal':>10}" if report.binary else "")
    lines.append(header)
    for i, G in enumerate(report.group_sizes):
        row = f"  {G:>5} {report.budget // G:>6} " + " ".join(
            f"{format_mse(report.mse[e]['estimate'][i], report.mse[e]['high'][i]):>11}"
            for e in report.mse)
        row += f" {'loses' if G in report.grpo_loses else 'wins':>6}"
        if report.binary:
            mark = "" if report.all_equal_unbiased[i] else "*"
            row += f" {_fmt(report.all_equal[i]) + mark:>10}"
        lines.append(row)
    if any(min(curve["estimate"]) <= 0 for curve in report.mse.values()):
        lines.append("<x: the unbiased estimate is not positive there (the MSE is below what the "
                     f"pilot resolves); x is the upper end of its {pct} interval.")
    lines.append("GRPO: 'wins' where its predicted MSE is below vanilla's, 'loses' where it "
                 "exceeds it.")
    if report.binary:
        lines.append("all-equal: prompt average of p^G + (1-p)^G, the fraction of groups whose "
                     "rewards are all equal; unbiased where G <= the pilot group size, "
                     "* = plug-in (biased upward).")
    return "\n".join(lines)
