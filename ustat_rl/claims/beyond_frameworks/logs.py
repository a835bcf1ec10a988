"""``ustat-rl logs``' bounds at other group sizes against the exact fraction (docs/theory.md C56).

Synthetic TRL logs (``trainer_state.json`` as TRL's ``GRPOTrainer`` writes it: ``reward``,
``reward_std`` and ``frac_reward_zero_std`` of each generation batch of 0/1 rewards) with each
group's success rate drawn from a Beta law, so that the all-equal fraction at every ``G`` is known
exactly (ratios of Beta functions). The file is read back (:func:`~ustat_rl.frameworks.logs.read_trainer_state`)
and reported (:func:`~ustat_rl.frameworks.logs_report.logs_report`) as the command does, with the
run's ``G0``: each window's bounds at ``G`` hold the exact fraction with probability at least
``level`` (two Student-t intervals at ``(1 + level)/2`` each, and bounds certified within their
box). The check: at each ``G`` at least ``MIN_COVERED`` of ``WINDOWS`` independent windows hold
it, false failure at most ``P(Binomial(WINDOWS, level) < MIN_COVERED)`` per size (1e-4 at most,
summed over the sizes below ``CLAIM_BUDGET``). Negative control: the same logs read with a wrong
``G0`` fail the same check at the run's ``G``.

Exact sub-checks of the group size the logs admit
(:func:`~ustat_rl.frameworks.logs.consistent_group_sizes`, the sizes the ``--group-size``
refusal names): the synthetic logs admit their own ``G0``; the logs of a run whose generation
batch is one group (``n = G``, the largest size a batch admits, :data:`ONE_GROUP_G`) admit
exactly that ``G``, a boundary a range that stops one short would miss; and every admitted size
divides the logged batch.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np

from ..registry import check_true, register

#: The success-rate law Beta(A, B), the run's G0, groups per batch, entries per window, windows.
BETA, G0, GROUPS, WINDOW, WINDOWS = (0.6, 0.9), 8, 64, 10, 10

#: Sizes checked besides G0, the reading with the wrong G0, and the report's level.
SIZES, WRONG_G0, LEVEL = (2, 32), 4, 0.9

#: The false-failure rate allowed per size.
RATE_PER_SIZE = 1e-4

#: The group size of the one-group-per-batch logs, and their successes per logged batch.
ONE_GROUP_G, ONE_GROUP_SUCCESSES = 6, (1, 2, 3, 4, 5, 2, 4)


def beta_all_equal(G: int) -> float:
    """``E[p^G + (1 - p)^G]`` under Beta(A, B): the exact all-equal fraction at ``G``."""
    from scipy.special import betaln

    a, b = BETA
    return math.exp(betaln(a + G, b) - betaln(a, b)) + math.exp(betaln(a, b + G) - betaln(a, b))


def min_covered() -> tuple[int, float]:
    """The largest count ``c`` with ``P(Binomial(WINDOWS, LEVEL) < c) <= RATE_PER_SIZE``, and
    that probability."""
    from scipy.stats import binom

    c = max(c for c in range(WINDOWS + 1) if binom.cdf(c - 1, WINDOWS, LEVEL) <= RATE_PER_SIZE)
    return c, float(binom.cdf(c - 1, WINDOWS, LEVEL))


def logged_entry(step: int, r: np.ndarray) -> dict:
    """TRL's log entry of one generation batch of 0/1 rewards ``r`` (groups, G)."""
    return {"step": step, "loss": 0.0, "grad_norm": 0.5, "reward": float(r.mean()),
            "reward_std": float(r.std(ddof=1)),
            "frac_reward_zero_std": float(np.mean(r.std(axis=1) == 0)),
            "rewards/accuracy/mean": float(r.mean())}


def trainer_state(entries: list) -> dict:
    """A TRL-style ``trainer_state.json`` holding ``entries``."""
    return {"global_step": len(entries), "logging_steps": 1, "log_history": entries}


def synthetic_state(rng) -> dict:
    """A TRL-style ``trainer_state.json`` of ``WINDOW * WINDOWS`` logged generation batches."""
    entries = []
    for step in range(1, WINDOW * WINDOWS + 1):
        p = rng.beta(*BETA, size=GROUPS)
        entries.append(logged_entry(step, (rng.random((GROUPS, G0)) < p[:, None]).astype(float)))
    return trainer_state(entries)


def one_group_state() -> dict:
    """TRL-style logs of a run whose generation batch is one group of ``ONE_GROUP_G``: entries
    with ``k`` successes of :data:`ONE_GROUP_SUCCESSES` (never all equal, so every entry is read).
    Of the sizes ``G >= 2`` dividing 6, 2 and 3 need 3 and 2 mixed groups and so ``k = 3`` and
    ``2 <= k <= 4``: only ``G = 6`` fits every entry."""
    return trainer_state([logged_entry(step, (np.arange(ONE_GROUP_G) < k)[None, :].astype(float))
                          for step, k in enumerate(ONE_GROUP_SUCCESSES, start=1)])


def coverage(report, G: int) -> int:
    """Windows whose bounds at ``G`` hold the exact fraction."""
    i, truth = report.group_sizes.index(G), beta_all_equal(G)
    return sum(w["feasible"] and w["all_equal_low"][i] <= truth <= w["all_equal_high"][i]
               for w in report.windows)


@register("C56", "Beyond the paper: from TRL's logs alone (mean reward and the all-equal "
          "fraction at the run's G0), ustat-rl logs' bounds on the all-equal fraction at other "
          "G hold the exact fraction in each window with probability at least the level; read "
          "with the wrong G0 they do not",
          "derived (docs/theory.md C56; \"Training logs alone\")",
          "synthetic trainer_state.json with Beta success rates (exact all-equal fractions), "
          "read and reported as the command does; coverage counts over independent windows "
          "against a binomial bound; the wrong G0 as the negative control")
def check_c56(ctx) -> list:
    from ...frameworks.logs import batch_counts, consistent_group_sizes, read_trainer_state
    from ...frameworks.logs_report import logs_report

    rng = np.random.default_rng(ctx.seed_for("C56"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trainer_state.json"
        path.write_text(json.dumps(synthetic_state(rng)))
        history = read_trainer_state(path)
        path.write_text(json.dumps(one_group_state()))
        one_group = read_trainer_state(path)
    sizes = SIZES + (G0,)
    report = logs_report(history, G0, WINDOW, LEVEL, group_sizes=sizes)
    wrong = logs_report(history, WRONG_G0, WINDOW, LEVEL, group_sizes=(G0,))
    need, rate = min_covered()
    where = (f"{WINDOWS} windows of {WINDOW} batches of {GROUPS} groups of {G0}, Beta{BETA} "
             f"success rates; at least {need} of {WINDOWS}: false-failure rate {rate:.1e}")
    checks = [check_true(f"G = {G}: the bounds hold the exact all-equal fraction "
                         f"{beta_all_equal(G):.4f} in at least {need} of {WINDOWS} windows",
                         coverage(report, G) >= need, float(coverage(report, G)),
                         evidence="monte-carlo", note=where) for G in sorted(sizes)]
    missed = coverage(wrong, G0)
    checks.append(check_true(
        f"negative control: read with G0 = {WRONG_G0}, the bounds at G = {G0} hold the exact "
        f"fraction in fewer than {need} windows", missed < need, float(missed),
        evidence="monte-carlo", note="measured: the windows that hold it; a power check, no "
                                     "rate stated"))
    admitted = consistent_group_sizes(history)
    n_logged = GROUPS * G0
    checks.append(check_true(
        f"the logs admit their own G0 = {G0}, and every admitted size divides the {n_logged} "
        f"rewards of a logged batch", G0 in admitted and all(n_logged % G == 0 for G in admitted)
        and bool(np.all(batch_counts(history)[0] == n_logged)), float(len(admitted)),
        note=f"exact: consistent_group_sizes gives {admitted}; measured: how many"))
    one = consistent_group_sizes(one_group)
    checks.append(check_true(
        f"logs of one group of {ONE_GROUP_G} per batch admit exactly G = {ONE_GROUP_G} (the "
        f"whole batch: the largest size)", one == [ONE_GROUP_G], float(max(one, default=0)),
        note=f"exact: consistent_group_sizes gives {one}; measured: the largest"))
    return checks
