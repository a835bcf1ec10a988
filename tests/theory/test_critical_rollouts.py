"""The critical rollout count against the softmax bandit's exact moments (docs/theory.md, "The
critical rollout count").

``B_noise(G) = tr(Sigma_G)/||g||^2`` with ``tr(Sigma_G) = N E||g_hat - g||^2`` at ``N = B G``
rollouts: compared here with the bandit's exact minibatch MSE (Proposition 3 through
``SoftmaxBandit.exact_mse``, a route that never forms the scaling constants), and each part with
its own exact source: the inter-prompt part ``G c1/||g||^2`` with the spread of the bandit's
per-prompt gradient vectors, the intra-prompt part with ``G E_X MSE(X; G)/||g||^2`` from the exact
per-prompt MSE of Theorem 2. Exact identities, so the tolerance is rounding (``RTOL``); the
negative control plants the wrong split of the intra part (``c3'/G`` for ``c3'/(G - 1)``), which
the same comparison must reject at every ``G`` (its relative error is ``c3'/(G (G - 1))`` of the
part, at least 0.4% on these bandits up to ``G = 16``, far above rounding).
"""

import dataclasses
import math

import numpy as np
import pytest

from ustat_rl.policies.examples import interior_optimum_bandit, small_bandit
from ustat_rl.theory import ScalingConstants, scaling_constants
from ustat_rl.theory import group_size as owner

pytestmark = pytest.mark.fast

# two evaluations of one exact quantity by different sums: rounding only
RTOL = 1e-9

BANDITS = {"small": small_bandit, "interior": interior_optimum_bandit}
SIZES = (2, 3, 4, 5, 8, 16)


def _exact_parts(bandit, G: int) -> tuple[float, float, float]:
    """``(total, inter, intra)`` of the count from the bandit's exact MSEs, not its constants."""
    m = bandit.moments()
    signal = float(m.grad_norm_sq)
    f = bandit.prompt_prob
    g = bandit.target_gradient()
    spread = sum(f[x] * np.sum((bandit.target_gradient(x) - g) ** 2)
                 for x in range(bandit.n_prompts))  # c1 = E||g(X) - g||^2 from the vectors
    within = float(f @ bandit.exact_mse_per_prompt("grpo", G))  # E_X MSE(X; G), Theorem 2
    batch = 3  # any B: N E||g_hat_B - g||^2 does not depend on it
    total = G * batch * bandit.exact_mse("grpo", G, batch)
    return total / signal, G * spread / signal, G * within / signal


def _matches(count: owner.CriticalRollouts, exact) -> bool:
    total, inter, intra = exact
    return bool(np.allclose([count.total, count.inter, count.intra], [total, inter, intra],
                            rtol=RTOL, atol=0.0))


def _planted_wrong_split(c: ScalingConstants, signal: float, G: int) -> owner.CriticalRollouts:
    """The intra-prompt part with ``c3'/G`` in place of ``c3'/(G - 1)``."""
    inter = G * c.c1 / signal
    intra = (c.c2 + c.c3 / G) / signal
    return owner.CriticalRollouts(float(G), inter + intra, inter, intra, signal,
                                  (inter + intra) * signal)


@pytest.mark.parametrize("name", sorted(BANDITS))
def test_count_and_split_equal_the_exact_mse_routes(name):
    bandit = BANDITS[name]()
    m = bandit.moments()
    c = scaling_constants(m)
    for G in SIZES:
        exact = _exact_parts(bandit, G)
        count = owner.critical_rollouts(c.c1, c.c2, c.c3, m.grad_norm_sq, G)
        assert _matches(count, exact), (G, count, exact)
        assert count.note is None and count.total == pytest.approx(count.inter + count.intra)
        assert count.noise == pytest.approx(count.total * float(m.grad_norm_sq), rel=RTOL)
        # negative control: the wrong split, rejected by the same comparison
        assert not _matches(_planted_wrong_split(c, float(m.grad_norm_sq), G), exact), G


def test_at_n_equal_to_the_count_the_noise_equals_the_signal():
    """McCandlish's reading: at ``N = B_noise`` rollouts the step's MSE is ``||g||^2``."""
    bandit = small_bandit()
    m = bandit.moments()
    c = scaling_constants(m)
    for G in SIZES:
        count = owner.critical_rollouts(c.c1, c.c2, c.c3, m.grad_norm_sq, G)
        mse = owner.grpo_law(c.c1, c.c2, c.c3, count.total, G)  # the law at real N
        assert mse == pytest.approx(float(m.grad_norm_sq), rel=RTOL)


def test_the_count_at_gstar_is_the_smallest():
    bandit = interior_optimum_bandit()
    m = bandit.moments()
    c = scaling_constants(m)
    gstar = owner.optimal_group_size(c.c1, c.c3)
    at_gstar = owner.critical_rollouts(c.c1, c.c2, c.c3, m.grad_norm_sq, gstar)
    # the minimum (c1 + c2 + 2 sqrt(c1 c3'))/||g||^2 of C17, split c1 + sqrt(c1 c3') between
    # prompts and c2 + sqrt(c1 c3') within them
    root = math.sqrt(c.c1 * c.c3)
    assert at_gstar.total == pytest.approx((c.c1 + c.c2 + 2 * root) / m.grad_norm_sq, rel=RTOL)
    assert at_gstar.inter == pytest.approx((c.c1 + root) / m.grad_norm_sq, rel=RTOL)
    grid = np.linspace(1.5, 64.0, 500)
    others = [owner.critical_rollouts(c.c1, c.c2, c.c3, m.grad_norm_sq, G).total for G in grid]
    assert at_gstar.total <= min(others) * (1 + RTOL)


def test_the_answer_carries_the_count_at_the_recommended_g_and_at_gstar():
    c = ScalingConstants(c1=1.0, c2=2.0, c3=16.0)
    out = owner.group_size_answer(48, c, grad_norm_sq=0.5)
    at_run, at_gstar = out.critical_rollouts
    assert at_run.group_size == out.recommended_group_size == 6
    assert (at_run.total, at_run.inter, at_run.intra) == pytest.approx((22.4, 12.0, 10.4))
    assert at_gstar.group_size == 5.0 and at_gstar.total == pytest.approx(22.0)
    assert owner.group_size_answer(48, c).critical_rollouts is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.critical_rollouts = None
    # G* past the budget: read at N, as the law at G* is
    wide = owner.group_size_answer(8, ScalingConstants(c1=1e-4, c2=2.0, c3=16.0),
                                   grad_norm_sq=0.5)
    assert wide.critical_rollouts[1].group_size == 8.0


def test_a_signal_at_or_below_zero_gives_infinity_with_words_never_a_negative_count():
    for signal in (0.0, -0.3):
        out = owner.critical_rollouts(1.0, 2.0, 16.0, signal, 4)
        assert out.total == out.inter == out.intra == math.inf
        assert "<= 0" in out.note and "every number of rollouts" in out.note
    undefined = owner.critical_rollouts(1.0, 2.0, 16.0, 0.5, math.nan)
    assert math.isnan(undefined.total) and "undefined" in undefined.note
    with pytest.raises(ValueError, match="grad_norm_sq"):
        owner.group_size_answer(48, ScalingConstants(1.0, 2.0, 16.0), grad_norm_sq=math.nan)
