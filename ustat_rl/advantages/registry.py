"""The one registry of advantage rules: the paper's estimators and every framework convention.

Every layer that takes a rule (theory, both Monte Carlo backends, training, the pilot report, the
command line) takes an :class:`~ustat_rl.advantages.rule.AdvantageRule` or its name and looks it
up with :func:`get_rule`; nothing else switches on rule names. A rule defined elsewhere (a test,
a user's script) joins with :func:`register_rule` and is then accepted everywhere.
"""

from __future__ import annotations

from .rule import AdvantageRule, Centring, Provenance, Scaling

__all__ = ["ESTIMATORS", "ESTIMATOR_NAMES", "LEAVE_ONE_OUT", "GROUP_MEAN", "NO_CENTRING",
           "VALUE", "BASELINE", "RULES", "get_rule", "register_rule", "unregister_rule",
           "rule_names", "unknown_name", "LISTING"]

#: The command that lists every registered rule name, named in an unknown name's refusal.
LISTING = "ustat-rl list --estimators"

#: The paper's four estimators of Algorithm 1 and Table 1, accepted wherever one is chosen.
ESTIMATORS = ("vanilla", "grpo", "oracle", "fullmean")

#: Estimators with a closed-form MSE for any rewards: the four and a prompt-only baseline.
ESTIMATOR_NAMES = ESTIMATORS + ("baseline",)

NO_CENTRING = Centring("none")
LEAVE_ONE_OUT = Centring("leave-one-out", leave_one_out=1.0)
GROUP_MEAN = Centring("group mean", mean=1.0)
VALUE = Centring("value", reference=1.0)
BASELINE = Centring("baseline", reference=1.0)

_HERE = "ustat_rl/advantages; docs/theory.md section 2"

_PAPER = (
    AdvantageRule("vanilla", NO_CENTRING, provenance=Provenance("ustat-rl", "REINFORCE (Table 1)", _HERE),
                  formula="z", zero_variance="z (nothing is subtracted)", singleton="z",
                  project_name="vanilla"),
    AdvantageRule("grpo", LEAVE_ONE_OUT,
                  provenance=Provenance("ustat-rl", "leave-one-out GRPO (Algorithm 1)", _HERE),
                  formula="z - (sum_g z - z)/(n_g - 1)", project_name="grpo"),
    AdvantageRule("oracle", VALUE, provenance=Provenance("ustat-rl", "oracle baseline V(x) (Table 1)",
                                                         _HERE),
                  formula="z - V(x)", zero_variance="z - V(x)", singleton="z - V(x)",
                  project_name="oracle"),
    AdvantageRule("fullmean", GROUP_MEAN,
                  provenance=Provenance("ustat-rl", "full-mean baseline (docs/theory.md C2)", _HERE),
                  formula="z - m_g", singleton="0", project_name="fullmean"),
    AdvantageRule("baseline", BASELINE,
                  provenance=Provenance("ustat-rl", "prompt-only baseline b(x) (Corollary 5)", _HERE),
                  formula="z - b(x)", zero_variance="z - b(x)", singleton="z - b(x)",
                  project_name="baseline"),
    AdvantageRule("paper_algorithm2", LEAVE_ONE_OUT,
                  Scaling("group std", bessel=True, all_equal="zero"),
                  Provenance("ustat-rl", "Algorithm 2 of the paper, all-equal groups zeroed",
                             "docs/theory.md section 2"),
                  formula="(z - (sum_g z - z)/(n_g - 1)) / s_g, 0 when s_g = 0",
                  zero_variance="0 (the rule chosen here)",
                  project_name="std-normalised, leave-one-out numerator"),
)

#: Every rule, by name (the paper's first, then the framework conventions).
RULES: dict[str, AdvantageRule] = {rule.name: rule for rule in _PAPER}


def rule_names() -> tuple[str, ...]:
    r"""The registered names, in registration order.

    .. math::

        (\text{vanilla}, \text{grpo}, \dots)
    """
    return tuple(RULES)


def get_rule(estimator, parameter: str = "estimator") -> AdvantageRule:
    r"""The :class:`AdvantageRule` called ``estimator`` (a rule is returned as is).

    .. math::

        \text{name} \mapsto \text{AdvantageRule}

    ``ValueError`` naming ``parameter`` for an unknown one, with the closest names
    (:func:`unknown_name`).
    """
    if isinstance(estimator, AdvantageRule):
        return estimator
    if not isinstance(estimator, str) or estimator not in RULES:
        raise ValueError(unknown_name(parameter, estimator, rule_names()))
    return RULES[estimator]


def unknown_name(parameter: str, name, known) -> str:
    """The one-line refusal of a rule name not in ``known``: the closest names ("did you
    mean", :func:`difflib.get_close_matches`) and the command that lists them all, not the
    whole list.

    Examples
    --------
    >>> unknown_name("estimator", "grpp", ("vanilla", "grpo", "oracle"))
    "`estimator` must be one of the 3 registered advantage rules, got 'grpp' (did you mean 'grpo'?); `ustat-rl list --estimators` lists them"
    """
    import difflib

    close = (difflib.get_close_matches(name, known, n=3, cutoff=0.6)
             if isinstance(name, str) else [])
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return (f"`{parameter}` must be one of the {len(known)} registered advantage rules, got "
            f"{name!r}{hint}; `{LISTING}` lists them")


def register_rule(estimator: AdvantageRule, *, replace: bool = False) -> AdvantageRule:
    r"""Add ``estimator`` to the registry, so every layer accepts its name; returns it.

    .. math::

        \text{RULES}[\text{estimator.name}] = \text{estimator}
    """
    if not isinstance(estimator, AdvantageRule):
        raise TypeError(f"`estimator` must be an AdvantageRule, got {type(estimator).__name__}")
    if estimator.name in RULES and not replace:
        raise ValueError(f"`estimator` {estimator.name!r} is already registered "
                         "(pass replace=True)")
    RULES[estimator.name] = estimator
    return estimator


def unregister_rule(name: str) -> None:
    r"""Remove a rule added with :func:`register_rule` (the built-in ones stay).

    .. math::

        \text{RULES} \setminus \{\text{name}\}
    """
    if name in {r.name for r in _PAPER}:
        raise ValueError(f"`name` {name!r} is a built-in rule")
    RULES.pop(name, None)
