"""Tests of proofs_check: every derivation proves the stated result, and a perturbed kernel,
a dropped factor or a wrong exponent passed through the *same* function is reported as
disproved (or failed). Statistical checks use ``proofs_check.comparison.Z`` = 4 standard
errors (two-sided false-failure rate 6.3e-5 each)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

import proofs_check
from proofs_check import baselines as bl
from proofs_check import bridge, hoeffding, limit_law, optimisation, practical, scaling
from proofs_check import ustatistic as us
from proofs_check._core import (
    DISPROVED,
    FAILED,
    PROVED,
    PROVED_CASES,
    Derivation,
    decide,
    derivation,
)
from proofs_check.bandit_model import score_derivation
from proofs_check.comparison import Comparison
from ustat_rl.policies.softmax import SoftmaxBandit

pytestmark = pytest.mark.integration  # whole derivations: every proof of `ustat-rl proofs` (sympy)

K2 = (2,)  # the negative controls run on K = 2 to stay fast; the positive runs cover K = 2, 3


def _holds(result: Derivation) -> None:
    assert result.status in (PROVED, PROVED_CASES), (result.name, result.status, result.detail)
    assert isinstance(result.expression, sp.Basic)
    assert result.latex == sp.latex(result.expression)


def _rejected(result: Derivation) -> None:
    assert result.status in (DISPROVED, FAILED), (result.name, result.status)


# ---------------------------------------------------------------------------- decision procedure
def test_decide_statuses():
    x = sp.Symbol("x", real=True)
    assert decide((x + 1) ** 2 - x**2 - 2 * x - 1).status == PROVED
    assert decide((x + 1) ** 2 - x**2 - 1).status == DISPROVED
    assert decide(x**2 - x**2, general=False).status == PROVED_CASES
    # no proof and no admissible point: undecided, never proved
    assert decide(x - 1, constraint=lambda point: False).status == FAILED


def test_derivation_reports_exceptions_as_failed():
    def body():
        raise ZeroDivisionError("boom")

    result = derivation("C0", "broken", "s", "m", body)
    assert result.status == FAILED and "ZeroDivisionError" in result.detail
    with pytest.raises(AttributeError):
        result.status = PROVED  # frozen


# ---------------------------------------------------------------------------- C1, C2
def test_ustat_identity_general_and_controls():
    _holds(us.ustat_identity_general())
    _rejected(us.ustat_identity_general(kernel=lambda wi, zi, wj, zj: (wi - wj) * (zi - zj)))
    _rejected(us.ustat_identity_general(kernel=lambda wi, zi, wj, zj: (wi - wj) * (zi + zj) / 2))
    _rejected(us.ustat_identity_general(normaliser=1 / (us.G * (us.G - 1))))


def test_ustat_identity_expanded_and_controls():
    result = us.ustat_identity_expanded()
    _holds(result)
    assert result.cases == tuple(f"G={g}" for g in range(2, 9))
    _rejected(us.ustat_identity_expanded(sizes=(2, 3),
                                         kernel=lambda wi, zi, wj, zj: (wi - wj) * (zi - zj) ** 2 / 2))


def test_fullmean_identity_and_controls():
    _holds(us.fullmean_identity_general())
    _holds(us.fullmean_identity_expanded())
    _rejected(us.fullmean_identity_general(factor=(us.G - 1) / us.G**2))
    _rejected(us.fullmean_identity_expanded(sizes=(2, 3), factor=us.G / (us.G + 1)))
    _rejected(us.eq4_as_printed(sizes=(2, 3)))


# ---------------------------------------------------------------------------- C4, C5, C7
def test_score_derivation():
    _holds(score_derivation(3))
    _rejected(score_derivation(2, claimed=lambda a, b, pi: (1 if a == b else 0) + pi[b]))


def test_hoeffding_components_hold_for_k2_k3():
    for func in (hoeffding.hoeffding_h0, hoeffding.hoeffding_h1, hoeffding.hoeffding_h2,
                 hoeffding.hoeffding_orthogonality, hoeffding.hoeffding_zetas):
        result = func()
        _holds(result)
        assert result.cases == ("K=2", "K=3")


def test_hoeffding_negative_controls():
    half = lambda wi, zi, wj, zj: (wi - wj) * (zi - zj)  # noqa: E731  the factor 1/2 dropped
    _rejected(hoeffding.hoeffding_h0(K2, kernel=half))
    _rejected(hoeffding.hoeffding_h0(K2, claimed=lambda b: b.grad * 2))
    _rejected(hoeffding.hoeffding_h1(K2, claimed=lambda b, a, z: b.scores[a] * (z - b.value) + b.grad))
    _rejected(hoeffding.hoeffding_h2(K2, claimed=lambda b, o1, o2: -hoeffding.claimed_h2(b, o1, o2)))
    _rejected(hoeffding.hoeffding_orthogonality(
        K2, h1=lambda b, a, z: b.scores[a] * (z - b.value) + b.grad))
    _rejected(hoeffding.hoeffding_zetas(K2, claimed_zeta1=lambda b: b.trace_sigma_oracle / 2))
    _rejected(hoeffding.hoeffding_zetas(K2, kernel=half))


def test_exact_mse_and_controls():
    _holds(hoeffding.exact_mse_general())
    _holds(hoeffding.mse_expansion())
    _holds(hoeffding.oracle_ratio_limit())

    def wrong_exponent(b, name, group_size=None):
        size = b.group_size if group_size is None else group_size
        if name == "grpo":  # 1/G^2 instead of 1/(G(G-1))
            return (b.trace_sigma_oracle / size
                    + (b.score_sq_norm * b.reward_var + b.grad_sq) / size**2)
        return hoeffding.claimed_mse(b, name, group_size)

    _rejected(hoeffding.exact_mse_general(K2, claimed=wrong_exponent))
    _rejected(hoeffding.exact_mse_enumerated(((2, (3,)),), claimed=wrong_exponent))
    _rejected(hoeffding.mse_expansion(
        K2, claimed_next=lambda b: 2 * (b.score_sq_norm * b.reward_var + b.grad_sq)))
    _rejected(hoeffding.oracle_ratio_limit(K2, claimed=sp.Integer(2)))


def test_exact_mse_enumeration_small():
    result = hoeffding.exact_mse_enumerated(((2, (2, 3)),))
    _holds(result)
    assert result.cases == ("K=2, G=2", "K=2, G=3")


# ---------------------------------------------------------------------------- C8, C9, C10
def test_baselines_hold():
    for func in (bl.baseline_mse_general, bl.prompt_baseline_optimality, bl.baseline_mse_bandit,
                 bl.optimal_constant_baseline, bl.value_baseline_counterexample,
                 bl.reversal_condition, bl.reversal_binary_threshold):
        _holds(func())


def test_baselines_negative_controls():
    _rejected(bl.baseline_mse_general(bl.claimed_baseline_mse(cross_factor=1)))
    _rejected(bl.baseline_mse_general(bl.paper_second_moment() - bl.gsq))
    _rejected(bl.prompt_baseline_optimality(bl.m0 * (bl.V - bl.b) ** 2 / bl.G**2))
    _rejected(bl.optimal_constant_baseline(bl.m1 / bl.m0**2))
    _rejected(bl.reversal_condition((bl.m0 * bl.V**2 - (bl.m0 * bl.s2 + bl.gsq) / bl.G) / bl.G))
    _rejected(bl.reversal_binary_threshold(lambda p: 1 / p))

    def no_cross(bd):
        diff = bd.value - bd.baseline
        return (bd.trace_sigma_oracle + diff**2 * bd.score_sq_norm) / bd.group_size

    _rejected(bl.baseline_mse_bandit(K2, claimed=no_cross))
    # equal success probabilities satisfy Assumption 2: the value baseline is then optimal
    equal = dict(bl.WITNESS, p2=bl.WITNESS["p1"])
    assert bl.value_baseline_counterexample(equal).status == DISPROVED


# ---------------------------------------------------------------------------- C12-C16, C21
def test_optimisation_lemmas_and_controls():
    for func in (optimisation.pl_example, optimisation.hessian_pl_bound,
                 optimisation.descent_contraction, optimisation.lemma6_discriminant,
                 optimisation.lemma14_step, optimisation.pl_from_wsc):
        _holds(func())
    mu, L, beta, M = optimisation.mu, optimisation.L, optimisation.beta, optimisation.M
    _rejected(optimisation.pl_example(sp.Integer(4)))
    _rejected(optimisation.hessian_pl_bound(lambda lam: lam**2))
    _rejected(optimisation.lemma6_discriminant(mu**2 - 4 * mu * L))
    _rejected(optimisation.descent_contraction(claimed_constant=L * beta**2 * M / (4 * mu * beta)))
    _rejected(optimisation.lemma14_step(claimed_constant=optimisation.C / (optimisation.A - 1)))
    _rejected(optimisation.lemma14_step(claimed_threshold=optimisation.B / (optimisation.A - 1)))
    _rejected(optimisation.pl_from_wsc(mu**2))


def test_lemma14_witness():
    result = optimisation.lemma14_witness()
    assert result.status == DISPROVED and "a_4 = 1/10" in result.detail
    # a smaller cap a keeps the same sequence inside the bound: the check can pass
    small = dict(optimisation.WITNESS14, a=optimisation.Fraction(1, 100))
    assert optimisation.lemma14_witness(small).status == PROVED_CASES


# ---------------------------------------------------------------------------- C17
def test_optimal_group_size_and_controls():
    _holds(scaling.optimal_group_size())
    _holds(scaling.optimal_group_size_exact())
    third = sp.Rational(1, 3)
    _rejected(scaling.optimal_group_size(claimed_argmin=(scaling.c3 / scaling.c1) ** third))
    _rejected(scaling.optimal_group_size(claimed_minimum=(scaling.c2 + sp.sqrt(scaling.c1 * scaling.c3))
                                         / scaling.N))
    _rejected(scaling.optimal_group_size_exact(claimed_argmin=sp.sqrt(scaling.c3e / scaling.c1)))


# ---------------------------------------------------------------------------- C20
def test_limit_law_and_controls():
    for func in (limit_law.limit_weight_1d, limit_law.omega_erratum, limit_law.lyapunov_diagonal,
                 limit_law.lyapunov_offdiagonal):
        _holds(func())
    _holds(limit_law.chi2_mixture_moments(r=2))
    _rejected(limit_law.limit_weight_1d(omega=limit_law.paper_omega()))
    _rejected(limit_law.limit_weight_1d(increment_power=0))
    _rejected(limit_law.omega_erratum(limit_law.beta))
    _rejected(limit_law.lyapunov_diagonal(
        r=2, claimed_weight=lambda lk, gk: lk * limit_law.beta**2 * gk / (2 * limit_law.beta * lk - 1)))
    _rejected(limit_law.lyapunov_offdiagonal(
        claimed_entry=lambda o, lk, ll: limit_law.beta**2 * o / (limit_law.beta * (lk + ll) - 2)))
    w = sp.symbols("w1:3", positive=True)
    _rejected(limit_law.chi2_mixture_moments(r=2, claimed_var=sum(w)))


# ---------------------------------------------------------------------------- C26, C27
def test_practical_and_controls():
    for func in (practical.arcsin_derivative, practical.normalised_gradient, practical.k3_unbiased,
                 practical.k3_nonnegative, practical.k3_gradient):
        _holds(func())
    _rejected(practical.arcsin_derivative(1 / sp.sqrt(practical.V)))
    _rejected(practical.normalised_gradient(K2, claimed=lambda g, v: g / (v * (1 - v))))
    _rejected(practical.k3_unbiased((2,), estimator=lambda r: sp.log(r) ** 2 / 2))
    _rejected(practical.k3_nonnegative(lambda r: r - sp.log(r) - 2))
    _rejected(practical.k3_gradient(2, claimed_factor=practical.paper_k3_factor))
    _holds(practical.k3_expected_gradient(2))
    swapped = practical.k3_expected_gradient(2, claimed=practical._forward_kl,
                                             other=practical._reverse_kl)
    _rejected(swapped)


# ---------------------------------------------------------------------------- numeric bridge
def test_bridge_exact_agreement():
    checks = bridge.exact_checks(seed=1, n_points=1)
    failed = [c.name for c in checks if not c.ok]
    assert not failed and len(checks) > 50


def test_bridge_rejects_wrong_formula():
    bandit = SoftmaxBandit([[0.0, 0.5]], [[0.3, 0.7]], reward_values=(0.0, 1.0))
    wrong = bridge.bandit_function(2, "wrong-grpo", lambda bd: bd.trace_sigma_oracle / bd.group_size
                                   + (bd.score_sq_norm * bd.reward_var + bd.grad_sq)
                                   / bd.group_size**2)
    right = bridge.bandit_function(2, "grpo", bridge._mse("grpo"))
    numeric = bandit.exact_mse_per_prompt("grpo", 3)[0]
    assert Comparison.exact("right", numeric, right(bandit, group_size=3), rtol=bridge.RTOL).ok
    assert not Comparison.exact("wrong", numeric, wrong(bandit, group_size=3), rtol=bridge.RTOL).ok


def test_monte_carlo_twin_and_controls():
    rng = np.random.default_rng(7)
    bandit = SoftmaxBandit([[0.0, 0.5]], [[0.3, 0.7]])
    assert all(c.ok for c in bridge.mse_monte_carlo(bandit, 2, 20000, rng))
    # wrong formula: the oracle MSE in place of GRPO's at G = 2 (drops c/(G(G-1)))
    oracle = bridge.bandit_function(2, "oracle", bridge._mse("oracle"))
    wrong = bridge.mse_monte_carlo(bandit, 2, 20000, rng,
                                   formula=lambda name, g: float(oracle(bandit, group_size=g)))
    assert not wrong[0].ok  # the GRPO row


def test_sgd_limit_and_k3_monte_carlo_controls():
    rng = np.random.default_rng(11)
    right = bridge.sgd_limit_monte_carlo(rng, n_iter=1000, n_reps=5000)
    assert all(c.ok for c in right)
    paper = float(limit_law.lyapunov_weight_1d(limit_law.paper_omega()).subs(
        {limit_law.beta: 0.5, limit_law.lam: 3.0, limit_law.gamma: 1.0}))
    assert not bridge.sgd_limit_monte_carlo(rng, n_iter=1000, n_reps=2000, weight=paper)[1].ok
    assert bridge.k3_monte_carlo(rng, 100000)[0].ok
    k2 = bridge.k3_monte_carlo(rng, 100000, estimator=lambda r: np.log(r) ** 2 / 2)
    assert not k2[0].ok


# ---------------------------------------------------------------------------- public API
def test_claim_derivations():
    results = proofs_check.claim_derivations("C17")
    assert results and all(isinstance(r, Derivation) and r.holds for r in results)
    assert proofs_check.claim_derivations("C6") == []
    # the transcribed Lemma 14 names C16 but is a printed form: only returned on request
    assert all(r.holds for r in proofs_check.claim_derivations("C16"))
    printed = proofs_check.claim_derivations("C16", include_printed=True)
    assert [r.status for r in printed if not r.holds] == [DISPROVED]
    with pytest.raises(ValueError, match="claim_id"):
        proofs_check.claim_derivations("seventeen")
    with pytest.raises(TypeError, match="claim_id"):
        proofs_check.claim_derivations(17)


def test_comparison_rules_and_controls():
    assert Comparison.exact("x", [1.0, 2.0], [1.0, 2.0 + 1e-13], rtol=1e-12).ok
    assert not Comparison.exact("x", [1.0, 2.0], [1.0, 2.0 + 1e-9], rtol=1e-12).ok
    assert not Comparison.exact("x", 1.0, np.nan, rtol=1e-12).ok
    assert Comparison.monte_carlo("x", 1.0, 1.3, 0.1).ok  # 3 se
    assert not Comparison.monte_carlo("x", 1.0, 1.5, 0.1).ok  # 5 se
    assert not Comparison.monte_carlo("x", 1.0, 1.0, np.nan).ok
    assert Comparison.interval("x", 1.0, 1.1, 0.9, 1.3).ok
    assert not Comparison.interval("x", 1.0, 1.5, 1.2, 1.8).ok
    with pytest.raises(ValueError, match="kind"):
        Comparison("x", "approximate", 1.0, 1.0, True)


def test_main_table_and_usage(capsys):
    assert proofs_check.main(["--claim", "C12", "--no-bridge"]) == 0
    out = capsys.readouterr().out
    assert "C12 PL example" in out and "proved" in out
    assert proofs_check.main(["--no-such-flag"]) == 2


def test_errata_report_computed():
    report = proofs_check.errata_report()
    for heading in ("Eq. (4)", "Corollary 5", "Lemma 6", "Lemma 18", "Theorem 8", "Lemma 11",
                    "Lemma 14", "Notation", "Appendix C"):
        assert heading in report
    assert report.count("**disproved**") >= 7
    assert report.count("- paper: arXiv:2603.01162v3") == report.count("- reproduce: `") == 9
    assert "rejected" in report and "accepted" in report  # the beta^2 numeric evidence


def test_each_erratum_names_version_statement_and_a_runnable_command():
    from proofs_check.errata import ERRATA
    from ustat_rl.claims import registry

    known = set(registry())
    for item in ERRATA:
        assert "v3" in item.paper and "v1 not checked" in item.paper, item.where
        assert item.checked, item.where
        assert "ustat-rl verify --errata" in item.reproduce, item.where
        for command in item.reproduce:
            words = command.split()
            assert words[:2] == ["ustat-rl", "verify"], command
            if "--only" in words:
                ids = words[words.index("--only") + 1].split(",")
                assert set(ids) <= known, (item.where, set(ids) - known)
        # an erratum with computed evidence must say which claim re-derives the corrected form
        assert bool(item.evidence) == any("--only" in c for c in item.reproduce), item.where
