"""The checks of docs/invariants.md and the generated inputs they run on (tests/test_invariants.py).

Each ``check_*`` function takes what a command printed and wrote (text, JSON, exit code) and
raises ``AssertionError`` naming the invariant (``I1`` ... ``I7`` of docs/invariants.md) that
output breaks; the strategies draw the inputs: pilots that are tiny or large, degenerate (all
rewards equal, every group all-equal, one informative prompt), binary with success rates near 0
and 1, continuous, and at extreme reward scales; budgets, levels and options.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re

import numpy as np
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st

from ustat_rl.interface.cli import main
from ustat_rl.pilot.dynamic_sampling import CAP_RISK
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.pilot.small_sample import SMALL_PILOT_PROMPTS

#: Budgets with several divisors, and one prime (a usage error for gstar).
BUDGETS = (12, 13, 16, 24, 48, 64, 96, 128, 512)
LEVELS = (0.5, 0.8, 0.9, 0.95)
#: Field names of the package's dataclasses that a message must never show (I7).
INTERNAL_NAMES = ("reward_var", "score_sq", "grad_sq", "grad_gram", "prompt_prob",
                  "grad_norm_sq", "PromptMoments", "ScalingConstants", "Rollouts(")
#: The verdict words of GRPO against vanilla (I3).
GRPO_WORDS = ("wins", "loses", "cannot tell")
#: The documented cap risk (I4), read once: a planted change of the package's constant is caught.
DOCUMENTED_CAP_RISK = CAP_RISK


def run_cli(argv) -> tuple[int, str, str]:
    """``ustat-rl argv`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


#: ``USTAT_RL_INVARIANTS=long`` runs the harness at its long budget.
LONG = os.environ.get("USTAT_RL_INVARIANTS", "") == "long"
#: Hypothesis settings of every property: derandomized (reproducible, a failure replays).
SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=False,
                report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
#: A control stops at the first input that breaks an invariant: it needs no smaller one.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


# ------------------------------------------------------------------------------ strategies
#: Reward kinds, the ordinary ones listed more than once so that most drawn pilots are answered
#: and the degenerate ones (refused in one line) still come up.
REWARD_KINDS = ("binary", "binary", "binary", "continuous", "continuous", "near_zero",
                "near_one", "all_equal_groups", "one_informative", "huge", "tiny", "constant")


@st.composite
def pilots(draw, large: bool | None = None) -> Rollouts:
    """A pilot of ``P`` prompts x ``n`` samples with ``k`` score columns and drawn rewards.

    ``large=True`` draws at least :data:`SMALL_PILOT_PROMPTS` prompts (the jackknife's regime),
    ``False`` fewer, ``None`` either.
    """
    if large is None:
        large = draw(st.booleans())
    P = draw(st.integers(SMALL_PILOT_PROMPTS, SMALL_PILOT_PROMPTS + 16) if large
             else st.integers(3, 12))
    n = draw(st.integers(3, 10))
    k = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(REWARD_KINDS))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(P), n)
    p = rng.uniform(0.0, 1.0, P)
    if kind == "near_zero":
        p = rng.uniform(0.0, 0.05, P)
    elif kind == "near_one":
        p = rng.uniform(0.95, 1.0, P)
    reward = (rng.uniform(size=P * n) < np.repeat(p, n)).astype(float)
    if kind == "all_equal_groups":
        reward = np.repeat((rng.uniform(size=P) < 0.5).astype(float), n)
    elif kind == "one_informative":
        reward = np.repeat((np.arange(P) % 2).astype(float), n)
        reward[:n] = np.arange(n) % 2
    elif kind == "continuous":
        reward = rng.normal(np.repeat(rng.normal(size=P), n), 1.0)
    elif kind == "huge":
        reward = rng.normal(size=P * n) * 10.0 ** draw(st.integers(150, 300))
    elif kind == "tiny":
        reward = rng.normal(size=P * n) * 10.0 ** -draw(st.integers(160, 300))
    elif kind == "constant":
        reward = np.full(P * n, 1.0)
    # scores of a softmax policy centre on 0 given the prompt; a reward-dependent part makes
    # g(x) nonzero
    unit = reward / max(float(np.max(np.abs(reward))), 1e-300)  # in [-1, 1], any scale
    score = rng.normal(size=(P * n, k)) + 0.5 * (unit - unit.mean())[:, None] \
        * rng.normal(size=(1, k))  # (P n, k)
    return Rollouts(ids, reward, score)


# ------------------------------------------------------------------------------- checks
def check_messages(code: int, out: str, err: str) -> None:
    """I6, I7: a usage error is exit 2 with one line on stderr and nothing on stdout; no
    traceback, file path, warning or internal field name anywhere."""
    for text in (out, err):
        assert "Traceback" not in text, f"I7 traceback: {text[-400:]}"
        # the package's own files (a path the user gave may be named back to them)
        assert "ustat_rl/" not in text and "site-packages" not in text, \
            f"I7 a file path of the package: {text[-400:]}"
        assert "Warning:" not in text, f"I7 warning: {text[-400:]}"
        for name in INTERNAL_NAMES:
            assert name not in text, f"I7 internal name {name!r}: {text[-400:]}"
        assert not re.search(r"\bnan\b", text), f"I7 nan shown: {text[-400:]}"
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("ustat-rl "), \
            f"I6 a usage error is one line on stderr: {code} {out!r} {err!r}"


def check_cut_at_zero(part, name: str) -> None:
    """I1 for a constant that is at least 0: its interval is cut at 0 and holds its estimate,
    or 0 where the unbiased estimate lies below 0."""
    low, est, high = part["low"], part["estimate"], part["high"]
    assert 0.0 <= low <= max(est, 0.0) <= high, f"I1 {name}: [{low}, {high}] vs {est}"


def _contains(part, name: str, text: str) -> None:
    check_cut_at_zero(part, name)
    low, high = part["low"], part["high"]
    if not high > low:  # cut at 0 from an interval wholly below 0: shown as "cannot tell"
        line = next(t for t in text.splitlines() if t.startswith(f"  {name} "))
        assert high == 0.0 and "cannot tell it from 0" in line, \
            f"I2 {name}: zero-width interval [{low}, {high}] shown as {line!r}"


def _number(value) -> float:
    return math.inf if value == "inf" else -math.inf if value == "-inf" else \
        (math.nan if value is None else float(value))


def check_gstar(report: dict, text: str) -> None:
    """I1-I5 on a ``gstar`` report (its JSON and its text)."""
    consts = report["constants"]
    for name in ("c1", "c2", "c3"):
        if "low" in consts[name]:
            _contains(consts[name], name, text)
    g = {k: _number(v) for k, v in report["gstar"].items()}
    if "low" in g:
        assert 1.0 <= g["low"] <= g["high"], f"I1 G*: [{g['low']}, {g['high']}]"
        assert report["bounded"] == math.isfinite(g["high"]), "I3 bounded is G*'s finite end"
        assert report["bounded"] == (consts["c1"]["low"] > 0.0), \
            "I3 G* is bounded exactly when c1's interval stays above 0"
        assert ("the pilot bounds G*" in text) == report["bounded"], "I3 bounds-G* words"
    assert report["recommended_group_size"] in report["group_sizes"], "I4 advice is admissible"
    assert all(report["budget"] % G == 0 for G in report["group_sizes"]), "I4 divisors"
    verdicts, margin = report["grpo_verdict"], report["grpo_margin"]
    assert len(verdicts) == len(report["group_sizes"])
    for i, verdict in enumerate(verdicts):
        assert verdict in GRPO_WORDS, f"I3 unknown verdict {verdict!r}"
        if verdict == "cannot tell":
            continue
        assert margin is not None and not report["small_pilot"], \
            "I3 a verdict needs an interval and a pilot that is not small"
        low, high = _number(margin["low"][i]), _number(margin["high"][i])
        assert (low > 0.0) if verdict == "wins" else (high < 0.0), \
            f"I3 '{verdict}' from the interval [{low}, {high}]"
    line = next(t for t in text.splitlines() if t.startswith("G* = "))
    assert "[inf, inf]" not in line and "G* = 1 + sqrt(c3/c1) = inf" not in line, \
        f"I5 an undefined G* is not a number: {line!r}"
    for low, high in re.findall(r"\[(-?[0-9.e+-]+), (-?[0-9.e+-]+)\]", text):
        assert float(low) < float(high), f"I2 zero-width or reversed interval [{low}, {high}]"


def check_dynamic_sampling(ds: dict, text: str) -> None:
    """I1, I4, I5 on the ``--dynamic-sampling`` section."""
    for r in ds["keep_prob"] + [u for u in ds["keep_prob_unbiased"] if u is not None]:
        assert 0.0 <= r <= 1.0, f"I1 a keep probability {r}"
    for i, unbiased in enumerate(ds["keep_prob_unbiased"]):
        assert ds["cost_uses_unbiased"][i] == (unbiased is not None), "I4 unbiased r used"
    K = ds["max_gen_batches"]
    if ds["mse"] is not None:
        for i, ok in enumerate(ds["resolved"]["grad"]):
            if ok:
                mse, bias, var = (ds["mse"][k][i] for k in ("mse", "bias_sq", "variance"))
                assert var > 0.0 and bias >= 0.0 and mse >= max(bias, var) * (1 - 1e-12), \
                    f"I1 a resolved MSE {mse} below its bias {bias} or variance {var}"
        for accounting, targets in ds["best"].items():
            for target, got in targets.items():
                if got is None:  # under a cap, or no G affords a batch of generated rollouts
                    assert K or accounting == "generated", "I4 a best G is missing"
                    continue
                assert got["group_size"] in ds["group_sizes"], "I4 a best G divides N"
                if got["resolved"] and accounting != "unfiltered":
                    i = ds["group_sizes"].index(got["group_size"])
                    assert ds["resolved"][target][i], "I5 a best G's MSE is resolved"
                    if K:
                        assert got["cap_probability"] <= DOCUMENTED_CAP_RISK, \
                            f"I4 the cap: P(cap) {got['cap_probability']} at the best G"
    if K:
        assert f"at most {DOCUMENTED_CAP_RISK:g} per step" in text or ds["mse"] is None, \
            "I4 the cap's assumption is named"
    table = text.split("kept batch at N")[-1].split("best G")[0] if ds["mse"] else ""
    for row in table.splitlines():
        cells = row.replace("<= 0", "<=0").split()
        if len(cells) == 7 and cells[0].isdigit():
            bias, var, mse = cells[2:5]
            assert var in ("unresolved", "<=0") or float(var) > 0.0, "I1 a variance shown"
            if mse not in ("unresolved", "<=0") and bias != "<=0" and var != "<=0":
                assert float(mse) >= max(float(bias), float(var)) * 0.999, \
                    f"I1 an MSE {mse} shown below its bias {bias} or variance {var}"


def check_allocation(report: dict, text: str) -> None:
    """I2-I4 on an ``allocate`` report."""
    budget = report["budget"]
    for name, sizes in report["group_sizes"].items():
        assert sum(sizes) == budget and min(sizes) >= 2, f"I4 {name} spends N in groups >= 2"
    for name, r in report["ratio_to_uniform"].items():
        low, high, est = (_number(r[k]) for k in ("low", "high", "estimate"))
        if r["verdict"] == "gain shown":
            assert low < high < 1.0 and est > 0, f"I3 {name}: gain from [{low}, {high}]"
        elif r["verdict"].startswith("worse than"):
            assert 1.0 < low < high, f"I3 {name}: worse from [{low}, {high}]"
        elif r["verdict"] == "within the noise":
            assert low <= 1.0 <= high and low < high, f"I3 {name}: noise from [{low}, {high}]"
    optimal = report["ratio_to_uniform"].get("optimal")
    if "use the optimal sizes" in text:
        assert optimal is not None and optimal["verdict"] == "gain shown", \
            "I3 the advice to use the optimal sizes needs a gain shown"


def check_rewards(report: dict, text: str) -> None:
    """I1, I7 on a ``rewards`` report: rates in [0, 1], no run of 20 digits, no step None."""
    assert "step None" not in text, "I7 step None"
    assert not re.search(r"\d{20}", text), "I7 a number printed as a long run of digits"
    for row in report["by_group_size"]["all_equal_observed"]:
        assert row is None or 0.0 <= row <= 1.0, "I1 an all-equal fraction"


def gstar_run(pilot: Rollouts, folder, budget: int, level: float, dynamic: bool,
              cap: int | None) -> None:
    """Run ``gstar`` on ``pilot`` and check every invariant on what comes out."""
    path = pilot.save(folder / "pilot.npz")
    argv = ["gstar", path, "--budget", budget, "--level", level, "--json", folder / "g.json"]
    if dynamic:
        argv += ["--dynamic-sampling"] + ([] if cap is None else ["--max-gen-batches", cap])
    code, out, err = run_cli(argv)
    check_messages(code, out, err)
    assert code in (0, 2), f"I6 gstar exits 0 or 2, got {code}: {err}"
    if code == 2:
        return
    report = json.loads((folder / "g.json").read_text())
    check_gstar(report, out)
    if dynamic:
        check_dynamic_sampling(report["dynamic_sampling"], out)
