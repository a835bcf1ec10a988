"""The pilot's critical rollout count against the softmax bandit's exact value (docs/theory.md,
"The critical rollout count").

``small_bandit`` has exact ``B_noise`` = 26.62 rollouts at ``G = 2`` (inter 1.57 + intra 25.05)
and 19.66 at ``G = 4``, ``||g||^2 = 0.009944``. Two checks over independent pilots of 64 x 8:

* Coverage: the 90% Fieller intervals for the count and for each part, and ``||g||^2``'s, must
  cover the exact values at a rate inside the 85-95% band, judged by
  ``ustat_rl.stats.coverage_band.coverage_in_band`` (4 binomial standard errors beyond the
  band's ends: a false failure at most 3.2e-5 per check when the true coverage is in the band).
* The estimating equation: ``B_noise`` is the root ``r`` of ``tr(Sigma_G) - r ||g||^2 = 0``,
  whose two terms are unbiased, so at the exact count ``E[noise_hat - B ||g||^2_hat] = 0``: the
  mean over pilots must lie within ``Z = 4`` standard errors of 0 (two-sided false-failure rate
  6.3e-5). This check has the power the coverage check lacks against a small shift: the planted
  wrong split (the intra-prompt part with ``c3'/G`` for ``c3'/(G - 1)``, planted in the code
  through ``grpo_law``) moves the mean by ``c3'/2 = 0.064`` at ``G = 2``, about 20 of its
  standard errors over 300 pilots, and the same check must reject it. The coverage check alone
  does not reject that plant at this pilot size (measured while writing the test: 262 of 300
  planted intervals covered the count; the Fieller interval of a ratio is long on the side the
  plant moves the truth to), which is why the second check exists.
"""

import math

import numpy as np
import pytest

from ustat_rl.pilot import critical_rollouts as pilot_counts
from ustat_rl.pilot.rollouts import Rollouts
from ustat_rl.policies.examples import small_bandit
from ustat_rl.scores.bandit import bandit_pilot
from ustat_rl.scores.spec import drawn_spec
from ustat_rl.stats.coverage_band import coverage_in_band
from ustat_rl.theory import group_size as owner
from ustat_rl.theory import scaling_constants

pytestmark = pytest.mark.integration  # coverage study: about 30 s of pilots on 2 cores

PILOTS, PROMPTS, SAMPLES = 300, 64, 8
#: Standard errors allowed for the estimating equation's mean (two-sided rate 6.3e-5).
Z = 4.0


def _exact(G):
    m = small_bandit().moments()
    c = scaling_constants(m)
    return owner.critical_rollouts(c.c1, c.c2, c.c3, m.grad_norm_sq, G)


def _wrong_law(c1, c2, c3, budget, G):
    """GRPO's law with the intra-prompt part's ``c3'/(G - 1)`` planted as ``c3'/G``."""
    return (c1 * G + c2 + c3 / G) / budget


def _study(G, seed, sketch_dim=None):
    """The pilots' intervals at ``G``: one list of CriticalRolloutIntervals."""
    rng = np.random.default_rng(seed)
    return [pilot_counts.critical_rollout_intervals(
        bandit_pilot(small_bandit(), PROMPTS, SAMPLES, rng=rng, sketch=drawn_spec(sketch_dim, rng)), G, 0.9)
        for _ in range(PILOTS)]


def _equation_holds(outs, count: float) -> bool:
    pivot = np.array([o.noise.estimate - count * o.grad_norm_sq.estimate for o in outs])
    return bool(abs(pivot.mean()) <= Z * pivot.std(ddof=1) / math.sqrt(pivot.size))


@pytest.mark.parametrize("G, sketch_dim", [(2, None), (4, 16)])
def test_intervals_cover_the_exact_count_and_its_parts(G, sketch_dim):
    exact = _exact(G)
    outs = _study(G, 20261207 + G, sketch_dim)
    for name in ("total", "inter", "intra", "grad_norm_sq"):
        hits = sum(getattr(o, name).covers(getattr(exact, name)) for o in outs)
        verdict = coverage_in_band(hits, PILOTS)
        assert verdict.passed, (name, verdict)
    assert _equation_holds(outs, exact.total)


def test_a_planted_wrong_split_is_rejected_by_the_estimating_equation(monkeypatch):
    exact = _exact(2)
    assert _equation_holds(_study(2, 20261208), exact.total)
    monkeypatch.setattr(owner, "grpo_law", _wrong_law)
    monkeypatch.setattr(pilot_counts, "grpo_law", _wrong_law)
    planted = _study(2, 20261208)  # the same pilots
    assert planted[0].noise.estimate != pytest.approx(exact.noise, rel=1e-2)  # the plant took
    assert not _equation_holds(planted, exact.total)


def _opposed_pilot() -> Rollouts:
    """Three prompts whose gradient estimates are +v, -v and 0: the unbiased ||g||^2, the mean
    of <g_a, g_b> over distinct pairs, is -1/27 < 0."""
    reward = np.tile([1.0, 0.0, 0.0], 3)
    score = np.array([[1.0], [0.0], [0.0], [-1.0], [0.0], [0.0], [0.0], [0.5], [-0.5]])
    return Rollouts(prompt_id=np.repeat(np.arange(3), 3), reward=reward, score=score)


def test_a_signal_estimated_below_zero_gives_an_unbounded_count_with_words():
    out = pilot_counts.critical_rollout_intervals(_opposed_pilot(), 4)
    assert out.grad_norm_sq.estimate == pytest.approx(-1.0 / 27.0)
    for name in ("total", "inter", "intra"):
        part = getattr(out, name)
        assert part.estimate == math.inf and part.high == math.inf and part.low >= 0.0
    assert math.isfinite(out.noise.estimate)
    assert not out.bounded and "<= 0" in out.note
    as_json = out.to_dict()
    assert as_json["total"]["estimate"] == math.inf and as_json["note"] == out.note


def test_bad_group_size_and_level_are_refused_in_one_line():
    pilot = _opposed_pilot()
    for bad in (1, 0.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="group_size"):
            pilot_counts.critical_rollout_intervals(pilot, bad)
    with pytest.raises(ValueError, match="level"):
        pilot_counts.critical_rollout_intervals(pilot, 4, level=1.0)
