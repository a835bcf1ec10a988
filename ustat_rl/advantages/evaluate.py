"""The one evaluator of advantage rules: a rule's data in, per-sample advantages out.

Every statistic is computed around a shift (the first reward of the group, or of the batch), so
an all-equal group has deviations exactly 0 whatever its offset and large offsets lose no
precision in the mean; root sums of squares are scaled by the largest deviation, so they are 0
exactly for ties and never underflow to 0 otherwise. Equal groups (``rewards (M, G)``) take a
row-wise route with the same arithmetic as the ragged one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Parts", "evaluate"]


@dataclass(frozen=True)
class Parts:
    """One evaluation, each ``(n,)``: ``advantage = numerator / denominator`` where divided, the
    spread (a std, or the rule's statistic) inside the denominator (0 where none is taken), and
    the one-sample groups."""

    advantage: np.ndarray
    numerator: np.ndarray
    denominator: np.ndarray
    std: np.ndarray
    single: np.ndarray


def _first_index(inverse: np.ndarray, n_groups: int) -> np.ndarray:
    first = np.full(n_groups, inverse.size, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(inverse.size))
    return first


def _root_ss(dev, inverse, k):
    """``sqrt(sum dev^2)`` per group, shape ``(k,)``, scaled by the largest ``|dev|``."""
    top = np.zeros(k)
    np.maximum.at(top, inverse, np.abs(dev))
    safe = np.where(top > 0, top, 1.0)
    return top * np.sqrt(np.bincount(inverse, (dev / safe[inverse]) ** 2, minlength=k))


def _deviations(z, inverse, counts, rows):
    """``z - m_g`` ``(n,)`` and each group's root sum of squared deviations ``(k,)``."""
    if rows is not None:  # equal groups: the same arithmetic along axis 1
        dev = rows - (rows[:, :1] + np.mean(rows - rows[:, :1], axis=1, keepdims=True))
        top = np.abs(dev).max(axis=1, keepdims=True)
        root = top[:, 0] * np.sqrt(np.sum((dev / np.where(top > 0, top, 1.0)) ** 2, axis=1))
        return dev.reshape(-1), root
    shift = z[_first_index(inverse, counts.size)]
    mean = shift + np.bincount(inverse, z - shift[inverse], minlength=counts.size) / counts
    dev = z - mean[inverse]
    return dev, _root_ss(dev, inverse, counts.size)


def _batch_moments(x, count_epsilon=0.0):
    """``x`` less its shifted batch mean (sum over ``N + count_epsilon``), and the root sum of
    squares left."""
    shift = x[0]
    centred = x - (shift + np.mean(x - shift)) * (x.size / (x.size + count_epsilon))
    return centred, float(_root_ss(centred, np.zeros(x.size, dtype=np.int64), 1)[0])


def _members(inverse, counts, size):
    """Sample indices ``(k_size, size)`` of the groups of ``size`` samples, groups in order."""
    order = np.argsort(inverse, kind="stable")
    return order[np.isin(inverse[order], np.flatnonzero(counts == size))].reshape(-1, size)


def _others_std(z, inverse, counts, bessel):
    """Std of the other ``n - 1`` rewards of each sample's group (0 for ``n < 3``)."""
    out = np.zeros(z.size)
    for n in np.unique(counts):
        if n < 3:
            continue
        members = _members(inverse, counts, n)
        others = z[members][:, None, :].repeat(n, axis=1)[:, ~np.eye(n, dtype=bool)]
        others = others.reshape(-1, n, n - 1)  # (k, n, n - 1): row i leaves sample i out
        dev = others - others[..., :1]  # exact zeros for ties
        dev = dev - dev.mean(axis=-1, keepdims=True)
        top = np.abs(dev).max(axis=-1, keepdims=True)
        dof = n - 2 if bessel else n - 1
        rms = np.sqrt(np.sum((dev / np.where(top > 0, top, 1.0)) ** 2, axis=-1) / dof)
        out[members] = top[..., 0] * rms
    return out


def _statistic(rule, z, inverse, counts):
    spread = np.zeros(counts.size)
    for n in np.unique(counts):
        groups = np.flatnonzero(counts == n)
        values = rule.scaling.statistic(z[_members(inverse, counts, n)])
        spread[groups] = np.asarray(values, dtype=np.float64).reshape(groups.size)
    return spread


def _group_function(function, z, inverse, counts, rows):
    """A group-function centring's numerators ``(n,)``, one call per group size."""
    if rows is not None:
        return np.asarray(function(rows), dtype=np.float64).reshape(-1)
    out = np.zeros(z.size)
    for n in np.unique(counts):
        members = _members(inverse, counts, n)  # (k_n, n)
        out[members] = np.asarray(function(z[members]), dtype=np.float64).reshape(members.shape)
    return out


def evaluate(estimator, z, inverse, counts, reference=None, rows=None) -> Parts:
    """The advantages of ``estimator`` (read off its data; no name is special).

    ``z (n,)`` float rewards in groups ``inverse (n,)`` of sizes ``counts (k,)``; ``reference``
    ``(n,)`` is ``r(x)`` per sample for a rule that subtracts one; ``rows`` is ``z`` as
    ``(k, G)`` when the groups are equal and contiguous (the fast route).
    """
    n = counts[inverse].astype(np.float64)
    single = n == 1
    dev, root = _deviations(z, inverse, counts, rows)
    own, deviation, ref = estimator.centring.kernel_coefficients(n)
    num = own * z + deviation * dev
    if not estimator.centring.is_affine:
        num = _group_function(estimator.centring.function, z, inverse, counts, rows)
        if estimator.centring.singleton != "formula":
            num = np.where(single, z if estimator.centring.singleton == "reward" else 0.0, num)
    if estimator.centring.reference_source is not None:
        if reference is None:
            raise ValueError(f"rule {estimator.name!r} subtracts "
                             f"{estimator.centring.reference_source} "
                             "r(x): pass `reference`")
        num = num - ref * np.broadcast_to(np.asarray(reference, dtype=np.float64), z.shape)
    sc = estimator.scaling
    if sc.kind == "none":
        return Parts(num, num, np.ones(z.size), np.zeros(z.size), single)
    if sc.kind == "group std":
        dof = np.maximum(counts - 1 if sc.bessel else counts, 1)
        s = np.where(single, 0.0, (root / np.sqrt(dof))[inverse])
    elif sc.kind == "group statistic":
        s = np.where(single, 0.0, _statistic(estimator, z, inverse, counts)[inverse])
    elif sc.kind == "others std":
        s = _others_std(z, inverse, counts, sc.bessel)
    elif sc.kind == "batch std":
        root_b = _batch_moments(z)[1]
        dof = z.size - 1 if sc.bessel else z.size
        s = np.full(z.size, root_b / np.sqrt(dof) if dof > 0 else 0.0)
    elif sc.kind == "batch nonzero fraction":  # exact: a count, no rounding
        s = np.full(z.size, max(np.count_nonzero(z), 1) / z.size)
    else:  # "batch whitening": the numerator's batch mean removed, divided by its batch std
        num, root_b = _batch_moments(num, sc.count_epsilon)
        # Bessel's N/(N - 1) from two samples on (slime's whitening leaves a lone sample's
        # variance uncorrected; the other Bessel rules need two samples)
        var_n = (z.size + sc.count_epsilon) * ((z.size - 1) / z.size
                                               if sc.bessel and z.size > 1 else 1)
        s = np.full(z.size, root_b / np.sqrt(var_n))
    d = sc.divisor(s)
    if sc.per_group:
        d = np.where(single, sc.singleton_divisor, d)
    if sc.all_equal != "divide":  # where s = 0 exactly, the numerator (or 0) is kept
        d = np.where(s > 0, d, 1.0)
        num = num if sc.all_equal == "keep numerator" else np.where(s > 0, num, 0.0)
    return Parts(num / np.where(d != 0, d, 1.0), num, d, s, single)
