"""Output paths checked before any long work, by every command and simulation script.

:func:`output_problem` says why a file or folder cannot be written (or ``None``): it finds the
nearest folder that exists on the way to the path, requires it to be a folder, and creates and
removes a probe file in it, so a read-only folder, a parent that is a file or a path that is a
folder all fail up front instead of after the run. Nothing is created: missing folders are made
when the output is written. :func:`check_output` turns a problem into a one-line ``ValueError``
naming the option; :func:`parser_check_outputs` into an argparse usage error (exit 2).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_output", "output_problem", "parser_check_outputs", "write_atomic"]

KINDS = ("file", "folder")


def _probe(folder: Path) -> str | None:
    """Why no file can be created in the existing folder ``folder`` (``None`` if one can)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ustat-rl-probe-", dir=folder)
    except OSError as exc:
        return f"{folder} is not writable ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(name)
    return None


def output_problem(path, kind: str = "file") -> str | None:
    """Why ``path`` cannot be written as a ``kind`` ("file" or "folder"), or ``None``.

    Parameters
    ----------
    path : path-like
        Where the output goes.
    kind : {"file", "folder"}
        A file is replaced (it may exist, but not as a folder); a folder is created or written
        into (it may exist, but not as a file).

    Returns
    -------
    str or None
        A short reason naming the offending path, without the option's name.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
    path = Path(path)
    if str(path) == "":
        return "the path is empty"
    if kind == "file" and path.is_dir():
        return f"{path} is a directory, not a file"
    if kind == "folder" and path.exists() and not path.is_dir():
        return f"{path} is a file, not a directory"
    if kind == "folder" and path.is_dir():
        return _probe(path)
    if kind == "file" and path.exists() and not os.access(path, os.W_OK):
        return f"{path} exists and is not writable"
    ancestor = path.parent
    while not ancestor.exists():
        if ancestor.parent == ancestor:
            return f"no existing directory above {path}"
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot create {path}: {ancestor} is a file, not a directory"
    return _probe(ancestor)


def check_output(path, option: str, kind: str = "file") -> None:
    """Raise ``ValueError("option: reason")`` if ``path`` cannot be written; ``None`` passes.

    A command-line ``option`` (``"--json"``) is named as it is typed, a Python parameter
    (``"out"``) in backticks; an ``option`` already in backticks is kept as it is.
    """
    if path is None:
        return
    problem = output_problem(path, kind)
    if problem is not None:
        name = option if option.startswith(("-", "`")) else f"`{option}`"
        raise ValueError(f"{name}: {problem}")


def parser_check_outputs(parser, outputs) -> None:
    """``parser.error`` (exit 2) for the first unwritable ``(path, option, kind)`` of ``outputs``."""
    for path, option, kind in outputs:
        if path is not None and (problem := output_problem(path, kind)) is not None:
            parser.error(f"{option}: {problem}")


def write_atomic(path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` (parents created), then rename it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
