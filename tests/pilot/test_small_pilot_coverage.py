"""Intervals on pilots of a few prompts cover at their level (ustat_rl/pilot/small_sample.py, C32).

Over ``N_PILOTS`` independent pilots of ``one_answer_bandit(0)`` (the policy whose jackknife
interval for c1 under-covers worst in simulations/small_pilot_coverage.py) at 3 x 3 and 8 x 8,
the nominal 90% intervals for c1, c2, c3' and G* must cover the exact values in at least
``90% - Z_CHECK se`` of the pilots gstar does not refuse, ``se = sqrt(0.9 0.1/n)``: with true
coverage 90% a count below that bound has probability under 3.2e-5 per comparison (one-sided
normal bound at 4 se; 8 comparisons), and the measured coverage is 96-100% (400 pilots per cell).
Power: the check rejects any interval covering below about 80%. Negative control: the
jackknife-t interval alone on the same pilots (the intervals small pilots got before) covers c1
in 21% (3 x 3) and 69% (8 x 8) of them, and the same bound must reject it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from script_loader import load_script

from ustat_rl.pilot.report import check_degenerate, check_resolved
from ustat_rl.pilot.small_sample import SMALL_PILOT_PROMPTS, is_small_pilot
from ustat_rl.pilot.uncertainty import pilot_intervals, student_quantile
from ustat_rl.policies.examples import one_answer_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.tolerances import Z_CHECK

pytestmark = pytest.mark.integration  # coverage study: 400 small pilots per cell

LEVEL = 0.9
N_PILOTS = 200


def _bound(n: int) -> float:
    return LEVEL - Z_CHECK * math.sqrt(LEVEL * (1 - LEVEL) / n)


def _counts(n_prompts, group_size, seed):
    bandit = one_answer_bandit(0.0)
    exact = bandit.scaling_constants()
    truth = (exact.c1, exact.c2, exact.c3, exact.optimal_group_size())
    rng = np.random.default_rng(seed)
    hits, control, used = np.zeros(4), 0, 0
    for _ in range(N_PILOTS):
        pilot = bandit_pilot(bandit, n_prompts, group_size, rng)
        try:
            check_degenerate(pilot)
            out = pilot_intervals(pilot, LEVEL)
            check_resolved(out)
        except ValueError:  # a refusal is an answer, not a miss
            continue
        used += 1
        parts = (out.c1, out.c2, out.c3, out.optimal_group_size)
        hits += [p.covers(t) for p, t in zip(parts, truth)]
        t = student_quantile(LEVEL, out.c1.prompt_std_error**2, 0.0, out.n_prompts, None)
        control += abs(out.c1.estimate - truth[0]) <= t * out.c1.std_error
    return hits, control, used


@pytest.mark.parametrize("n_prompts, group_size, seed", [(3, 3, 35), (8, 8, 36)])
def test_small_pilot_intervals_cover_at_their_level(n_prompts, group_size, seed):
    hits, control, used = _counts(n_prompts, group_size, seed)
    assert used >= N_PILOTS // 2, used  # most pilots are answered, not refused
    bound = _bound(used)
    assert np.all(hits / used >= bound), (hits / used, bound)
    assert control / used < bound, (control / used, bound)  # the jackknife alone is rejected


def test_the_threshold_and_the_report_agree():
    bandit = one_answer_bandit(0.0)
    small = pilot_intervals(bandit_pilot(bandit, SMALL_PILOT_PROMPTS - 1, 8, 1), LEVEL)
    large = pilot_intervals(bandit_pilot(bandit, SMALL_PILOT_PROMPTS, 8, 1), LEVEL)
    assert is_small_pilot(SMALL_PILOT_PROMPTS - 1) and not is_small_pilot(SMALL_PILOT_PROMPTS)
    assert small.small_pilot and not large.small_pilot
    for out in (small, large):  # every constant's interval holds its estimate cut at 0
        for part in (out.c1, out.c2, out.c3):
            assert 0.0 <= part.low <= max(part.estimate, 0.0) <= part.high
        assert out.bounded == (out.c1.low > 0.0)


def test_coverage_script_quick_mode(tmp_path, capsys):
    script = load_script("simulations/small_pilot_coverage.py")
    result = script.main(["--quick", "--pilots", "4", "--out", str(tmp_path)])
    table = result["coverage"]
    assert len(table) == len(script.SIZES) * len(script.POLICIES)
    counts = table[["c1", "c2", "c3", "gstar", "c1_jackknife", "unbounded"]]
    assert (counts.le(table["pilots"], axis=0)).all().all()
    assert ((table["pilots"] + table["refused"]) == 4).all()
    assert (tmp_path / "small_pilot_coverage.csv").is_file()
    assert "| policy | prompts |" in capsys.readouterr().out
