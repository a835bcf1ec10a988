"""C51, dynamic sampling in ``verify``: it passes on the code as it is and fails on planted bugs.

Each planted bug is monkeypatched (nothing changes on disk) and is a kind a dynamic-sampling
implementation can have: one outcome of the all-equal probability ``p^G + (1 - p)^G`` dropped,
the cap ``max_num_gen_batches`` ignored in the expected batch count, the bias computed as if
nothing were filtered, and the budget search counting ``G B / r`` rollouts (kept groups arriving
one by one) instead of whole generation batches. The claim's own statistics are at
``Z_STRICT = 4.5`` (6.8e-6 per comparison); the estimator of the squared bias,
``ustat_rl.stats.ustatistics.squared_mean_norm``, is tests/stats/test_ustatistics.py's. Seeds are fixed for reproducibility, not chosen.
"""

import dataclasses
import math

import numpy as np
import pytest
from script_loader import load_script

import ustat_rl.theory.dynamic_sampling as ds_module
import ustat_rl.theory.dynamic_sampling_cost as cost_module
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_frameworks.dynamic_sampling import CASES
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

    def keep(value, G, mask=None):  # the claim runs verl's filter, the default
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

    def unfiltered_bias(moments, advantage, group_size, batch_size, group_filter=None):
        out = original(moments, advantage, group_size, batch_size, group_filter)
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


@pytest.mark.parametrize("name", ["ustat_rl.stats.ustatistics", "ustat_rl.policies.examples"])
def test_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
