"""C51, dynamic sampling in ``verify``: it passes on the code as it is and fails on planted bugs.

Each planted bug is monkeypatched (nothing changes on disk) and is a kind a dynamic-sampling
implementation can have: one outcome of the all-equal probability ``p^G + (1 - p)^G`` dropped,
the cap ``max_num_gen_batches`` ignored in the expected batch count, the bias computed as if
nothing were filtered, and the budget search counting ``G B / r`` rollouts (kept groups arriving
one by one) instead of whole generation batches. The claim's own statistics are at
``Z_STRICT = 4.5`` (6.8e-6 per comparison); the helper ``squared_mean_norm`` is checked here by
exact enumeration. Seeds are fixed for reproducibility, not chosen.
"""

import dataclasses
import itertools
import math

import numpy as np
import pytest
from script_loader import load_script

import ustat_rl.theory.dynamic_sampling as ds_module
import ustat_rl.theory.dynamic_sampling_cost as cost_module
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_frameworks.dynamic_sampling import CASES, squared_mean_norm
from ustat_rl.policies.examples import known_value_bandit
from ustat_rl.tolerances import CLAIM_BUDGET, FALSE_FAILURE_STRICT_TWO_SIDED, Z_STRICT

pytestmark = pytest.mark.integration  # whole claim C51 with planted bugs

calibration = load_script("benchmarks/calibration.py", "calibration_script_c51")


def _run(seed=0):
    return run_claim(registry()["C51"], VerifyContext(seed=seed, quick=True))


def _failing(result):
    return [c.name for c in result.checks if c.required and not c.passed]


def test_claim_passes_and_states_its_rate():
    result = _run()
    assert result.verdict == "pass", (_failing(result), result.error)
    rates = [calibration.stated_rate(c.note, c.evidence) for c in result.checks]
    monte_carlo = [r for r, c in zip(rates, result.checks)
                   if c.evidence == "monte-carlo" and not math.isnan(r)]
    assert len(monte_carlo) == 16
    assert all(r == pytest.approx(FALSE_FAILURE_STRICT_TWO_SIDED) for r in monte_carlo)
    assert 0 < np.nansum(rates) <= CLAIM_BUDGET
    # the one power check states no rate and is far from its threshold
    control = [c for c, r in zip(result.checks, rates) if math.isnan(r)]
    assert len(control) == 1 and control[0].measured > 10 * Z_STRICT
    assert any("p = 0.02" in c.name for c in result.checks)
    assert any("p = 0.98" in c.name for c in result.checks)


@pytest.mark.parametrize("dropped,caught", [("failure", "p = 0.02"), ("success", "p = 0.98")])
def test_claim_catches_one_all_equal_outcome_dropped(monkeypatch, dropped, caught):
    """``q = p^G`` (all failures forgotten) or ``q = (1 - p)^G`` (all successes forgotten)."""

    def keep(value, G, mask=None):  # the claim runs verl's rule, the default
        kept = value if dropped == "failure" else 1.0 - value
        return 1.0 - kept**G

    monkeypatch.setattr(ds_module, "_prompt_keep", keep)
    result = _run()
    assert result.verdict == "fail"
    assert any(name.startswith(caught) for name in _failing(result)), _failing(result)


def test_claim_catches_the_cap_ignored_in_the_batch_count(monkeypatch):
    original = cost_module.expected_gen_batches
    monkeypatch.setattr(cost_module, "expected_gen_batches",
                        lambda r, B, b, K: original(r, B, b, 0))
    failing = _failing(_run())
    assert any("E min(N, K)" in name for name in failing)
    assert any("P(verl raises)" in name for name in failing)


def test_claim_catches_the_bias_computed_as_if_nothing_were_filtered(monkeypatch):
    original = ds_module.filtered_batch_moments

    def unfiltered_bias(moments, advantage, group_size, batch_size, keep_rule=None):
        out = original(moments, advantage, group_size, batch_size, keep_rule)
        mean = out.keep_prob * out.prompt_weight  # f(x) c(x): the unfiltered group's mean
        f, gram = moments.prompt_prob, moments.grad_gram
        bias_sq = float(mean @ gram @ mean - 2.0 * mean @ gram @ f + moments.grad_norm_sq)
        return dataclasses.replace(out, bias_sq=bias_sq)

    monkeypatch.setattr(ds_module, "filtered_batch_moments", unfiltered_bias)
    failing = _failing(_run())
    assert sum("squared bias" in name for name in failing) == len(CASES), failing


def test_claim_catches_a_budget_search_without_whole_generation_batches(monkeypatch):
    """The cost ``G B / r`` of kept groups arriving one by one affords too large a batch."""

    def one_by_one(r, G, budget, multiple):
        B = math.floor(budget * r / G)
        return (B, G * B / r) if B else (0, math.inf)

    monkeypatch.setattr(ds_module, "_largest_batch", one_by_one)
    failing = _failing(_run())
    assert any("equals the brute force's" in name for name in failing), failing


# ------------------------------------------------------------------------- squared_mean_norm
def _enumerated_mean(estimator, support, prob, n):
    """``E estimator(sample)`` over every ordered sample of ``n`` draws from ``support``."""
    total = 0.0
    for idx in itertools.product(range(len(support)), repeat=n):
        total += np.prod(prob[list(idx)]) * estimator(support[list(idx)])
    return total


def test_squared_mean_norm_is_unbiased_by_enumeration():
    support = np.array([[1.0, 0.0], [-0.5, 2.0], [0.0, -1.0]])  # (3, d)
    prob = np.array([0.5, 0.3, 0.2])
    mu = prob @ support
    for n in (2, 3, 4):
        mean = _enumerated_mean(lambda s: squared_mean_norm(s)[0], support, prob, n)
        assert mean == pytest.approx(mu @ mu, rel=1e-12)
        # negative control: the squared norm of the sample mean is biased by tr(Sigma)/n
        naive = _enumerated_mean(lambda s: float(np.sum(s.mean(axis=0) ** 2)), support, prob, n)
        trace = float(prob @ np.sum((support - mu) ** 2, axis=1))
        assert naive == pytest.approx(mu @ mu + trace / n, rel=1e-12)
        assert abs(naive - mu @ mu) > 0.1


#: A three-point law of the errors with a mean far from 0 relative to its noise at these n.
SUPPORT, SUPPORT_PROB = np.array([[1.0, 0.0], [-0.5, 2.0], [0.0, -1.0]]), np.full(3, 1 / 3)


def _exact_se(n):
    from ustat_rl.stats.ustatistics import ustat_variance

    mu = SUPPORT_PROB @ SUPPORT
    second = (SUPPORT * SUPPORT_PROB[:, None]).T @ SUPPORT  # (d, d) E[e e^T]
    zeta1 = float(SUPPORT_PROB @ (SUPPORT @ mu) ** 2 - (mu @ mu) ** 2)
    zeta2 = float(np.sum(second * second) - (mu @ mu) ** 2)
    return math.sqrt(ustat_variance(zeta1, zeta2, n)), float(mu @ mu)


def test_squared_mean_norm_error_is_the_exact_one_at_large_n():
    """At n = 20,000 the plug-in standard error is within 15% of the exact one (over 300 seeds
    its ratio to the exact one had mean 1.002 and sd 0.031, so 15% is about 5 sd); the error
    without the Hoeffding factor 2, sd(<e, mean e>)/sqrt(n), is rejected by the same bound."""
    n = 20_000
    exact, _ = _exact_se(n)
    sample = SUPPORT[np.random.default_rng(5).choice(3, size=n, p=SUPPORT_PROB)]
    _, se = squared_mean_norm(sample)
    assert se == pytest.approx(exact, rel=0.15)
    without_factor = float(np.std(sample @ sample.mean(axis=0), ddof=1)) / math.sqrt(n)
    assert without_factor != pytest.approx(exact, rel=0.15)


def test_squared_mean_norm_z_is_calibrated():
    """Over 400 data sets of n = 500, ``|z| > 2`` is seen about as often as for a normal z
    (4.55%, 18.2 expected, binomial sd 4.2): the count must lie within 4.5 sd of 18.2 (the
    normal approximation's two-sided 6.8e-6; at n = 500 the U-statistic is close to normal, 300
    data sets gave a z sd of 0.93). Negative control: the standard error halved, rejected."""
    n, sets = 500, 400
    _, truth = _exact_se(n)
    rng = np.random.default_rng(11)
    z = np.empty(sets)
    for k in range(sets):
        estimate, se = squared_mean_norm(SUPPORT[rng.choice(3, size=n, p=SUPPORT_PROB)])
        z[k] = (estimate - truth) / se
    expected = sets * 0.0455
    spread = Z_STRICT * math.sqrt(sets * 0.0455 * (1 - 0.0455))
    assert abs(np.sum(np.abs(z) > 2) - expected) <= spread
    assert abs(np.sum(np.abs(2 * z) > 2) - expected) > spread


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((1, 2)), np.full((3, 2), np.nan)])
def test_squared_mean_norm_names_its_parameter(bad):
    with pytest.raises(ValueError, match="`errors`"):
        squared_mean_norm(bad)


# ------------------------------------------------------------------------- known_value_bandit
def test_known_value_bandit_has_the_values_it_is_given():
    values = [0.02, 0.3, 0.5, 0.98]
    bandit = known_value_bandit(values, [0.4, 0.1, 0.1, 0.4])
    assert np.allclose(bandit.value, values, rtol=1e-12, atol=0)
    assert np.allclose(bandit.prompt_prob, [0.4, 0.1, 0.1, 0.4])
    # right, wrong and a coin, each drawn with positive probability: a success has two answers
    assert np.array_equal(bandit.reward_prob, np.tile([1.0, 0.0, 0.5], (4, 1)))
    assert np.all(bandit.policy > 0)


@pytest.mark.parametrize("bad", [[0.0], [1.0], [], [[0.5]], [np.nan], [0.5, 1.2]])
def test_known_value_bandit_names_its_parameter(bad):
    with pytest.raises(ValueError, match="`values`"):
        known_value_bandit(bad)


@pytest.mark.parametrize("name", ["ustat_rl.claims.beyond_frameworks.dynamic_sampling",
                                  "ustat_rl.policies.examples"])
def test_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
