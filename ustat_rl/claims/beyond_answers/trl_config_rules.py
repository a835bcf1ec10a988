"""A TRL run's configuration read as the advantage rule it trains (C84).

:func:`~ustat_rl.frameworks.trl_monitor.run_rule` reads ``GRPOConfig.scale_rewards``,
``multi_objective_aggregation`` and the number of reward functions, and names the registry rule
the TRL monitor then advises for; every later answer of the monitor is for that rule. Here, for
every value of ``scale_rewards`` TRL accepts (``"group"``, ``"batch"``, ``"none"``, ``True``,
``False``), with one and with two reward functions, the named rule's advantages on a batch of
three groups of four are set against TRL's arithmetic written out by loops in C81's module
(:func:`~ustat_rl.claims.beyond_answers.small_routes.trl_written`): the
(weighted) sum of the rewards, minus its group's mean, divided by the group's or the batch's
sample std plus 1e-4, or not divided. With ``normalize_then_sum`` the name is TRL's
normalise-then-sum rule whatever ``scale_rewards`` says (its arithmetic is C74's); an order TRL
does not have gives no rule. Negative control: the ``"batch"`` rule's advantages against the
group-std arithmetic, rejected. Exact; needs the ``hf`` extra (the monitor's module imports
``transformers``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..registry import check_exact, check_true, register, require_extra
from .small_routes import trl_written

__all__: list[str] = []

#: Three groups of four; two reward functions with weights 1 and 0.5.
G, B = 4, 3
WEIGHTS = (1.0, 0.5)


def _rewards() -> np.ndarray:
    """``(B G, 2)`` rewards: a binary channel and a graded one (no group all equal)."""
    first = np.array([1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0], dtype=np.float64)
    second = np.array([0.2, 0.9, 0.4, 0.4, 0.0, 0.7, 0.1, 0.3, 0.8, 0.6, 0.6, 0.5])
    return np.column_stack([first, second])


@register("C84", "Beyond the paper: the TRL monitor reads a GRPOConfig as the rule TRL trains: "
          "for every scale_rewards value, with one and two reward functions, the named rule's "
          "advantages are TRL's sum-then-normalise arithmetic; normalize_then_sum names its own "
          "rule whatever scale_rewards says",
          "derived (docs/theory.md C84; docs/conventions.md, TRL's rules)",
          "run_rule on GRPOConfig-like settings, the named registry rule (or multi-reward rule) "
          "applied to three groups of four against TRL's arithmetic written out; the batch "
          "rule against the group arithmetic as the negative control")
def check_c84(ctx) -> list:
    require_extra("hf", "transformers")
    from ...advantages.multichannel import get_multichannel_rule
    from ...advantages.registry import get_rule
    from ...frameworks.trl_monitor import run_rule

    rewards = _rewards()
    inverse = np.repeat(np.arange(B), G)
    counts = np.full(B, G)
    weights = np.array(WEIGHTS)
    checks = []
    for scale in ("group", "batch", "none", True, False):
        args = SimpleNamespace(scale_rewards=scale,
                               multi_objective_aggregation="sum_then_normalize")
        one, _ = run_rule(args, 1)
        two, _ = run_rule(args, 2)
        got_one = get_rule(one).apply(rewards[:, 0], inverse, counts)
        got_two = get_multichannel_rule(two).apply(rewards, inverse, counts, weights)
        checks += [
            check_exact(f"scale_rewards={scale!r}, one reward function: {one} = TRL's "
                        f"arithmetic", trl_written(rewards[:, 0], inverse, scale), got_one,
                        rtol=1e-12, atol=1e-14),
            check_exact(f"scale_rewards={scale!r}, two reward functions (weights {WEIGHTS}): "
                        f"{two} = TRL's arithmetic on the weighted sum",
                        trl_written(rewards @ weights, inverse, scale), got_two, rtol=1e-12,
                        atol=1e-14)]
    names = {run_rule(SimpleNamespace(scale_rewards=scale,
                                      multi_objective_aggregation="normalize_then_sum"), n)[0]
             for scale in ("group", "batch", "none") for n in (1, 2)}
    unknown = run_rule(SimpleNamespace(scale_rewards="group",
                                       multi_objective_aggregation="mean_then_scale"), 1)[0]
    checks.append(check_true(
        "normalize_then_sum names trl_normalize_then_sum whatever scale_rewards says, and an "
        "order TRL does not have names no rule", names == {"trl_normalize_then_sum"}
        and unknown is None, float(len(names))))
    batch = get_rule(run_rule(SimpleNamespace(scale_rewards="batch"), 1)[0]).apply(
        rewards[:, 0], inverse, counts)
    checks.append(check_true(
        "negative control: the batch rule's advantages against the group-std arithmetic are "
        "rejected by the same comparison",
        not check_exact("", trl_written(rewards[:, 0], inverse, "group"), batch, rtol=1e-12,
                        atol=1e-14).passed, 1.0))
    return checks
