"""How the library writes numbers: one JSON encoding and one text format for every report.

* :func:`json_ready`: NaN (nothing measured) becomes ``null``, ``+-inf`` the strings ``"inf"`` and
  ``"-inf"`` (JSON has no literal for them), numpy scalars plain Python ones;
* :func:`parse_number`: the inverse for one value (``null`` -> NaN, ``"inf"`` -> inf);
* :func:`format_number`: four significant digits, ``"-"`` for a missing value.

``ustat-rl verify --json`` and ``ustat-rl gstar --json`` both write through :func:`json_ready`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["json_ready", "parse_number", "format_number"]


def json_ready(obj):
    """``obj`` with every float made JSON-safe (NaN -> ``None``, inf -> ``"inf"``), recursively.

    Examples
    --------
    >>> json_ready({"a": [float("nan"), np.float64(2.5), float("-inf")], "n": np.int64(3)})
    {'a': [None, 2.5, '-inf'], 'n': 3}
    """
    if isinstance(obj, dict):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        value = float(obj)
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else str(value)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def parse_number(value) -> float:
    """A number written by :func:`json_ready` (or an older ``"nan"`` string) as a float."""
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def format_number(value) -> str:
    """Four significant digits, ``"-"`` for a missing value (``None`` or NaN), ``"0"`` for zero
    of either sign.

    Examples
    --------
    >>> format_number(0.000123456), format_number(None), format_number("inf"), format_number(-0.0)
    ('0.0001235', '-', 'inf', '0')
    """
    value = parse_number(value)
    if math.isnan(value):
        return "-"
    return "0" if value == 0.0 else f"{value:.4g}"
