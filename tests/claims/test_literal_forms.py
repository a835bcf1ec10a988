"""The frameworks' formulas written out for C46 (``ustat_rl.claims.literal_forms``), checked three ways.

1. Each literal form conforms to its registered rule under the conformance kit's own search
   (hypothesis's batches, not only the claim's fixed ones), in the framework's call signature.
2. Where the framework's own function is in tests/data (verl's GRPO, Pass@k, GPG and
   REINFORCE++ at 1dda039b, OpenRLHF's REINFORCE at 3c3be623, prime-rl's MaxRL at 559b4477), the
   literal form returns what that function returns on the claim's batches passed in float64
   (rtol 1e-9: the same formula in the same precision, summed in another order; twice the
   kit's float32 bound for the two that compute in float32 whatever they are passed).
3. AReaL's two-stage ``Normalization`` (float32, rtol 1e-5), verl's ``opo`` with ragged
   lengths and ROLL's ``reward_norm`` with its batch option (float64, rtol 1e-12) on shuffled
   batches, the frameworks' code called as their trainers call it (tests/framework_calls.py).

Negative control: a literal form run against a neighbouring rule does not conform. All checks
are deterministic (hypothesis derandomized, batches from fixed seeds): no false-failure rate.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from framework_calls import areal_normalization, roll_reward_norm
from script_loader import load_data

from ustat_rl.advantages import get_rule
from ustat_rl.advantages.conventions import CONVENTION_NAMES
from ustat_rl.claims.beyond_frameworks.conventions import kit_batches
from ustat_rl.claims.literal_forms import LITERAL_FORMS
from ustat_rl.conformance.adapters import adapt
from ustat_rl.conformance.kit import check_conformance, tolerance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.fast


def test_every_convention_has_a_literal_form():
    assert set(CONVENTION_NAMES) <= set(LITERAL_FORMS)


@pytest.mark.parametrize("name", sorted(LITERAL_FORMS))
def test_literal_form_conforms_under_the_kits_search(name):
    form = LITERAL_FORMS[name]
    report = check_conformance(form.fn, name, signature=form.signature,
                               search=Search(max_examples=60))
    assert report.passed, report.summary()


@pytest.mark.parametrize("form_name, other", [("trl_group", "trl_batch"),
                                              ("verl_grpo", "verl_grpo_nostd"),
                                              ("verl_rloo", "verl_rloo_vectorized"),
                                              ("nemo_rl_grpo", "paper_algorithm2")])
def test_literal_form_does_not_conform_to_a_neighbouring_rule(form_name, other):
    form = LITERAL_FORMS[form_name]
    report = check_conformance(form.fn, other, signature=form.signature,
                               search=Search(max_examples=60, shrink=False))
    assert not report.passed


def _frameworks():
    verl = load_data("verl_core_algos_1dda039b")
    openrlhf = load_data("openrlhf_experience_maker_3c3be623")
    prime = load_data("prime_rl_max_rl_559b4477")

    def grpo(norm):
        return lambda t, m, i: verl.compute_grpo_outcome_advantage(
            t, m, i, norm_adv_by_std_in_grpo=norm)

    def passk(norm):
        return lambda t, m, i: verl.compute_grpo_passk_outcome_advantage(
            t, m, i, config={"norm_adv_by_std_in_grpo": norm})

    return {
        "verl_grpo": (grpo(True), "verl"),
        "verl_grpo_nostd": (grpo(False), "verl"),
        "verl_grpo_passk": (passk(True), "verl"),
        "verl_grpo_passk_nostd": (passk(False), "verl"),
        "verl_gpg": (lambda t, m, i: verl.compute_gpg_outcome_advantage(t, m, i), "verl"),
        "verl_reinforce_pp": (lambda t, m, i: verl.compute_reinforce_plus_plus_outcome_advantage(
            t, m, index=i, config=SimpleNamespace(gamma=1.0)), "verl"),
        "openrlhf_reinforce": (lambda z, n: openrlhf.reinforce(torch.as_tensor(z), n), "trl"),
        "prime_rl_max_rl": (prime.max_rl, "plain"),
    }


@pytest.mark.parametrize("name", sorted(_frameworks()))
def test_literal_form_returns_what_the_frameworks_own_function_returns(name):
    fn, signature = _frameworks()[name]
    form = LITERAL_FORMS[name]
    assert form.signature == signature
    rule = get_rule(name)
    tokens = 1 if rule.scale == "whiten" else 4
    own = adapt(fn, signature, "torch" if signature == "verl" else "numpy", tokens=tokens)
    ours = adapt(form.fn, signature, "numpy", tokens=tokens)
    compared = 0
    for z, ids in kit_batches(rule, contiguous=signature == "trl", count=24, seed=5):
        z = z.astype(np.float64)
        theirs, got = own(z, ids).astype(np.float64), ours(z, ids)
        if rule.working_precision == "the rewards' dtype":
            np.testing.assert_allclose(got, theirs, rtol=1e-9,
                                       atol=1e-9 * max(1.0, np.abs(theirs).max()))
        else:  # a float32 computation (.float(), float32 tensors): twice the kit's bound
            bound = tolerance(rule, z, ids, np.float32)
            assert np.all(np.abs(got - theirs) <= 2 * bound), (z, ids, got, theirs)
        compared += 1
    assert compared == 24


def test_literal_form_returns_what_areals_own_class_returns():
    """C46's literal form (ustat_rl.claims.literal_forms) against AReaL's own two stages
    on shuffled batches: AReaL returns float32, so rtol 1e-5 with atol 1e-6; negative control:
    AReaL with the population std in its second stage is outside that tolerance."""
    form = LITERAL_FORMS["areal_grpo"].fn
    rng = np.random.default_rng(387)
    for size in (1, 3, 6):
        ids = rng.permutation(np.repeat(np.arange(4), size))
        z = rng.normal(size=ids.size)
        np.testing.assert_allclose(form(z, ids), areal_normalization()(z, ids), rtol=1e-5, atol=1e-6)
    wrong = areal_normalization(adv_norm={"std_unbiased": False})(z, ids)
    assert not np.allclose(form(z, ids), wrong, rtol=1e-5, atol=1e-6)


def test_literal_forms_return_what_the_frameworks_own_functions_return():
    """C46's literal forms (ustat_rl.claims.literal_forms) against verl's and ROLL's own
    functions in float64, rtol 1e-12 with atol 1e-14 (two float64 routes through the same
    arithmetic, to rounding): opo with ragged lengths too (its length weighting, as
    docs/conventions.md states it), ROLL's batch option; negative control: opo's form without
    the lengths misses verl's ragged result."""
    verl = load_data("verl_opo_remax_1dda039b")
    opo, roll = LITERAL_FORMS["verl_opo"].fn, LITERAL_FORMS["roll_batch"].fn
    rng = np.random.default_rng(380)
    for _ in range(5):
        ids = rng.integers(0, 4, size=11)
        z = rng.normal(size=11)
        T = rng.integers(1, 6, size=11)
        mask = (np.arange(5)[None, :] < T[:, None]).astype(np.float64)
        token = np.zeros((11, 5))
        token[np.arange(11), T - 1] = z
        theirs, _ = verl.compute_opo_outcome_advantage(torch.as_tensor(token),
                                                       torch.as_tensor(mask), ids)
        np.testing.assert_allclose(opo(z, ids, lengths=T), theirs.numpy()[:, 0], rtol=1e-12,
                                   atol=1e-14)
        assert not np.allclose(opo(z, ids), theirs.numpy()[:, 0], rtol=1e-6)
        own = roll_reward_norm("batch")(z, ids)
        np.testing.assert_allclose(roll(z, ids), own, rtol=1e-12, atol=1e-14)
