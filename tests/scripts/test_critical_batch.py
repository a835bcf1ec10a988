"""The analysis of simulations/critical_batch.py (docs/critical_batch.md) on planted tables: the
steps to a target (first crossing, interpolated, censored), McCandlish's frontier
``S(N) = S_min + E_min/N`` and ``B_crit = E_min/S_min`` with its bootstrap over seeds, the target
rule and the verdict, each with a negative control. The script's runs are tested by
test_critical_batch_quick.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from script_loader import load_script

pytestmark = pytest.mark.fast

#: A planted frontier inside the protocol's grid: B_crit = 3600/30 = 120 rollouts.
S_MIN, E_MIN = 30.0, 3600.0
B_CRIT = E_MIN / S_MIN
BUDGETS = (24, 48, 96, 192)
STEPS = np.arange(0, 241, 10)


@pytest.fixture(scope="module")
def cb():
    return load_script("simulations/critical_batch.py", "critical_batch_script")


def planted_curves(rng, sigma, height=0.02, start=0.1, seeds=3, scale=1.0):
    """Per N, seed curves rising linearly through ``start + height`` at
    ``scale * (S_MIN + E_MIN/N)`` steps, plus independent noise of sd ``sigma`` per evaluation
    (none at step 0: every run starts from one warm start)."""
    out = {}
    for N in BUDGETS:
        needed = scale * (S_MIN + E_MIN / N)
        noise = rng.normal(0.0, sigma, (seeds, STEPS.size))
        noise[:, 0] = 0.0
        out[N] = start + height * STEPS[None, :] / needed + noise  # (seeds, K)
    return out, start + height


# ---------------------------------------------------------------- steps to the target
def test_crossing_interpolates_between_evaluations_and_finds_the_first_crossing(cb):
    for needed in (3.0, 17.5, 104.2, 239.0):
        curve = 0.2 + 0.05 * STEPS / needed  # linear: interpolation is exact
        assert cb.crossing_steps(STEPS, curve, 0.25) == pytest.approx(needed, rel=1e-12)
    # negative control: the evaluation at or after the crossing (no interpolation) is off by up
    # to one interval, and the check above tells it apart (17.5 -> 20)
    curve = 0.2 + 0.05 * STEPS / 17.5
    assert STEPS[np.argmax(curve >= 0.25)] != pytest.approx(17.5, rel=1e-12)
    # a dip, a crossing at 35, a fall below and a second crossing at 95: the first counts
    dipping = np.interp(STEPS, [0, 20, 40, 60, 90, 100, 240], [0.2, 0.1, 0.3, 0.1, 0.2, 0.3, 0.3])
    assert cb.crossing_steps(STEPS, dipping, 0.25) == pytest.approx(35.0)


def test_a_curve_that_never_reaches_the_target_is_censored_and_one_already_there_is_0(cb):
    curves = np.array([0.2 + 0.01 * STEPS / 240, np.full(STEPS.size, 0.3)])
    got = cb.crossing_steps(STEPS, curves, 0.25)
    assert math.isnan(got[0]) and got[1] == 0.0
    with pytest.raises(ValueError, match="`steps`"):
        cb.crossing_steps(STEPS[::-1], curves, 0.25)
    with pytest.raises(ValueError, match="`target`"):
        cb.crossing_steps(STEPS, curves, math.nan)
    unfinished = curves.copy()
    unfinished[0, -1] = math.nan  # a run that stopped early is refused, not read as censored
    with pytest.raises(ValueError, match="`curves`"):
        cb.crossing_steps(STEPS, unfinished, 0.25)


# ---------------------------------------------------------------- the frontier
def test_the_line_recovers_a_planted_frontier_exactly_and_its_edge_cases(cb):
    needed = np.array([S_MIN + E_MIN / N for N in BUDGETS])
    s_min, e_min = cb.frontier_line(BUDGETS, needed)
    assert s_min == pytest.approx(S_MIN, rel=1e-10) and e_min == pytest.approx(E_MIN, rel=1e-10)
    assert cb.critical_batch(s_min, e_min) == pytest.approx(B_CRIT, rel=1e-10)
    # a negative control: the frontier read as S = E_min/N + S_min with E = S alone (steps on N,
    # not on 1/N) gives another number
    slope = np.polyfit(BUDGETS, needed, 1)
    assert abs(slope[1] / -slope[0] - B_CRIT) > 10
    assert cb.critical_batch(-1.0, 50.0) == math.inf  # steps fell as 1/N over the whole grid
    assert cb.critical_batch(10.0, -5.0) == 0.0  # more rollouts saved no step
    assert math.isnan(cb.critical_batch(math.nan, 5.0))
    with pytest.raises(ValueError, match="`budgets`"):
        cb.frontier_line((48, 48), [1.0, 2.0])


def test_a_noiseless_planted_table_gives_b_crit_to_rounding_whatever_the_target(cb):
    rng = np.random.default_rng(0)
    for scale in (1.0, 0.6):  # the target's height scales S(N), not B_crit = E_min/S_min
        curves, target = planted_curves(rng, 0.0, scale=scale)
        fit = cb.fit_frontier(curves, STEPS, target, rng, 200)
        assert fit.b_crit == pytest.approx(B_CRIT, rel=1e-9)
        assert fit.low == pytest.approx(B_CRIT, rel=1e-9) and fit.high == pytest.approx(B_CRIT,
                                                                                         rel=1e-9)


#: Planted tables of the coverage check; noise sd 0.2 of the target's height per evaluation.
TABLES, SIGMA = 300, 0.004
#: Three seeds make a crude bootstrap: at most 10 distinct resamples per N and a percentile
#: interval that runs narrow. The check asks for at least 80% coverage of the nominal 95%: with
#: 300 tables, a true coverage of 87% (what this design gives) falls below 80% with probability
#: about 2e-4 (3.6 binomial standard errors).
MIN_COVERAGE = 0.80
#: The negative control: the same intervals must hold a planted wrong B_crit (3 times the truth,
#: the protocol's band edge) in at most 15% of the tables.
MAX_WRONG = 0.15


def test_the_bootstrap_interval_covers_a_planted_b_crit_and_rejects_three_times_it(cb):
    rng = np.random.default_rng(1)
    covered = wrong = 0
    points = []
    for _ in range(TABLES):
        curves, target = planted_curves(rng, SIGMA)
        fit = cb.fit_frontier(curves, STEPS, target, rng, 2000)
        covered += fit.low <= B_CRIT <= fit.high
        wrong += fit.low <= 3 * B_CRIT <= fit.high
        points.append(fit.b_crit)
    assert covered / TABLES >= MIN_COVERAGE
    assert wrong / TABLES <= MAX_WRONG
    # the first crossing of a noisy mean comes early, most where the curve is flattest (small
    # N): B_crit is biased low, by about a tenth at this noise; the median stays within 20%
    assert abs(np.median(points) / B_CRIT - 1) <= 0.2


def test_a_censored_budget_leaves_no_fit(cb):
    rng = np.random.default_rng(2)
    curves, target = planted_curves(rng, 0.0)
    curves[24] = curves[24] * 0.0 + 0.1  # never rises
    fit = cb.fit_frontier(curves, STEPS, target, rng, 100)
    assert fit.censored == (24,)
    assert math.isnan(fit.b_crit) and math.isnan(fit.low) and math.isnan(fit.high)


# ---------------------------------------------------------------- target rule and verdicts
def planted_table(rng, sigma, height=0.03, name="c", sizes=(4, 8), rise=True):
    rows = []
    for G in sizes:
        curves, _ = planted_curves(rng, sigma, height=height if rise else 0.0)
        for N, block in curves.items():
            for seed, curve in enumerate(block):
                rows.append(dict(condition=name, N=N, G=G, seed=seed,
                                 **{f"reward_{s}": v for s, v in zip(STEPS, curve)}))
    return pd.DataFrame(rows)


def test_the_target_is_the_stated_fraction_of_the_smallest_rise_or_none(cb):
    table = planted_table(np.random.default_rng(3), 0.0)
    target, rise = cb.target_of(table, "reward_240", 0.5)
    smallest = 0.03 * 240 / (S_MIN + E_MIN / 24)  # N = 24 rises least
    assert rise == pytest.approx(smallest) and target == pytest.approx(0.1 + smallest / 2)
    flat = planted_table(np.random.default_rng(3), 0.0, rise=False)
    assert math.isnan(cb.target_of(flat, "reward_240", 0.5)[0])
    table.loc[0, "reward_0"] = 0.2
    with pytest.raises(ValueError, match="`runs`"):
        cb.target_of(table, "reward_240", 0.5)


def test_verdicts_read_the_ratio_interval_against_the_band(cb):
    assert cb.verdict(0.5, 2.0) == "agreement shown"
    assert cb.verdict(0.5, math.inf) == "consistent"
    assert cb.verdict(0.01, 0.2) == "disagreement"
    assert cb.verdict(4.0, math.inf) == "disagreement"
    assert cb.verdict(math.nan, math.nan) == "not measured"


def test_the_summary_agrees_with_a_true_prediction_and_rejects_the_pilots_count(cb, tmp_path):
    # noiseless curves: the summary's plumbing (target, crossings, fit, ratio, verdict) is
    # checked to rounding; the noise's effect is the coverage test's
    rng = np.random.default_rng(4)
    table = pd.concat([planted_table(rng, 0.0, name="c"),
                       planted_table(rng, 0.0, name="flat", rise=False)])
    right = pd.DataFrame([dict(condition=c, G=G, total=B_CRIT, total_low=0.8 * B_CRIT,
                               total_high=1.25 * B_CRIT) for c in ("c", "flat") for G in (4, 8)])
    summary = cb.summarise(table, right, n_boot=500)
    primary = summary[summary["fraction"] == 0.5].set_index(["condition", "G"])
    assert set(primary.loc["flat", "verdict"]) == {"did not rise"}
    assert set(primary.loc["c", "verdict"]) == {"agreement shown"}
    assert np.allclose(primary.loc["c", "B_crit"], B_CRIT, rtol=1e-9)
    assert np.allclose(primary.loc["c", "ratio"], 1.0, rtol=1e-9)
    # negative control: d2-seed0's pilot count at G = 4 (1,292 [690, 12,700], 95%), ten times the
    # planted B_crit, is rejected by the same reading
    wrong = right.assign(total=1292.0, total_low=690.0, total_high=12700.0)
    summary = cb.summarise(table, wrong, n_boot=500)
    primary = summary[(summary["fraction"] == 0.5) & (summary["condition"] == "c")]
    assert set(primary["verdict"]) == {"disagreement"}
    text = cb.markdown(summary)
    assert "| c | 4 | 0.5 |" in text and "did not rise" in text
    assert cb.plot(summary, tmp_path / "fig")
