r"""Dynamic sampling read from a pilot's binary rewards (docs/theory.md section 7, "Dynamic sampling").

What ``ustat-rl gstar --dynamic-sampling`` and ``ustat-rl rewards --dynamic-sampling`` report at
each admissible ``G`` (a divisor of the budget ``N``, ``B = N/G`` kept groups per step): the keep
probability ``r``, verl's ``filter_groups`` cost with generation batches of ``b = B`` prompts
(expected batches, generated rollouts and, under a cap of ``K`` batches, the chance of hitting
it), GRPO's kept batch ``E g_DS = g/r`` (its scale ``1/r`` and relative bias ``Q/r``,
``Q = 1 - r``), and, from a pilot with scores, the exact MSE of that batch and the best ``G``
when the budget counts generated rollouts, accepted ones, or no filter is run
(:func:`~ustat_rl.theory.dynamic_sampling.optimal_filtered_group_size`). It computes; the
interface prints.

Every derived number plugs the pilot's success rates ``p_hat = m/n`` into the theory, whose
``q(p) = p^G + (1 - p)^G`` is convex, so ``E q(p_hat) >= q(p)``: the plug-in ``r`` reads low in
expectation and the costs and ``1/r`` read high. Only the per-group all-equal indicator, and its
U-statistic ``(C(m, G) + C(n - m, G))/C(n, G)`` for ``G <= n``
(:func:`~ustat_rl.pilot.report.all_equal_fraction`), is unbiased; it is reported beside the
plug-in ``r`` where every pilot group has at least ``G`` samples. Estimated moments enter the
exact kept-batch moments through :func:`~ustat_rl.theory.advantage.binary_projection`, as the
theory requires; those moments evaluate polynomials of degree up to ``G`` in ``p_hat``, so they
are plug-in estimates too (a small pilot can give a negative MSE), and ``unfiltered_mse`` is the
same computation without the filter, to hold against the unbiased prediction of C6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .._validation import as_int
from ..formatting import json_ready
from ..theory.advantage import binary_projection
from ..theory.dynamic_sampling import (
    ACCOUNTINGS,
    FILTER_TARGETS,
    cost_at_keep_probability,
    filtered_batch_moments,
    keep_probability,
    optimal_filtered_group_size,
)
from ..theory.dynamic_sampling_cost import expected_gen_batches
from ..theory.group_filters import DEFAULT_GROUP_FILTER, get_group_filter, keep_mask
from ..theory.group_size import best_index, budget_grid
from .estimate import estimate_moments, pilot_statistics
from .report import all_equal_fraction, check_degenerate, check_signal
from .rollouts import Rollouts

__all__ = ["DynamicSamplingReport", "pilot_dynamic_sampling", "rewards_dynamic_sampling",
           "PLUG_IN_NOTE", "NOTHING_TO_FILTER", "CAP_RISK"]

#: The advantage rule the kept-batch moments and the best ``G`` are computed for (E g_DS = g/r).
ESTIMATOR = "grpo"

#: Why the plug-in numbers are biased, in one sentence the commands print and the help repeats.
PLUG_IN_NOTE = ("the plug-in r puts the pilot's success rates p = m/n into p^G + (1-p)^G, which "
                "is biased: that function is convex, so in expectation the plug-in overstates "
                "the all-equal fraction, r reads low and costs and 1/r built on it read high; "
                "only the per-group all-equal indicator is unbiased (its U-statistic, the "
                "'r unbiased' column, for G <= every pilot group's size), and the costs and 1/r "
                "use it there (rows marked * use the plug-in r)")

#: The largest chance per step of hitting verl's cap (``max_num_gen_batches``, where verl raises
#: "Generated too many") that a best ``G`` may carry: a run of 1000 steps then stops with
#: probability at most about 1 - (1 - 1e-3)^1000 = 0.63 -- so the text names the rate.
CAP_RISK = 1e-3


@dataclass(frozen=True)
class DynamicSamplingReport:
    """What ``--dynamic-sampling`` adds to ``gstar`` and ``rewards`` (module docstring).

    Attributes
    ----------
    budget : int
        ``N``: the ``B G`` accepted rollouts of one step at each ``G``.
    max_gen_batches : int
        ``K``, verl's ``max_num_gen_batches``; 0 for no cap (verl's default).
    n_prompts : int
        Pilot groups (prompts).
    min_pilot_group : int
        The smallest pilot group: the unbiased ``r`` needs ``G`` at most this.
    group_sizes, batch_sizes : list of int
        The admissible ``G`` (divisors of ``N``, at least 2) and ``B = N/G``; the generation
        batch is ``b = B`` prompts.
    keep_prob : list of float
        The plug-in ``r = 1 - sum_x f(x) q(p_hat(x))``.
    keep_prob_unbiased : list of float or None
        ``1 -`` the U-statistic all-equal fraction (unbiased), ``None`` where ``G`` exceeds a
        pilot group or where ``group_filter`` is not verl's filter at that ``G``.
    cost_uses_unbiased : list of bool
        Whether the cost columns and the ``1/r`` scale of each ``G`` use ``keep_prob_unbiased``
        (where it exists) or the plug-in ``keep_prob``.
    expected_gen_batches, expected_rollouts : list of float
        ``E min(N, K)`` generation batches per step and the ``G b E min(N, K)`` rollouts they
        generate (discarded groups and the overflow included).
    cap_probability : list of float or None
        ``P(N > K)``, verl's "Generated too many" error; ``None`` without a cap.
    grpo_mean_scale, grpo_relative_bias : list of float or None
        GRPO's kept batch estimates ``g/r``: the direction of ``g``, ``1/r`` times as long, with
        ``||E g_DS - g|| / ||g|| = Q/r``; ``None`` at a ``G`` where ``group_filter`` is not verl's
        all-equal filter (it then drops groups with a gradient and ``E g_DS`` is not ``g/r``).
    resolved : dict of lists of bool, or None
        Per target (``"grad"``: ``mse``; ``"rescaled"``: ``mse_rescaled``) and ``G``, whether the
        kept batch's plug-in variance is positive and that target's squared bias not negative:
        where not, the MSE is unresolved (an MSE is at least its squared bias and at least its
        variance). ``None`` without scores.
    mse : dict of lists or None
        From a pilot with scores, GRPO at ``(G, B)`` (point estimates, no interval):
        ``bias_sq``, ``variance``, ``mse`` (against ``g``), ``mse_rescaled`` (the batch times
        ``r``) and ``unfiltered_mse`` (``B`` drawn groups, no filter); ``None`` without scores.
    best : dict or None
        Per accounting of :data:`~ustat_rl.theory.dynamic_sampling.ACCOUNTINGS` and target of
        :data:`~ustat_rl.theory.dynamic_sampling.FILTER_TARGETS` (one target, ``"grad"``, for
        ``"unfiltered"``): ``group_size``, ``batch_size``, ``mse``, ``rollouts`` (expected,
        generated), ``cap_probability`` and ``resolved`` of the smallest MSE of
        :func:`~ustat_rl.theory.dynamic_sampling.optimal_filtered_group_size` over the
        ``group_sizes`` whose chance of hitting a cap ``K`` at that ``(G, B)`` is at most
        :data:`CAP_RISK` (``b = B``), an unresolved size entering at its squared bias (so
        ``resolved`` is false when such a size may be best, or the smallest MSE is not
        positive); ``None`` for a target no ``G`` qualifies for (under the cap, or because no
        ``G`` affords a batch within ``N`` generated rollouts); the whole field ``None`` without
        scores.
    estimator : str
        The advantage rule of ``mse`` and ``best`` (``"grpo"``).
    group_filter : str
        Which groups are kept (:data:`~ustat_rl.theory.group_filters.GROUP_FILTERS`; beyond the
        paper), ``"verl"`` by default.
    note : str
        :data:`PLUG_IN_NOTE`.
    """

    budget: int
    max_gen_batches: int
    n_prompts: int
    min_pilot_group: int
    group_sizes: list
    batch_sizes: list
    keep_prob: list
    keep_prob_unbiased: list | None
    expected_gen_batches: list
    expected_rollouts: list
    cap_probability: list | None
    grpo_mean_scale: list
    grpo_relative_bias: list
    mse: dict | None
    best: dict | None
    cost_uses_unbiased: list = field(default_factory=list)
    resolved: dict | None = None
    estimator: str = ESTIMATOR
    note: str = PLUG_IN_NOTE
    group_filter: str = DEFAULT_GROUP_FILTER

    def to_dict(self) -> dict:
        """JSON-ready (:func:`ustat_rl.formatting.json_ready`)."""
        return json_ready(asdict(self))


#: What a pilot of equal rewards means here (the consequence ``check_signal`` words).
NOTHING_TO_FILTER = ("there is nothing for dynamic sampling to filter or learn from (it keeps no "
                     "group at any G: r = 0 and a step never fills)")


def _check_binary_and_varied(reward: np.ndarray, index: np.ndarray, P: int) -> None:
    """One ``ValueError`` for rewards the keep probability cannot describe or cannot use."""
    binary = (reward == 0.0) | (reward == 1.0)
    if not np.all(binary):
        raise ValueError("--dynamic-sampling needs binary rewards (0 or 1): the keep "
                         "probability 1 - p^G - (1-p)^G and the kept batch's exact moments are "
                         f"those of binary rewards; got the reward {reward[~binary][0]:g}")
    if np.all(reward == reward[0]):  # the words of check_signal, shared with gstar and allocate
        raise ValueError(f"all rewards are equal (every reward equals {reward[0]:g}), so the "
                         f"pilot carries no gradient signal and {NOTHING_TO_FILTER}; pilot "
                         "prompts whose rewards vary are needed")
    successes = np.bincount(index, reward, P)
    if np.all((successes == 0) | (successes == np.bincount(index, minlength=P))):
        raise ValueError("every group's rewards are all equal (each prompt solved by all its "
                         f"samples or by none), so the estimated r is 0 and {NOTHING_TO_FILTER}; "
                         "pilot prompts whose rewards vary are needed")


def _unbiased_keep(successes, counts, sizes, prompt_prob):
    """``1 -`` the U-statistic all-equal fraction at each ``G``, ``None`` where ``G > min n``."""
    if prompt_prob is None:
        frac, unbiased = all_equal_fraction(successes, counts, sizes)
    else:  # a fixed prompt set: its weights, prompt by prompt
        per = np.array([all_equal_fraction(successes[i:i + 1], counts[i:i + 1], sizes)[0]
                        for i in range(successes.size)])  # (P, n_G)
        frac, unbiased = prompt_prob @ per, sizes <= counts.min()
    return [float(1.0 - f) if ok else None for f, ok in zip(frac, unbiased)]


def _cost_columns(keep, sizes, budget: int, K: int) -> dict:
    """Costs at each ``G`` from the keep probability ``keep`` (unbiased where it exists)."""
    rows = [cost_at_keep_probability(r, int(G), budget // int(G), None, K)
            for r, G in zip(keep, sizes)]
    r = np.array(keep, dtype=np.float64)
    with np.errstate(divide="ignore"):
        scale = np.where(r > 0.0, 1.0 / np.where(r > 0.0, r, 1.0), np.inf)
    return {"expected_gen_batches": [row.expected_gen_batches for row in rows],
            "expected_rollouts": [row.expected_rollouts for row in rows],
            "cap_probability": [row.cap_probability for row in rows] if K else None,
            "grpo_mean_scale": scale.tolist(), "grpo_relative_bias": (scale - 1.0).tolist()}


def _best(projected, grid, rows, keep, K: int, group_filter) -> dict:
    """The best ``G`` per accounting and target (``DynamicSamplingReport.best``).

    Sizes that break the cap are left out. A size whose MSE the pilot does not resolve (its
    plug-in variance, or for the unfiltered batch its MSE, is not positive; or its squared bias
    is negative) enters with the lower bound its squared bias gives (0 when that is not
    resolved either), so the answer is "unresolved" whenever such a size may be the best.
    """
    sizes = grid.group_sizes  # the budget was checked where the walk began
    keep_of = dict(zip(map(int, sizes), keep))
    by_size = {int(G): row for G, row in zip(sizes, rows)}
    best = {}
    for accounting in ACCOUNTINGS:
        targets = FILTER_TARGETS if accounting != "unfiltered" else FILTER_TARGETS[:1]
        best[accounting] = {}
        for target in targets:
            try:
                out = optimal_filtered_group_size(projected, grid, ESTIMATOR, accounting, sizes,
                                                  target=target, group_filter=group_filter)
            except ValueError:  # no G affords one kept group within N generated rollouts
                best[accounting][target] = None
                continue
            fit = [_resolved(by_size[int(G)], accounting, target) for G in out.group_sizes]
            ok, floor = np.array([f[0] for f in fit]), np.array([f[1] for f in fit])
            value = np.where(ok, out.mses, floor)  # (n_G,) an unresolved size at its bound
            allowed = np.isfinite(out.mses)
            cap = np.zeros(out.group_sizes.size)
            if K and accounting != "unfiltered":
                cap = np.array([expected_gen_batches(keep_of[int(G)], int(B), int(B), K)[1]
                                if B else 1.0 for G, B in zip(out.group_sizes, out.batch_sizes)])
                allowed &= cap <= CAP_RISK
            if not np.any(allowed):
                best[accounting][target] = None
                continue
            i = best_index(value, allowed)
            best[accounting][target] = {"group_size": int(out.group_sizes[i]),
                                        "batch_size": int(out.batch_sizes[i]),
                                        "mse": float(out.mses[i]),
                                        "resolved": bool(ok[i] and out.mses[i] > 0.0),
                                        "rollouts": float(out.rollouts[i]),
                                        "cap_probability": float(cap[i])}
    return best


def _resolved(row, accounting: str, target: str) -> tuple[bool, float]:
    """Whether one size's MSE is resolved, and the lower bound it has when it is not."""
    if accounting == "unfiltered":  # an unbiased rule: its MSE is its variance
        return bool(row.unfiltered_mse > 0.0), 0.0
    bias_sq = (row.bias_sq if target == "grad"
               else row.mse_rescaled - row.keep_prob**2 * row.variance)
    return bool(row.variance > 0.0 and bias_sq >= 0.0), max(bias_sq, 0.0)


def _report(reward, index, P, budget, max_gen_batches, prompt_prob, moments,
            group_filter=None) -> DynamicSamplingReport:
    grid = budget_grid(budget)  # a BudgetGrid from the entry passes as it is: checked once
    budget, sizes = grid.budget, grid.group_sizes  # sizes (n_G,): divisors of N, >= 2
    kept = get_group_filter(group_filter)
    K = as_int(max_gen_batches, "max_gen_batches", 0, "(0 for no cap)")
    _check_binary_and_varied(reward, index, P)
    successes = np.bincount(index, reward, P)
    counts = np.bincount(index, minlength=P)
    value = successes / counts  # (P,) p_hat = m/n
    plug_in = [keep_probability(value, int(G), prompt_prob, kept) for G in sizes]
    # where the filter is verl's at G, the all-equal U-statistic and GRPO's g/r apply to it
    as_verl = [bool(np.array_equal(keep_mask(kept, int(G)), keep_mask(None, int(G))))
               for G in sizes]
    unbiased = [u if same else None for u, same in
                zip(_unbiased_keep(successes, counts, sizes, prompt_prob), as_verl)]
    keep = [u if u is not None else r for u, r in zip(unbiased, plug_in)]
    costs = _cost_columns(keep, sizes, budget, K)
    for key in ("grpo_mean_scale", "grpo_relative_bias"):
        costs[key] = [v if same else None for v, same in zip(costs[key], as_verl)]
    mse = best = resolved = None
    if moments is not None:
        projected = binary_projection(moments)
        rows = [filtered_batch_moments(projected, ESTIMATOR, int(G), budget // int(G), kept)
                for G in sizes]
        mse = {key: [float(getattr(row, key)) for row in rows]
               for key in ("bias_sq", "variance", "mse", "mse_rescaled", "unfiltered_mse")}
        resolved = {target: [_resolved(row, "generated", target)[0] for row in rows]
                    for target in FILTER_TARGETS}
        best = _best(projected, grid, rows, keep, K, kept)
    return DynamicSamplingReport(
        budget=budget, max_gen_batches=K, n_prompts=P, min_pilot_group=int(counts.min()),
        group_sizes=sizes.tolist(), batch_sizes=(budget // sizes).tolist(),
        keep_prob=plug_in, keep_prob_unbiased=unbiased,
        expected_gen_batches=costs["expected_gen_batches"],
        expected_rollouts=costs["expected_rollouts"], cap_probability=costs["cap_probability"],
        grpo_mean_scale=costs["grpo_mean_scale"], grpo_relative_bias=costs["grpo_relative_bias"],
        mse=mse, best=best, cost_uses_unbiased=[u is not None for u in unbiased],
        resolved=resolved, group_filter=kept.name)


def rewards_dynamic_sampling(reward, group_index, budget, max_gen_batches: int = 0,
                             prompt_prob=None, group_filter=None) -> DynamicSamplingReport:
    """Dynamic sampling at budget ``N`` from grouped binary rewards alone (no ``mse``, ``best``).

    Parameters
    ----------
    reward : array_like (n,)
        Rewards in ``{0, 1}``.
    group_index : array_like of int (n,)
        Each row's group in ``0..P-1``, every group non-empty (``GroupedRewards.groups()[1]``).
    budget : int
        ``N``, accepted rollouts per step (:func:`~ustat_rl.theory.group_size.budget_grid`).
    max_gen_batches : int
        ``K >= 1`` generation batches before verl raises; 0 (default) for no cap.
    prompt_prob : array_like (P,), optional
        ``f(x)`` of a fixed prompt set; i.i.d. groups (uniform) by default.
    group_filter : str or GroupFilter, optional
        Which groups are kept (:data:`~ustat_rl.theory.group_filters.GROUP_FILTERS`); verl's by
        default.

    Returns
    -------
    DynamicSamplingReport
        ``ValueError`` (one line) for rewards that are not binary, or all equal within every
        group (then nothing is kept, or learnt).

    Examples
    --------
    Two prompts solved by 1 and 3 of their 4 samples: ``p_hat = 1/4, 3/4``.

    >>> out = rewards_dynamic_sampling([1, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1], 8)
    >>> out.group_sizes, [round(r, 4) for r in out.keep_prob], out.keep_prob_unbiased
    ([2, 4, 8], [0.375, 0.6797, 0.8999], [0.5, 1.0, None])
    """
    reward = np.asarray(reward, dtype=np.float64).reshape(-1)
    index = np.asarray(group_index).reshape(-1)
    if index.shape != reward.shape or reward.size == 0:
        raise ValueError(f"`group_index` must have the shape of `reward` {reward.shape}, got "
                         f"{index.shape}")
    if not np.issubdtype(index.dtype, np.integer) or index.min() < 0:
        raise TypeError("`group_index` must hold non-negative integers (0..P-1)")
    P = int(index.max()) + 1
    if np.bincount(index, minlength=P).min() == 0:
        raise ValueError("`group_index` must use every group 0..P-1")
    f = None if prompt_prob is None else np.asarray(prompt_prob, dtype=np.float64)
    return _report(reward, index, P, budget, max_gen_batches, f, None, group_filter)


def pilot_dynamic_sampling(rollouts: Rollouts, budget, max_gen_batches: int = 0,
                           group_filter=None) -> DynamicSamplingReport:
    """Dynamic sampling at budget ``N`` from a pilot with scores: costs, bias, MSE and best ``G``.

    The pilot's moments (:func:`~ustat_rl.pilot.estimate.estimate_moments`) pass through
    :func:`~ustat_rl.theory.advantage.binary_projection` before the exact kept-batch moments
    (:func:`~ustat_rl.theory.dynamic_sampling.filtered_batch_moments`) and the fixed-budget
    search are evaluated on them: point estimates, biased like the plug-in ``r`` (module
    docstring), with no interval. A pilot without gradient signal is refused as ``gstar``
    refuses it (:func:`~ustat_rl.pilot.report.check_degenerate`). ``group_filter`` as in
    :func:`rewards_dynamic_sampling`.
    """
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a Rollouts, got {type(rollouts).__name__}")
    budget = budget_grid(budget)
    _, index = rollouts.groups()
    P = rollouts.n_prompts
    reward = np.asarray(rollouts.reward, dtype=np.float64)
    if np.all((reward == 0.0) | (reward == 1.0)):
        check_signal(rollouts, NOTHING_TO_FILTER)
    _check_binary_and_varied(reward, index, P)
    check_degenerate(rollouts)
    stats = pilot_statistics(rollouts)
    return _report(reward, index, P, budget, max_gen_batches, stats.prompt_prob,
                   estimate_moments(stats), group_filter)

