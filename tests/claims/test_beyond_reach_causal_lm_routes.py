"""C80 (ustat_rl.claims.beyond_reach.causal_lm_routes): a causal LM's pilot on every route. The
claim passes on the code as it is; planted bugs of the sampler, the log-probability, each
sketched route, the exact fallback projector and a projection's scale turn it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ustat_rl.scores.causal_lm as causal_lm
import ustat_rl.scores.forward_sketch as forward_sketch
import ustat_rl.scores.projectors as projectors
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_reach import causal_lm_routes as c80

pytestmark = pytest.mark.integration


def run():
    return run_claim(registry()["C80"], VerifyContext())


def failed(result) -> list[str]:
    return [c.name for c in result.checks if not c.passed]


def test_the_gate_takes_the_exact_fallback_and_the_probabilities_sum_to_one():
    from ustat_rl.scores.coverage import parameter_coverage

    model = c80.gated_lm()
    assert parameter_coverage(model)["gate.weight"] == "module"
    probs = c80.answer_probabilities(model, c80.PROMPTS[1], c80.TEMPERATURE)
    assert len(probs) == 73 and abs(sum(probs.values()) - 1.0) < 1e-12


def test_the_pooled_chi_square_accepts_its_own_law_and_refuses_an_answer_outside_it():
    probs = {(0, 0): 0.5, (0, 1): 0.3, (8, None): 0.2}
    exact = {key: int(1000 * p) for key, p in probs.items()}
    assert c80.gof_pvalue(exact, probs) > 0.99
    assert c80.gof_pvalue({(0, 0): 500, (0, 1): 200, (8, None): 300}, probs) < 1e-10
    assert np.isnan(c80.gof_pvalue({(5, 5): 1}, probs))


def test_the_claim_passes():
    result = run()
    assert result.verdict == "pass", failed(result)


def test_a_sampler_that_ignores_the_temperature_fails(monkeypatch):
    real = causal_lm.sample_answers

    def planted(model, prompt_ids, sampling, generator):
        from dataclasses import replace

        return real(model, prompt_ids, replace(sampling, temperature=1.0), generator)

    monkeypatch.setattr(causal_lm, "sample_answers", planted)
    result = run()
    assert result.verdict == "fail" and any("sample_answers" in n for n in failed(result))


def test_a_log_probability_without_the_temperature_fails(monkeypatch):
    real = causal_lm.sequence_log_probs

    def planted(model, tokens, target, temperature=1.0, params=None):
        return real(model, tokens, target, 1.0, params)

    monkeypatch.setattr(causal_lm, "sequence_log_probs", planted)
    names = failed(run())
    assert any("causal_lm_log_prob" in n for n in names)
    assert any(n.startswith("full route: scores") for n in names)


def test_a_dense_route_that_loses_a_percent_fails(monkeypatch):
    real = causal_lm.sketch_scores
    monkeypatch.setattr(causal_lm, "sketch_scores", lambda *a, **k: 0.99 * real(*a, **k))
    names = failed(run())
    assert names and all(n.startswith("dense route") for n in names)


def test_a_fallback_projector_that_keeps_only_the_first_sample_fails(monkeypatch):
    real = projectors.Module.gradient

    def planted(sk, module, own, values, args, kwargs, grad):
        keep = torch.zeros_like(grad)
        keep[:1] = grad[:1]
        return real(sk, module, own, values, args, kwargs, keep)

    monkeypatch.setattr(projectors.Module, "gradient", staticmethod(planted))
    names = failed(run())
    assert names and all(n.startswith("factored route") for n in names)


def test_jvp_directions_ten_percent_too_long_fail_the_law(monkeypatch):
    real = forward_sketch._directions

    def planted(params, k, seed, kind):
        for tangent in real(params, k, seed, kind):
            yield {name: 1.1 * t for name, t in tangent.items()}

    monkeypatch.setattr(forward_sketch, "_directions", planted)
    names = failed(run())
    # the sketch and its materialised matrix stay consistent; the law sees the scale
    assert names and all(n.startswith("jvp_projection_matrix") for n in names)
