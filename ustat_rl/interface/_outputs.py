"""The ``--json`` and ``--plot`` outputs that ``ustat-rl gstar`` and ``ustat-rl allocate`` share.

Both commands check the two paths before any work and write them the same way once their report
exists: the JSON through :func:`ustat_rl.formatting`-ready dicts, the figure in the format its
suffix names, each atomically (:func:`ustat_rl._paths.write_atomic`).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Callable

from .._paths import check_output, write_atomic

__all__ = ["FIGURE_SUFFIXES", "check_report_outputs", "error_line", "write_report_outputs"]

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def error_line(command: str, exc: BaseException, options=()) -> str:
    """The one stderr line of a refusal, in the user's words.

    The first line of ``exc``'s message, after ``ustat-rl COMMAND: error:``; a library
    parameter that the command sets from an option (``options``: the parameter names, e.g.
    ``("budget", "estimator")``) is named as the user typed it: `` `budget` `` becomes
    `` `--budget` ``.
    """
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for name in options:
        text = text.replace(f"`{name}`", f"`--{name.replace('_', '-')}`")
    return f"ustat-rl {command}: error: {text}"


def check_report_outputs(json_path: Path | None, plot_path: Path | None) -> None:
    """Raise one ``ValueError`` naming ``--json`` or ``--plot`` if it cannot be written.

    ``--json`` must end in ``.json`` and ``--plot`` in one of :data:`FIGURE_SUFFIXES`, each in a
    folder that exists and can be written; ``None`` (not asked for) passes.
    """
    for path, suffixes, name in ((json_path, (".json",), "--json"),
                                 (plot_path, FIGURE_SUFFIXES, "--plot")):
        if path is None:
            continue
        if path.suffix not in suffixes:
            raise ValueError(f"`{name}` must end in one of {suffixes}, got {str(path)!r}")
        if not path.parent.is_dir():
            raise ValueError(f"`{name}`: folder {str(path.parent)!r} does not exist")
        check_output(path, f"`{name}`")


def write_report_outputs(payload: dict, make_figure: Callable, json_path: Path | None,
                         plot_path: Path | None) -> None:
    """Write ``payload`` as JSON to ``json_path`` and ``make_figure()`` to ``plot_path``."""
    if json_path is not None:
        write_atomic(json_path, json.dumps(payload, indent=2, allow_nan=False).encode())
        print(f"wrote {json_path}")
    if plot_path is not None:
        buffer = io.BytesIO()
        make_figure().savefig(buffer, format=plot_path.suffix[1:], dpi=150)
        write_atomic(plot_path, buffer.getvalue())
        print(f"wrote {plot_path}")
