"""Adapters and loading for the conformance kit (:mod:`ustat_rl.conformance.kit`).

The kit tests ``plain(rewards (n,), group_ids (n,)) -> (n,)``; :func:`adapt` turns a verl-style or
TRL-style function into that form, passing ids the way those frameworks do, and checks that what
comes back is a real floating array of the right shape. :func:`load_function` resolves a
``module:function`` target with a one-line :class:`TargetError` for anything that stops it.
:func:`probe_call` calls an adapted function once on a plain valid batch and says why it cannot
be tested (both kits probe through it before a search).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["SIGNATURES", "SIGNATURE_WORDS", "SIGNATURE_FORMS", "REFERENCE_FORMS", "INDEX_KINDS",
           "VERL_TOKENS", "TargetError", "adapt", "load_function", "probe_call", "takes_reference",
           "unchanged"]

#: The call signatures the kit can test (see :func:`adapt`).
SIGNATURES = ("plain", "verl", "trl")

#: How the verl-style adapter passes group ids: uuid strings (as verl's trainer does) or the
#: non-negative contiguous integers ``0..k-1`` (what verl's vectorised estimators can index by).
INDEX_KINDS = ("uid", "int")

#: Response length of the verl-style adapter's token-level rewards (responses are 1..T long).
VERL_TOKENS = 4

class TargetError(ValueError):
    """The function under test could not be loaded (a usage error: exit 2)."""


class BadOutput(Exception):
    """The function returned something that is not a real floating array of the right shape."""


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _to_numpy(out):
    if isinstance(out, (tuple, list)) and len(out) > 0 and not np.isscalar(out[0]):
        out = out[0]  # verl returns (advantages, returns)
    if hasattr(out, "detach"):
        out = out.detach().cpu()
        out = (out.float() if str(out.dtype) == "torch.bfloat16" else out).numpy()
    try:
        return np.asarray(out)
    except Exception as exc:  # ragged lists and other objects numpy cannot hold
        raise BadOutput(f"returned {type(out).__name__} that is not an array ({exc})") from None


def _real_floating(out, shape):
    if out.dtype.kind in "US":
        raise BadOutput(f"returned strings (dtype {out.dtype}), expected real floating "
                         f"advantages")
    if out.dtype.kind == "c":
        raise BadOutput(f"returned complex values (dtype {out.dtype}), expected real floating "
                         f"advantages")
    if out.dtype.kind != "f":
        raise BadOutput(f"returned dtype {out.dtype}, expected real floating advantages")
    if out.shape != shape:
        raise BadOutput(f"returned shape {out.shape}, expected {shape}")
    return out


def unchanged(inputs: dict, kept: dict) -> None:
    """Raise :class:`BadOutput` naming the first input the function modified in place:
    ``inputs`` are the arrays it was given (or share memory with), ``kept`` copies taken
    before the call. A framework's advantage function must leave its rewards and ids alone."""
    for name, value in inputs.items():
        if not np.array_equal(np.asarray(value), kept[name], equal_nan=value.dtype.kind == "f"):
            raise BadOutput(f"modified its input {name!r} in place")


def _tensor(x, tensors):
    if tensors == "torch":
        import torch

        return torch.as_tensor(x)
    return x


def _verl_index(ids, index):
    inverse = np.unique(ids, return_inverse=True)[1].reshape(-1)
    if index == "int":
        return inverse  # 0..k-1
    labels = [str(uuid.uuid5(uuid.NAMESPACE_OID, str(int(g)))) for g in np.unique(ids)]
    return np.array(labels, dtype=object)[inverse]


def adapt(fn: Callable, signature: str = "plain", tensors: str = "numpy",
          tokens: int = VERL_TOKENS, index: str = "uid", reference: bool = False) -> Callable:
    """Wrap ``fn`` as ``plain(rewards (n,), group_ids (n,)) -> (n,)`` (with ``reference``,
    ``plain(rewards, group_ids, reference (n,))``).

    Parameters
    ----------
    fn : callable
        ``"plain"``: ``fn(rewards, group_ids)`` with integer ids (any sign, any order).
        ``"verl"``: ``fn(token_level_rewards (n, T), response_mask (n, T), index (n,))`` returning
        ``(n, T)`` advantages or a tuple whose first item they are; the reward sits on the last
        token of a response of length ``1..T``, and the advantage must be constant over the
        response and 0 on padding. ``"trl"``: ``fn(rewards (n,), num_generations)``, the groups
        contiguous blocks of ``num_generations`` rewards.
    signature : {"plain", "verl", "trl"}
    tensors : {"numpy", "torch"}
        What array type ``fn`` receives (torch tensors keep the rewards' dtype).
    tokens : int
        ``T`` for the verl-style adapter.
    index : {"uid", "int"}
        The verl-style adapter's ``index``: a numpy object array of uuid strings, one per group
        (as verl's trainer passes), or the non-negative contiguous integers ``0..k-1``.
    reference : bool
        The rule subtracts a reference reward per sample (verl's ``remax``: its prompt's greedy
        rollout's reward): ``"plain"`` calls ``fn(rewards, group_ids, reference)``, ``"verl"``
        calls ``fn(token_level_rewards, reward_baselines, response_mask)`` as verl's
        ``compute_remax_outcome_advantage`` takes them (no index); ``"trl"`` is refused.
    """
    if signature not in SIGNATURES:
        raise ValueError(f"`signature` must be one of {SIGNATURES}, got {signature!r}")
    if tensors not in ("numpy", "torch"):
        raise ValueError(f"`tensors` must be 'numpy' or 'torch', got {tensors!r}")
    if index not in INDEX_KINDS:
        raise ValueError(f"`index` must be one of {INDEX_KINDS}, got {index!r}")
    if reference:
        return _adapt_reference(fn, signature, tensors, tokens)
    if signature == "plain":
        def plain(z, ids):
            kept = {"rewards": z.copy(), "group_ids": ids.copy()}
            out = _to_numpy(fn(_tensor(z, tensors), _tensor(ids, tensors)))
            unchanged({"rewards": z, "group_ids": ids}, kept)  # torch tensors share z's memory
            return _real_floating(out, z.shape)
        return plain
    if signature == "trl":
        def trl(z, ids):
            size = int(np.unique(ids, return_counts=True)[1][0])
            blocks = ids.reshape(-1, size)
            if np.any(blocks != blocks[:, :1]) or np.unique(blocks[:, 0]).size != blocks.shape[0]:
                raise ValueError("the TRL-style adapter needs contiguous equal-size groups")
            kept = {"rewards": z.copy()}
            out = _to_numpy(fn(_tensor(z, tensors), size))
            unchanged({"rewards": z}, kept)
            return _real_floating(out, z.shape)
        return trl

    def verl(z, ids):
        mask, token_rewards = _verl_tokens(z, tokens)  # ragged responses
        given = {"token_level_rewards": token_rewards, "response_mask": mask,
                 "index": _verl_index(ids, index)}
        kept = {name: value.copy() for name, value in given.items()}
        out = _to_numpy(fn(_tensor(token_rewards, tensors), _tensor(mask, tensors),
                           given["index"]))
        unchanged(given, kept)
        return _per_response(out, mask)
    return verl


def takes_reference(spec) -> bool:
    """Whether the rule subtracts a reference reward the batch does not hold (``verl_remax``'s
    greedy rollout): the kit then draws one per group and passes it (:func:`adapt`)."""
    return spec.centring.reference_source == "baseline"


def probe_call(call: Callable, batch: tuple, signature: str) -> str | None:
    """Why ``call(*batch)`` shows the function cannot be tested (``None`` when it ran)."""
    try:
        call(*(np.copy(a) for a in batch))
    except BadOutput:  # it runs: what it returns is the search's to judge
        return None
    except (Exception, SystemExit) as exc:
        shown = ", ".join(repr(np.asarray(a).tolist()) for a in batch)  # one line
        return (f"calling it as {signature} on a plain valid batch ({shown}) raised "
                f"{first_line(exc)}; a function that cannot run on such a batch cannot be "
                "tested (check its signature, or --signature)")
    return None


def _verl_tokens(z, tokens):
    """Ragged responses of ``1..tokens`` tokens, the reward on the last: ``(mask, rewards)``."""
    n = z.size
    length = 1 + np.arange(n) % tokens
    mask = (np.arange(tokens)[None, :] < length[:, None]).astype(z.dtype)  # (n, T)
    token_rewards = np.zeros((n, tokens), dtype=z.dtype)
    token_rewards[np.arange(n), length - 1] = z
    return mask, token_rewards


def _per_response(out, mask):
    """verl's ``(n, T)`` advantages, constant over each response and 0 on padding, as ``(n,)``."""
    out = _real_floating(out, mask.shape)
    if np.any((mask == 0) & (out != 0)):
        raise BadOutput("advantages on padding tokens are not 0")
    if np.any((mask == 1) & (out != out[:, :1])):
        raise BadOutput("advantage is not constant over a response's tokens")
    return out[:, 0]


def _adapt_reference(fn: Callable, signature: str, tensors: str, tokens: int) -> Callable:
    if signature == "trl":
        raise ValueError("`signature` 'trl' passes no reference reward; test a rule that "
                         "subtracts one with 'plain' (fn(rewards, group_ids, reference)) or "
                         "'verl' (fn(token_level_rewards, reward_baselines, response_mask))")
    if signature == "plain":
        def plain(z, ids, ref):
            given = {"rewards": z, "group_ids": ids, "reference": ref}
            kept = {name: value.copy() for name, value in given.items()}
            out = _to_numpy(fn(*(_tensor(v, tensors) for v in given.values())))
            unchanged(given, kept)
            return _real_floating(out, z.shape)
        return plain

    def verl(z, ids, ref):
        mask, token_rewards = _verl_tokens(z, tokens)
        given = {"token_level_rewards": token_rewards, "reward_baselines": ref,
                 "response_mask": mask}
        kept = {name: value.copy() for name, value in given.items()}
        out = _to_numpy(fn(*(_tensor(v, tensors) for v in given.values())))
        unchanged(given, kept)
        return _per_response(out, mask)
    return verl


def load_function(target: str) -> Callable:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the function.

    The current directory is searched first, as ``python -m`` would. Anything that stops the
    import (an exception, ``sys.exit``) and a missing or non-callable attribute raise
    :class:`TargetError` with a one-line message.
    """
    if not isinstance(target, str) or target.count(":") != 1:
        raise TargetError(f"target must look like 'module:function' or 'file.py:function', "
                          f"got {target!r}")
    module_name, func_name = target.split(":")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or not path.is_file():
                raise TargetError(f"no such file: {module_name}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except TargetError:
        raise
    except SystemExit as exc:
        raise TargetError(f"importing {module_name} called sys.exit({exc.code!r})") from None
    except Exception as exc:
        raise TargetError(f"importing {module_name} raised {first_line(exc)}") from None
    if not hasattr(module, func_name):
        raise TargetError(f"{module_name} has no attribute {func_name!r}")
    fn = getattr(module, func_name)
    if not callable(fn):
        raise TargetError(f"{module_name}.{func_name} is not callable (it is a "
                          f"{type(fn).__name__})")
    return fn


#: A report's signature in words where the name alone would not say how it was called.
SIGNATURE_WORDS = {"multichannel-contiguous": "multichannel signature, contiguous equal groups "
                                              "as --signature trl draws them"}

#: How each signature calls the function, for messages.
SIGNATURE_FORMS = {"plain": "(rewards, group_ids)",
                   "verl": "(token_level_rewards, response_mask, index)",
                   "trl": "(rewards, num_generations)"}

#: The same for a rule that subtracts a reference reward (verl's remax; TRL's signature has no
#: place for it, :func:`adapt` refuses it).
REFERENCE_FORMS = {"plain": "(rewards, group_ids, reference)",
                   "verl": "(token_level_rewards, reward_baselines, response_mask)"}
