"""Input validation shared by the public entry points.

Every public function validates here and computes in a private core, so errors name the
parameter and the allowed values (scipy's ``_bootstrap_iv`` pattern). Never ``assert``.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_int(value, name: str, minimum: int | None = None, reason: str = "") -> int:
    """Return ``value`` as a Python int, rejecting floats, bools and values below ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        suffix = f" {reason}" if reason else ""
        raise ValueError(f"`{name}` must be an integer >= {minimum}{suffix}, got {value}")
    return value


def as_float(value, name: str, *, low: float | None = None, high: float | None = None) -> float:
    """Return ``value`` as a finite float within [low, high]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value}")
    if low is not None and value < low:
        raise ValueError(f"`{name}` must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"`{name}` must be <= {high}, got {value}")
    return value


def as_finite_array(value, name: str, ndim: tuple[int, ...] | None = None) -> np.ndarray:
    """Return a float64 array, rejecting empty, NaN, infinite and wrongly-shaped input."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be array-like of real numbers: {exc}") from None
    if ndim is not None and array.ndim not in ndim:
        allowed = " or ".join(str(n) for n in ndim)
        raise ValueError(f"`{name}` must have {allowed} dimensions, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"`{name}` must not be empty, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` must contain only finite values (no NaN or inf)")
    return array


def as_probabilities(value, name: str, ndim: tuple[int, ...] | None = None) -> np.ndarray:
    """Return a finite array whose entries lie in [0, 1]."""
    array = as_finite_array(value, name, ndim)
    if np.any(array < 0.0) or np.any(array > 1.0):
        raise ValueError(f"`{name}` must lie in [0, 1], got values in [{array.min()}, {array.max()}]")
    return array


def as_group_sizes(values, name: str = "group_sizes", minimum: int = 1) -> np.ndarray:
    """Return a sorted, unique int array of group sizes, each >= ``minimum``."""
    raw = np.atleast_1d(np.asarray(values))
    if raw.size == 0:
        raise ValueError(f"`{name}` must not be empty")
    sizes = [as_int(v.item() if hasattr(v, "item") else v, name, minimum) for v in raw]
    return np.array(sorted(set(sizes)), dtype=np.int64)


def as_instance(value, cls: type, name: str, *, none_is_default: bool = False):
    """``value`` if it is a ``cls``; ``cls()`` for ``None`` when ``none_is_default``; otherwise a
    ``TypeError`` naming the parameter and the type it must have.

    >>> as_instance(None, dict, "settings", none_is_default=True)
    {}
    """
    if value is None and none_is_default:
        return cls()
    if not isinstance(value, cls):
        article = "an" if cls.__name__[:1].lower() in "aeiou" else "a"
        raise TypeError(f"`{name}` must be {article} {cls.__name__}, got {type(value).__name__}")
    return value


def as_rng(seed) -> np.random.Generator:
    """Turn ``None``, an int, a SeedSequence or a Generator into a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)
