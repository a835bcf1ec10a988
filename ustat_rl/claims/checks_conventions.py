"""Every registered convention's exact finite-G moments against enumeration (docs/theory.md C46).

``ustat_rl.theory.advantage.advantage_moments`` gives the mean factor and the second moment of
``g_hat(x) = (1/G) sum_g a(Z_g, M) W_g`` for binary rewards from the rule's two-point table in
``O(G)``. The route a user's per-sample advantages take is the rule's own evaluation
(``rule_gradient``, the same function the trainers' conventions are checked with). This claim
runs both on every rule registered when it runs (the registry grows: it iterates over
``ustat_rl.advantages.RULES``, not a list) whose statistics are per group and need no reference
value, on a softmax bandit with Bernoulli rewards, enumerating every one of the ``(2K)^G``
outcomes of a group; and it checks that each rule's epsilon is the one its formula states.
Deterministic: exact comparisons, no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..policies.softmax import SoftmaxBandit
from .registry import check_exact, check_true, register

#: Group sizes enumerated (those below a rule's smallest group are skipped): (2K)^G outcomes.
ENUM_GROUP_SIZES = (2, 3, 4, 5)
#: The bandit: 2 prompts x 3 actions with Bernoulli rewards (binary Z), one action certain to
#: fail and one near-certain to succeed, so groups with every success count occur.
ENUM_LOGITS = ((0.4, -0.3, 0.0), (-0.2, 0.5, 0.1))
ENUM_REWARD_PROB = ((0.9, 0.3, 0.0), (0.5, 0.2, 0.97))
#: Relative tolerance: float64 sums of at most 6^5 outcomes; a rule computing in float32
#: (``working_precision``) rounds its advantages by about 6e-8.
ENUM_RTOL, ENUM_RTOL_FLOAT32 = 1e-10, 1e-5


def epsilon_text(epsilon: float) -> str:
    """``epsilon`` as the formulas write it: ``1e-4``, ``1e-6``, ``2.5e-3``."""
    mantissa, exponent = f"{epsilon:.6e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def exact_rules():
    """``(covered, others)``: registered rules with exact binary finite-G moments (per-group
    statistics, no reference value), and the names of the rest with the reason."""
    from ..advantages import RULES

    covered, others = [], []
    for rule in RULES.values():
        if rule.statistics != "group":
            others.append(f"{rule.name} (batch statistics)")
        elif rule.centring.reference_source is not None:
            others.append(f"{rule.name} (subtracts {rule.centring.reference_source})")
        else:
            covered.append(rule)
    return covered, others


def enumerated_moments(bandit: SoftmaxBandit, prompt: int, group_size: int, rule):
    """``(E g_hat(x), E||g_hat(x)||^2)`` over all outcomes of a group, by enumeration."""
    from ._common import enumerate_prompt_estimates

    values, prob = enumerate_prompt_estimates(bandit, prompt, group_size, rule.name)  # (M, K)
    return prob @ values, prob @ np.sum(values**2, axis=1)


@register("C46", "Beyond the paper: every registered per-group convention's exact finite-G mean "
          "and second moment for binary rewards equal the enumeration of its own advantages, "
          "and its epsilon is the one its formula states",
          "derived (docs/theory.md C46; section 7's exact moments of any group-relative "
          "advantage)",
          "advantage_moments against sums over all (2K)^G outcomes of rule_gradient on a "
          "softmax bandit, G = 2..5, for every rule in RULES")
def check_c46(ctx) -> list:
    from ..theory.advantage import advantage_moments

    bandit = SoftmaxBandit(np.array(ENUM_LOGITS), np.array(ENUM_REWARD_PROB))
    moments = bandit.moments()
    covered, others = exact_rules()
    checks = [check_true(f"{len(covered)} registered rules have exact binary moments",
                         len(covered) > 0, float(len(covered)),
                         note="not covered: " + ", ".join(others))]
    for rule in covered:
        rtol = ENUM_RTOL if rule.working_precision == "the rewards' dtype" else ENUM_RTOL_FLOAT32
        exact_mean, exact_second, enum_mean, enum_second = [], [], [], []
        sizes = [G for G in ENUM_GROUP_SIZES if G >= rule.min_group_size]
        for G in sizes:
            out = advantage_moments(moments, rule, G)
            for x in range(bandit.n_prompts):
                mean, second = enumerated_moments(bandit, x, G, rule)
                exact_mean.append(out.mean_factor[x] * bandit.grad_per_prompt[x])
                exact_second.append(out.second_moment[x])
                enum_mean.append(mean)
                enum_second.append(second)
        scale = float(np.max(np.abs(exact_mean)))
        checks.append(check_exact(f"{rule.name}: E g_hat(x) = c(x) g(x), G = {sizes}",
                                  np.array(enum_mean), np.array(exact_mean), rtol=rtol,
                                  atol=rtol * scale, note="both prompts"))
        checks.append(check_exact(f"{rule.name}: E||g_hat(x)||^2, G = {sizes}",
                                  np.array(enum_second), np.array(exact_second), rtol=rtol,
                                  atol=0.0, note="both prompts"))
        if rule.scaling.epsilon > 0:
            text = epsilon_text(rule.scaling.epsilon)
            checks.append(check_true(f"{rule.name}: the epsilon {text} is the formula's",
                                     text in rule.formula.replace("1e-0", "1e-"),
                                     rule.scaling.epsilon, note=f"formula: {rule.formula}"))
    return checks
