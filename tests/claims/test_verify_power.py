"""The verify checks that target bugs the theorem checks miss, each with a planted bug it catches.

Every planted bug below is a kind the issue lists: a Monte Carlo stream shared across blocks, an
enumeration that drops an outcome, a ``ppf`` returning the other tail, the leave-one-out helper
with Eq. (4)'s printed index, and a conformance generator that has lost its ties and all-equal
groups. Each claim passes on the code as it is and fails with the bug planted (monkeypatched,
so nothing is changed on disk).
"""

import numpy as np
import pytest

from ustat_rl.claims import VerifyContext, registry, run_claim
from ustat_rl.claims.paper_ustatistic import lemma1, minibatch
from ustat_rl.weighted_chi2 import WeightedChiSquare

pytestmark = pytest.mark.integration  # whole claims: each power claim with a planted bug it must catch


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

    monkeypatch.setattr(minibatch, "run_monte_carlo", by_workers)
    assert "numba: n_jobs = 2 gives the n_jobs = 1 means" in _failing(_run("C6.engine"))


def test_loo_claim_catches_the_printed_index_of_eq4(monkeypatch):

    def printed(reward):  # Eq. (4) as printed: Z^{(b,g)} inside the sum
        reward = np.asarray(reward, dtype=float)
        return reward * (reward.shape[-1] - 1) / (reward.shape[-1] - 1)

    monkeypatch.setattr(lemma1, "leave_one_out_baseline", printed)
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
    from ustat_rl.conformance import kit as conformance

    # the all-equal, ties and near-tie kinds lost; random and binary groups remain
    monkeypatch.setattr(conformance, "_KINDS", ("random", "binary"))
    result = _run("C2.kit")
    assert result.verdict == "fail"
    assert any("all-equal" in name for name in _failing(result))


def test_kit_claim_catches_a_broken_aggregation(monkeypatch):
    from ustat_rl.frameworks import aggregation

    original = aggregation.aggregation_weights

    def token_mean_per_sequence(lengths, mode, horizon=None):
        if mode == "token-mean":  # divides by each sequence's length instead of the batch's
            return original(lengths, "seq-mean-token-mean")
        return original(lengths, mode, horizon)

    monkeypatch.setattr(aggregation, "aggregation_weights", token_mean_per_sequence)
    assert "aggregation token-mean: token-by-token == sum_i c_i A_i W_i" in _failing(
        _run("C2.kit"))


@pytest.mark.parametrize("factor", [3.0, 10.0])
def test_kit_claim_catches_a_loosened_tolerance(monkeypatch, factor):
    """C2.kit: the kit's tolerance a few times looser (3x: within the 4-bound margin, so only
    the comparison with the documented bound sees it; 10x: a bug 4 bounds large passes too).
    The population-std control, off by 30%, is rejected either way."""
    from ustat_rl.conformance import kit as conformance

    original = conformance.tolerance
    monkeypatch.setattr(conformance, "tolerance", lambda *a, **k: factor * original(*a, **k))
    failing = _failing(_run("C2.kit"))
    expected = ["kit tolerance, trl_group: the bound its docstring derives, 16 batches",
                "kit tolerance, trl_none: the bound its docstring derives, 16 batches"]
    if factor > 4:
        expected = [expected[0], "kit, trl_group: an implementation 4 bounds off is rejected on "
                    "every batch", expected[1], "kit, trl_none: an implementation 4 bounds off "
                    "is rejected on every batch"]
    assert failing == expected


def test_kit_claim_catches_a_coarser_working_precision(monkeypatch):
    """C2.kit: the kit taking a machine epsilon 8 times float32's (bfloat16 is 2^16 times): every
    bound grows and a bug of 4 bounds passes."""
    from ustat_rl.conformance import kit as conformance

    original = conformance._working
    monkeypatch.setattr(conformance, "_working",
                        lambda dtype: (8 * original(dtype)[0], original(dtype)[1]))
    failing = _failing(_run("C2.kit"))
    assert "kit, trl_group: an implementation 4 bounds off is rejected on every batch" in failing
    assert "kit tolerance, trl_none: the bound its docstring derives, 16 batches" in failing


def _adapter(monkeypatch, signature, wrap):
    """Plant a bug in the kit's adapter for ``signature``: the function it is handed is first
    passed through ``wrap`` (rules of the rewards alone; the reference route has its own)."""
    from ustat_rl.conformance import kit as conformance

    original = conformance.adapt

    def adapt(fn, signature_=signature, *args, **kwargs):
        planted = signature_ == signature and not kwargs.get("reference")
        return original(wrap(fn) if planted else fn, signature_, *args, **kwargs)

    monkeypatch.setattr(conformance, "adapt", adapt)


def test_kit_claim_catches_a_verl_adapter_that_masks_instead_of_checking(monkeypatch):
    """C2.kit: the verl-style adapter zeroes the padding itself, so advantages a function puts on
    padding tokens (which verl's loss would then weigh) go unseen."""
    def masking(fn):
        def call(token_level_rewards, response_mask, index):
            out = fn(token_level_rewards, response_mask, index)
            out = out[0] if isinstance(out, tuple) else out
            return np.asarray(out) * np.asarray(response_mask)
        return call

    _adapter(monkeypatch, "verl", masking)
    assert _failing(_run("C2.kit")) == ["kit, verl, advantages on the padding tokens: rejected"]


def test_kit_claim_catches_a_verl_index_that_splits_groups(monkeypatch):
    """C2.kit: the verl-style adapter's index built from positions, not groups (every response
    its own uid): a correct verl implementation is then rejected, under either index kind."""
    from ustat_rl.conformance import adapters as conformance_adapters

    monkeypatch.setattr(conformance_adapters, "_verl_index",
                        lambda ids, index: np.arange(ids.size))
    assert _failing(_run("C2.kit")) == ["kit, verl (torch, uid index), verl's GRPO: conforms",
                                        "kit, verl (torch, int index), verl's GRPO: conforms"]


def test_kit_claim_catches_a_trl_adapter_passing_the_number_of_groups(monkeypatch):
    """C2.kit: the TRL-style adapter handing ``num_generations`` the number of groups instead of
    their size."""
    _adapter(monkeypatch, "trl", lambda fn: lambda z, size: fn(z, len(z) // size))
    failing = _failing(_run("C2.kit"))
    assert "kit, trl (torch), TRL's scale_rewards='group': conforms" in failing
    assert all(name.startswith("kit, trl") for name in failing)


def test_kit_claim_catches_a_reference_route_that_passes_the_batch_mean(monkeypatch):
    """C2.kit: the reference route's adapter handing the function the batch's mean greedy
    reward instead of each sample's (one prompt's baseline leaking into another's): a correct
    remax is then rejected, in both signatures."""
    from ustat_rl.conformance import adapters as conformance_adapters

    original = conformance_adapters._adapt_reference

    def leaking(fn, signature, tensors, tokens):
        call = original(fn, signature, tensors, tokens)
        return lambda z, ids, ref: call(z, ids, np.full_like(ref, ref.mean()))

    monkeypatch.setattr(conformance_adapters, "_adapt_reference", leaking)
    assert _failing(_run("C2.kit")) == ["kit, reference route plain, z - b: conforms",
                                        "kit, reference route verl (torch), remax written out: "
                                        "conforms"]


@pytest.mark.parametrize("claim_id", ["C1.loo", "C6.engine"])  # C20.inv draws nothing
def test_power_claims_pass_at_other_seeds(claim_id):
    for seed in (1, 2):
        result = _run(claim_id, seed)
        assert result.verdict == "pass", (seed, _failing(result), result.error)


# --------------------------------------------------------------------------------------------
# Claims that run the routes users' answers come from (docs/theory.md C43-C46)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("claim_id", ["C43", "C44", "C45", "C45.trl", "C46", "C47", "C48",
                                      "C49"])
def test_route_claims_pass_on_the_code_as_it_is(claim_id):
    result = _run(claim_id)
    assert result.verdict == "pass", (_failing(result), result.error)


def test_series_claim_catches_a_series_cut_early_that_c20_inv_misses(monkeypatch):
    from ustat_rl.weighted_chi2 import _ruben

    # 1000 of the 20000 coefficients: enough for C20.inv's x = 0.5, 4, 20, not for the sf of
    # the spread-50 and spread-100 weights at 1e-12 (4500 and 8600 coefficients)
    monkeypatch.setattr(_ruben, "J_CAP", 1000)
    result = _run("C43")
    assert result.verdict == "fail"
    assert {name.split(",")[0] + "," + name.split(",")[1] for name in _failing(result)} == {
        "K=6, spread 100", "K=8, spread 50"}
    assert _run("C20.inv").verdict == "pass"  # the gap this claim closes


def _one_factor_unscaled(factored, which):
    original = factored._factors

    def unscaled(shapes, k, blocks, seed, kind):
        k_out, k_in = factored.block_factors(k // blocks)
        out = []
        for spec in original(shapes, k, blocks, seed, kind):
            if spec[0] == "matrix" and which == "A":
                spec = (spec[0], spec[1] * k_out**0.5, spec[2])
            elif spec[0] == "matrix" and which == "B":
                spec = (spec[0], spec[1], spec[2] * k_in**0.5)
            elif spec[0] == "vector" and which == "D":
                spec = (spec[0], spec[1] * k**0.5)
            out.append(spec)
        return out

    return unscaled


@pytest.mark.parametrize("which", ["A", "B", "D"])
def test_sketch_claim_catches_one_factor_unscaled(monkeypatch, which):
    from ustat_rl.scores import factored

    factored._device_factors.cache_clear()  # factors drawn before the bug must not be reused
    monkeypatch.setattr(factored, "_factors", _one_factor_unscaled(factored, which))
    try:
        result = _run("C44")
    finally:
        factored._device_factors.cache_clear()
    assert result.verdict == "fail"
    # the materialised matrix carries the same factors, so the exact identity still holds and
    # the inner products over independent blocks see the scale
    assert _failing(result) and all("averaged over" in name for name in _failing(result))


def test_sketch_claim_catches_a_block_scale_lost_in_the_hooks(monkeypatch):
    from ustat_rl.scores import _sketcher

    original = _sketcher.Sketcher.outer
    monkeypatch.setattr(_sketcher.Sketcher, "outer",
                        lambda self, left, right: original(self, left, right) * self.m**0.5)
    failing = _failing(_run("C44"))
    assert "gaussian, k = 8, 4 block(s): sketch == full scores x R^T" in failing


def test_adapter_claim_catches_group_ids_merged_across_steps(monkeypatch):
    from ustat_rl.frameworks import dumps

    original = dumps.rebuild_groups
    monkeypatch.setattr(dumps, "rebuild_groups", lambda step, key, size, contiguous: original(
        np.zeros_like(step), key, size, contiguous))  # the step dropped from the group key
    result = _run("C45")
    assert result.verdict == "fail"
    assert "verl dump (no rollout.n): a prompt drawn twice in a step is one group" in _failing(
        result)


def test_adapter_claim_catches_trl_groups_merged_across_runs(monkeypatch):
    from ustat_rl.frameworks import dumps

    original = dumps.rebuild_groups
    monkeypatch.setattr(dumps, "rebuild_groups", lambda step, key, size, contiguous: original(
        step, key, size, False))  # TRL's log read as verl's: a prompt's two draws merged
    failing = _failing(_run("C45.trl"))
    assert any(name.startswith("TRL log: contiguous runs") for name in failing)


def test_conventions_claim_catches_a_changed_epsilon(monkeypatch):
    import dataclasses

    from ustat_rl.advantages import RULES

    rule = RULES["trl_group"]
    changed = dataclasses.replace(rule, scaling=dataclasses.replace(rule.scaling, epsilon=1e-5))
    monkeypatch.setitem(RULES, "trl_group", changed)
    assert _failing(_run("C46")) == [
        "trl_group: E g_hat(x) = c(x) g(x), G = [2, 3], the advantages from huggingface/trl's "
        "formula",
        "trl_group: E||g_hat(x)||^2, G = [2, 3], the advantages from huggingface/trl's formula",
        "trl_group: the epsilon 1e-5 is the formula's",
        "trl_group: the registry's advantages are the TRL formula as written, 16 batches (trl "
        "signature)"]


def test_conventions_claim_catches_an_epsilon_changed_in_the_exact_route_only(monkeypatch):
    import dataclasses

    from ustat_rl.advantages.rule import AdvantageRule

    original = AdvantageRule.two_point_table

    def table(self, group_size, low=0.0, high=1.0):
        if self.name == "trl_group":  # the O(G) table divides by s_g + 1e-5, the rule by + 1e-4
            self = dataclasses.replace(self, scaling=dataclasses.replace(self.scaling,
                                                                         epsilon=1e-5))
        return original(self, group_size, low, high)

    monkeypatch.setattr(AdvantageRule, "two_point_table", table)
    assert set(_failing(_run("C46"))) == {
        "trl_group: E g_hat(x) = c(x) g(x), G = [2, 3, 4, 5]",
        "trl_group: E||g_hat(x)||^2, G = [2, 3, 4, 5]",
        "trl_group: E g_hat(x) = c(x) g(x), G = [2, 3], the advantages from huggingface/trl's "
        "formula",
        "trl_group: E||g_hat(x)||^2, G = [2, 3], the advantages from huggingface/trl's formula"}


@pytest.mark.parametrize("name, part, field, value", [
    ("trl_group", "scaling", "bessel", False),
    ("verl_rloo", "centring", "singleton", "zero"),
    ("nemo_rl_grpo", "scaling", "kind", "group std")])
def test_conventions_claim_catches_a_rule_that_agrees_only_with_itself(monkeypatch, name, part,
                                                                       field, value):
    """C46: a field of a registered rule changed (the population std for TRL's default, verl's
    loop RLOO giving a singleton 0 where it keeps its reward, NeMo-RL dividing by the whole
    group's std instead of the others'). The exact moments still equal the enumeration of the
    rule's own advantages and the epsilon is still its formula's: only the sides built on the
    framework's formula written out see it (the kit's batches, and the enumeration with the
    formula's advantages wherever the change shows at G = 2, 3: verl's singleton does not)."""
    import dataclasses

    from ustat_rl.advantages import RULES

    rule = RULES[name]
    changed = dataclasses.replace(rule, **{part: dataclasses.replace(getattr(rule, part),
                                                                     **{field: value})})
    monkeypatch.setitem(RULES, name, changed)
    failing = _failing(_run("C46"))
    assert {n.split(":")[0] for n in failing} == {name}, failing
    assert any(n.startswith(f"{name}: the registry's advantages are the ") for n in failing)
    assert all("formula" in n for n in failing), failing  # never the rule against itself


def test_conventions_claim_covers_a_rule_registered_at_run_time():
    import dataclasses

    from ustat_rl.advantages import RULES, register_rule, unregister_rule
    from ustat_rl.claims.beyond_frameworks.conventions import exact_rules

    rule = dataclasses.replace(RULES["verl_grpo"], name="test_only_rule")
    register_rule(rule)
    try:
        assert "test_only_rule" in [r.name for r in exact_rules()[0]]
        result = _run("C46")
        assert result.verdict == "pass"
        assert any(c.name.startswith("test_only_rule:") for c in result.checks)
    finally:
        unregister_rule("test_only_rule")


def test_sketch_claim_passes_at_other_seeds():
    for seed in (1, 2):
        result = _run("C44", seed)
        assert result.verdict == "pass", (seed, _failing(result), result.error)


def test_trainer_units_claim_catches_dapo_weighted_as_dr_grpo(monkeypatch):
    """C47: dapo's batch-token normaliser replaced by max_completion_length (dr_grpo's)."""
    from ustat_rl.frameworks import trainer_units

    monkeypatch.setitem(trainer_units.LOSS_WEIGHTS, "dapo", "max_length")
    result = _run("C47")
    assert result.verdict == "fail" and _failing(result) == ["dapo: w_i = n x TRL's per-token weight"]


def test_trainer_units_claim_catches_cispo_without_its_clamped_ratio(monkeypatch):
    """C47: cispo's score weighted as dapo's, without the factor min(1, epsilon_high) its
    clamped ratio puts on it at ratio 1 (a fifth at TRL's default epsilon_high)."""
    from ustat_rl.frameworks import trainer_units

    monkeypatch.setattr(trainer_units, "ratio_one_factor", lambda loss_type, epsilon_high: 1.0)
    failing = _failing(_run("C47"))
    assert len(failing) == 1 and failing[0].startswith("cispo: the clamped ratio's factor")


def test_trainer_units_claim_catches_the_mse_reported_as_the_variance(monkeypatch):
    """C47: var_run computed as the MSE (the squared bias of the full mean not removed)."""
    import ustat_rl.theory as theory

    monkeypatch.setattr(theory, "minibatch_variance",
                        lambda m, rule, G, B: theory.minibatch_mse(m, rule, G, B))
    result = _run("C47")
    assert result.verdict == "fail" and any("fullmean" in name for name in _failing(result))


def test_window_claim_catches_a_window_that_pools_only_its_newest_batch(monkeypatch):
    """C48: the audit's planted bug, the window built from its newest batch alone."""
    from ustat_rl.frameworks import window

    original = window.window_rollouts
    monkeypatch.setattr(window, "window_rollouts",
                        lambda batches, meta: original(batches[-1:], meta))
    result = _run("C48")
    assert result.verdict == "fail"
    assert "the window pools every batch's rows once, in order, the newest last" in \
        _failing(result)


def test_window_claim_catches_batches_pooled_out_of_order(monkeypatch):
    """C48: the newest batch first (a pool read from the wrong end)."""
    from ustat_rl.frameworks import window

    original = window.window_rollouts
    monkeypatch.setattr(window, "window_rollouts",
                        lambda batches, meta: original(list(reversed(batches)), meta))
    assert _run("C48").verdict == "fail"


def test_trajectory_claim_catches_the_simultaneous_level_dropped(monkeypatch):
    """C49: the audit's planted bug, each window rebuilt at the stated level instead of
    1 - (1 - level)/K (Bonferroni dropped)."""
    from ustat_rl.frameworks import universality

    original = universality._window
    monkeypatch.setattr(universality, "_window",
                        lambda record, window_level: original(record, record.level))
    result = _run("C49")
    assert result.verdict == "fail"
    assert any("within 1 - level" in name for name in _failing(result))


@pytest.mark.parametrize("where", ["gradient", "read-off"])
def test_sketch_claim_catches_a_scaled_embeddings_scale_dropped(monkeypatch, where):
    """C44: Gemma's embedding scale (sqrt(width), applied inside the module) dropped from the
    sketch, where the embedding's gradient is projected or where the scale is read off."""
    from ustat_rl.scores.projectors import Embedding

    if where == "gradient":
        original = Embedding.gradient
        monkeypatch.setattr(Embedding, "gradient", staticmethod(
            lambda sk, module, spec, ids, scale, grad: original(sk, module, spec, ids, None,
                                                                grad)))
    else:
        monkeypatch.setattr(Embedding, "gather_scale",
                            staticmethod(lambda sk, module, ids, output: None))
    failing = _failing(_run("C44"))
    assert failing == ["scaled embedding, gaussian, k = 12, 3 block(s): sketch == full scores x "
                       "R^T", "scaled embedding, rademacher, k = 12, 3 block(s): sketch == full "
                       "scores x R^T"]


@pytest.mark.parametrize("bug", ["bias dropped", "variance halved"])
def test_budget_claim_catches_a_biased_rules_optimum_read_wrongly(monkeypatch, bug):
    """C17: theory.group_size's split of the exact MSE into G V(G)/N + D(G) read wrongly. For GRPO
    (D = 0) neither bug moves the optimum (the second only rescales every G's MSE), so the
    GRPO-only checks passed; the full mean and trl_group, compared with every outcome of a
    group, fail."""
    from ustat_rl.theory import group_size as budget

    original = budget._parts

    def parts(*args):
        var, bias = original(*args)
        return (var, 0.0 * bias) if bug == "bias dropped" else (var / 2.0, bias)

    monkeypatch.setattr(budget, "_parts", parts)
    failing = _failing(_run("C17"))
    assert all(name.startswith("beyond the paper") for name in failing)
    assert "beyond the paper, trl_group, N=65536: budget_mse = G V(G)/N + D(G) by enumeration, " \
           "G = 2..5" in failing
    assert "beyond the paper, fullmean, N=65536: the budget optimum is a neighbour of its " \
           "cubic's root, not GRPO's optimum" in failing


def test_budget_claim_catches_a_report_that_reads_another_rules_curve(monkeypatch):
    """C17: ustat-rl gstar's argmin for a biased rule taken from GRPO's MSE curve."""
    import types

    from ustat_rl.advantages import get_rule
    from ustat_rl.pilot import report
    from ustat_rl.theory import group_size as owner

    # the report's view of the owner alone is planted: the claim's exact side reads the owner
    planted = types.SimpleNamespace(**vars(owner))
    planted.fixed_budget_curve = lambda m, rule, *a, **k: owner.fixed_budget_curve(
        m, get_rule("grpo"), *a, **k)
    monkeypatch.setattr(report, "owner", planted)
    failing = _failing(_run("C17"))
    assert failing and all(name.startswith("beyond the paper, gstar report") for name in failing)


# --------------------------------------------------------------------------------------------
# The words a command prints against what its interval allows (C42, C49, C50)
# --------------------------------------------------------------------------------------------


def test_allocation_claim_catches_advice_that_claims_a_gain_the_interval_does_not_show(
        monkeypatch):
    """C42: allocate's last line for an interval holding 1 given the words of a gain."""
    from ustat_rl.pilot import allocation

    monkeypatch.setitem(allocation._ADVICE, "within the noise", allocation._ADVICE["gain shown"])
    failing = _failing(_run("C42"))
    assert "allocate's words, the optimal sizes' interval ending at 1: the row and the advice " \
           "are what it allows" in failing
    assert all(name.startswith("allocate's words") for name in failing)


def test_allocation_claim_catches_a_verdict_read_off_the_point_estimate(monkeypatch):
    """C42: a ratio called a gain (or a loss) because its estimate is below (above) 1, whatever
    its interval: the rows say more than the intervals show."""
    from ustat_rl.pilot import allocation

    original = allocation.ratio_verdict

    def by_estimate(estimate, low, high, reference="uniform"):
        verdict = original(estimate, low, high, reference)
        if verdict == "within the noise":
            return "gain shown" if estimate < 1.0 else f"worse than {reference}"
        return verdict

    monkeypatch.setattr(allocation, "ratio_verdict", by_estimate)
    failing = _failing(_run("C42"))
    assert "allocate's words, the optimal sizes' interval ending at 1: the row and the advice " \
           "are what it allows" in failing
    assert "allocate's words, the optimal sizes' interval starting at 1: the row and the advice " \
           "are what it allows" in failing


def test_advice_claim_catches_a_report_that_always_says_it_bounds_gstar(monkeypatch):
    """C50: gstar's text saying 'the pilot bounds G*' whatever c1's interval."""
    import dataclasses

    from ustat_rl.pilot import report_text

    original = report_text._advice_lines
    monkeypatch.setattr(report_text, "_advice_lines",
                        lambda report: original(dataclasses.replace(report, bounded=True)))
    failing = _failing(_run("C50"))
    assert "gstar's words, c1's interval reaching 0: 'the pilot cannot bound G*'" in failing
    assert all(name.startswith("gstar's words") for name in failing)


def test_trajectory_claim_catches_the_runs_g_always_said_to_be_inside(monkeypatch):
    """C49: the trajectory's verdict saying the run's G is inside every window's interval when
    it is outside some."""
    from ustat_rl.frameworks import universality

    monkeypatch.setattr(universality.Universality, "group_size_inside",
                        property(lambda self: True if self.windows else None))
    failing = _failing(_run("C49"))
    assert failing == ["trajectory's words, G* moving from 8 to 21: the verdict is what the "
                       "windows' intervals allow", "trajectory's words, G* = 8.4 throughout (no "
                       "integer inside): the verdict is what the windows' intervals allow"]


def test_c20_dist_passes_and_catches_an_engine_regression(monkeypatch):
    """``ustat-rl verify`` claim C20.dist passes, and fails if the weighted chi-square engine
    drifts by 1e-8."""
    claim = registry()["C20.dist"]
    ctx = VerifyContext(quick=True)
    assert run_claim(claim, ctx).verdict == "pass"
    original = WeightedChiSquare._log_cdf_sf

    def drifted(self, x):
        log_cdf, log_sf = original(self, x)
        return log_cdf + 1e-8, log_sf + 1e-8

    monkeypatch.setattr(WeightedChiSquare, "_log_cdf_sf", drifted)
    assert run_claim(claim, ctx).verdict == "fail"
