"""``--dynamic-sampling`` of ``ustat-rl gstar`` and ``ustat-rl rewards`` (ustat_rl.pilot.dynamic_sampling).

A pilot with known success counts (``m = 1, 2, 4, 6`` of ``n = 8``) fixes every plug-in number:
the report must equal the theory's functions called directly on ``p = m/n`` and on the pilot's
moments made binary (``binary_projection``), and the unbiased ``r`` must equal the U-statistic
written here with ``math.comb``. A second route checks the words: averaged over the binomial law
of ``m`` (a weighted prompt set, one prompt per ``m``), the U-statistic gives ``1 - q(p)``
exactly and the plug-in ``1 - E q(m/n)`` falls below it (the negative control: convexity). The
commands' text, JSON and refusals (non-binary rewards, equal rewards, bad options) follow.
"""

from __future__ import annotations

import doctest
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

import ustat_rl.pilot.dynamic_sampling as dynamic_sampling_module
from ustat_rl.interface.cli import main
from ustat_rl.interface.dynamic_sampling import HELP, format_dynamic_sampling
from ustat_rl.pilot.dynamic_sampling import (
    CAP_RISK,
    NOTHING_TO_FILTER,
    PLUG_IN_NOTE,
    pilot_dynamic_sampling,
    rewards_dynamic_sampling,
)
from ustat_rl.pilot.estimate import estimate_moments, pilot_statistics
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.theory.advantage import binary_projection
from ustat_rl.theory.dynamic_sampling import (
    cost_at_keep_probability,
    filtered_batch_moments,
    generation_cost,
    keep_probability,
    optimal_filtered_group_size,
)

pytestmark = pytest.mark.fast

RTOL = 1e-13  # the same float64 arithmetic by two calls; the hand U-statistic to rounding
N_SAMPLES, SUCCESSES = 8, (1, 2, 4, 6)
BUDGET, SIZES = 32, [2, 4, 8, 16, 32]


def _known_pilot(seed: int = 0) -> Rollouts:
    """Four prompts, 8 samples each, with exactly ``SUCCESSES`` rewards of 1 (p = m/8)."""
    rng = np.random.default_rng(seed)
    reward = np.concatenate([np.repeat([1.0, 0.0], [m, N_SAMPLES - m]) for m in SUCCESSES])
    ids = np.repeat(np.arange(len(SUCCESSES)), N_SAMPLES)
    score = rng.normal(size=(ids.size, 3)) + reward[:, None]  # (n, 3), reward-dependent
    return Rollouts(ids, reward, score)


def _u_keep(G: int) -> float | None:
    """1 - mean over prompts of (C(m, G) + C(n - m, G)) / C(n, G); None above the pilot group."""
    if G > N_SAMPLES:
        return None
    q = [(math.comb(m, G) + math.comb(N_SAMPLES - m, G)) / math.comb(N_SAMPLES, G)
         for m in SUCCESSES]
    return 1.0 - float(np.mean(q))


@pytest.fixture(scope="module")
def known():
    pilot = _known_pilot()
    return pilot, pilot_dynamic_sampling(pilot, BUDGET, max_gen_batches=3)


def test_keep_probability_and_cost_equal_the_theory_at_p_hat(known):
    _, out = known
    p = np.array(SUCCESSES) / N_SAMPLES
    assert out.group_sizes == SIZES and out.batch_sizes == [BUDGET // G for G in SIZES]
    assert out.min_pilot_group == N_SAMPLES and out.max_gen_batches == 3
    for i, G in enumerate(SIZES):
        r = keep_probability(p, G)
        np.testing.assert_allclose(out.keep_prob[i], r, rtol=RTOL)
        # by hand: 1 - mean(p^G + (1 - p)^G)
        np.testing.assert_allclose(out.keep_prob[i], 1 - np.mean(p**G + (1 - p)**G), rtol=1e-12)
        # the costs and 1/r use the unbiased r where it exists (G <= n), the plug-in above
        used = _u_keep(G)
        assert out.cost_uses_unbiased[i] == (used is not None)
        used = r if used is None else used
        cost = cost_at_keep_probability(used, G, BUDGET // G, None, 3)
        if used == r:  # the plug-in route: the theory's own function on p = m/n
            cost = generation_cost(p, G, BUDGET // G, None, 3)
        np.testing.assert_allclose(out.expected_gen_batches[i], cost.expected_gen_batches,
                                   rtol=RTOL)
        np.testing.assert_allclose(out.expected_rollouts[i], cost.expected_rollouts, rtol=RTOL)
        np.testing.assert_allclose(out.cap_probability[i], cost.cap_probability, rtol=RTOL,
                                   atol=1e-300)
        # the GRPO statements: E g_DS = g / r, |bias| = (Q / r) |g|
        np.testing.assert_allclose(out.grpo_mean_scale[i], 1 / used, rtol=RTOL)
        np.testing.assert_allclose(out.grpo_relative_bias[i], (1 - used) / used, rtol=RTOL)
    # verl's default gen batch b = B: with the cap at 3, P(cap) = P(Binomial(3 B, r) < B)
    r2, B2 = out.keep_prob_unbiased[0], BUDGET // 2
    np.testing.assert_allclose(out.cap_probability[0], binom.cdf(B2 - 1, 3 * B2, r2), rtol=1e-12)


def test_unbiased_keep_probability_is_the_u_statistic(known):
    _, out = known
    for i, G in enumerate(SIZES):
        want = _u_keep(G)
        if want is None:
            assert out.keep_prob_unbiased[i] is None
        else:
            np.testing.assert_allclose(out.keep_prob_unbiased[i], want, rtol=1e-12)
    # G = 2 by hand: m = 1, 2, 4, 6 of 8 give q = 21/28, 16/28, 12/28, 16/28
    np.testing.assert_allclose(out.keep_prob_unbiased[0], 1 - 65 / 112, rtol=1e-14)
    assert out.keep_prob_unbiased[0] > out.keep_prob[0]  # the plug-in reads low here too


def test_the_unbiased_route_is_unbiased_and_the_plug_in_is_not():
    """Averaged over m ~ Binomial(n, p) (one prompt per m, weighted by its pmf)."""
    n, p = 6, 0.3
    ids = np.repeat(np.arange(n + 1), n)
    reward = np.concatenate([np.repeat([1.0, 0.0], [m, n - m]) for m in range(n + 1)])
    pmf = binom.pmf(np.arange(n + 1), n, p)
    out = rewards_dynamic_sampling(reward, ids, 12, prompt_prob=pmf)
    for i, G in enumerate(out.group_sizes):
        truth = 1 - p**G - (1 - p)**G
        if G <= n:
            np.testing.assert_allclose(out.keep_prob_unbiased[i], truth, rtol=1e-12)
        else:
            assert out.keep_prob_unbiased[i] is None
        # negative control: the plug-in is below the truth by more than rounding (convexity)
        assert out.keep_prob[i] < truth - 1e-3, (G, out.keep_prob[i], truth)


def test_kept_batch_moments_and_best_group_size_equal_the_theory(known):
    pilot, out = known
    projected = binary_projection(estimate_moments(pilot_statistics(pilot)))
    for i, G in enumerate(SIZES):
        want = filtered_batch_moments(projected, "grpo", G, BUDGET // G)
        np.testing.assert_allclose(want.keep_prob, out.keep_prob[i], rtol=RTOL)
        np.testing.assert_allclose(want.prompt_weight, np.full(4, 0.25 / want.keep_prob),
                                   rtol=RTOL)  # GRPO: w(x) = f(x)/r, so E g_DS = g/r
        for key in ("bias_sq", "variance", "mse", "mse_rescaled", "unfiltered_mse"):
            np.testing.assert_allclose(out.mse[key][i], getattr(want, key), rtol=RTOL)
    assert set(out.best) == {"generated", "accepted", "unfiltered"}
    keep = {G: (u if u is not None else r)
            for G, u, r in zip(SIZES, out.keep_prob_unbiased, out.keep_prob)}
    for accounting, targets in out.best.items():
        assert set(targets) == ({"grad"} if accounting == "unfiltered" else {"grad", "rescaled"})
        for target, got in targets.items():
            want = optimal_filtered_group_size(projected, BUDGET, "grpo", accounting, SIZES,
                                               target=target)
            # the smallest MSE among the sizes that, under the cap K = 3, hit it at (G, B) with
            # chance at most CAP_RISK; a size whose MSE is not resolved (variance <= 0 or a
            # negative squared bias; unfiltered: MSE <= 0) counts at its squared bias (or 0)
            rows = [filtered_batch_moments(projected, "grpo", G, 1) for G in SIZES]
            if accounting == "unfiltered":
                resolved = np.array([u > 0 for u in want.mses])
                floor = np.zeros(len(SIZES))
            else:
                bias = np.array([r.bias_sq if target == "grad"
                                 else r.mse_rescaled - r.keep_prob**2 * r.variance for r in rows])
                resolved = np.array([r.variance > 0 for r in rows]) & (bias >= 0)
                floor = np.maximum(bias, 0.0)
            allowed = np.isfinite(want.mses)
            if accounting != "unfiltered":
                cap = np.array([binom.cdf(B - 1, 3 * B, keep[G]) if B else 1.0
                                for G, B in zip(SIZES, want.batch_sizes)])
                allowed &= cap <= CAP_RISK
            if not allowed.any():
                assert got is None
                continue
            j = int(np.argmin(np.where(allowed, np.where(resolved, want.mses, floor), np.inf)))
            assert (got["group_size"], got["batch_size"]) == (SIZES[j], want.batch_sizes[j])
            assert got["resolved"] == bool(resolved[j] and want.mses[j] > 0)
            np.testing.assert_allclose([got["mse"], got["rollouts"]],
                                       [want.mses[j], want.rollouts[j]], rtol=RTOL)
    # negative control: without the projection the exact moments refuse the estimated ones
    with pytest.raises(ValueError, match="binary"):
        filtered_batch_moments(estimate_moments(pilot_statistics(pilot)), "grpo", 4, 8)


def test_rewards_only_report_has_no_mse_and_the_same_costs(known):
    pilot, out = known
    _, index = pilot.groups()
    only = rewards_dynamic_sampling(pilot.reward, index, BUDGET, 3)
    assert only.mse is None and only.best is None
    assert only.to_dict() == replace(out, mse=None, best=None, resolved=None).to_dict()


def test_another_frameworks_group_filter_reaches_every_number(known):
    """ROLL's filter (beyond the paper) is verl's at G = 2, 4, 8 and drops k = 1 from G = 10 and
    k = G - 1 from G = 20: the report follows the theory under it, and keeps verl's unbiased r
    and GRPO's g/r only where the two filters agree."""
    pilot, verl = known
    out = pilot_dynamic_sampling(pilot, BUDGET, max_gen_batches=3, group_filter="roll")
    projected = binary_projection(estimate_moments(pilot_statistics(pilot)))
    p = np.array(SUCCESSES) / N_SAMPLES
    assert out.group_filter == "roll" and verl.group_filter == "verl"
    for i, G in enumerate(SIZES):
        np.testing.assert_allclose(out.keep_prob[i], keep_probability(p, G, group_filter="roll"),
                                   rtol=RTOL)
        want = filtered_batch_moments(projected, "grpo", G, BUDGET // G, "roll")
        for key in ("bias_sq", "variance", "mse", "mse_rescaled"):
            np.testing.assert_allclose(out.mse[key][i], getattr(want, key), rtol=RTOL)
        same = G < 10
        assert (out.keep_prob_unbiased[i] == verl.keep_prob_unbiased[i]) if same else (
            out.keep_prob_unbiased[i] is None and out.grpo_mean_scale[i] is None)
        # negative control: where the filters differ, verl's r and MSE are not ROLL's
        if not same:
            assert out.keep_prob[i] < verl.keep_prob[i] - 1e-3
            assert abs(out.mse["mse"][i] - verl.mse["mse"][i]) > 1e-6 * abs(verl.mse["mse"][i])
    text = format_dynamic_sampling(out)
    assert "dynamic sampling (group filter roll, alibaba/ROLL;" in text and "group filter roll" in text


def test_gstar_takes_the_group_filter(tmp_path, capsys, known):
    path = known[0].save(tmp_path / "pilot.npz")
    code, text, err = _run(capsys, "gstar", str(path), "--budget", str(BUDGET),
                           "--dynamic-sampling", "--group-filter", "roll",
                           "--json", str(tmp_path / "g.json"))
    assert code == 0 and err == "" and "group filter roll" in text
    payload = json.loads((tmp_path / "g.json").read_text(), parse_constant=_no_nan)
    assert payload["dynamic_sampling"]["group_filter"] == "roll"


# ---------------------------------------------------------------------------- the commands
def _run(capsys, *argv):
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def _no_nan(token):
    raise AssertionError(f"the JSON holds {token}")


def test_gstar_prints_the_section_and_writes_its_json(tmp_path, capsys, known):
    pilot, out = known
    path = pilot.save(tmp_path / "pilot.npz")
    code, text, err = _run(capsys, "gstar", str(path), "--budget", str(BUDGET),
                           "--dynamic-sampling", "--max-gen-batches", "3",
                           "--json", str(tmp_path / "g.json"))
    assert code == 0 and err == ""
    assert "dynamic sampling (verl filter_groups; generation batch b = B, cap K = 3" in text
    assert "GRPO's kept batch estimates g/r, not g" in text
    assert f"note: {PLUG_IN_NOTE}" in text and "binary_projection" in text
    assert "counts generated rollouts:" in text and "counts accepted rollouts:" in text
    row = next(line for line in text.splitlines()
               if line.split()[:3] == ["2", "16", f"{out.keep_prob[0]:.4g}"])
    assert f"{out.keep_prob_unbiased[0]:.4g}" in row
    payload = json.loads((tmp_path / "g.json").read_text(), parse_constant=_no_nan)
    assert payload["dynamic_sampling"] == json.loads(json.dumps(out.to_dict()))
    assert payload["budget"] == BUDGET and "mse" in payload  # the gstar report is still there


def test_gstar_without_the_option_is_unchanged(tmp_path, capsys, known):
    path = known[0].save(tmp_path / "pilot.npz")
    code, text, _ = _run(capsys, "gstar", str(path), "--budget", str(BUDGET),
                         "--json", str(tmp_path / "g.json"))
    assert code == 0 and "dynamic sampling" not in text
    assert "dynamic_sampling" not in json.loads((tmp_path / "g.json").read_text())


def test_rewards_prints_the_section_and_says_what_needs_scores(tmp_path, capsys, known):
    pilot, out = known
    path = pilot.save(tmp_path / "pilot.npz")
    code, text, err = _run(capsys, "rewards", str(path), "--budget", str(BUDGET),
                           "--dynamic-sampling", "--json", str(tmp_path / "r.json"))
    assert code == 0 and err == ""
    assert "generation batch b = B, no cap" in text and "P(cap)" not in text
    assert "the kept batch's MSE and the best G need scores" in text
    assert f"note: {PLUG_IN_NOTE}" in text
    got = json.loads((tmp_path / "r.json").read_text(), parse_constant=_no_nan)
    want = rewards_dynamic_sampling(pilot.reward, pilot.groups()[1], BUDGET)
    assert got["dynamic_sampling"] == json.loads(json.dumps(want.to_dict()))
    assert want.keep_prob == out.keep_prob and want.cap_probability is None


def test_help_text_says_the_plug_in_is_biased(capsys):
    for command in ("gstar", "rewards"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--dynamic-sampling" in text and "--max-gen-batches" in text
        assert "is biased" in text and "only the per-group all-equal indicator is unbiased" in text
    assert "binary rewards only" in HELP


def _save(tmp_path, reward, ids=None) -> str:
    ids = np.repeat(np.arange(4), 8) if ids is None else ids
    score = np.random.default_rng(1).normal(size=(ids.size, 2))
    return str(Rollouts(ids, np.asarray(reward, dtype=float), score).save(tmp_path / "p.npz"))


def _one_line_refusal(capsys, argv, words):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert words in err, err
    return err


@pytest.mark.parametrize("command", ["gstar", "rewards"])
def test_non_binary_rewards_are_refused_in_one_line(tmp_path, capsys, command):
    reward = np.tile([0.0, 1.0, 0.5, 1.0], 8)
    path = _save(tmp_path, reward)
    _one_line_refusal(capsys, [command, path, "--budget", "32", "--dynamic-sampling"],
                      f"ustat-rl {command}: error: --dynamic-sampling needs binary rewards "
                      "(0 or 1)")
    # without the option the same file is an ordinary report
    assert main([command, path, "--budget", "32"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", ["gstar", "rewards"])
def test_equal_rewards_leave_nothing_to_filter(tmp_path, capsys, command):
    path = _save(tmp_path, np.ones(32))
    err = _one_line_refusal(capsys, [command, path, "--budget", "32", "--dynamic-sampling"],
                            "all rewards are equal (every reward equals 1), so the pilot carries "
                            f"no gradient signal and {NOTHING_TO_FILTER}")
    assert err.startswith(f"ustat-rl {command}: error: ")
    # every group all-equal, but groups differ: the estimated keep probability is 0 at every G
    path = _save(tmp_path, np.repeat([1.0, 0.0, 1.0, 0.0], 8))
    _one_line_refusal(capsys, [command, path, "--budget", "32", "--dynamic-sampling"],
                      "every group's rewards are all equal")


@pytest.mark.parametrize("command", ["gstar", "rewards"])
@pytest.mark.parametrize("extra, words", [
    (["--dynamic-sampling", "--max-gen-batches", "0"],
     "`--max-gen-batches` must be an integer >= 1"),
    (["--dynamic-sampling", "--max-gen-batches", "-2"], "`--max-gen-batches` must be"),
    (["--max-gen-batches", "3"], "applies only with --dynamic-sampling"),
    (["--group-filter", "roll"], "`--group-filter` applies only with --dynamic-sampling"),
])
def test_bad_options_are_usage_errors(tmp_path, capsys, command, extra, words):
    path = _save(tmp_path, np.tile([0.0, 1.0], 16))
    _one_line_refusal(capsys, [command, path, "--budget", "32", *extra], words)


def test_gstar_trajectory_takes_no_dynamic_sampling(tmp_path, capsys):
    _one_line_refusal(capsys, ["gstar", "--trajectory", str(tmp_path / "run.jsonl"),
                               "--dynamic-sampling"], "needs a pilot rollouts file")


def test_a_non_positive_point_mse_is_never_printed_as_a_value_or_a_best_g(known):
    _, out = known
    negative = {key: [-abs(v) for v in values] for key, values in out.mse.items()}
    best = {a: {t: dict(got, mse=-1.0) for t, got in targets.items()}
            for a, targets in out.best.items()}
    text = format_dynamic_sampling(replace(out, mse=negative, best=best,
                                           resolved={t: [True] * len(SIZES)
                                                     for t in ("grad", "rescaled")}))
    table = text.split("kept batch at N")[1].split("best G")[0]
    # a variance <= 0 is unresolved (a variance is positive); the other four columns "<= 0"
    assert "-0." not in table and table.count("<= 0") == 4 * len(SIZES)
    assert table.count("unresolved") == len(SIZES) + 1  # and the footnote
    assert text.count("unresolved (a point MSE estimate is not positive") == 5
    assert "G = " not in text.split("best G at N")[1].split("note:")[0]


def test_doctests():
    result = doctest.testmod(dynamic_sampling_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("command", ["gstar", "rewards"])
def test_an_unknown_group_filter_is_a_usage_error_naming_the_filters(tmp_path, capsys, command):
    from ustat_rl.interface import cli

    path = _save(tmp_path, np.tile([0.0, 1.0], 16))
    with pytest.raises(SystemExit) as info:
        cli.main([command, path, "--budget", "32", "--dynamic-sampling", "--group-filter", "rol"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "--group-filter: unknown group filter 'rol'; choose from verl, slime, openrlhf, roll" in err


def test_the_group_filter_help_names_every_registered_filter():
    # the option's help is written out (so --help does not import the theory package): it must
    # name every filter the theory registers, and each with the wording its docstring gives
    import argparse

    from ustat_rl.interface.dynamic_sampling import add_arguments
    from ustat_rl.theory.group_filters import GROUP_FILTERS

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    named = [name for name in GROUP_FILTERS if f"{name} (" in text]
    assert named == list(GROUP_FILTERS) and len(named) >= 4
