"""The flat-group report: reasons on a planted table, expected shares against simulation (C66).

``ustat-rl rewards`` and the monitor's windows report, per window, the groups whose rewards
were all equal and why (:func:`ustat_rl.frameworks.flat_groups.flat_group_report`,
:func:`~ustat_rl.frameworks.flat_groups.window_flat_groups`), and with binary rewards the share
of flat groups to expect at other group sizes ``G``, the prompt average of
``h_G(p) = p^G + (1 - p)^G`` (:func:`~ustat_rl.frameworks.flat_groups.expected_flat_share`).
Two routes:

* exact: a planted table of two steps whose every group's reason is written down here (every
  reason once, errored over truncated over the reward's value, marks on groups whose rewards
  differ, a group with one truncated answer), read through the table and through generation
  batches; and at the window's own ``G`` the expected share equals the window's flat share (the
  U-statistic of a group of ``G`` is its all-equal indicator);
* Monte Carlo: windows of ``P`` groups of ``n = 8`` binary rewards whose prompts' success
  probabilities are drawn from a known four-point law; the windows' estimates at ``G = 2, 4, 8``
  averaged over the windows against the exact ``E h_G(p)`` summed here over the law, within
  ``Z_STRICT = 4.5`` standard errors of the windows' spread (two-sided false-failure rate
  6.8e-6 each, 3 comparisons: 2.0e-5 for the claim). Above ``n`` the estimate is the plug-in,
  marked biased. Negative control: the plug-in ``p_hat^G + (1 - p_hat)^G`` at ``G <= n``,
  computed here from the same groups, is rejected by the same comparison.
"""

from __future__ import annotations

import numpy as np

from ...tolerances import Z_STRICT
from ..registry import check_close, check_exact, check_true, register

__all__ = ["PLANTED", "SUCCESS_LAW", "FLAT_GROUP_SIZE", "FLAT_SIZES", "FLAT_WINDOWS",
           "FLAT_PROMPTS", "planted_table", "exact_flat_share"]

#: The planted table: per group (step, rewards, truncated marks, errored marks, its reason).
PLANTED = (
    (0, (0.0, 0.0, 0.0), (1, 1, 1), (1, 1, 1), "all errored"),
    (0, (0.0, 0.0, 0.0), (1, 1, 1), (0, 1, 0), "all truncated"),
    (0, (1.0, 1.0, 1.0), (0, 1, 0), (0, 0, 0), "all correct"),
    (0, (0.0, 0.0, 0.0), (0, 0, 0), (0, 0, 0), "all wrong"),
    (0, (1.0, 0.0, 1.0), (1, 1, 1), (1, 1, 1), ""),  # marked everywhere, rewards differ
    (0, (1.0, 1.0, 0.0), (0, 0, 0), (0, 0, 0), ""),
    (1, (0.5, 0.5, 0.5), (0, 0, 0), (0, 0, 0), "equal rewards"),
    (1, (0.25, 0.75, 0.75), (0, 0, 0), (0, 0, 0), ""),
    (1, (1.0, 1.0, 1.0), (1, 1, 1), (0, 0, 0), "all truncated"),
    (1, (1.0, 1.0, 1.0), (0, 0, 0), (0, 0, 0), "all correct"),
)
#: The success-probability law of the simulated prompts: values and their probabilities.
SUCCESS_LAW = ((0.05, 0.3, 0.6, 0.95), (0.25, 0.25, 0.25, 0.25))
#: Rewards per simulated group, the sizes the share is asked at (the last above it), windows
#: (training steps) quick and full, and groups per window.
FLAT_GROUP_SIZE = 8
FLAT_SIZES = (2, 4, 8, 16)
FLAT_WINDOWS = (100, 1000)
FLAT_PROMPTS = 64


def planted_table(rows=PLANTED):
    """``(GroupedRewards, reasons per step)`` of :data:`PLANTED` (groups ``s:k``)."""
    from ...frameworks import GroupedRewards

    ids, reward, step, trunc, err = [], [], [], [], []
    expected: dict[int, list[str]] = {}
    for k, (s, r, t, e, why) in enumerate(rows):
        ids += [f"{s}:{k}"] * len(r)
        reward += list(r)
        step += [s] * len(r)
        trunc += list(t)
        err += list(e)
        expected.setdefault(s, []).append(why)
    table = GroupedRewards(np.array(ids), np.array(reward), step=np.array(step),
                           truncated=np.array(trunc, dtype=bool),
                           errored=np.array(err, dtype=bool))
    return table, expected


def exact_flat_share(sizes) -> np.ndarray:
    """``E h_G(p) = sum_p w(p) (p^G + (1 - p)^G)`` over :data:`SUCCESS_LAW`, per ``G``."""
    p, w = (np.asarray(v) for v in SUCCESS_LAW)
    G = np.asarray(sizes, dtype=np.float64)[:, None]
    return (w * (p**G + (1.0 - p) ** G)).sum(axis=1)


def _counts(reasons) -> dict:
    from ...frameworks.flat_groups import REASONS

    return {name: sum(r == name for r in reasons) for name in REASONS}


def _planted_checks() -> list:
    from ...frameworks.flat_groups import flat_group_report, window_flat_groups
    from ...frameworks.window import Batch

    table, expected = planted_table()
    windows = flat_group_report(table, (2, 3))
    checks = []
    for w, (s, reasons) in zip(windows, sorted(expected.items())):
        want = _counts(reasons)
        flat = sum(bool(r) for r in reasons)
        checks.append(check_true(f"planted step {s}: flat groups per reason {want}",
                                 w.window == f"step {s}" and w.counts == want
                                 and w.n_flat == flat and w.n_groups == len(reasons),
                                 float(w.n_flat)))
    # step 0 is binary: at its own G = 3 the expected share is the flat share (4 of 6)
    checks.append(check_exact("planted step 0: expected share at its own G = 3 is its flat "
                              "share", 4.0 / 6.0, windows[0].expected[1]))
    checks.append(check_true("planted step 1 (rewards 0.25, 0.5, 0.75): no expected shares",
                             windows[1].group_sizes == [] and windows[1].expected == [],
                             float(len(windows[1].expected))))
    # the same rows as generation batches of the monitor's window, one batch per step
    batches, trunc, err = [], [], []
    for s in sorted(expected):
        rows = [r for r in PLANTED if r[0] == s]
        reward = np.array([v for r in rows for v in r[1]])
        batches.append(Batch(s, 3, reward, np.zeros((reward.size, 1)), 0))
        trunc += [v for r in rows for v in r[2]]
        err += [v for r in rows for v in r[3]]
    pooled = window_flat_groups(batches, (2, 3), truncated=np.array(trunc, dtype=bool),
                                errored=np.array(err, dtype=bool))
    want = _counts([why for _, _, _, _, why in PLANTED])
    checks.append(check_true(f"window_flat_groups over both steps' batches: {want}",
                             pooled.window == "steps 0-1" and pooled.counts == want
                             and pooled.n_groups == len(PLANTED), float(pooled.n_flat)))
    return checks


@register("C66", "Beyond the paper: the flat-group report gives every group of a planted table "
          "its reason (errored, truncated, all correct, all wrong, equal rewards), and its "
          "expected share of flat groups at other G, averaged over windows of simulated binary "
          "groups, equals the exact E[p^G + (1-p)^G]",
          "derived (docs/theory.md C66; section 7, 'Why groups gave no signal')",
          "flat_group_report and window_flat_groups on a planted two-step table; 100 windows "
          "of 64 groups of 8 Bernoulli rewards (p from a 4-point law), mean estimate at G = 2, "
          "4, 8 within 4.5 se of the exact share; the plug-in as the negative control")
def check_c66(ctx) -> list:
    from ...frameworks import GroupedRewards
    from ...frameworks.flat_groups import flat_group_report

    checks = _planted_checks()
    rng = np.random.default_rng(ctx.seed_for("C66"))
    W, P, n = ctx.reps(*FLAT_WINDOWS), FLAT_PROMPTS, FLAT_GROUP_SIZE
    p = rng.choice(np.asarray(SUCCESS_LAW[0]), size=(W, P), p=np.asarray(SUCCESS_LAW[1]))
    z = (rng.random((W, P, n)) < p[..., None]).astype(np.float64)  # (W, P, n)
    ids = np.repeat(np.arange(W * P), n).astype(str)
    table = GroupedRewards(ids, z.ravel(), step=np.repeat(np.arange(W), P * n))
    windows = flat_group_report(table, FLAT_SIZES)
    est = np.array([w.expected for w in windows])  # (W, n_G)
    flat_share = np.array([w.n_flat / w.n_groups for w in windows])  # (W,)
    by_hand = np.mean((z.min(axis=2) == z.max(axis=2)), axis=1)  # (W,) flat groups counted here
    checks.append(check_exact(f"every window's flat share is the groups counted flat here "
                              f"({W} windows)", by_hand, flat_share))
    own = FLAT_SIZES.index(n)
    checks.append(check_exact(f"at the groups' own G = {n} the expected share is the flat share",
                              flat_share, est[:, own]))
    checks.append(check_true(f"estimates marked unbiased exactly at G <= {n}",
                             all(w.unbiased == [G <= n for G in FLAT_SIZES] for w in windows),
                             float(W)))
    exact = exact_flat_share(FLAT_SIZES)
    phat = z.mean(axis=2)  # (W, P)
    caught = []
    for j, G in enumerate(FLAT_SIZES):
        if G > n:
            continue
        checks.append(check_close(f"G = {G}: expected share averaged over {W} windows of {P} "
                                  f"groups of {n}", exact[j], est[:, j].mean(),
                                  est[:, j].std(ddof=1) / np.sqrt(W), z=Z_STRICT))
        plug = (phat**G + (1.0 - phat) ** G).mean(axis=1)  # (W,) the plug-in, by hand
        caught.append(abs(plug.mean() - exact[j]) > Z_STRICT * plug.std(ddof=1) / np.sqrt(W))
    checks.append(check_true("negative control: the plug-in p_hat^G + (1 - p_hat)^G is rejected "
                             "at G = 2 and 4 (at G = 8 it is biased too)", all(caught[:2]),
                             float(sum(caught)), evidence="monte-carlo",
                             note="a power check, no rate"))
    return checks
