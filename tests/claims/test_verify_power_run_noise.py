"""C53 and C48 catch bugs in the monitor's estimates at the run's G (docs/theory.md C53).

Each bug is planted with monkeypatch in the route the monitor uses
(:func:`ustat_rl.frameworks.window.window_noise` and what it calls), and each turns a verdict:
the run's rule read as the paper's GRPO rule, the bias's target taken from the rule itself, the
step's variance not divided by B, a multi-reward order read as the single rule on the combined
reward, and an interval whose standard error is halved.
"""

from __future__ import annotations

import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim

pytestmark = pytest.mark.integration  # whole claims C53, C48 with planted bugs


def _run(claim_id, seed=0):
    return run_claim(registry()[claim_id], VerifyContext(seed=seed, quick=True))


def _failing(result):
    return [c.name for c in result.checks if c.required and not c.passed]


@pytest.mark.parametrize("claim_id", ["C53", "C48"])
def test_the_claims_pass_on_the_code_as_it_is(claim_id):
    result = _run(claim_id)
    assert result.verdict == "pass", (_failing(result), result.error)


def test_catches_the_run_rule_read_as_grpo(monkeypatch):
    from ustat_rl.frameworks import window

    original = window.run_advantages
    monkeypatch.setattr(window, "run_advantages",
                        lambda batch, rule, weights=None: original(batch, None))
    failing = _failing(_run("C53"))
    assert "trl_group: mean variance estimate = exact at G = 4, B = 16" in failing


def test_catches_the_bias_taken_against_the_rule_itself(monkeypatch):
    from ustat_rl.frameworks import window
    from ustat_rl.pilot import run_noise as module

    original = module.run_noise
    monkeypatch.setattr(window, "run_noise", lambda terms, target, *a, **k: original(
        terms, terms, *a, **k))  # no squared bias: the MSE reads as the variance
    failing = _failing(_run("C53"))
    assert "trl_group: mean MSE estimate = exact at G = 4, B = 16" in failing
    assert not any("variance estimate" in name for name in failing if "trl_group" in name)


def test_catches_the_variance_of_one_group_for_the_step(monkeypatch):
    from ustat_rl.frameworks import window
    from ustat_rl.pilot import run_noise as module

    original = module.run_noise
    monkeypatch.setattr(window, "run_noise", lambda terms, target, batch_size, *a, **k:
                        original(terms, target, 1, *a, **k))
    assert "grpo: mean variance estimate = exact at G = 4, B = 16" in _failing(_run("C53"))


def test_catches_a_multi_reward_order_read_as_the_single_rule(monkeypatch):
    from ustat_rl.frameworks import window

    original = window.run_advantages

    def combined_only(batch, rule, weights=None):
        if rule == "trl_normalize_then_sum":  # the channels ignored
            return original(batch, "trl_group")
        return original(batch, rule, weights)

    monkeypatch.setattr(window, "run_advantages", combined_only)
    failing = _failing(_run("C53"))
    assert any(name.startswith("trl_normalize_then_sum") for name in failing)
    assert not any(name.startswith("trl_sum_then_normalize") for name in failing)


def test_catches_an_interval_too_narrow(monkeypatch):
    from ustat_rl.pilot import run_noise as module

    original = module._interval

    def narrow(parts, level, n_groups, floor=0.0):
        estimate, prompt_var, sketch_var, units = parts
        return original((estimate, prompt_var / 6.0, sketch_var, units), level, n_groups, floor)

    monkeypatch.setattr(module, "_interval", narrow)
    failing = _failing(_run("C53"))
    assert any("interval of the variance covers" in name for name in failing)


def test_window_claim_catches_the_record_taking_another_rules_noise(monkeypatch):
    from ustat_rl.frameworks import window

    original = window.window_noise
    monkeypatch.setattr(window, "window_noise", lambda batches, rule, *a, **k: original(
        batches, "trl_group", *a, **k))
    assert any("pairwise definitions" in name for name in _failing(_run("C48")))
