"""Symbolic unbiasedness of the pilot estimators (proofs_check.pilot, docs/theory.md C31).

Each section-7 kernel, the power-sum forms and the projected inner product are proved; a biased
kernel (the plug-in variance), a wrong closed form and an unscaled projection go through the same
functions and must be disproved.
"""

from __future__ import annotations

import pytest
import sympy as sp

from proofs_check import pilot
from proofs_check._core import DISPROVED, PROVED_CASES
from proofs_check.catalogue import CATALOGUE, run_entry

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("name", list(pilot.KERNELS))
def test_each_kernel_is_unbiased(name):
    result = pilot.kernel_unbiased(name)
    assert result.status == PROVED_CASES, (name, result.detail)
    assert result.cases == ("d=1", "d=2", "d=3")


def test_negative_control_plug_in_variance_is_disproved():
    result = pilot.kernel_unbiased("reward_var", pilot.plug_in_variance)
    assert result.status == DISPROVED
    # its expectation is (n - 1)/n Var(Z) with n = 3
    V, V2 = sp.Symbol("E[Z^1]", real=True), sp.Symbol("E[Z^2]", real=True)
    assert sp.expand(result.expression - sp.Rational(2, 3) * (V2 - V**2)) == 0


def test_expectation_rule_on_a_repeated_index():
    w, z = pilot._draw(1, 1)
    _, z2 = pilot._draw(2, 1)
    assert pilot.expect_iid(z * z2, 2, 1) == sp.Symbol("E[Z^1]", real=True) ** 2
    assert pilot.expect_iid(z * z, 2, 1) == sp.Symbol("E[Z^2]", real=True)


def test_power_sum_forms_and_a_wrong_form():
    assert pilot.power_sum_forms(sizes=(3, 4)).status == PROVED_CASES

    def wrong(z, s, u_sq, n):  # Bessel factor dropped from the variance
        forms = pilot._closed_forms(z, s, u_sq, n)
        return {**forms, "reward_var": forms["reward_var"] * (n - 1) / n}

    assert pilot.power_sum_forms(sizes=(3,), forms=wrong).status == DISPROVED


def test_projection_is_unbiased_only_with_its_scale():
    assert pilot.sketch_inner_product().status == PROVED_CASES
    assert pilot.sketch_inner_product(rows=(2, 3), scale=lambda k: 1).status == DISPROVED


def test_catalogue_lists_the_pilot_derivations():
    entries = [e for e in CATALOGUE if "C31" in e.evidence_for]
    assert len(entries) == len(pilot.KERNELS) + 3  # + power sums, dense and factored sketches
    assert all(run_entry(e).holds for e in entries)


def test_fieller_quadratic_and_a_set_without_the_covariance():
    assert pilot.fieller_quadratic().status == "proved"
    # negative control: b = c1 c3 without the t^2 v13 term is not Fieller's set
    wrong = pilot.fieller_quadratic(lambda c1, c3, v11, v13, v33, t: (
        c3**2 - t**2 * v33, c1 * c3, c1**2 - t**2 * v11))
    assert wrong.status == DISPROVED
