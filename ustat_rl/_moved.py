"""Old import paths of modules that moved into packages, kept working with a deprecation note.

One mechanism serves every moved module: a meta-path finder, installed by ``ustat_rl/__init__``,
that answers an import of an old dotted name (``ustat_rl.conventions``, ``ustat_rl.cli``, ...)
with the module object at its new path, and warns with :class:`DeprecationWarning`. The alias
*is* the new module (``ustat_rl.estimators is ustat_rl.advantages.gradients``), so monkeypatching
and ``isinstance`` behave as before, and a name added to the new module later is importable from
the old path too. Names a package used to re-export from a module that has left it are served by
:func:`moved_attribute` from that package's ``__getattr__``.

Every old path is removed in release :data:`REMOVED_IN` (0.3.0), as each warning says; until
then an old path and its new module are the same object.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

__all__ = ["REMOVED_IN", "MOVED_MODULES", "MOVED_ATTRIBUTES", "moved_attribute", "install"]

#: The release that drops every old path listed here (stated in each warning).
REMOVED_IN = "0.3.0"

#: Old dotted module name -> its new home.
MOVED_MODULES: dict[str, str] = {
    "ustat_rl.estimators": "ustat_rl.advantages.gradients",
    "ustat_rl.std_training": "ustat_rl.training.std",
    "ustat_rl.algorithm2": "ustat_rl.training.algorithm2",
    "ustat_rl.group_size": "ustat_rl.training.group_size",
    "ustat_rl.batch_study": "ustat_rl.training.batch_study",
    "ustat_rl.policies.transformer.training": "ustat_rl.training.transformer",
    "ustat_rl.policies.transformer.sampling": "ustat_rl.montecarlo.transformer",
    "ustat_rl.sweeps": "ustat_rl.runs.sweeps",
    "ustat_rl._cell_tasks": "ustat_rl.runs._cell_tasks",
    "ustat_rl.run_records": "ustat_rl.runs.records",
    "ustat_rl.cli": "ustat_rl.interface.cli",
    "ustat_rl.report": "ustat_rl.interface.report",
    "ustat_rl._report_html": "ustat_rl.interface._report_html",
    "ustat_rl.plotting": "ustat_rl.interface.plotting",
    "ustat_rl.plotting_training": "ustat_rl.interface.plotting_training",
    "ustat_rl.plotting_pilot": "ustat_rl.interface.plotting_pilot",
    "ustat_rl.examples": "ustat_rl.policies.examples",
    "ustat_rl.conventions": "ustat_rl.advantages.conventions",
    "ustat_rl.conformance_adapters": "ustat_rl.conformance.adapters",
    # the root's statistics, the aggregation weights, the script flags and the conformance
    # kit, given rooms of their own (``ustat_rl.conformance`` itself is now the kit's package)
    "ustat_rl.rates": "ustat_rl.stats.rates",
    "ustat_rl.ustatistics": "ustat_rl.stats.ustatistics",
    "ustat_rl.intervals": "ustat_rl.stats.intervals",
    "ustat_rl.aggregation": "ustat_rl.frameworks.aggregation",
    "ustat_rl._script_args": "ustat_rl.runs.script_args",
    "ustat_rl.advantages.conformance": "ustat_rl.conformance.kit",
    "ustat_rl.advantages.conformance_adapters": "ustat_rl.conformance.adapters",
    "ustat_rl.advantages.conformance_multichannel": "ustat_rl.conformance.multichannel",
    "ustat_rl.advantages.conformance_search": "ustat_rl.conformance.search",
    **{f"ustat_rl.pilot.{name}": f"ustat_rl.scores.{name}"
       for name in ("sequence", "coverage", "_sketcher", "factored", "forward_sketch", "sketch",
                    "causal_lm", "families", "transformer", "bandit")},
    # the claims' check modules, one per section of docs/theory.md (checks_ustatistic,
    # checks_power and checks_transformer were split between sections and have no old path)
    **{f"ustat_rl.claims.checks_{old}": f"ustat_rl.claims.{new}" for old, new in (
        ("baselines", "paper_ustatistic.baselines"), ("optimisation", "paper_convergence"),
        ("group_size", "paper_group_size"), ("limit_law", "paper_limit_law"),
        ("practical", "paper_practical"), ("pilot", "paper_pilot"),
        ("allocation", "beyond_allocation"), ("advice", "beyond_advice"),
        ("routes", "beyond_routes"), ("adapters", "beyond_frameworks.adapters"),
        ("conventions", "beyond_frameworks.conventions"),
        ("multireward", "beyond_frameworks.multireward"),
        ("dynamic_sampling", "beyond_frameworks.dynamic_sampling"),
        ("trainer", "beyond_monitor.trainer"), ("window", "beyond_monitor.window"),
        ("run_noise", "beyond_monitor.run_noise"))},
    # the presentation of a verify run, up to the interface layer
    "ustat_rl.claims.display": "ustat_rl.interface.claims_display",
    "ustat_rl.claims.markdown": "ustat_rl.interface.claims_markdown",
    "ustat_rl.claims.compare": "ustat_rl.interface.claims_compare",
}

#: (package, name) -> module that now owns a name the package used to re-export.
MOVED_ATTRIBUTES: dict[tuple[str, str], str] = {
    **{("ustat_rl.policies.transformer", name): "ustat_rl.montecarlo.transformer"
       for name in ("mc_squared_errors", "squared_error_statistic")},
    **{("ustat_rl.theory.advantage", name): "ustat_rl.theory.lemma11"
       for name in ("lemma11_constant", "lemma11_difference_table")},
    **{("ustat_rl.policies.transformer", name): "ustat_rl.training.transformer"
       for name in ("GRPORun", "expected_accuracy", "grpo_step_gradient", "grpo_train",
                    "moderate_questions", "question_values", "supervised_warmup")},
    # the claims' enumeration route, down to the policies it enumerates
    ("ustat_rl.claims._common", "enumerate_prompt_estimates"): "ustat_rl.policies.enumeration",
}


#: Old paths served without a warning: ``ustat-rl`` scripts installed before the move import
#: ``ustat_rl.cli:main`` until the package is reinstalled.
SILENT = frozenset({"ustat_rl.cli"})


def _warn(old: str, new: str) -> None:
    if old in SILENT:
        return
    warnings.warn(f"{old} has moved to {new}; the old path is deprecated and will be removed "
                  f"in ustat-rl {REMOVED_IN}", DeprecationWarning, stacklevel=3)


def moved_attribute(package: str, name: str):
    """The object ``name`` that ``package`` used to re-export, from its new module.

    Raises ``AttributeError`` (as a missing attribute should) for names that never moved.
    """
    new = MOVED_ATTRIBUTES.get((package, name))
    if new is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{new}.{name}")
    return getattr(importlib.import_module(new), name)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec):
        _warn(self.old, self.new)
        module = importlib.import_module(self.new)
        self._own = module.__spec__, module.__loader__
        return module

    def exec_module(self, module):
        # the import system stamped the alias spec on the shared module: give it back its own
        module.__spec__, module.__loader__ = self._own

    def get_code(self, fullname):
        # `python -m ustat_rl.cli`: run the new module as __main__
        return compile(f"import runpy; runpy.run_module({self.new!r}, run_name='__main__')",
                       f"<moved {self.old}>", "exec")

    def is_package(self, fullname):
        return False


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (before the path finders)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
