"""Claims registry and the checks behind ``ustat-rl verify``.

Check modules are the files ``checks_*.py`` in this package; each registers its claims with
:func:`register`. They are imported on first use of :func:`registry`, not at package import.
"""

from __future__ import annotations

import importlib
import pkgutil

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
    "load_checks",
    "register",
    "registry",
    "run_claim",
]

_LOADED = False


def load_checks() -> None:
    """Import every ``checks_*`` module of this package once, which registers their claims."""
    global _LOADED
    if _LOADED:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("checks_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True
