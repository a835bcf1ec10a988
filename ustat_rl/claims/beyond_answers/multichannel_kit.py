"""The multi-reward conformance kit and the kits' probes on functions written here (C74).

A user checks a framework's multi-reward advantage with
:func:`ustat_rl.conformance.multichannel.check_multichannel_conformance` (``ustat-rl conformance
--weights``), whose tolerance is :func:`~ustat_rl.conformance.multichannel.multichannel_tolerance`,
whose fixed weights pass :func:`~ustat_rl.conformance.multichannel.check_kit_weights`, and whose
first call is :func:`~ustat_rl.conformance.multichannel.multichannel_probe` (the single-reward
kit's is :func:`ustat_rl.conformance.kit.probe`). The checks, all exact (a derandomised search,
no false-failure rate):

* TRL's two ``multi_objective_aggregation`` orders written out here from their source (float64,
  groups found by id, Bessel's std plus ``1e-4``; ``normalize_then_sum`` then whitens the batch)
  conform to ``trl_sum_then_normalize`` and ``trl_normalize_then_sum``, and so does the first
  computed in float32 throughout (the tolerance is wide enough for the float32 rounding it
  bounds); two planted wrong forms, the population std and the orders swapped, are rejected;
* on one batch of distinct rewards the tolerance is finite, at least the float32 form's
  rounding error and below the population std's error at every sample (narrow enough to see
  it);
* the weights' check returns valid weights and refuses all-zero weights and too few channels
  with a one-line error naming ``weights``;
* each probe answers ``None`` for the written functions and a one-line reason for a function
  of the wrong signature.
"""

from __future__ import annotations

import numpy as np

from ..registry import check_true, register

__all__ = ["KIT_EXAMPLES", "KIT_WEIGHTS", "group_standardise", "sum_then_normalize",
           "normalize_then_sum", "float32_sum_then_normalize", "population_sum_then_normalize",
           "swapped_orders", "kit_batch"]

#: Batches each search draws (derandomised: the same batches every run), and fixed weights.
KIT_EXAMPLES = (40, 150)
KIT_WEIGHTS = (1.0, 0.5)


def group_standardise(x, group_ids, ddof: int = 1, dtype=np.float64):
    """``(x - m_g(x)) / (s_g(x) + 1e-4)`` per group id, ``s = 0`` for a group of one."""
    x = np.asarray(x, dtype=dtype)
    out = np.empty_like(x)
    for g in np.unique(group_ids):
        rows = group_ids == g
        dev = x[rows] - x[rows].mean()
        std = np.sqrt((dev * dev).sum() / (rows.sum() - ddof)) if rows.sum() > 1 else dtype(0)
        out[rows] = dev / (std + dtype(1e-4))
    return out


def sum_then_normalize(rewards, group_ids, weights):
    """TRL ``sum_then_normalize``: ``s = sum_k w_k z_k``, then the group's standardisation."""
    z = np.asarray(rewards, dtype=np.float64)
    return group_standardise(z @ np.asarray(weights, dtype=np.float64), group_ids)


def float32_sum_then_normalize(rewards, group_ids, weights):
    """The same computed in float32 throughout, as TRL's tensors are."""
    z = np.asarray(rewards, dtype=np.float32)
    s = z @ np.asarray(weights, dtype=np.float32)
    return group_standardise(s, group_ids, dtype=np.float32)


def population_sum_then_normalize(rewards, group_ids, weights):
    """Planted: the population std (``ddof = 0``)."""
    z = np.asarray(rewards, dtype=np.float64)
    return group_standardise(z @ np.asarray(weights, dtype=np.float64), group_ids, ddof=0)


def normalize_then_sum(rewards, group_ids, weights):
    """TRL ``normalize_then_sum``: each channel standardised in its group, the weighted sum, then
    ``(r - mean_B r)/(s_B(r) + 1e-4)`` over the batch."""
    z = np.asarray(rewards, dtype=np.float64)
    r = sum(w * group_standardise(z[:, k], group_ids) for k, w in enumerate(weights))
    dev = r - r.mean()
    if r.size == 1:  # torch's std of one value is nan, as TRL's whitening then returns
        return np.full(1, np.nan)
    return dev / (np.sqrt((dev * dev).sum() / (r.size - 1)) + 1e-4)


def swapped_orders(rewards, group_ids, weights):
    """Planted: the orders swapped, each channel standardised in its group before the weighted
    sum (``normalize_then_sum`` without its batch step, so no batch of one gives a NaN)."""
    z = np.asarray(rewards, dtype=np.float64)
    return sum(w * group_standardise(z[:, k], group_ids) for k, w in enumerate(weights))


def kit_batch():
    """Three groups of 4 samples in shuffled order, two channels of distinct rewards."""
    rng = np.random.default_rng(74)
    ids = rng.permutation(np.repeat([7, -3, 11], 4))
    return rng.normal(0.0, 2.0, (ids.size, 2)), ids


def _search_checks(n: int) -> list:
    from ...conformance import Search
    from ...conformance.multichannel import check_multichannel_conformance

    search = Search(n, shrink=False)
    runs = [("trl_sum_then_normalize", sum_then_normalize, True),
            ("trl_sum_then_normalize", float32_sum_then_normalize, True),
            ("trl_normalize_then_sum", normalize_then_sum, True),
            ("trl_sum_then_normalize", population_sum_then_normalize, False),
            ("trl_sum_then_normalize", swapped_orders, False)]
    checks = []
    for rule, fn, conforms in runs:
        report = check_multichannel_conformance(fn, rule, search=search)
        verb = "conforms to" if conforms else "is rejected by"
        checks.append(check_true(f"check_multichannel_conformance: {fn.__name__} {verb} {rule} "
                                 f"({report.n_examples} batches)", report.passed == conforms,
                                 float(report.n_examples)))
    return checks


def _tolerance_checks() -> list:
    from ...advantages.multichannel import get_multichannel_rule
    from ...conformance.multichannel import multichannel_tolerance

    z, ids = kit_batch()
    z32 = z.astype(np.float32)
    w = np.array(KIT_WEIGHTS)
    expected = get_multichannel_rule("trl_sum_then_normalize").advantages(z32, ids, w)
    tol = multichannel_tolerance("trl_sum_then_normalize", z32, ids, w, np.float32)
    rounding = np.abs(float32_sum_then_normalize(z32, ids, w).astype(np.float64) - expected)
    wrong = np.abs(population_sum_then_normalize(z32, ids, w) - expected)
    return [check_true("multichannel_tolerance on a float32 batch of distinct rewards: finite, "
                       "at least the float32 form's rounding, below the population std's error "
                       "at every sample",
                       bool(np.all(np.isfinite(tol)) and np.all(rounding <= tol)
                            and np.all(tol < wrong)), float(np.max(tol / wrong)))]


def _weights_and_probe_checks() -> list:
    from ...advantages.multichannel import get_multichannel_rule
    from ...conformance.kit import probe
    from ...conformance.multichannel import check_kit_weights, multichannel_probe

    refused = []
    for rule, weights in (("trl_sum_then_normalize", (0.0, 0.0)), ("nemo_rl_gdpo", (1.0,))):
        try:
            check_kit_weights(get_multichannel_rule(rule), weights)
            refused.append("")
        except ValueError as exc:
            refused.append(str(exc))
    kept = check_kit_weights(get_multichannel_rule("trl_sum_then_normalize"), KIT_WEIGHTS)

    def one_argument(rewards):
        return rewards

    return [
        check_true("check_kit_weights returns valid weights and refuses all-zero weights and "
                   "one channel for nemo_rl_gdpo, in one line naming `weights`",
                   kept.tolist() == list(KIT_WEIGHTS)
                   and all(m.startswith("`weights`") and "\n" not in m for m in refused),
                   float(len(refused))),
        check_true("multichannel_probe: None for the written functions, a reason for one of "
                   "the wrong signature",
                   multichannel_probe(sum_then_normalize, "trl_sum_then_normalize") is None
                   and multichannel_probe(normalize_then_sum, "trl_normalize_then_sum",
                                          KIT_WEIGHTS) is None
                   and "raised" in (multichannel_probe(one_argument, "trl_sum_then_normalize")
                                    or ""), 1.0),
        check_true("kit.probe: None for TRL's group standardisation written out, a reason for "
                   "one of the wrong signature",
                   probe(group_standardise, "trl_group") is None
                   and "raised" in (probe(one_argument, "trl_group") or ""), 1.0),
    ]


@register("C74", "Beyond the paper: the multi-reward conformance kit passes TRL's two "
          "aggregation orders written out (in float64 and float32) and rejects a population std "
          "and the orders swapped; its tolerance lies between the float32 rounding and the "
          "population std's error; its weights check and both kits' probes answer as documented",
          "derived (docs/theory.md C74; docs/conventions.md, multi-reward rules)",
          "check_multichannel_conformance (derandomised, 40 batches quick, 150 full) on five "
          "functions written here; multichannel_tolerance on a float32 batch; "
          "check_kit_weights, multichannel_probe and kit.probe on written and wrong-signature "
          "functions; all exact")
def check_c74(ctx) -> list:
    return (_search_checks(ctx.reps(*KIT_EXAMPLES)) + _tolerance_checks()
            + _weights_and_probe_checks())
