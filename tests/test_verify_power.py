"""The verify checks that target bugs the theorem checks miss, each with a planted bug it catches.

Every planted bug below is a kind the issue lists: a Monte Carlo stream shared across blocks, an
enumeration that drops an outcome, a ``ppf`` returning the other tail, the leave-one-out helper
with Eq. (4)'s printed index, and a conformance generator that has lost its ties and all-equal
groups. Each claim passes on the code as it is and fails with the bug planted (monkeypatched,
so nothing is changed on disk).
"""

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, checks_power, registry, run_claim


def _run(claim_id, seed=0):
    return run_claim(registry()[claim_id], VerifyContext(seed=seed, quick=True))


def _failing(result):
    return [c.name for c in result.checks if c.required and not c.passed]


@pytest.mark.parametrize("claim_id", ["C6.engine", "C1.loo", "C20.inv", "C3.enum", "C2.kit"])
def test_power_claims_pass_on_the_code_as_it_is(claim_id):
    result = _run(claim_id)
    assert result.verdict == "pass", (_failing(result), result.error)


def test_monte_carlo_engine_claim_catches_a_stream_shared_across_blocks(monkeypatch):
    from ustat_rl.montecarlo import engine
    from ustat_rl.seeding import child_seed

    monkeypatch.setattr(engine, "block_seed", lambda seed, block: child_seed(seed, 0))
    result = _run("C6.engine")
    assert result.verdict == "fail"
    assert any("distinct replicates" in name for name in _failing(result))


def test_monte_carlo_engine_claim_catches_a_worker_dependent_result(monkeypatch):
    from ustat_rl.montecarlo import engine

    original = engine.run_monte_carlo

    def by_workers(statistic, n_reps, seed, *, n_jobs=1, **kw):  # seeds depend on n_jobs
        seed = seed.spawn(1)[0] if n_jobs > 1 else seed
        return original(statistic, n_reps, seed, n_jobs=n_jobs, **kw)

    monkeypatch.setattr(checks_power, "run_monte_carlo", by_workers)
    assert "numba: n_jobs = 2 gives the n_jobs = 1 means" in _failing(_run("C6.engine"))


def test_loo_claim_catches_the_printed_index_of_eq4(monkeypatch):

    def printed(reward):  # Eq. (4) as printed: Z^{(b,g)} inside the sum
        reward = np.asarray(reward, dtype=float)
        return reward * (reward.shape[-1] - 1) / (reward.shape[-1] - 1)

    monkeypatch.setattr(checks_power, "leave_one_out_baseline", printed)
    assert _run("C1.loo").verdict == "fail"


def test_weighted_chi2_claim_catches_a_ppf_returning_the_other_tail(monkeypatch):
    from ustat_rl.weighted_chi2 import WeightedChiSquare

    monkeypatch.setattr(WeightedChiSquare, "ppf", lambda self, q, *a, **k: self.isf(q))
    result = _run("C20.inv")
    assert result.verdict == "fail"
    assert all("ppf" in name for name in _failing(result))


def test_enumeration_claim_catches_a_dropped_outcome(monkeypatch):
    from ustat_rl.policies.softmax import SoftmaxBandit

    original = SoftmaxBandit.enumerate_groups

    def drops_one(self, prompt, group_size):  # loses the likeliest outcome
        action, reward, prob = original(self, prompt, group_size)
        keep = np.arange(prob.size) != np.argmax(prob)
        return action[keep], reward[keep], prob[keep]

    monkeypatch.setattr(SoftmaxBandit, "enumerate_groups", drops_one)
    result = _run("C3.enum")
    assert result.verdict == "fail"
    assert len(_failing(result)) == 3  # two softmax enumerations and the tabular log-linear one
    # (an outcome rarer than the 1e-12 rounding tolerance could be lost unseen)


def test_kit_claim_catches_a_generator_without_all_equal_groups(monkeypatch):
    from ustat_rl import conformance

    # the all-equal, ties and near-tie kinds lost; random and binary groups remain
    monkeypatch.setattr(conformance, "_KINDS", ("random", "binary"))
    result = _run("C2.kit")
    assert result.verdict == "fail"
    assert any("all-equal" in name for name in _failing(result))


def test_kit_claim_catches_a_broken_aggregation(monkeypatch):
    from ustat_rl import aggregation

    original = aggregation.aggregation_weights

    def token_mean_per_sequence(lengths, mode, horizon=None):
        if mode == "token-mean":  # divides by each sequence's length instead of the batch's
            return original(lengths, "seq-mean-token-mean")
        return original(lengths, mode, horizon)

    monkeypatch.setattr(aggregation, "aggregation_weights", token_mean_per_sequence)
    assert "aggregation token-mean: token-by-token == sum_i c_i A_i W_i" in _failing(
        _run("C2.kit"))


@pytest.mark.parametrize("claim_id", ["C1.loo", "C6.engine"])  # C20.inv draws nothing
def test_power_claims_pass_at_other_seeds(claim_id):
    for seed in (1, 2):
        result = _run(claim_id, seed)
        assert result.verdict == "pass", (seed, _failing(result), result.error)
