"""Conformance kit: does an advantage function compute a named framework convention?

Give it your ``fn(rewards, group_ids) -> advantages`` (or a verl-style or TRL-style function,
through an adapter) and a convention name from :data:`CONVENTION_NAMES`; property-based testing
with hypothesis draws batches that stress the places where implementations differ: random
groups, ties, near-ties (differences of 1e-5 and 1e-9), all-equal groups, one-sample groups,
large offsets (1e6), float32 and float64 inputs, and ragged group ids in any order. The result is
a :class:`ConformanceReport` with the smallest failing batch hypothesis could shrink to.

Tolerance (stated, and derived from the conditioning of the formula, not tuned): with ``eps`` the
machine epsilon of the coarser of the input and output dtypes, ``|A|`` the reference advantage,
``scale`` the largest ``|z|`` the advantage depends on (its group, or the batch for batch
conventions), ``d`` its denominator (``s + epsilon``, ``sqrt(var + epsilon)``, or 1) and ``n`` the
number of rewards its statistics run over::

    |got - expected| <= K eps (|A| + (scale / d)(1 + |A|)),   K = 2 (n + 4).

The first term is the final rounding; the second bounds the rounding of the centre and of the
standard deviation (each at most about ``n eps scale`` for recursive summation), amplified by the
division. A correct float32 implementation at an offset of 1e6 passes; swapping Bessel for the
population std, moving the epsilon inside the square root, flooring the variance or leaking
another group into the mean changes advantages by far more on the batches hypothesis finds.
Algorithm 2's rule for all-equal groups (``d = 0``) is checked exactly. The reference is
:func:`ustat_rl.conventions.advantages` in float64 on the same (cast) inputs
(docs/theory.md section 2; docs/conventions.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .conventions import (
    CONVENTION_NAMES,
    ConventionSpec,
    _batch_mean_std,
    _centred,
    _group_std,
    _leave_one_out,
    get_convention,
)

__all__ = ["CONVENTION_NAMES", "SIGNATURES", "ConformanceFailure", "ConformanceReport",
           "check_conformance", "tolerance", "adapt", "load_function"]

#: The call signatures the kit can test (see :func:`adapt`).
SIGNATURES = ("plain", "verl", "trl")

#: Response length of the verl-style adapter's token-level rewards (responses are 1..T long).
VERL_TOKENS = 4


@dataclass(frozen=True)
class ConformanceFailure:
    """The smallest failing batch found (after hypothesis shrinking).

    Attributes
    ----------
    rewards, group_ids : ndarray
        The batch, in the dtype it was passed.
    expected : ndarray
        The convention's advantages (float64 reference).
    got : ndarray or None
        What the function returned (``None`` when it raised or returned the wrong shape).
    index : int
        The worst sample (-1 when no comparison was possible).
    message : str
        What went wrong.
    """

    rewards: np.ndarray
    group_ids: np.ndarray
    expected: np.ndarray
    got: np.ndarray | None
    index: int
    message: str


@dataclass(frozen=True)
class ConformanceReport:
    """Outcome of :func:`check_conformance`.

    Attributes
    ----------
    convention, signature : str
    passed : bool
    n_examples : int
        Batches the function was called on.
    seconds : float
    tolerance : str
        The rule applied (see the module docstring).
    failure : ConformanceFailure or None
    """

    convention: str
    signature: str
    passed: bool
    n_examples: int
    seconds: float
    tolerance: str
    failure: ConformanceFailure | None = field(default=None)

    def summary(self) -> str:
        """A short human-readable report."""
        head = (f"{'CONFORMS' if self.passed else 'DOES NOT CONFORM'} to {self.convention!r} "
                f"({self.signature} signature): {self.n_examples} batches in {self.seconds:.1f} s.\n"
                f"tolerance: {self.tolerance}")
        if self.failure is None:
            return head
        f = self.failure
        with np.printoptions(precision=17, linewidth=100):
            lines = [head, f"smallest failing batch: {f.message}",
                     f"  rewards   = np.array({f.rewards.tolist()!r}, dtype=np.{f.rewards.dtype})",
                     f"  group_ids = np.array({f.group_ids.tolist()!r})",
                     f"  expected  = {np.array2string(f.expected, separator=', ')}"]
            if f.got is not None:
                lines.append(f"  got       = {np.array2string(f.got, separator=', ')}")
        return "\n".join(lines)


TOLERANCE_RULE = ("|got - expected| <= K eps (|A| + (scale/d)(1 + |A|)), K = 2(n + 4); eps of the "
                  "coarser dtype, scale = max|z| the advantage depends on, d its denominator, n the "
                  "samples its statistics use")


# --------------------------------------------------------------------------- tolerance
def _denominator_and_support(spec: ConventionSpec, z, inverse, counts):
    """Per-sample denominator ``d`` and whether statistics run over the batch."""
    n = z.size
    name = spec.name
    if name in ("trl_group", "verl_grpo", "openrlhf_group_norm", "paper_algorithm2"):
        _, mean = _centred(z, inverse, counts)
        singleton = {"trl_group": 0.0, "verl_grpo": 1.0}.get(name, 0.0)
        std = _group_std(z, inverse, counts, mean, singleton)[inverse]
        return std + spec.epsilon, False
    if name == "trl_batch":
        return np.full(n, _batch_mean_std(z)[1] + spec.epsilon), True
    if name == "trl_rloo_normalized":
        loo = _leave_one_out(z, inverse, counts, "zero")
        return np.full(n, _batch_mean_std(loo)[1] + spec.epsilon), True
    if name == "verl_reinforce_pp_baseline":
        dev = _centred(z, inverse, counts, singleton_mean_zero=True)[0]
        std = _batch_mean_std(dev)[1]
        return np.full(n, np.sqrt(std * std + spec.epsilon)), True
    return np.ones(n), spec.statistics == "batch"


def tolerance(convention, rewards, group_ids, expected, dtype=np.float64) -> np.ndarray:
    """The allowed ``|got - expected|`` per sample, shape ``(n,)`` (module docstring).

    ``dtype`` is the coarser of the input and output dtypes. Where the denominator is 0
    (Algorithm 2's all-equal rule) the tolerance is ``K eps |A|``, i.e. the rule is exact.
    """
    spec = get_convention(convention)
    z = np.asarray(rewards, dtype=np.float64)
    _, inverse, counts = np.unique(np.asarray(group_ids), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    d, batch = _denominator_and_support(spec, z, inverse, counts)
    absz = np.abs(z)
    if batch:
        scale = np.full(z.size, absz.max())
        n = np.full(z.size, z.size)
    else:
        group_max = np.zeros(counts.size)
        np.maximum.at(group_max, inverse, absz)
        scale, n = group_max[inverse], counts[inverse]
    eps = float(np.finfo(dtype).eps)
    A = np.abs(np.asarray(expected, dtype=np.float64))
    K = 2.0 * (n + 4.0)
    amplified = np.where(d > 0, scale / np.where(d > 0, d, 1.0) * (1.0 + A), 0.0)
    return K * eps * (A + amplified)


# --------------------------------------------------------------------------- adapters
def _to_numpy(out):
    if isinstance(out, (tuple, list)) and len(out) > 0 and not np.isscalar(out[0]):
        out = out[0]  # verl returns (advantages, returns)
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    return np.asarray(out)


def _tensor(x, tensors):
    if tensors == "torch":
        import torch

        return torch.as_tensor(x)
    return x


def adapt(fn: Callable, signature: str = "plain", tensors: str = "numpy",
          tokens: int = VERL_TOKENS) -> Callable:
    """Wrap ``fn`` as ``plain(rewards (n,), group_ids (n,)) -> (n,)``.

    Parameters
    ----------
    fn : callable
        ``"plain"``: ``fn(rewards, group_ids)``. ``"verl"``: ``fn(token_level_rewards (n, T),
        response_mask (n, T), index (n,))`` returning ``(n, T)`` advantages or a tuple whose first
        item they are; the reward sits on the last token of a response of length ``1..T``, and the
        advantage must be constant over the response and 0 on padding. ``"trl"``:
        ``fn(rewards (n,), num_generations)`` with groups contiguous and of equal size.
    signature : {"plain", "verl", "trl"}
    tensors : {"numpy", "torch"}
        What array type ``fn`` receives (torch tensors keep the rewards' dtype).
    tokens : int
        ``T`` for the verl-style adapter.
    """
    if signature not in SIGNATURES:
        raise ValueError(f"`signature` must be one of {SIGNATURES}, got {signature!r}")
    if tensors not in ("numpy", "torch"):
        raise ValueError(f"`tensors` must be 'numpy' or 'torch', got {tensors!r}")
    if signature == "plain":
        return lambda z, ids: _to_numpy(fn(_tensor(z, tensors), _tensor(ids, tensors)))
    if signature == "trl":
        def trl(z, ids):
            _, counts = np.unique(ids, return_counts=True)
            return _to_numpy(fn(_tensor(z, tensors), int(counts[0])))
        return trl

    def verl(z, ids):
        n = z.size
        length = 1 + np.arange(n) % tokens  # ragged responses, (n,)
        mask = (np.arange(tokens)[None, :] < length[:, None]).astype(z.dtype)  # (n, T)
        token_rewards = np.zeros((n, tokens), dtype=z.dtype)
        token_rewards[np.arange(n), length - 1] = z
        out = _to_numpy(fn(_tensor(token_rewards, tensors), _tensor(mask, tensors), ids))
        if out.shape != (n, tokens):
            raise ValueError(f"verl-style function returned shape {out.shape}, expected "
                             f"({n}, {tokens})")
        first = out[:, :1]
        if np.any((mask == 0) & (out != 0)):
            raise ValueError("advantages on padding tokens are not 0")
        if np.any((mask == 1) & (out != first)):
            raise ValueError("advantage is not constant over a response's tokens")
        return out[:, 0]
    return verl


def load_function(target: str) -> Callable:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the function.

    The current directory is searched first, as ``python -m`` would.
    """
    if not isinstance(target, str) or target.count(":") != 1:
        raise ValueError(f"target must look like 'module:function', got {target!r}")
    module_name, func_name = target.split(":")
    if module_name.endswith(".py"):
        path = Path(module_name)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or not path.is_file():
            raise ValueError(f"no such file: {module_name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no function {func_name!r}")
    return fn


# --------------------------------------------------------------------------- strategies
_KINDS = ("random", "binary", "ties", "near_tie_1e-5", "near_tie_1e-9", "all_equal")


def _batches(spec: ConventionSpec, equal_sizes: bool, contiguous: bool):
    from hypothesis import assume
    from hypothesis import strategies as st

    value = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)

    @st.composite
    def batches(draw):
        n_groups = draw(st.integers(1, 5))
        low = spec.min_group_size
        if equal_sizes:
            sizes = [draw(st.integers(low, 8))] * n_groups
        else:
            sizes = draw(st.lists(st.integers(low, 8), min_size=n_groups, max_size=n_groups))
        assume(sum(sizes) >= spec.min_batch_size)
        groups = []
        for size in sizes:
            kind = draw(st.sampled_from(_KINDS))
            if kind == "random":
                vals = draw(st.lists(value, min_size=size, max_size=size))
            elif kind == "binary":
                vals = draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=size, max_size=size))
            elif kind == "ties":
                pair = draw(st.lists(value, min_size=2, max_size=2))
                vals = draw(st.lists(st.sampled_from(pair), min_size=size, max_size=size))
            elif kind.startswith("near_tie"):
                delta = float(kind.split("_")[-1])
                base = draw(value)
                steps = draw(st.lists(st.integers(0, 2), min_size=size, max_size=size))
                vals = [base + k * delta for k in steps]
            else:
                vals = [draw(value)] * size
            groups.append(vals)
        offset = draw(st.sampled_from([0.0, 1e6]))
        dtype = draw(st.sampled_from([np.float32, np.float64]))
        ids = draw(st.lists(st.integers(-1000, 1000), min_size=n_groups, max_size=n_groups,
                            unique=True))
        z = np.array([v + offset for vals in groups for v in vals], dtype=dtype)
        group_ids = np.repeat(np.array(ids, dtype=np.int64), sizes)
        if not contiguous:
            order = np.array(draw(st.permutations(range(z.size))), dtype=np.int64)
            z, group_ids = z[order], group_ids[order]
        return z, group_ids

    return batches()


def _compare(call, spec: ConventionSpec, z, ids) -> ConformanceFailure | None:
    from .conventions import advantages

    expected = advantages(spec, z, ids)
    try:
        got = call(z.copy(), ids.copy())
    except Exception as exc:  # any exception on a valid batch is non-conformance
        return ConformanceFailure(z, ids, expected, None, -1,
                                  f"the function raised {type(exc).__name__}: {exc}")
    got = np.asarray(got)
    if got.shape != expected.shape:
        return ConformanceFailure(z, ids, expected, None, -1,
                                  f"returned shape {got.shape}, expected {expected.shape}")
    if not np.issubdtype(got.dtype, np.floating):
        got = got.astype(np.float64)
    coarse = z.dtype if np.finfo(z.dtype).eps >= np.finfo(got.dtype).eps else got.dtype
    tol = tolerance(spec, z, ids, expected, coarse)
    diff = np.abs(got.astype(np.float64) - expected)
    bad = ~(diff <= tol)  # NaN counts as a failure
    if not np.any(bad):
        return None
    excess = np.where(np.isfinite(diff), diff / np.maximum(tol, 1e-300), np.inf)
    i = int(np.argmax(np.where(bad, excess, -1.0)))
    return ConformanceFailure(z, ids, expected, got, i,
                              f"sample {i}: got {float(got[i])!r}, expected {float(expected[i])!r} "
                              f"(|difference| {diff[i]:.3g} > tolerance {tol[i]:.3g})")


def check_conformance(fn: Callable, convention, *, signature: str = "plain",
                      tensors: str = "numpy", max_examples: int = 200,
                      seed: int | None = None) -> ConformanceReport:
    """Property-test ``fn`` against a named convention (docs/conventions.md).

    Parameters
    ----------
    fn : callable
        The implementation under test, in the form ``signature`` names (see :func:`adapt`).
    convention : str
        One of :data:`CONVENTION_NAMES`.
    signature : {"plain", "verl", "trl"}
        ``"trl"`` draws contiguous equal-size groups only; conventions that reshape into
        ``(-1, G)`` get equal sizes under every signature; verl's REINFORCE++-baseline is tested
        with one-token responses (its whitening weighs tokens).
    tensors : {"numpy", "torch"}
    max_examples : int
        Batches hypothesis generates before shrinking.
    seed : int, optional
        ``None`` (default) runs hypothesis derandomized, so a report is reproducible.

    Returns
    -------
    ConformanceReport
    """
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    spec = get_convention(convention)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise ValueError(f"`max_examples` must be an integer >= 1, got {max_examples!r}")
    one_token = signature == "verl" and spec.name == "verl_reinforce_pp_baseline"
    call = adapt(fn, signature, tensors, tokens=1 if one_token else VERL_TOKENS)
    strategy = _batches(spec, equal_sizes=spec.equal_group_sizes or signature == "trl",
                        contiguous=signature == "trl")
    failures: list[ConformanceFailure] = []
    count = [0]

    @settings(max_examples=max_examples, deadline=None, database=None,
              derandomize=seed is None, suppress_health_check=list(HealthCheck),
              print_blob=False)
    @given(strategy)
    def conforms(batch):
        count[0] += 1
        failure = _compare(call, spec, *batch)
        if failure is not None:
            failures.append(failure)
            raise AssertionError(failure.message)

    if seed is not None:
        conforms = hypothesis_seed(seed)(conforms)
    start = time.perf_counter()
    try:
        conforms()
        passed = True
    except AssertionError:
        passed = False
    seconds = time.perf_counter() - start
    return ConformanceReport(spec.name, signature, passed, count[0], seconds, TOLERANCE_RULE,
                             failures[-1] if (failures and not passed) else None)
