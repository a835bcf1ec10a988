"""``ustat-rl report``: one self-contained HTML file from a verify run and simulation results.

The report holds the verdict table of a ``ustat-rl verify --json`` file (with each headline in
words and every sub-check in a collapsible row), the errata of :func:`proofs_check.errata_report`
with evidence computed when the report is made, every PNG figure under a results folder (embedded
as a base64 ``data:`` URI, with its caption and the command that made it), the result tables,
and the seeds, timings, versions and machine. It needs no network access: no scripts, fonts or
style sheets are loaded from anywhere, and it contains no script at all.

Captions come from the ``Title`` text chunk that :func:`ustat_rl.interface.plotting.save_figure` writes
into PNG files; commands come from the run records (``*.run.json``) that the simulation scripts
write with :func:`ustat_rl.runs.records.write_run_record`. A figure without them says so.
"""

from __future__ import annotations

import base64
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from .._paths import write_atomic
from ..runs.records import RUN_RECORD_SUFFIX
from ._report_html import CSS as _CSS
from ._report_html import (
    PNG_SIGNATURE,
    csv_table_html,
    environment_html,
    markdown_to_html,
    png_text_chunks,
    verdict_section,
)
from ._report_html import escape as _e
from .claims_display import format_number

__all__ = ["MAX_REPORT_BYTES", "PNG_SIGNATURE", "VERDICTS", "ReportSummary", "environment",
           "load_verify_json", "markdown_to_html", "png_text_chunks", "render_report",
           "write_report"]

#: The verdicts a claim can have (``ustat_rl.claims.run_claim``), in the summary's order.
VERDICTS = ("pass", "refuted", "differs", "fail", "error", "skipped")

#: Verdicts a check decides from its sub-checks: a result with one of them carries its evidence.
_DECIDED = ("pass", "refuted", "differs", "fail")

#: Size limit of a report. Figures that would push the file past it are listed, not embedded.
MAX_REPORT_BYTES = 10 * 1024 * 1024

_VERSIONED = ("numpy", "scipy", "torch", "numba", "pandas", "sympy", "matplotlib")
_TABLE_ROWS = 40  # result tables up to this many rows are shown in full
_TABLE_COLUMNS = 14


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`write_report` wrote.

    Attributes
    ----------
    path : pathlib.Path
        The HTML file.
    n_bytes : int
        Its size.
    n_figures : int
        Figures embedded.
    n_skipped : int
        Figures listed but not embedded (they would have exceeded ``MAX_REPORT_BYTES``).
    seconds : float
        Time taken, most of it the errata's evidence.
    dropped : tuple of str
        Files under the results folder left out because they could not be read (a PNG that is
        not one, a run record that is not JSON), each with the reason; the report lists them.
    """

    path: Path
    n_bytes: int
    n_figures: int
    n_skipped: int
    seconds: float
    dropped: tuple[str, ...] = ()


def environment() -> dict:
    """Versions and machine of this process: package versions, Python, platform, CPU count.

    Versions are read from the installed distributions' metadata, without importing them.
    """
    from .. import __version__

    versions = {"ustat-rl": __version__}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"versions": versions, "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor() or "unknown", "cpu_count": os.cpu_count()}


def load_verify_json(path) -> dict:
    """Read and check a ``ustat-rl verify --json`` file.

    Raises
    ------
    ValueError
        Naming the path and the problem when the file is missing, unreadable, not JSON, or not
        a verify run (a JSON object whose ``results`` is a non-empty list of claim results,
        each with a ``claim_id`` and one of the ``VERDICTS``), or when a verdict has no evidence
        (``pass``, ``refuted``, ``differs`` or ``fail`` without the ``checks`` that decided it).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (expected the output of "
                         "`ustat-rl verify --json PATH`)")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise ValueError(f"{path}: not a `ustat-rl verify --json` file (no list 'results')")
    for i, result in enumerate(payload["results"]):
        if not (isinstance(result, dict) and "claim_id" in result and "verdict" in result):
            raise ValueError(f"{path}: results[{i}] is not a claim result "
                             "(needs 'claim_id' and 'verdict')")
        if result["verdict"] not in VERDICTS:
            raise ValueError(f"{path}: results[{i}] ({result['claim_id']}) has verdict "
                             f"{result['verdict']!r}; a verdict is one of {', '.join(VERDICTS)}")
        checks = result.get("checks")
        if result["verdict"] in _DECIDED and not (
                isinstance(checks, list) and checks and all(isinstance(c, dict) for c in checks)):
            raise ValueError(f"{path}: results[{i}] ({result['claim_id']}) says "
                             f"{result['verdict']!r} with no evidence (no 'checks' list of the "
                             "sub-checks that decided it): not the output of `ustat-rl verify "
                             "--json`")
    if not payload["results"]:
        raise ValueError(f"{path}: 'results' is empty: no claim was checked, nothing to report "
                         "(run `ustat-rl verify --json PATH` first)")
    return payload


# --------------------------------------------------------------------------- figures and runs
@dataclass(frozen=True)
class _Figure:
    path: Path
    data: bytes
    caption: str
    run: dict | None


def _run_records(results: Path, dropped: list) -> list[tuple[Path, dict]]:
    records = []
    for path in sorted(results.rglob(f"*{RUN_RECORD_SUFFIX}")):
        name = path.relative_to(results).as_posix()
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            dropped.append(f"{name}: run record not readable ({exc})")
            continue
        if isinstance(record, dict):
            records.append((path, record))
        else:
            dropped.append(f"{name}: run record is not a JSON object")
    return records


def _record_of(path: Path, records) -> dict | None:
    for record_path, record in records:
        if any((record_path.parent / name).resolve() == path.resolve()
               for name in record.get("files", [])):
            return record
    return None


def _figures(results: Path, records, dropped: list) -> list[_Figure]:
    figures = []
    for path in sorted(results.rglob("*.png")):
        try:
            data = path.read_bytes()
            caption = png_text_chunks(data).get("Title", "")
        except (OSError, ValueError) as exc:  # unreadable, or not a PNG despite its name
            dropped.append(f"{path.relative_to(results).as_posix()}: figure not embedded ({exc})")
            continue
        figures.append(_Figure(path, data, caption, _record_of(path, records)))
    return figures


# --------------------------------------------------------------------------- HTML pieces
def _figure_html(number: int, figure: _Figure, results: Path) -> str:
    encoded = base64.b64encode(figure.data).decode("ascii")
    name = figure.path.relative_to(results).as_posix()
    caption = figure.caption or "caption not recorded"
    if figure.run is None:
        made = "command not recorded"
        made_html = f"<em>{made}</em>"
    else:
        made_html = f"<code>{_e(figure.run.get('command', 'command not recorded'))}</code>"
        extra = [f"seed {figure.run['seed']}" if figure.run.get("seed") is not None else "",
                 f"{format_number(figure.run.get('seconds'))} s"
                 if figure.run.get("seconds") is not None else "",
                 f"finished {figure.run['finished']}" if figure.run.get("finished") else ""]
        extra = [x for x in extra if x]
        if extra:
            made_html += f" ({_e(', '.join(extra))})"
    return (f"<figure id=\"figure-{number}\"><img alt=\"{_e(caption)}\" "
            f"src=\"data:image/png;base64,{encoded}\">"
            f"<figcaption><strong>Figure {number}.</strong> {_e(caption)}<br>"
            f"File: <code>{_e(name)}</code>. Made by: {made_html}</figcaption></figure>")


def _tables_html(results: Path, records) -> str:
    parts = []
    for path in sorted(results.rglob("*.csv")):
        record = _record_of(path, records)
        made = (f"<code>{_e(record['command'])}</code>" if record and record.get("command")
                else "<em>command not recorded</em>")
        parts.append(csv_table_html(path, path.relative_to(results).as_posix(), made,
                                    _TABLE_ROWS, _TABLE_COLUMNS))
    return "".join(parts) or "<p>No CSV tables in the results folder.</p>"


def render_report(payload: dict, results=None, *, errata: str | None = None,
                  source: str = "", max_bytes: int = MAX_REPORT_BYTES,
                  dropped: list | None = None) -> tuple[str, int, int]:
    """The report's HTML for a verify payload and an optional results folder.

    Parameters
    ----------
    payload : dict
        A verify run, as returned by :func:`load_verify_json`.
    results : path-like, optional
        Folder searched (recursively) for ``*.png`` figures, ``*.csv`` tables and the
        ``*.run.json`` records of the simulation scripts.
    errata : str, optional
        Markdown errata; by default :func:`proofs_check.errata_report` computes them now.
    source : str
        How to name the verify file in the report.
    max_bytes : int
        Size limit of the HTML; figures that would exceed it are listed but not embedded.
    dropped : list, optional
        Receives one line per file left out because it could not be read (also listed in the
        report's figures section).

    Returns
    -------
    html : str
        The document.
    n_figures, n_skipped : int
        Figures embedded, and figures left out for size.
    """
    start = time.perf_counter()
    if errata is None:
        try:
            from proofs_check import errata_report
        except ImportError:
            errata = "Errata unavailable: proofs_check is not installed."
        else:
            errata = errata_report()
    results = None if results is None else Path(results)
    dropped = [] if dropped is None else dropped
    records = [] if results is None else _run_records(results, dropped)
    figures = [] if results is None else _figures(results, records, dropped)
    made = datetime.now(timezone.utc).isoformat(timespec="seconds")

    head = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>ustat-rl report: {_e(payload.get('mode', ''))} run, seed "
        f"{_e(payload.get('seed', ''))}</title><style>{_CSS}</style></head><body>"
        "<h1>ustat-rl report</h1>"
        "<p>Checks of <em>Demystifying Group Relative Policy Optimization: Its Policy Gradient is "
        f"a U-Statistic</em> (arXiv:2603.01162). Made {_e(made)} from <code>{_e(source)}</code>"
        f"{' and the results folder <code>' + _e(results) + '</code>' if results else ''}.</p>"
        "<p><a href=\"#verdicts\">Verdicts</a> · <a href=\"#errata\">Errata</a> · "
        "<a href=\"#figures\">Figures</a> · <a href=\"#tables\">Result tables</a> · "
        "<a href=\"#runs\">Runs, seeds and timings</a> · <a href=\"#environment\">Versions and "
        "machine</a></p>")
    errata_html = ("<h2 id=\"errata\">Errata</h2><p>The paper's slips, with evidence computed "
                   "by <code>proofs_check</code> when this report was made.</p>"
                   + markdown_to_html(errata, heading_offset=1))
    runs = "".join(
        f"<tr><td><code>{_e(p.relative_to(results).as_posix())}</code></td>"
        f"<td><code>{_e(r.get('command', 'command not recorded'))}</code></td>"
        f"<td class=\"num\">{_e(r.get('seed', '-'))}</td>"
        f"<td class=\"num\">{_e(format_number(r.get('seconds')))}</td>"
        f"<td>{_e(r.get('finished', '-'))}</td><td>{_e(r.get('platform', '-'))}</td></tr>"
        for p, r in records)
    claim_seconds = sum(float(r.get("seconds") or 0.0) for r in payload["results"])
    runs_html = (
        "<h2 id=\"runs\">Runs, seeds and timings</h2>"
        f"<p>Verify run: root seed <code>{_e(payload.get('seed', '?'))}</code> (each claim "
        f"derives its own stream from it), {_e(payload.get('n_jobs', '?'))} worker(s), "
        f"{claim_seconds:.1f} s in the checks (per claim in the verdict table).</p>"
        + (("<table><tr><th>record</th><th>command</th><th>seed</th><th>s</th><th>finished "
            "(UTC)</th><th>platform</th></tr>" + runs + "</table>") if records
           else "<p>No simulation run records (<code>*.run.json</code>) found.</p>"))
    env_html = ("<h2 id=\"environment\">Versions and machine</h2>"
                + (environment_html("The verify run", payload["environment"])
                   if isinstance(payload.get("environment"), dict) else
                   "<p>The verify file records no environment (written by an older "
                   "version); below is the one that made this report.</p>")
                + environment_html("This report", environment()))
    tables_html = ("<h2 id=\"tables\">Result tables</h2>"
                   + (_tables_html(results, records) if results is not None
                      else "<p>No results folder given.</p>"))
    tail_fixed = errata_html + tables_html + runs_html + env_html
    # The closing part is added after the figures; its length is known up to the timing line.
    used = len((head + verdict_section(payload) + tail_fixed).encode("utf-8")) + 2000
    figure_parts, skipped = [], []
    for figure in figures:
        part = _figure_html(len(figure_parts) + 1, figure, results)
        if used + len(part.encode("utf-8")) > max_bytes:
            skipped.append(figure.path.relative_to(results).as_posix())
            continue
        figure_parts.append(part)
        used += len(part.encode("utf-8"))
    figures_html = "<h2 id=\"figures\">Figures</h2>" + (
        "".join(figure_parts) if figure_parts else "<p>No figures embedded.</p>")
    if skipped:
        figures_html += (f"<p>Not embedded, to keep this file under {max_bytes // 2**20} MiB: "
                         + ", ".join(f"<code>{_e(s)}</code>" for s in skipped) + ".</p>")
    if dropped:
        figures_html += ("<p>Left out as unreadable:</p><ul>"
                         + "".join(f"<li><code>{_e(line)}</code></li>" for line in dropped)
                         + "</ul>")
    document = (head + verdict_section(payload) + errata_html + figures_html + tables_html
                + runs_html + env_html
                + f"<p><em>Report made in {time.perf_counter() - start:.1f} s by "
                  f"<code>ustat-rl report</code> (Python {_e(sys.version.split()[0])}).</em></p>"
                + "</body></html>\n")
    return document, len(figure_parts), len(skipped)


def write_report(out, verify_json, results=None, *, errata: str | None = None
                 ) -> ReportSummary:
    """Write the HTML report of a verify run (and a results folder) to ``out``.

    Parameters
    ----------
    out : path-like
        The HTML file to write (atomically).
    verify_json : path-like
        A ``ustat-rl verify --json`` file.
    results : path-like, optional
        A folder of simulation results (``simulations/*.py --out``), searched recursively.
    errata : str, optional
        Markdown errata to show instead of computing them (see :func:`render_report`).

    Returns
    -------
    ReportSummary

    Raises
    ------
    ValueError
        If the verify file is missing or invalid, or ``results`` is not a folder.
    """
    start = time.perf_counter()
    out = Path(out)
    payload = load_verify_json(verify_json)
    if results is not None and not Path(results).is_dir():
        raise ValueError(f"{results}: the results folder does not exist")
    dropped: list[str] = []
    document, n_figures, n_skipped = render_report(payload, results, errata=errata,
                                                   source=str(verify_json), dropped=dropped)
    write_atomic(out, document.encode("utf-8"))
    return ReportSummary(out, out.stat().st_size, n_figures, n_skipped,
                         time.perf_counter() - start, tuple(dropped))
