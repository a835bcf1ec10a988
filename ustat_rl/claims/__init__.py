"""Claims registry and the checks behind ``ustat-rl verify``.

Check modules hold one section of docs/theory.md each, every variant of a claim (``C5.tf``,
``C20.inv``, ...) beside its base claim: ``paper_*`` for the paper's results (C1-C32) and
``beyond_*`` for those beyond it (C40 on); a section too long for one module is a subpackage
of them. Each registers its claims with :func:`register`; they are imported on first use of
:func:`registry`, not at package import.

* :mod:`.paper_ustatistic`: Lemma 1 to Corollary 5 and Figure 4 (C1-C11, C28, C30);
* :mod:`.paper_convergence`: Assumptions 3-5, Lemmas 6, 14, 15 and 16 (C12-C16, C21);
* :mod:`.paper_group_size`: Theorem 7, Figure 5 and Table 2 (C17, C18);
* :mod:`.paper_limit_law`: Assumptions 6-9, Theorem 8, Corollaries 9 and 10 (C19, C20, C22, C23);
* :mod:`.paper_practical`: Appendix A (C24-C27);
* :mod:`.paper_pilot`: the constants of Theorem 7 from a pilot sample (C31, C32);
* :mod:`.beyond_allocation` (C40-C42), :mod:`.beyond_routes` (C43, C44),
  :mod:`.beyond_frameworks` (C45, C46, C51, C52, C55, C56), :mod:`.beyond_monitor` (C47-C49,
  C53), :mod:`.beyond_advice` (C50) and :mod:`.beyond_shrinkage` (C54).
"""

from __future__ import annotations

from .registry import (
    Z_CHECK,
    Check,
    Claim,
    ClaimResult,
    VerifyContext,
    check_close,
    check_exact,
    check_interval,
    check_true,
    detectable_error,
    load_checks,
    register,
    registry,
    run_claim,
)

__all__ = [
    "Z_CHECK",
    "Check",
    "Claim",
    "ClaimResult",
    "VerifyContext",
    "check_close",
    "check_exact",
    "check_interval",
    "check_true",
    "detectable_error",
    "load_checks",
    "register",
    "registry",
    "run_claim",
]
