"""C52, multi-reward rules in ``verify``: it passes on the code as it is and fails on planted bugs.

Each planted bug is monkeypatched (nothing changes on disk) and is a kind a multi-reward
implementation can have: the multinomial coefficient of a group's counts dropped, the large-batch
spread taken as a root second moment (the mean not subtracted), the per-channel normalisation
dropped (the raw rewards summed), the two orders swapped, a Monte Carlo sampler that draws the
channels without looking at the action, and Theorem 3's correlation taken with a unit diagonal.
The claim's Monte Carlo comparisons are at ``Z_CHECK = 4`` (6.3e-5 each, five of them). Seeds are
fixed for reproducibility, not chosen.
"""

import math
from dataclasses import replace

import numpy as np
import pytest
from script_loader import load_script

import ustat_rl.montecarlo.multichannel as mc_module
import ustat_rl.theory.multichannel as theory_module
import ustat_rl.theory.sample_correlation as correlation_module
from ustat_rl.advantages.multichannel import MULTI_CHANNEL_RULES, MultiChannelRule
from ustat_rl.advantages.registry import get_rule
from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.tolerances import CLAIM_BUDGET, FALSE_FAILURE_TWO_SIDED, Z_CHECK

pytestmark = pytest.mark.integration  # whole claim C52 with planted bugs

calibration = load_script("benchmarks/calibration.py", "calibration_script_c52")


def _run(seed=0):
    return run_claim(registry()["C52"], VerifyContext(seed=seed, quick=True))


def _failing(result):
    assert result.verdict == "fail", (result.verdict, result.error)
    return [c.name for c in result.checks if c.required and not c.passed]


def test_claim_passes_and_states_its_rate():
    result = _run()
    assert result.verdict == "pass", ([c.name for c in result.checks if not c.passed],
                                      result.error)
    assert result.statement.startswith("Beyond the paper:")
    rates = [calibration.stated_rate(c.note, c.evidence) for c in result.checks]
    monte_carlo = [r for r, c in zip(rates, result.checks) if c.evidence == "monte-carlo"]
    assert len(monte_carlo) == 6
    stated = [r for r in monte_carlo if not math.isnan(r)]
    assert len(stated) == 5
    assert all(r == pytest.approx(FALSE_FAILURE_TWO_SIDED, rel=0.05) for r in stated)
    # the negative control states no rate and is far past its threshold
    control = [c for c, r in zip(result.checks, rates) if math.isnan(r)]
    assert len(control) == 1 and control[0].passed and control[0].measured > 2 * Z_CHECK
    assert 0 < np.nansum(rates) <= CLAIM_BUDGET


def test_claim_catches_the_multinomial_coefficient_dropped(monkeypatch):
    original = theory_module.composition_pmf

    def no_coefficient(counts, outcome_prob):
        G = np.asarray(counts)[0].sum()
        from scipy.special import gammaln

        scale = np.exp(gammaln(G + 1) - gammaln(np.asarray(counts) + 1.0).sum(axis=1))
        return original(counts, outcome_prob) / scale

    monkeypatch.setattr(theory_module, "composition_pmf", no_coefficient)
    failing = _failing(_run())
    assert any("equal enumeration" in n for n in failing), failing
    assert any("Monte Carlo" in n for n in failing), failing


def test_claim_catches_the_batch_spread_without_its_mean(monkeypatch):
    original = theory_module.limit_constants

    def root_second_moment(moments, rule, group_size, weights=None):
        centre, spread = original(moments, rule, group_size, weights)
        return centre, math.sqrt(spread**2 + 0.25)  # as if E[c]^2 = 1/4 were not subtracted

    monkeypatch.setattr(theory_module, "limit_constants", root_second_moment)
    failing = _failing(_run())
    assert any(n.startswith("trl_normalize_then_sum: exact mean") for n in failing), failing


def test_claim_catches_the_per_channel_normalisation_dropped(monkeypatch):
    def raw_sum(self, rows, weights):
        return np.asarray(rows, dtype=np.float64) @ weights

    monkeypatch.setattr(MultiChannelRule, "combined_grouped", raw_sum)
    failing = _failing(_run())
    assert any("single-reward trl_group factor" in n for n in failing), failing


def test_claim_catches_the_orders_swapped(monkeypatch):
    """normalize_then_sum that only centres each channel and normalises after the sum: the
    sum-then-normalise order under its name (centring is linear, so the sum is centred)."""
    swapped = replace(MULTI_CHANNEL_RULES["trl_normalize_then_sum"], channel=get_rule("trl_none"))
    monkeypatch.setitem(MULTI_CHANNEL_RULES, "trl_normalize_then_sum", swapped)
    failing = _failing(_run())
    assert any("single-reward trl_group factor" in n for n in failing), failing
    assert any("lower best-step MSE" in n for n in failing), failing


def test_claim_catches_a_sampler_that_ignores_the_action(monkeypatch):
    original = mc_module._numba_sampler

    class Marginal:
        def __init__(self, bandit):
            self.__dict__.update(bandit.__dict__)
            q = np.einsum("xa,xao->xo", bandit.policy, bandit.outcome_prob)
            self.outcome_prob = np.repeat(q[:, None, :], bandit.n_actions, axis=1)

    monkeypatch.setattr(mc_module, "_numba_sampler",
                        lambda bandit, fixed: original(Marginal(bandit), fixed))
    failing = _failing(_run())
    assert any("Monte Carlo" in n for n in failing), failing


def test_claim_catches_theorem3_with_a_unit_diagonal(monkeypatch):
    original = correlation_module.expected_sample_correlation

    def unit(moments, group_size, *, unit_diagonal=False):
        return original(moments, group_size, unit_diagonal=True)

    monkeypatch.setattr(correlation_module, "expected_sample_correlation", unit)
    failing = _failing(_run())
    assert any("harness's C_hat" in n for n in failing), failing


def test_c52_pilot_passes_and_fails_with_the_cross_prompt_terms_summed_per_coordinate(monkeypatch):
    """The bug C52.pilot found: across prompts the estimate summed each mean's coordinates and
    multiplied the sums (einsum "xod,ype") instead of taking inner products."""
    import ustat_rl.pilot.channels as channels

    claim = registry()["C52.pilot"]
    assert run_claim(claim, VerifyContext()).verdict == "pass"
    real = channels.estimate_channel_moments

    def planted(prompt_id, z, score):
        m = real(prompt_id, z, score)
        ids = list(dict.fromkeys(int(i) for i in prompt_id))
        outcome = (np.asarray(z) @ (2 ** np.arange(np.shape(z)[1]))).astype(int)
        O = m.outcome_prob.shape[1]
        sums = np.array([np.eye(O)[outcome[np.asarray(prompt_id) == x]].T
                         @ np.asarray(score)[np.asarray(prompt_id) == x]
                         / np.sum(np.asarray(prompt_id) == x) for x in ids]).sum(axis=2)
        gram = m.mean_gram.copy()
        for a in range(len(ids)):
            for b in range(len(ids)):
                if a != b:
                    gram[a, :, b, :] = np.outer(sums[a], sums[b])
        return replace(m, mean_gram=gram)

    monkeypatch.setattr(channels, "estimate_channel_moments", planted)
    result = run_claim(claim, VerifyContext())
    assert result.verdict == "fail" and "nu_o" in result.headline


@pytest.mark.parametrize("name, planted", [
    ("mean_factor", property(lambda self: self.mean_projection / self.mean_norm_sq)),
    ("mean_cosine", property(lambda self: self.mean_projection
                             / (self.mean_norm_sq * self.target_norm_sq))),
])
def test_c52_fails_with_the_mean_direction_misread(monkeypatch, name, planted):
    """The mean's factor taken against ||E g_hat||^2 instead of ||t||^2, and the cosine without
    its square root: C52's direction check turns."""
    monkeypatch.setattr(theory_module.MultiChannelMoments, name, planted)
    result = run_claim(registry()["C52"], VerifyContext())
    assert result.verdict == "fail" and "mean_factor" in result.headline
