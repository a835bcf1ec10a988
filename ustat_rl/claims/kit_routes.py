"""The conformance kit's tolerance and its call signatures, for C2.kit (docs/theory.md C2).

A kit whose tolerance were loosened a few-fold would still reject C2.kit's population-std
control (off by 10% and more) while letting through bugs a few rounding bounds large; and a
kit that mishandled one of its signatures (``plain``, ``verl``, ``trl``) would mislead only
the users who call it that way. Two groups of checks close those gaps:

* :func:`tolerance_checks`: for TRL's ``scale_rewards="group"`` (the default) and ``"none"``,
  the kit's :func:`~ustat_rl.conformance.kit.tolerance` equals the bound its docstring
  derives, recomputed here group by group (:func:`documented_bound`); an implementation off by
  0.99 of that bound conforms under the kit's search, and one off by 4 bounds is rejected on
  every batch;
* :func:`signature_checks`: through each signature, a conforming implementation (the
  framework's formula written out, :mod:`ustat_rl.claims.literal_forms`) conforms, and
  implementations wrong in the way that signature allows are rejected; the same for the
  reference route of verl's ``remax`` (a greedy reward per group, passed as
  ``fn(rewards, group_ids, reference)`` or verl's ``fn(token_level_rewards,
  reward_baselines, response_mask)``).

Deterministic (hypothesis derandomized, batches from a fixed seed): no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from .beyond_frameworks.conventions import kit_batches
from .registry import check_exact, check_true

__all__ = ["BUG_BOUNDS", "AT_BOUND", "documented_bound", "tolerance_checks", "signature_checks"]

#: Multiples of the documented bound added to the reference: a bug a few rounding bounds large
#: (rejected), and a perturbation at the bound (1% inside it, for the rounding of the
#: comparison itself: accepted).
BUG_BOUNDS, AT_BOUND = 4.0, 0.99
#: Batches hypothesis draws for each run of the kit's search here.
SEARCH_EXAMPLES = 40

_EPS = float(np.finfo(np.float32).eps)
_TINY = float(np.finfo(np.float32).tiny)


def documented_bound(name: str, rewards, group_ids) -> np.ndarray:
    """The kit's docstring bound for ``trl_none`` or ``trl_group``, group by group, ``(n,)``.

    At float32 working precision (``eps``, ``tiny``): a group of ``n`` rewards, largest ``|z|``
    ``S``, Bessel std ``s``, reference advantage ``A``: ``dN = (n + 4)(eps S + tiny)``; for
    ``trl_none`` the bound is ``dN + 2 eps |A|``; for ``trl_group`` the std is off by
    ``ds = sqrt(n/(n - 1)) dN + (n + 3) eps s + sqrt(2 tiny)`` (0 for a singleton, whose std is
    set to 0), the divisor ``d = s + 1e-4`` by ``dd = ds + 2 eps d``, it is never below
    ``d_low = max(d - dd, 1e-4)``, and the bound is ``(dN + |A| dd)/d_low + 2 eps |A|``.
    """
    from ..advantages.conventions import advantages

    if name not in ("trl_none", "trl_group"):
        raise ValueError(f"`name` must be 'trl_none' or 'trl_group', got {name!r}")
    z = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(group_ids)
    A = np.abs(advantages(name, z, ids))
    out = np.empty(z.size)
    for g in np.unique(ids):
        idx = np.flatnonzero(ids == g)
        n, r = idx.size, z[idx]
        dN = (n + 4) * (_EPS * np.abs(r).max() + _TINY)
        if name == "trl_none":
            out[idx] = dN + 2 * _EPS * A[idx]
            continue
        dev = r - r[0]
        s = float(np.sqrt(np.sum((dev - dev.mean()) ** 2) / (n - 1))) if n > 1 else 0.0
        ds = 0.0 if n == 1 else np.sqrt(n / (n - 1)) * dN + (n + 3) * _EPS * s + np.sqrt(2 * _TINY)
        d = s + 1e-4
        dd = ds + 2 * _EPS * d
        d_low = max(d - dd, 1e-4)
        out[idx] = (dN + A[idx] * dd) / d_low + 2 * _EPS * A[idx]
    return out


def _off_by(name: str, factor: float):
    """The reference plus ``factor`` documented bounds: an implementation whose error is known
    without asking the kit."""
    from ..advantages.conventions import advantages

    return lambda z, ids: advantages(name, z, ids) + factor * documented_bound(name, z, ids)


def tolerance_checks() -> list:
    from ..advantages import get_rule
    from ..conformance.kit import check_batch, check_conformance, tolerance
    from ..conformance.search import Search

    checks = []
    for name in ("trl_group", "trl_none"):
        batches = kit_batches(get_rule(name), contiguous=False)
        kit = np.concatenate([tolerance(name, z, ids, z.dtype) for z, ids in batches])
        ours = np.concatenate([documented_bound(name, z, ids) for z, ids in batches])
        checks.append(check_exact(f"kit tolerance, {name}: the bound its docstring derives, "
                                  f"{len(batches)} batches", ours, kit, rtol=1e-9, atol=0.0,
                                  note="documented_bound recomputes it group by group"))
        near = check_conformance(_off_by(name, AT_BOUND), name,
                                 search=Search(max_examples=SEARCH_EXAMPLES))
        checks.append(check_true(f"kit, {name}: an implementation {AT_BOUND:g} bounds off "
                                 f"conforms", near.passed, float(near.n_examples),
                                 note=near.failure.message if near.failure else
                                 f"{near.n_examples} batches of the kit's search"))
        far = [check_batch(_off_by(name, BUG_BOUNDS), name, z, ids) for z, ids in batches]
        rejected = sum(f is not None for f in far)
        checks.append(check_true(f"kit, {name}: an implementation {BUG_BOUNDS:g} bounds off is "
                                 f"rejected on every batch", rejected == len(batches),
                                 float(rejected), note=f"{rejected} of {len(batches)} batches"))
    return checks


def _unmasked(fn):
    """A verl-style function whose advantages also sit on the padding tokens."""
    return lambda t, m, i: fn(t, np.ones_like(np.asarray(m)), i)


def _population_std(rewards, num_generations):
    rows = np.asarray(rewards, dtype=np.float64).reshape(-1, num_generations)
    out = (rows - rows.mean(axis=1, keepdims=True)) / (rows.std(axis=1, keepdims=True) + 1e-4)
    return out.reshape(-1)


def _one_group(fn):
    """A TRL-style function that ignores ``num_generations`` (the batch as one group)."""
    return lambda rewards, num_generations: fn(rewards, len(rewards))


def _remax_verl(token_level_rewards, reward_baselines, response_mask):
    """verl's remax at an outcome reward, written out: ``z - b`` on every valid token."""
    mask = np.asarray(response_mask, dtype=np.float64)
    z = (np.asarray(token_level_rewards, dtype=np.float64) * mask).sum(axis=1)
    return (z - np.asarray(reward_baselines, dtype=np.float64))[:, None] * mask


def _remax_batches():
    """C2.kit's deterministic batches (shuffled groups) with a greedy reward per group: one of
    the group's rewards, 0, or a value of its own, in turn."""
    from ..advantages import get_rule

    out = []
    for k, (z, ids) in enumerate(kit_batches(get_rule("verl_remax"), contiguous=False)):
        b = np.empty(z.size, dtype=z.dtype)
        for j, g in enumerate(np.unique(ids)):
            members = np.flatnonzero(ids == g)
            choice = (k + j) % 3
            b[members] = z[members[0]] if choice == 0 else (0.0 if choice == 1 else 0.5 + j)
        out.append((z, ids, b))
    return out


def reference_checks() -> list:
    """verl's remax through the kit's reference route: written out, it conforms in both
    signatures; using the batch's mean greedy reward is rejected."""
    from ..conformance.kit import check_batch, check_conformance
    from ..conformance.search import Search

    checks = []
    for label, fn, signature, tensors in (
            ("plain, z - b", lambda z, ids, b: z - b, "plain", "numpy"),
            ("verl (torch), remax written out", _remax_verl, "verl", "torch")):
        report = check_conformance(fn, "verl_remax", signature=signature, tensors=tensors,
                                   search=Search(max_examples=SEARCH_EXAMPLES))
        checks.append(check_true(f"kit, reference route {label}: conforms", report.passed,
                                 float(report.n_examples), note=report.failure.message
                                 if report.failure else f"{report.n_examples} batches"))
    batches = _remax_batches()
    failures = [f for f in (check_batch(lambda z, ids, b: z - np.mean(b), "verl_remax", z, ids,
                                        reference=b) for z, ids, b in batches) if f is not None]
    checks.append(check_true("kit, reference route, the batch's mean greedy reward: rejected",
                             bool(failures), float(len(failures)),
                             note=f"{len(failures)} of {len(batches)} batches"))
    return checks


def signature_checks() -> list:
    from ..advantages import get_rule
    from ..conformance.kit import SIGNATURES, check_batch, check_conformance
    from ..conformance.search import Search
    from .literal_forms import LITERAL_FORMS

    verl, trl = LITERAL_FORMS["verl_grpo"].fn, LITERAL_FORMS["trl_group"].fn
    conforming = {  # label: (fn, convention, signature, tensors, index)
        "verl (torch, uid index), verl's GRPO": (verl, "verl_grpo", "verl", "torch", "uid"),
        "verl (torch, int index), verl's GRPO": (verl, "verl_grpo", "verl", "torch", "int"),
        "trl (torch), TRL's scale_rewards='group'": (trl, "trl_group", "trl", "torch", "uid"),
    }
    wrong = {  # label: (fn, convention, signature, tensors)
        "verl, advantages on the padding tokens": (_unmasked(verl), "verl_grpo", "verl", "torch"),
        "trl, the population std": (_population_std, "trl_group", "trl", "numpy"),
        "trl, num_generations ignored": (_one_group(trl), "trl_group", "trl", "numpy"),
    }
    covered = {label.split(" ")[0].rstrip(",") for label in conforming} | {"plain"}
    checks = [check_true(f"kit: every signature {SIGNATURES} is run", covered == set(SIGNATURES),
                         float(len(covered)), note="plain: the loop implementation above")]
    for label, (fn, name, signature, tensors, index) in conforming.items():
        report = check_conformance(fn, name, signature=signature, tensors=tensors, index=index,
                                   search=Search(max_examples=SEARCH_EXAMPLES))
        checks.append(check_true(f"kit, {label}: conforms", report.passed,
                                 float(report.n_examples), note=report.failure.message
                                 if report.failure else f"{report.n_examples} batches"))
    for label, (fn, name, signature, tensors) in wrong.items():
        batches = kit_batches(get_rule(name), contiguous=signature == "trl")
        failures = [f for f in (check_batch(fn, name, z, ids, signature=signature,
                                            tensors=tensors) for z, ids in batches)
                    if f is not None]
        checks.append(check_true(f"kit, {label}: rejected", bool(failures), float(len(failures)),
                                 note=(f"{len(failures)} of {len(batches)} batches; "
                                       f"{failures[0].message}") if failures else
                                 "no batch rejected"))
    return checks + reference_checks()
