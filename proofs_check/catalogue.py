"""The list of derivations run by ``python -m proofs_check`` and by the claims registry.

Each entry has a *role*: ``"claim"`` entries derive a statement of docs/theory.md and must hold
(``proved`` or ``proved-for-listed-cases``); ``"printed"`` entries run the *same* derivation with
the form printed in the paper (or a statement as transcribed that the toolkit tests), and feed
the errata report. The verdicts are computed at run time; the role only says which outcome a
reader of docs/theory.md should expect, so that a change in either direction is flagged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Callable

from . import allocation as allocation_proofs
from . import baselines, hoeffding, limit_law, optimisation, pilot, practical, scaling, ustatistic
from ._core import DISPROVED, Derivation
from .bandit_model import score_derivation

__all__ = ["Entry", "CATALOGUE", "run_entry", "entries_for", "entry_named"]


@dataclass(frozen=True)
class Entry:
    """One derivation of the catalogue.

    Attributes
    ----------
    func : callable
        ``func() -> Derivation``.
    role : str
        ``"claim"`` (expected to hold) or ``"printed"`` (paper's form; expected disproved).
    name : str
        Label overriding the derivation's own (printed forms reuse a claim's derivation).
    evidence_for : tuple of str
        Claim IDs whose registry entry this derivation supports.
    """

    func: Callable[[], Derivation]
    role: str = "claim"
    name: str = ""
    evidence_for: tuple[str, ...] = ()

    @property
    def expected(self) -> str:
        return "holds" if self.role == "claim" else DISPROVED


def run_entry(entry: Entry) -> Derivation:
    """Run one entry, applying its label."""
    result = entry.func()
    return dataclasses.replace(result, name=entry.name) if entry.name else result


CATALOGUE: tuple[Entry, ...] = (
    Entry(ustatistic.ustat_identity_general, evidence_for=("C1",)),
    Entry(ustatistic.ustat_identity_expanded, evidence_for=("C1",)),
    Entry(ustatistic.fullmean_identity_general, evidence_for=("C2",)),
    Entry(ustatistic.fullmean_identity_expanded, evidence_for=("C2",)),
    Entry(partial(score_derivation, 2), evidence_for=("C4",)),
    Entry(partial(score_derivation, 3), evidence_for=("C4",)),
    Entry(hoeffding.hoeffding_h0, evidence_for=("C3", "C4")),
    Entry(hoeffding.hoeffding_h1, evidence_for=("C4",)),
    Entry(hoeffding.hoeffding_h2, evidence_for=("C4",)),
    Entry(hoeffding.hoeffding_orthogonality, evidence_for=("C4",)),
    Entry(hoeffding.hoeffding_zetas, evidence_for=("C4",)),
    Entry(hoeffding.exact_mse_general, evidence_for=("C4", "C5")),
    Entry(hoeffding.exact_mse_enumerated, evidence_for=("C5",)),
    Entry(hoeffding.mse_expansion, evidence_for=("C4", "C5")),
    Entry(hoeffding.oracle_ratio_limit, evidence_for=("C7",)),
    Entry(baselines.baseline_mse_general, evidence_for=("C8",)),
    Entry(baselines.baseline_mse_bandit, evidence_for=("C8",)),
    Entry(baselines.prompt_baseline_optimality, evidence_for=("C8",)),
    Entry(baselines.optimal_constant_baseline, evidence_for=("C9",)),
    Entry(baselines.value_baseline_counterexample, evidence_for=("C9",)),
    Entry(baselines.reversal_condition, evidence_for=("C10",)),
    Entry(baselines.reversal_binary_threshold, evidence_for=("C10",)),
    Entry(optimisation.pl_example, evidence_for=("C12",)),
    Entry(optimisation.hessian_pl_bound, evidence_for=("C13",)),
    Entry(optimisation.descent_contraction, evidence_for=("C14",)),
    Entry(optimisation.lemma6_discriminant, evidence_for=("C13", "C14")),
    Entry(optimisation.lemma14_step, evidence_for=("C16",)),
    Entry(scaling.optimal_group_size, evidence_for=("C17",)),
    Entry(scaling.optimal_group_size_exact, evidence_for=("C17",)),
    Entry(limit_law.limit_weight_1d, evidence_for=("C15", "C20")),
    Entry(limit_law.omega_erratum, evidence_for=("C20",)),
    Entry(limit_law.lyapunov_diagonal, evidence_for=("C20",)),
    Entry(limit_law.lyapunov_offdiagonal, evidence_for=("C20",)),
    Entry(limit_law.chi2_mixture_moments, evidence_for=("C20",)),
    Entry(optimisation.pl_from_wsc, evidence_for=("C21",)),
    Entry(practical.arcsin_derivative, evidence_for=("C26",)),
    Entry(practical.normalised_gradient, evidence_for=("C26",)),
    Entry(practical.k3_unbiased, evidence_for=("C27",)),
    Entry(practical.k3_nonnegative, evidence_for=("C27",)),
    Entry(practical.k3_gradient, evidence_for=("C27",)),
    Entry(practical.k3_expected_gradient, evidence_for=("C27",)),
    *(Entry(partial(pilot.kernel_unbiased, name), name=f"C31 {name} kernel is unbiased",
            evidence_for=("C31",)) for name in pilot.KERNELS),
    Entry(pilot.power_sum_forms, evidence_for=("C31",)),
    Entry(pilot.sketch_inner_product, evidence_for=("C31",)),
    Entry(pilot.factored_inner_product, evidence_for=("C31",)),
    Entry(pilot.fieller_quadratic, evidence_for=("C32",)),
    Entry(allocation_proofs.grpo_convex_decreasing, evidence_for=("C40",)),
    Entry(allocation_proofs.one_over_g_convex_decreasing, evidence_for=("C40",)),
    Entry(allocation_proofs.greedy_equals_minimum, evidence_for=("C40",)),
    # ---- printed forms and statements as transcribed (errata evidence)
    Entry(ustatistic.eq4_as_printed, "printed", "Eq. (4) as printed (Z^(b,g) in the sum)"),
    Entry(partial(baselines.baseline_mse_general,
                  baselines.paper_second_moment() - baselines.gsq), "printed",
          "Cor. 5 proof: second moment as printed"),
    Entry(partial(optimisation.lemma6_discriminant, optimisation.mu**2 - 4 * optimisation.mu
                  * optimisation.L), "printed", "Lemma 6 proof: discriminant mu^2 - 4 mu L"),
    Entry(partial(limit_law.limit_weight_1d, omega=limit_law.paper_omega()), "printed",
          "Thm 8: Omega = Q^T Gamma Q (no beta^2)"),
    Entry(partial(limit_law.limit_weight_1d, increment_power=0), "printed",
          "Lemma 18: increment Delta M_n without 1/n"),
    Entry(partial(practical.k3_gradient, claimed_factor=practical.paper_k3_factor), "printed",
          "Lemma 11 kernel: K3 gradient with (mu - 1)"),
    Entry(optimisation.lemma14_witness, "printed", "Lemma 14 as transcribed (C16)",
          evidence_for=("C16",)),
)


def entries_for(claim_id: str) -> list[Entry]:
    """Catalogue entries supporting ``claim_id`` (``"C20.sym"`` maps to ``"C20"``)."""
    base = claim_id.split(".")[0]
    return [e for e in CATALOGUE if base in e.evidence_for]


def entry_named(name: str) -> Entry:
    """The one catalogue entry labelled ``name`` (printed forms are looked up this way)."""
    found = [e for e in CATALOGUE if e.name == name]
    if len(found) != 1:
        raise ValueError(f"`name` must label exactly one catalogue entry, got {name!r} "
                         f"({len(found)} matches)")
    return found[0]
