"""Advantage rules: one type, one registry, and everything that reads a rule.

* :mod:`.parts`, :mod:`.rule`: :class:`AdvantageRule` (centring and scaling as data,
  provenance, edge cases) and :mod:`.evaluate`, its one per-sample evaluator;
* :mod:`.registry`: the registry, :func:`get_rule`, :func:`register_rule`, and the paper's
  rules; :mod:`.conventions`: the framework options (TRL, verl, OpenRLHF, NeMo-RL), registered
  through :func:`~ustat_rl.advantages.frameworks.convention_rule`;
* :mod:`.gradients`: the estimators of Algorithm 1 and Table 1, and :func:`rule_gradient` for
  any rule.

The kit that property-tests an implementation against any rule is :mod:`ustat_rl.conformance`,
a layer above this one.

Layering: this package imports only :mod:`ustat_rl._validation` from the library; theory,
Monte Carlo, training, the pilot and the command line import it.
"""

from . import conventions  # noqa: F401  (registers the framework conventions)
from .gradients import (
    baseline_gradient,
    fullmean_gradient,
    grpo_gradient,
    grpo_gradient_pairwise,
    grpo_kernel,
    leave_one_out_baseline,
    oracle_gradient,
    rule_gradient,
    vanilla_gradient,
)
from .registry import (
    ESTIMATOR_NAMES,
    ESTIMATORS,
    RULES,
    get_rule,
    register_rule,
    rule_names,
    unregister_rule,
)
from .rule import AdvantageRule, Centring, Provenance, Scaling

__all__ = ["AdvantageRule", "Centring", "ESTIMATORS", "ESTIMATOR_NAMES", "Provenance", "RULES",
           "Scaling", "baseline_gradient", "fullmean_gradient", "get_rule", "grpo_gradient",
           "grpo_gradient_pairwise", "grpo_kernel", "leave_one_out_baseline", "oracle_gradient",
           "register_rule", "rule_gradient", "rule_names", "unregister_rule", "vanilla_gradient"]
