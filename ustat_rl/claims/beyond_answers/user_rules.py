"""A user's own affine rule, registered by name, against every outcome of a group (C77).

Every built-in affine rule is either a prompt-only baseline (``a = 1, b = 0``) or a multiple of
GRPO (``a = 0``), so the general branch of the affine moments
(:func:`~ustat_rl.theory.affine.affine_variance` and
:func:`~ustat_rl.theory.affine.affine_covariance` with ``a != 0`` and ``b != 0``) answers only a
user's own rule. Here such a rule, ``z - 0.5 m - 0.2 l - 0.1 V(x)`` (group mean ``m``,
leave-one-out mean ``l``, the prompt's value ``V``), is registered with
:func:`~ustat_rl.advantages.registry.register_rule` and asked for by its name:
:func:`~ustat_rl.theory.mse.per_prompt_mse` and
:func:`~ustat_rl.theory.mse.per_prompt_covariance` are set against the sums over every outcome
of a group of C71's bandit, the advantages written out in this module (never read from the
rule), with 0/1 rewards and with the non-binary two-point rewards -1 and 2. Then
:func:`~ustat_rl.advantages.registry.unregister_rule` removes the name, which the registry must
then refuse, and leaves the built-in rules alone. A negative control: GRPO's exact MSE, set
against the same enumeration, is rejected by the same comparison. All exact (rtol 1e-10), no
sampling: no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_exact, check_true, register
from .enumerated_routes import (
    ROUTE_GROUP_SIZES,
    ROUTE_RTOL,
    enumerated,
    full_mean,
    loo,
    route_bandit,
)

__all__ = ["USER_WEIGHTS", "USER_RULE_NAME", "user_rule", "written_out", "enumerated_moments"]

#: The weights ``(w_m, w_l, w_r)`` of the group mean, the leave-one-out mean and the value:
#: ``a = 1 - w_m - w_l = 0.3`` and ``b != 0``, and ``D = a V - w_r V = 0.2 V != 0``, so every term
#: of the general branch (the ``D`` terms included) is reached.
USER_WEIGHTS = (0.5, 0.2, 0.1)
#: The name the rule is registered under for the check (removed afterwards).
USER_RULE_NAME = "verify_user_mixed"


def user_rule():
    """The rule, built from the package's parts as a user would."""
    from ...advantages.parts import Centring
    from ...advantages.rule import AdvantageRule

    w_m, w_l, w_r = USER_WEIGHTS
    return AdvantageRule(USER_RULE_NAME, Centring("value", mean=w_m, leave_one_out=w_l,
                                                  reference=w_r))


def written_out(z: np.ndarray, value: float) -> np.ndarray:
    """``z_i - w_m mean(z) - w_l (sum_k z_k - z_i)/(G - 1) - w_r V`` for outcomes ``(M, G)``."""
    w_m, w_l, w_r = USER_WEIGHTS
    # the means from C71's written-out advantages: m = z - (z - m), l = z - (z - l)
    return z - w_m * (z - full_mean(z)) - w_l * (z - loo(z)) - w_r * value


def enumerated_moments(bandit, G: int, estimator) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt, ``E||g_hat(x) - g(x)||^2`` ``(P,)`` and ``Cov(g_hat(x) | x)`` ``(P, d, d)``
    over every outcome of a group; ``estimator(z, V(x))`` gives the outcomes' advantages."""
    mse, cov = [], []
    for x in range(bandit.n_prompts):
        est, prob, _ = enumerated(bandit, x, G, lambda z, v=bandit.value[x]: estimator(z, v),
                                  full=True)
        mean = prob @ est
        mse.append(prob @ np.sum((est - _target(bandit, x)) ** 2, axis=1))
        cov.append(np.einsum("m,mk,ml->kl", prob, est, est) - np.outer(mean, mean))
    return np.array(mse), np.array(cov)


def _target(bandit, x: int) -> np.ndarray:
    """``g(x)`` in the whole parameter (the prompt's block, zeros elsewhere)."""
    d = bandit.n_actions
    out = np.zeros(bandit.n_prompts * d)
    out[x * d:(x + 1) * d] = bandit.grad_per_prompt[x]
    return out


def _two_point_bandit():
    from ...policies.softmax import SoftmaxBandit

    base = route_bandit()
    return SoftmaxBandit(base.logits, base.reward_prob, base.prompt_prob,
                         reward_values=(-1.0, 2.0))


@register("C77", "Beyond the paper: a user's own affine rule (group mean, leave-one-out mean "
          "and value mixed, a case no built-in rule reaches), registered by name, gets the exact "
          "per-prompt MSE and covariance of every outcome of a group, for 0/1 and non-binary "
          "rewards; unregistering removes the name and nothing else",
          "derived (docs/theory.md C77; section 2's affine rules, C5)",
          "register_rule, then per_prompt_mse and per_prompt_covariance by the rule's name on "
          "C71's bandit at G = 2, 3, 4 against enumeration of all 6^G outcomes with the "
          "advantages written out; unregister_rule; GRPO's MSE as the negative control")
def check_c77(ctx) -> list:
    from ...advantages.registry import get_rule, register_rule, rule_names, unregister_rule
    from ...theory.mse import per_prompt_covariance, per_prompt_mse

    before = rule_names()
    register_rule(user_rule(), replace=True)
    checks = []
    try:
        for label, bandit in (("0/1 rewards", route_bandit()),
                              ("rewards -1 and 2", _two_point_bandit())):
            moments = bandit.moments(matrices=True)
            for G in ROUTE_GROUP_SIZES:
                mse, cov = enumerated_moments(bandit, G, written_out)
                checks.append(check_exact(
                    f"{label}, G = {G}: per_prompt_mse of the registered rule = enumeration",
                    mse, per_prompt_mse(moments, USER_RULE_NAME, G), rtol=ROUTE_RTOL))
                checks.append(check_exact(
                    f"{label}, G = {G}: per_prompt_covariance of the registered rule = "
                    f"enumeration", cov, per_prompt_covariance(moments, USER_RULE_NAME, G),
                    rtol=ROUTE_RTOL, atol=1e-14))
        bandit = route_bandit()
        mse, _ = enumerated_moments(bandit, 3, written_out)
        grpo = per_prompt_mse(bandit.moments(), "grpo", 3)
        control = check_exact("negative control: GRPO's MSE at G = 3 against the user rule's "
                              "enumeration", mse, grpo, rtol=ROUTE_RTOL)
        checks.append(check_true(
            "negative control: GRPO's exact MSE is rejected by the same comparison at G = 3",
            not control.passed, float(np.max(np.abs(mse - grpo))),
            note="measured: the largest per-prompt gap"))
    finally:
        unregister_rule(USER_RULE_NAME)
    try:
        get_rule(USER_RULE_NAME)
        refused = False
    except ValueError:
        refused = True
    checks.append(check_true("after unregister_rule the name is refused and the built-in "
                             "rules are unchanged", refused and rule_names() == before,
                             float(len(rule_names()))))
    return checks
