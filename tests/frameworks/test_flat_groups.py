"""Why groups gave no signal (ustat_rl.frameworks.flat_groups) and `ustat-rl rewards`' section.

The reasons are checked against a table whose every group's reason is written out by hand, and
two planted misclassifications (the marks tried in the other order; one truncated completion
taken for a truncated group) are rejected by the same comparison. The expected share at the
window's own G equals the observed share exactly (the U-statistic of one full group is its
all-equal indicator). Its interval covers the true prompt average of p^G + (1 - p)^G: over
400 windows of 64 Beta(0.5, 0.5) prompts with 8 samples each, at least 0.84 of the 90%
intervals must cover (4 binomial standard errors below 0.9: a false-failure rate below 1e-4 if
the coverage is 0.9); negative control: the same count against the value at G + 1 fails.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import integrate, stats

import ustat_rl.frameworks.flat_groups as flat_module
from ustat_rl.frameworks import GroupedRewards
from ustat_rl.frameworks.flat_groups import (
    REASONS,
    expected_flat_share,
    flat_group_reasons,
    flat_group_report,
    format_flat_groups,
)
from ustat_rl.interface.cli import main

pytestmark = pytest.mark.fast

#: (rewards, truncated, errored, the reason written out)
GROUPS = (
    ([1, 1, 1], [0, 0, 0], [0, 0, 0], "all correct"),
    ([0, 0, 0], [0, 0, 0], [0, 0, 0], "all wrong"),
    ([0, 0, 0], [1, 1, 1], [0, 0, 0], "all truncated"),
    ([0, 0, 0], [0, 0, 0], [1, 1, 1], "all errored"),
    ([0, 0, 0], [1, 1, 1], [1, 1, 1], "all errored"),  # both marks: errored first
    ([0, 0, 0], [1, 0, 0], [0, 0, 0], "all wrong"),  # one truncated completion is not a group
    ([0.5, 0.5, 0.5], [0, 0, 0], [0, 0, 0], "equal rewards"),
    ([1, 0, 0], [1, 1, 1], [0, 0, 0], ""),  # truncated but not flat: it gave a signal
)


def _table():
    reward = np.concatenate([g[0] for g in GROUPS]).astype(float)
    ids = np.repeat(np.arange(len(GROUPS)), 3)
    truncated = np.concatenate([g[1] for g in GROUPS]).astype(bool)
    errored = np.concatenate([g[2] for g in GROUPS]).astype(bool)
    return reward, ids, truncated, errored


def test_reasons_are_the_ones_written_out():
    reward, ids, truncated, errored = _table()
    got = flat_group_reasons(reward, ids, len(GROUPS), truncated, errored)
    assert got.tolist() == [g[3] for g in GROUPS]
    # without the marks, the value decides
    plain = flat_group_reasons(reward, ids, len(GROUPS))
    assert plain.tolist()[2:5] == ["all wrong"] * 3


def _marks_swapped(reward, index, n_groups, truncated=None, errored=None):
    """Planted: truncation tried after errors, so it wins."""
    return flat_group_reasons(reward, index, n_groups, errored, truncated).tolist()


def _any_truncated(reward, index, n_groups, truncated=None, errored=None):
    """Planted: a group with any truncated completion counted as all truncated."""
    out = flat_group_reasons(reward, index, n_groups, None, errored).astype(object)
    r = np.asarray(reward)
    for g in range(n_groups):
        sel = np.asarray(index) == g
        if out[g] not in ("", "all errored") and np.any(np.asarray(truncated)[sel]) and np.ptp(r[sel]) == 0:
            out[g] = "all truncated"
    return out.tolist()


@pytest.mark.parametrize("bug", [_marks_swapped, _any_truncated])
def test_planted_misclassifications_are_rejected(bug):
    reward, ids, truncated, errored = _table()
    assert bug(reward, ids, len(GROUPS), truncated, errored) != [g[3] for g in GROUPS]


def test_report_counts_and_the_own_G_share():
    reward, ids, truncated, errored = _table()
    table = GroupedRewards(ids.astype(str), reward, truncated=truncated, errored=errored)
    (w,) = flat_group_report(table, (2, 3, 6))
    assert w.n_groups == 8 and w.n_flat == 7
    assert w.counts == {"all errored": 2, "all truncated": 1, "all correct": 1,
                        "all wrong": 2, "equal rewards": 1}
    assert set(w.counts) == set(REASONS)
    # not binary (0.5): no expected shares
    assert w.group_sizes == []
    binary = GroupedRewards(ids.astype(str), np.where(reward == 0.5, 1.0, reward))
    (b,) = flat_group_report(binary, (2, 3, 6))
    observed = b.n_flat / b.n_groups
    assert b.expected[b.group_sizes.index(3)] == pytest.approx(observed, abs=1e-15)
    assert b.unbiased == [True, True, False]
    text = format_flat_groups([w, b])
    assert "7 of 8 groups were flat" in text and "2 all errored" in text
    assert "expected share of flat groups (90% interval): G = 2:" in text


def test_windows_follow_the_steps():
    reward, ids, truncated, errored = _table()
    step = np.repeat([0, 1], 12)
    table = GroupedRewards(ids.astype(str), reward, step, truncated=truncated, errored=errored)
    windows = flat_group_report(table, (2,))
    assert [w.window for w in windows] == ["step 0", "step 1"]
    assert sum(w.n_flat for w in windows) == 7


def _truth(G, a=0.5, b=0.5):
    value, _ = integrate.quad(lambda p: (p**G + (1 - p)**G) * stats.beta.pdf(p, a, b), 0, 1,
                              epsabs=1e-12, limit=200)
    return value


def test_interval_covers_the_expected_share():
    rng = np.random.default_rng(2026)
    P, n, windows, G = 64, 8, 400, 4
    covered = wrong = 0
    truth, other = _truth(G), _truth(G + 1)
    for _ in range(windows):
        p = rng.beta(0.5, 0.5, size=P)
        m = rng.binomial(n, p)
        _, lo, hi, unbiased = expected_flat_share(m, np.full(P, n), [G], 0.9)
        assert unbiased[0]
        covered += int(lo[0] <= truth <= hi[0])
        wrong += int(lo[0] <= other <= hi[0])
    floor = 0.9 - 4 * np.sqrt(0.9 * 0.1 / windows)
    assert covered / windows >= floor, covered / windows
    assert wrong / windows < floor, wrong / windows  # negative control


def test_rewards_command_prints_why(tmp_path, capsys):
    reward, ids, truncated, errored = _table()
    path = tmp_path / "r.npz"
    np.savez(path, prompt_id=ids.astype(str), reward=np.where(reward == 0.5, 1.0, reward),
             truncated=truncated, errored=errored)
    code = main(["rewards", str(path), "--budget", "12", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "groups that gave no signal" in out.out and "1 all truncated" in out.out
    payload = json.loads((tmp_path / "r.json").read_text())
    assert payload["flat_groups"][0]["counts"]["all errored"] == 2


def test_bad_marks_name_the_parameter():
    with pytest.raises(ValueError, match="`truncated`"):
        GroupedRewards(["a", "a"], [1.0, 0.0], truncated=[1, 0, 1])
    with pytest.raises(TypeError, match="`table`"):
        flat_group_report([1, 0])
    assert flat_module.DEFAULT_SIZES[0] == 2


def test_a_monitored_window_pools_its_batches():
    from ustat_rl.frameworks.window import Batch

    reward, ids, truncated, errored = _table()
    binary = np.where(reward == 0.5, 1.0, reward)
    first, second = binary[:12], binary[12:]
    batches = [Batch(5, 3, first, np.zeros((12, 2)), 0), Batch(6, 3, second, np.zeros((12, 2)), 4)]
    w = flat_module.window_flat_groups(batches, (2, 3), truncated=truncated, errored=errored)
    assert w.window == "steps 5-6" and w.n_groups == 8 and w.n_flat == 7
    assert w.counts["all errored"] == 2 and w.counts["all truncated"] == 1
    assert w.counts["all correct"] == 2  # the 0.5 group made 1


def test_doctests():
    import doctest

    assert doctest.testmod(flat_module).failed == 0
