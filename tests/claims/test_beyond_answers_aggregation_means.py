"""C78 (ustat_rl.claims.beyond_answers.aggregation_means): exact_aggregation_mean against every
group of outputs. The claim passes on the code as it is; its written-out weights are the
documented reductions; planted bugs of the closed form turn it."""

from __future__ import annotations

import numpy as np
import pytest

import ustat_rl.frameworks.aggregation as aggregation
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.beyond_answers import aggregation_means as c78

pytestmark = pytest.mark.fast


def run():
    return run_claim(registry()["C78"], VerifyContext())


def test_the_claim_passes():
    result = run()
    assert result.verdict == "pass", [c.name for c in result.checks if not c.passed]


@pytest.mark.parametrize("mode", aggregation.AGGREGATIONS)
def test_the_written_weights_are_the_documented_reductions(mode):
    T = np.array([[1, 4, 2], [3, 3, 1], [2, 4, 4]])
    np.testing.assert_allclose(c78.written_weights(T.astype(float), mode),
                               aggregation.aggregation_weights(T, mode, horizon=c78.HORIZON),
                               rtol=1e-12)


def test_the_other_draws_length_pmf_shifted_by_a_token_fails(monkeypatch):
    real = aggregation._sum_pmf
    monkeypatch.setattr(aggregation, "_sum_pmf", lambda q, n: np.concatenate([[0.0], real(q, n)]))
    result = run()
    assert result.verdict == "fail" and "token-mean" in result.headline


def test_a_token_mean_weight_without_the_group_factor_fails(monkeypatch):
    real = aggregation.exact_aggregation_mean

    def planted(prob, reward, lengths, scores, estimator, group_size, mode, horizon=None):
        out = real(prob, reward, lengths, scores, estimator, group_size, mode, horizon)
        return out / group_size if mode == "token-mean" else out

    monkeypatch.setattr(aggregation, "exact_aggregation_mean", planted)
    result = run()
    assert result.verdict == "fail" and "token-mean" in result.headline
