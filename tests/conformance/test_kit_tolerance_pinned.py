"""Every tolerance of the conformance kit pinned from both sides, convention by convention.

The kit (``ustat_rl.conformance.kit``) accepts ``|got - expected| <= tol`` per sample, with
``tol = (dN + |A| dd) / d_low + 2 eps |A|`` in units of ``eps``, the float32 machine epsilon
(the working precision is never taken finer than float32), as its module docstring derives:
``dN = (n + 4)(eps S + tiny)`` (times ``n/(n - 1)`` for a leave-one-out numerator), ``ds`` the
spread's bound (group, others', batch or whitening std), ``dd = ds + 2 eps d``,
``d_low = max(d - dd, floor)``, ``inf`` where ``d_low`` is 0 (a numerator that is a first
stage's advantages, AReaL's, takes that stage's own bound as ``dN``), and the all-equal rules' branches
(an exact tie, or a statistic below ``-ds``, takes the rule with ``dN + 2 eps |A|``; a spread
within ``ds`` of 0 may take either). A group statistic (MaxRL's mean) takes the std's ``ds``
with ``|s|``, and, as it may be negative (SkyRL's ``m_g + 1e-6``), ``|d|`` and the floor only
where ``s >= 0``; a batch's nonzero fraction (verl's GPG) is exact but for rewards below float32's
``tiny``.

``documented_bound`` below computes that bound a second way, per group and in a loop, from the
docstring's terms (group sizes, largest ``|z|``, the spread recomputed here, the divisor from the
convention's epsilon and placement), and is the unit of the checks:

1. ``tolerance`` equals ``documented_bound`` (rtol 1e-9, the same samples unchecked) on 40
   batches per convention of random, tied, near-tied and all-equal groups, offsets 0 and 1e6, in
   float32 and float64;
2. from below: implementations written here (a loop over groups, numpy's mean and std, no shift
   trick), computing in float32 and in float64, conform (a rule's own function of a group,
   Pass@k's numerator or MaxRL's mean, is called on the rewards cast to the working dtype and
   rounded back: see ``naive``); so do the reference's advantages rounded once more (times
   ``1 + eps``) and the reference plus half the bound;
3. from above: the reference plus 4 bounds (a bug of a few rounding bounds) is rejected by
   ``check_conformance``, and by the kit's comparison on each of the 40 batches, float32 and
   float64 alike.

The conventions are all of ``CONVENTION_NAMES``, read from the registry (33 today).
All checks are deterministic (hypothesis derandomized, numpy seeds fixed): no false-failure rate.
So ``tolerance`` changed by more than 1e-9 relative fails 1; the comparison loosened 4-fold or
more (``diff <= 4 tol``) lets the 4-bound bug through and fails 3; tightened below half of the
bound it rejects the half-bound perturbation and fails 2. (Planted in memory: 1000x looser in
``_compare`` fails 3 for all 19 conventions of the first pinning, and 1000x looser in
``tolerance`` for all 25 of the registry; in ``tolerance``'s returns fails 1 and 3 for the
conventions of that branch; 3x looser, in either, is within the 4-bound margin and passes.)
"""

import numpy as np
import pytest

from ustat_rl.advantages.conventions import CONVENTION_NAMES, advantages, get_convention
from ustat_rl.conformance import kit as conformance
from ustat_rl.conformance.kit import check_conformance
from ustat_rl.conformance.search import Search

pytestmark = pytest.mark.integration  # conformance runs: every convention's tolerance, both sides

EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).tiny)
UNDER = np.sqrt(2 * TINY)
#: Every registered convention, read from the registry so that a rule added there is pinned too
#: (scale none, group, others', group statistic, batch, nonzero fraction, whitening; centring
#: none, group mean, leave-one-out or a group function; epsilon added, inside the sqrt, as a
#: floor, or none; a zero spread zeroed or its numerator kept). A rule of a kind the bound below
#: has no branch for fails ``test_tolerance_is_the_documented_bound`` with NotImplementedError,
#: not silently.
NAMES = CONVENTION_NAMES
#: Bounds a deliberate bug adds (rejected) and a harmless perturbation adds (accepted).
BUG_BOUNDS, HARMLESS_BOUNDS = 4.0, 0.5


# --------------------------------------------------------------------------- the bound, again
def _std(values, ddof):
    """Std about the first value's shift: exactly 0 for exact ties, as the kit's bound needs."""
    dev = values - values[0]
    dev = dev - dev.mean()
    return float(np.sqrt(np.sum(dev * dev) / (values.size - ddof))) if values.size > ddof else 0.0


def _centred(spec, r):
    """The unscaled numerator of one group, float64."""
    n = r.size
    if n == 1 and spec.centring.singleton != "formula":
        return r.copy() if spec.centring.singleton == "reward" else np.zeros(1)
    if not spec.centring.is_affine:  # the rule's own function of the group (Pass@k)
        return np.asarray(spec.centring.function(r[None, :]), dtype=np.float64)[0]
    if spec.centring.leave_one_out:
        return r - (r.sum() - r) / (n - 1)
    if spec.centring.mean:
        return r - (r[0] + np.mean(r - r[0]))
    return r.copy()  # no baseline (REINFORCE++, OpenRLHF's reinforce)


def _divisor(spec, s):
    e, placement = spec.epsilon, spec.epsilon_placement
    if placement == "added to std":
        return s + e, e
    if placement == "inside sqrt":
        return np.sqrt(s * s + e), np.sqrt(e)
    if placement == "variance floor":
        return np.sqrt(max(s * s, e)), np.sqrt(e)
    return s, 0.0


def documented_bound(name, rewards, group_ids):
    """The module docstring's per-sample bound, at float32 working precision."""
    spec = get_convention(name)
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    A = np.abs(advantages(name, z, ids))
    N = z.size
    members = [np.flatnonzero(ids == g) for g in np.unique(ids)]
    num_err, centred = np.empty(N), np.empty(N)
    for idx in members:
        n = idx.size
        leave_one_out = spec.centring.leave_one_out != 0 and n > 1
        num_err[idx] = (n + 4) * (EPS * np.abs(z[idx]).max() + TINY) * (
            n / (n - 1) if leave_one_out else 1.0)
        centred[idx] = _centred(spec, z[idx])
    stage = getattr(spec.centring.function, "__self__", None)
    if stage is not None:  # the numerator is a first stage's advantages (AReaL): its own bound
        num_err = documented_bound(stage, z, ids)
    if spec.scale == "none":
        return num_err + 2 * EPS * A
    if spec.scale not in ("group", "statistic", "leave_one_out", "batch", "nonzero", "whiten"):
        raise NotImplementedError(f"documented_bound has no branch for scale {spec.scale!r}: "
                                  "add the docstring's term for it here")
    tol = np.empty(N)
    s_of, s_err_of, d_of, floor_of = (np.empty(N) for _ in range(4))
    ddof = 1 if spec.scaling.bessel else 0
    if spec.scale == "nonzero":  # a count: exact, but float32 may flush rewards below tiny
        s_of[:] = max(np.count_nonzero(z), 1) / N
        s_err_of[:] = s_of[0] - max(np.count_nonzero(z) - np.count_nonzero(
            (z != 0) & (np.abs(z) < TINY)), 1) / N
    elif spec.scale == "batch":
        s = _std(z, ddof)
        batch_err = (N + 4) * (EPS * np.abs(z).max() + TINY)
        s_of[:], s_err_of[:] = s, np.sqrt(N / max(N - 1, 1)) * batch_err + (N + 3) * EPS * s + UNDER
    elif spec.scale == "whiten":
        num_err = num_err + num_err.max() + (N + 3) * EPS * np.abs(centred).max()
        ce = spec.count_epsilon
        c = centred - (centred[0] + np.mean(centred - centred[0])) * (N / (N + ce))
        # Bessel's N/(N - 1) from two samples on (a lone sample: uncorrected, as slime)
        s = float(np.sqrt(np.sum(c * c) / ((N + ce) * ((N - 1) / N if ddof and N > 1
                                                         else 1.0))))
        s_of[:], s_err_of[:] = s, np.sqrt(N / max(N - 1, 1)) * num_err.max() + (N + 3) * EPS * s + UNDER
    for idx in members:
        n = idx.size
        dev_err = (n + 4) * (EPS * np.abs(z[idx]).max() + TINY)
        for k in idx:
            if spec.scale in ("group", "statistic"):
                if spec.scale == "group":
                    s = _std(z[idx], ddof) if n > 1 else 0.0
                else:  # the rule's statistic of the group (MaxRL's mean), which may be negative
                    s = float(spec.scaling.statistic(z[idx][None, :])[0]) if n > 1 else 0.0
                # a negative statistic (a group mean) rounds by (n + 3) eps |s| like any other
                s_err = 0.0 if n == 1 else (np.sqrt(n / (n - 1)) * dev_err
                                            + (n + 3) * EPS * abs(s) + UNDER)
                s_of[k], s_err_of[k] = s, s_err
            elif spec.scale == "leave_one_out":  # the std of the other n - 1 rewards
                s = _std(z[idx[idx != k]], ddof) if n >= 3 else 0.0
                s_of[k] = s
                s_err_of[k] = (np.sqrt((n - 1) / max(n - 2, 1)) * dev_err + (n + 3) * EPS * s
                               + UNDER)
            d, floor = _divisor(spec, s_of[k])
            if spec.scale in ("group", "statistic") and n == 1:
                d = spec.singleton_divisor
            # |d|: a group mean plus epsilon (SkyRL's MaxRL) may be negative, and the epsilon
            # bounds the divisor from below only where the spread is not
            d_of[k], floor_of[k] = abs(d), floor
    d_err = s_err_of + 2 * EPS * d_of
    d_low = np.maximum(d_of - d_err, np.where(s_of >= 0, floor_of, 0.0))
    for k in range(N):
        tol[k] = ((num_err[k] + A[k] * d_err[k]) / d_low[k] + 2 * EPS * A[k] if d_low[k] > 0
                  else np.inf)
        if spec.zero_std != "divide":
            # an exact tie, or a statistic below minus its error, must take the rule
            if s_of[k] == 0 or s_of[k] < -s_err_of[k]:
                tol[k] = num_err[k] + 2 * EPS * A[k]
            elif abs(s_of[k]) <= s_err_of[k]:
                tol[k] = ((abs(centred[k]) + num_err[k]) / floor_of[k] + A[k]
                          if floor_of[k] > 0 else np.inf)
    return tol


# --------------------------------------------------------------------------- batches
def hand_batches(name, count=40, seed=7):
    """Deterministic batches of every kind the kit cares about, valid for the convention."""
    spec = get_convention(name)
    rng = np.random.default_rng(seed)
    low = max(spec.min_group_size, 1)
    out = []
    for i in range(count):
        n_groups = 1 + i % 4
        size = int(rng.integers(low, 7))
        sizes = [size] * n_groups if spec.equal_group_sizes else [
            int(rng.integers(low, 7)) for _ in range(n_groups)]
        if sum(sizes) < spec.min_batch_size:
            sizes[0] += spec.min_batch_size
        groups = []
        for j, n in enumerate(sizes):
            kind = (i + j) % 5
            if kind == 0:
                vals = rng.uniform(-10, 10, n)
            elif kind == 1:  # exact ties between two values
                vals = rng.choice(rng.uniform(-10, 10, 2), n)
            elif kind == 2:  # near-ties, 1e-3 to 1e-9
                vals = rng.uniform(-10, 10) + 10.0 ** -rng.choice([3, 5, 9]) * rng.integers(0, 3, n)
            elif kind == 3:  # all equal
                vals = np.full(n, rng.uniform(-10, 10))
            else:
                vals = rng.integers(0, 2, n).astype(float)
            groups.append(vals)
        z = np.concatenate(groups) + (1e6 if i % 3 == 2 else 0.0)
        ids = np.repeat(rng.choice(np.arange(-50, 50), n_groups, replace=False), sizes)
        order = rng.permutation(z.size) if not spec.equal_group_sizes else np.arange(z.size)
        out.append((z[order].astype(np.float32 if i % 2 else np.float64), ids[order]))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_tolerance_is_the_documented_bound(name):
    for z, ids in hand_batches(name):
        got = conformance.tolerance(name, z, ids, z.dtype)
        want = documented_bound(name, z, ids)
        assert np.array_equal(np.isinf(got), np.isinf(want)), (z, ids)
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-9, atol=0)


# --------------------------------------------------------------------------- implementations
def naive(name, work):
    """``plain(rewards, group_ids)`` computing in ``work`` (rewards cast on entry).

    The arithmetic is written here, dispatching on the rule's data. A rule's own function of a
    group (Pass@k's numerator, MaxRL's group mean) is data the test cannot rewrite without
    naming the convention, so it is called on the group's rewards as cast to ``work`` and its
    result is rounded back to ``work``: one rounding, where an implementation computing in
    ``work`` makes a few (both are inside ``dN`` and ``ds``).
    """
    spec = get_convention(name)
    sc = spec.scaling
    ddof = 1 if sc.bessel else 0

    def divide(c, s):
        e = work(sc.epsilon)
        d = {"added to std": lambda: s + e, "inside sqrt": lambda: np.sqrt(s * s + e),
             "variance floor": lambda: np.sqrt(np.maximum(s * s, e))}.get(
                 sc.epsilon_placement, lambda: s)()
        return c / d

    def fn(rewards, group_ids):
        z = np.asarray(rewards).astype(work)
        ids = np.asarray(group_ids)
        members = [np.flatnonzero(ids == g) for g in np.unique(ids)]
        num = np.empty_like(z)
        for idx in members:
            r, n = z[idx], idx.size
            if n == 1 and spec.centring.singleton != "formula":
                num[idx] = r if spec.centring.singleton == "reward" else 0
            elif not spec.centring.is_affine:
                num[idx] = np.asarray(spec.centring.function(r[None, :]))[0].astype(work)
            elif spec.centring.leave_one_out:
                num[idx] = r - (r.sum() - r) / work(n - 1)
            elif spec.centring.mean:
                num[idx] = r - r.mean()
            else:
                num[idx] = r
        if sc.kind == "none":
            return num
        out = np.empty_like(z)
        if sc.kind == "group std":
            for idx in members:
                r = z[idx]
                if r.size == 1:
                    out[idx] = num[idx] / work(sc.singleton_divisor)
                elif sc.all_equal == "zero" and np.all(r == r[0]):
                    out[idx] = 0
                else:
                    out[idx] = divide(num[idx], r.std(ddof=ddof))
        elif sc.kind == "group statistic":
            for idx in members:
                r = z[idx]
                stat = work(np.asarray(sc.statistic(r[None, :]))[0]) if r.size > 1 else work(0)
                if r.size == 1:
                    out[idx] = num[idx] / work(sc.singleton_divisor)
                elif stat > 0 or sc.all_equal == "divide":
                    out[idx] = divide(num[idx], stat)
                else:
                    out[idx] = num[idx] if sc.all_equal == "keep numerator" else 0
        elif sc.kind == "batch nonzero fraction":
            out = num * work(z.size) / work(max(np.count_nonzero(z), 1))
        elif sc.kind == "others std":
            for idx in members:
                for k in idx:
                    others = z[idx[idx != k]]
                    tie = bool(np.all(others == others[0]))
                    out[k] = num[k] if tie else divide(num[k], others.std(ddof=ddof))
        elif sc.kind == "batch std":
            out = divide(num, z.std(ddof=ddof) if z.size > 1 else work(0))
        else:  # batch whitening, the batch mean and variance over N + count_epsilon
            count = work(z.size + sc.count_epsilon)
            c = num - num.sum() / count
            var = (c * c).sum() / count * (work(z.size / (z.size - 1)) if ddof and z.size > 1
                                           else work(1))
            out = divide(c, np.sqrt(var))
        return out
    return fn


def _shifted(name, bounds):
    def fn(z, ids):
        tol = documented_bound(name, z, ids)
        return advantages(name, z, ids) + bounds * np.where(np.isfinite(tol), tol, 0.0)
    return fn


@pytest.mark.parametrize("name", NAMES)
def test_correct_implementations_conform_in_float32_and_float64(name):
    for work in (np.float32, np.float64):
        report = check_conformance(naive(name, work), name, search=Search(max_examples=100))
        assert report.passed, (work, report.summary())


@pytest.mark.parametrize("name", NAMES)
def test_perturbations_within_the_bound_conform(name):
    once_more = check_conformance(lambda z, ids: advantages(name, z, ids) * (1 + EPS), name,
                                  search=Search(max_examples=50))
    half = check_conformance(_shifted(name, HARMLESS_BOUNDS), name, search=Search(max_examples=50))
    assert once_more.passed, once_more.summary()
    assert half.passed, half.summary()


@pytest.mark.parametrize("name", NAMES)
def test_a_bug_of_a_few_bounds_is_rejected_in_either_dtype(name):
    spec = get_convention(name)
    report = check_conformance(_shifted(name, BUG_BOUNDS), name,
                               search=Search(max_examples=50, shrink=False))
    assert not report.passed and report.failure.index >= 0, report.summary()
    # every hand batch, float32 and float64 alike, through the kit's own comparison
    call = conformance.adapt(_shifted(name, BUG_BOUNDS))
    for z, ids in hand_batches(name):
        if np.isfinite(documented_bound(name, z, ids)).any():
            failure = conformance._compare(call, spec, z, ids)
            assert failure is not None and failure.rewards.dtype == z.dtype, (z, ids)
