"""Run records: how a simulation run was made (for ``ustat-rl report``), measured sections of a
Markdown file rewritten in place (the benchmarks' README), and the coverage scripts' count tables.

At the end of a run each simulation script writes a small JSON sidecar, ``<stem>.run.json``,
recording the command, seed, timing and files of the run; the report reads it to say how each
figure was made.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RUN_RECORD_SUFFIX", "count_table", "replace_markdown_section", "write_run_record"]

#: File-name suffix of the run records written by :func:`write_run_record`.
RUN_RECORD_SUFFIX = ".run.json"


def write_run_record(out, stem: str, script, argv, *, seed=None, seconds: float | None = None,
                     files=()) -> Path:
    """Write ``<out>/<stem>.run.json``: how one simulation run was made.

    Parameters
    ----------
    out : path-like
        The run's output folder (the script's ``--out``).
    stem : str
        Name of the record, usually the script's name without ``.py``.
    script : path-like
        The script that ran (its ``__file__``); recorded relative to the working directory when
        it lies below it.
    argv : sequence of str or None
        The arguments the script parsed; ``None`` means ``sys.argv[1:]``.
    seed : int, optional
        The run's root seed.
    seconds : float, optional
        Wall time of the run.
    files : iterable of path-like
        Files the run wrote (CSV tables, figures); recorded relative to ``out``.

    Returns
    -------
    pathlib.Path
        The path of the record, written atomically.

    Notes
    -----
    The record holds ``command`` (a shell line that reruns the script with the same
    arguments), ``script``, ``argv``, ``seed``, ``seconds``, ``finished`` (UTC, ISO 8601),
    ``python``, ``platform`` and ``files``.
    """
    out = Path(out)
    argv = list(sys.argv[1:] if argv is None else argv)
    script = Path(script).resolve()
    try:
        shown = script.relative_to(Path.cwd())
    except ValueError:
        shown = script
    names = []
    for path in files:
        path = Path(path)
        try:
            names.append(str(path.resolve().relative_to(out.resolve())))
        except ValueError:
            names.append(str(path))
    record = {
        "command": shlex.join(["python", str(shown), *map(str, argv)]),
        "script": str(shown),
        "argv": [str(a) for a in argv],
        "seed": None if seed is None else int(seed),
        "seconds": None if seconds is None else float(seconds),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "files": names,
    }
    path = out / f"{stem}{RUN_RECORD_SUFFIX}"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def replace_markdown_section(path, heading: str, section: str) -> None:
    """Replace the section that starts with the line ``heading`` in ``path`` by ``section``.

    The section runs to the next ``## `` heading or the end of the file; a section not yet in
    the file is appended, and a missing file is started with ``# Benchmarks``. Everything else
    in the file is left as it was.
    """
    path = Path(path)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    pattern = re.compile(re.escape(heading) + r".*?(?=\n## |\Z)", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def count_table(frame, count_columns, total: str = "pilots") -> str:
    """A Markdown table of ``frame`` (a pandas DataFrame) with each of ``count_columns`` shown
    as ``count (percent of total)``, ``-`` where the row's ``total`` is 0."""
    shown = frame.copy()
    for name in count_columns:
        shown[name] = [f"{c} ({100 * c / n:.1f}%)" if n else "-"
                       for c, n in zip(frame[name], frame[total])]
    head = "| " + " | ".join(shown.columns) + " |"
    rule = "|" + "|".join("---" for _ in shown.columns) + "|"
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([head, rule, *rows])
