"""The words a command prints against what its interval allows (docs/theory.md C42, C49, C50).

A verdict in words is a second route from an interval to the user: a check of the interval
cannot see words that claim more than it shows (an advice line saying the pilot shows a gain
when the ratio's interval holds 1). Each function below reads the text a command prints, finds
what each phrase claims, and compares that with the interval it rests on, read from the same
result object, unrounded:

* ``ustat-rl allocate`` (:func:`allocation_mismatches`): each rule's cross-fitted ratio and the
  last line of advice: a gain only for an interval below 1, "worse than uniform" only above 1,
  "within the noise" only for one that holds 1, "undefined" (and no numbers) only for a ratio
  that is not a positive number with ordered ends;
* ``ustat-rl gstar`` (:func:`gstar_mismatches`): "the pilot bounds G*" only when c1's interval
  stays above 0, "cannot bound G* from above" only when it reaches 0;
* ``ustat-rl gstar --trajectory`` (:func:`trajectory_mismatches`): "one G lies inside every
  window's interval" only when an integer G >= 2 does, "no single G" only when the intervals do
  not meet, and the run's G "inside every" or "outside some" interval as it is.

Each returns the mismatches it finds (empty when the words claim what the interval shows).
Deterministic: no false-failure rate.
"""

from __future__ import annotations

import math

from ustat_rl.stats.intervals import ratio_verdict

__all__ = ["ALLOCATION_PHRASES", "interval_allows", "allocation_mismatches", "gstar_mismatches",
           "trajectory_mismatches"]

#: What the last line of ``ustat-rl allocate`` claims, by the phrase it opens with.
ALLOCATION_PHRASES = {
    "the pilot shows a gain": "gain shown",
    "the pilot does not show a gain": "within the noise",
    "the optimal sizes fitted on half the pilot are worse than uniform": "worse than uniform",
    "the pilot cannot compare": "undefined",
}


def interval_allows(estimate: float, low: float, high: float) -> str:
    """The one verdict an interval for ``MSE(rule)/MSE(uniform)`` allows, stated from the
    interval alone: a gain needs every ratio in it below 1, a loss every ratio above 1, and a
    zero-width or unordered interval allows none. The rule is the commands' own
    (:func:`ustat_rl.stats.intervals.ratio_verdict`), held once; the words are read against it here."""
    return ratio_verdict(estimate, low, high, "uniform")


def allocation_mismatches(report, text: str) -> list[str]:
    """Where the table ``text`` of :func:`ustat_rl.pilot.allocation.format_pilot_allocation`
    words a ratio of ``report`` otherwise than its interval allows; ``[]`` when it never does."""
    lines = text.splitlines()
    out = []
    for name, ratio in report.ratios.items():
        allowed = interval_allows(ratio.estimate, ratio.low, ratio.high)
        rows = [line for line in lines if line.split(" ", 1)[0] == name]
        if len(rows) != 1:
            out.append(f"{name}: {len(rows)} rows")
            continue
        said = rows[0][37:]  # after the rule, plug-in MSE and ratio columns (14 + 10 + 3 wide)
        words = said.split("]  ", 1)[1] if "]  " in said else said.split(":", 1)[0]
        if words != allowed or (allowed == "undefined" and "[" in said):
            out.append(f"{name}: says {said!r}, its interval [{ratio.low:.6g}, "
                       f"{ratio.high:.6g}] allows {allowed!r}")
    best = report.ratios.get("optimal")
    if best is not None:
        advice = [v for k, v in ALLOCATION_PHRASES.items() if lines[-1].startswith(k)]
        allowed = interval_allows(best.estimate, best.low, best.high)
        if advice != [allowed]:
            out.append(f"advice {lines[-1]!r} claims {advice}, the optimal sizes' interval "
                       f"[{best.low:.6g}, {best.high:.6g}] allows {allowed!r}")
    return out


def gstar_mismatches(report, text: str) -> list[str]:
    """Where the text of :func:`ustat_rl.pilot.report_text.format_report` says whether the pilot
    bounds ``G*`` otherwise than ``c1``'s interval allows (bounded iff its lower end is > 0)."""
    c1 = report.constants["c1"]
    if "low" not in c1:  # a fixed weighted prompt set: no interval, no such words
        return [] if "bound" not in text else ["words about bounds without an interval"]
    bounded = c1["low"] > 0.0
    says_bounds = "the pilot bounds G*" in text
    says_cannot = "the pilot cannot bound G* from above" in text
    if (says_bounds, says_cannot) != (bounded, not bounded):
        return [f"says bounds: {says_bounds}, cannot bound: {says_cannot}; c1's interval "
                f"[{c1['low']:.6g}, {c1['high']:.6g}] allows bounded = {bounded}"]
    return []


def trajectory_mismatches(result, text: str) -> list[str]:
    """Where :func:`ustat_rl.frameworks.universality.format_universality`'s verdict differs
    from what the windows' intervals allow."""
    windows = result.windows
    if not windows:
        return [] if "no window was estimated" in text else ["no windows, yet a verdict"]
    low, high = max(w.low for w in windows), min(w.high for w in windows)
    meet = low <= high
    integer = meet and math.ceil(max(low, 2.0)) <= high
    out = []
    said = ("one G lies inside every window's interval" in text,
            "no single G lies inside every window's interval" in text,
            "but no integer G >= 2 lies inside all of them" in text)
    if said != (integer, not meet, meet and not integer):
        out.append(f"says (one G, no single G, no integer) = {said}; the intervals meet in "
                   f"[{low:.6g}, {high:.6g}]")
    if result.group_size is not None:
        inside = all(w.low <= result.group_size <= w.high for w in windows)
        phrase = f"the run's G = {result.group_size} is {'inside every' if inside else 'outside some'}"
        if phrase not in text:
            out.append(f"the run's G = {result.group_size} is inside every interval: {inside}, "
                       "not what the text says")
    return out


# ---------------------------------------------------------------------------------------------
# The checks: real results, and the same results with their intervals moved to every verdict
# ---------------------------------------------------------------------------------------------

#: Intervals ``(estimate, low, high)`` given to the optimal sizes' ratio of a real allocation,
#: one for each verdict and the edges: an interval that ends at 1 holds 1.
ALLOCATION_CASES = {
    "below 1": (0.8, 0.6, 0.99),
    "ending at 1": (0.95, 0.9, 1.0),
    "starting at 1": (1.2, 1.0, 1.4),
    "above 1": (1.5, 1.1, 1.9),
    "with an estimate not positive": (-0.2, 0.0, 0.1),
    "undefined (NaN)": (math.nan, math.nan, math.nan),
}


def allocation_words_checks(ctx) -> list:
    """``ustat-rl allocate``'s table on two pilots and on one of them with the optimal sizes'
    interval moved to each case of :data:`ALLOCATION_CASES`, and a doctored table as the
    negative control."""
    import dataclasses

    import numpy as np

    from ..pilot.allocation import (
        RatioInterval,
        format_pilot_allocation,
        loglinear_pilot,
        pilot_allocation,
    )
    from ..policies.examples import heterogeneous_score_bandit
    from .registry import check_true

    rng = np.random.default_rng(ctx.seed_for("C42", 1))
    pilots = {"heterogeneous bandit, 16 samples per prompt": (heterogeneous_score_bandit(), 16),
              "20 equal prompts, 6 samples per prompt": (heterogeneous_score_bandit(
                  np.full(20, 0.5), np.ones(20)), 6)}
    checks, seen, reports = [], set(), []
    for label, ((bandit, theta), samples) in pilots.items():
        report = pilot_allocation(loglinear_pilot(bandit, theta, samples, rng),
                                  8 * bandit.n_prompts)
        reports.append(report)
        found = allocation_mismatches(report, format_pilot_allocation(report))
        verdicts = {k: r.verdict for k, r in report.ratios.items()}
        seen |= set(verdicts.values())
        checks.append(check_true(f"allocate's words, {label}: each ratio's verdict and the advice "
                                 f"are what the intervals allow", not found, float(len(found)),
                                 note="; ".join(found) or f"verdicts {verdicts}"))
    base = reports[0]
    for label, (estimate, low, high) in ALLOCATION_CASES.items():
        ratio = RatioInterval(estimate, math.nan, low, high)
        moved = dataclasses.replace(base, ratios={**base.ratios, "optimal": ratio})
        found = allocation_mismatches(moved, format_pilot_allocation(moved))
        seen.add(ratio.verdict)
        checks.append(check_true(f"allocate's words, the optimal sizes' interval {label}: the "
                                 f"row and the advice are what it allows", not found,
                                 float(len(found)), note="; ".join(found) or
                                 f"{ratio.verdict!r}"))
    checks.append(check_true("allocate's words: every verdict is printed in some case",
                             seen >= {"gain shown", "within the noise", "worse than uniform",
                                      "undefined"}, float(len(seen)), note=f"seen: {sorted(seen)}"))
    holds = dataclasses.replace(base, ratios={**base.ratios,
                                              "optimal": RatioInterval(0.95, math.nan, 0.9, 1.0)})
    text = format_pilot_allocation(holds).splitlines()
    doctored = "\n".join(text[:-1] + ["the pilot shows a gain: use the optimal sizes"])
    checks.append(check_true("negative control: a gain claimed for an interval ending at 1 is "
                             "caught", bool(allocation_mismatches(holds, doctored)), 1.0,
                             note="the same table with the advice line of a gain"))
    return checks


def gstar_words_checks(ctx) -> list:
    """``ustat-rl gstar``'s words on whether the pilot bounds ``G*``: two pilots of
    ``interior_optimum_bandit`` and, from the first, the report with c1's interval moved above 0
    and to reach 0 (``G*``'s upper end finite, and infinite as Fieller's interval then has it)."""
    import dataclasses

    import numpy as np

    from ..pilot.report import gstar_report
    from ..pilot.report_text import format_report
    from ..policies.examples import interior_optimum_bandit
    from ..scores.bandit import bandit_pilot
    from .registry import check_true

    rng = np.random.default_rng(ctx.seed_for("C50", 1))
    bandit = interior_optimum_bandit()
    checks, reports = [], []
    for prompts, samples in ((64, 16), (6, 4)):
        report = gstar_report(bandit_pilot(bandit, prompts, samples, rng), 256)
        reports.append(report)
        found = gstar_mismatches(report, format_report(report))
        checks.append(check_true(f"gstar's words, a {prompts} x {samples} pilot: whether it "
                                 f"bounds G* is what c1's interval allows", not found,
                                 float(report.bounded), note="; ".join(found) or
                                 f"bounded: {report.bounded}"))
    base = reports[0]
    c1, gstar = base.constants["c1"], base.gstar
    scale = max(abs(c1["estimate"]), abs(c1["high"]), 1e-12)
    variants = {  # c1's interval, G*'s (Fieller's: unbounded above when c1's reaches 0)
        "above 0": (dict(c1, estimate=scale, low=0.5 * scale, high=1.5 * scale),
                    dict(gstar, low=2.0, high=9.0), True),
        "reaching 0": (dict(c1, estimate=scale, low=-0.5 * scale, high=2.5 * scale),
                       dict(gstar, low=2.0, high=math.inf), False)}
    moved = {}
    for label, (interval, fieller, bounded) in variants.items():
        moved[label] = dataclasses.replace(base, constants={**base.constants, "c1": interval},
                                           gstar=fieller, bounded=bounded)
        found = gstar_mismatches(moved[label], format_report(moved[label]))
        checks.append(check_true(f"gstar's words, c1's interval {label}: 'the pilot "
                                 f"{'bounds' if bounded else 'cannot bound'} G*'", not found,
                                 float(bounded), note="; ".join(found) or "as allowed"))
    doctored = format_report(moved["above 0"]).replace("the pilot bounds G*",
                                                       "the pilot cannot bound G* from above")
    checks.append(check_true("negative control: 'cannot bound' for an interval above 0 is caught",
                             bool(gstar_mismatches(moved["above 0"], doctored)), 1.0,
                             note="the same report with the other words"))
    return checks


#: Windows of the trajectory cases: ``G*`` of each window (c1 = 1, c3' = (G* - 1)^2, standard
#: errors 1e-3 and 1e-2 of them, 64 prompts), the run's G being 8.
TRAJECTORY_CASES = {"constant G* = 8": (8.0, 8.0, 8.0),
                    "G* moving from 8 to 21": (8.0, 14.0, 21.0),
                    "G* = 8.4 throughout (no integer inside)": (8.4, 8.4, 8.4)}


def trajectory_words_checks() -> list:
    """``ustat-rl gstar --trajectory``'s verdict on synthetic runs of each kind
    (:data:`TRAJECTORY_CASES`), and a doctored verdict as the negative control."""
    from ..frameworks.synthetic import SyntheticErrors, synthetic_record
    from ..frameworks.universality import format_universality, gstar_universality
    from .registry import check_true

    checks, texts = [], {}
    for label, gstars in TRAJECTORY_CASES.items():
        records = [synthetic_record(10 * (i + 1), 1.0, 2.0, (g - 1.0) ** 2,
                                    SyntheticErrors(1e-3, 1e-2))
                   for i, g in enumerate(gstars)]
        result = gstar_universality(records, 0.9)
        texts[label] = (result, format_universality(result))
        found = trajectory_mismatches(result, texts[label][1])
        checks.append(check_true(f"trajectory's words, {label}: the verdict is what the windows' "
                                 f"intervals allow", not found, float(result.consistent),
                                 note="; ".join(found) or "as allowed"))
    result, text = texts["constant G* = 8"]
    doctored = text.replace("one G lies inside every window's interval",
                            "no single G lies inside every window's interval")
    checks.append(check_true("negative control: 'no single G' for meeting intervals is caught",
                             bool(trajectory_mismatches(result, doctored)), 1.0,
                             note="the same verdict with the other words"))
    return checks
