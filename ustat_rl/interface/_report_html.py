"""HTML pieces of ``ustat-rl report``: escaping, the errata's Markdown subset, PNG text chunks,
and the verdict and result tables (in boxes that scroll sideways, numbers rounded).

Private to :mod:`ustat_rl.interface.report`, which re-exports :func:`markdown_to_html` and
:func:`png_text_chunks`.
"""

from __future__ import annotations

import csv
import html
import math
import re
import struct
import zlib

from .claims_display import format_number, row_cells

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_text_chunks(data: bytes) -> dict[str, str]:
    """The ``tEXt`` and ``iTXt`` chunks of a PNG file as ``{keyword: text}``.

    Raises
    ------
    ValueError
        If ``data`` is not a PNG file (wrong signature or a truncated chunk).
    """
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG file (bad signature)")
    chunks, pos = {}, len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) < length:
            raise ValueError("truncated PNG chunk")
        if kind == b"tEXt" and b"\0" in body:
            key, text = body.split(b"\0", 1)
            chunks[key.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"iTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            compressed, rest = rest[0], rest[2:]
            text = rest.split(b"\0", 2)[-1]
            chunks[key.decode("latin-1")] = (zlib.decompress(text) if compressed
                                             else text).decode("utf-8")
        elif kind == b"IEND":
            break
        pos += 12 + length
    return chunks


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 75em; padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
            font-size: 0.9em; background: #f6f6f6; }
pre { padding: 0.5em; overflow-x: auto; white-space: pre-wrap; }
figure { margin: 1.5em 0; border-top: 1px solid #ddd; padding-top: 1em; }
figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.95em; }
.pass { color: #1b7e3a; } .fail, .error { color: #b00020; font-weight: bold; }
.refuted { color: #7a3db8; font-weight: bold; } .differs { color: #a65e00; }
details summary { cursor: pointer; }
div.wide { overflow-x: auto; max-width: 100%; margin: 0.5em 0 1.5em; }
div.wide > table { margin: 0; }
td { overflow-wrap: anywhere; }
"""

#: Significant digits of the numbers in result tables (the CSV files keep full precision).
TABLE_DIGITS = 6


def wide(table_html: str) -> str:
    """A table in a box that scrolls sideways instead of running off the page."""
    return f"<div class=\"wide\">{table_html}</div>"


def table_cell(text: str) -> str:
    """A CSV cell for display: numbers with more than ``TABLE_DIGITS`` significant digits
    rounded to that many (``0.123456789012`` -> ``0.123457``); integers and text unchanged."""
    stripped = text.strip()
    if not stripped or re.fullmatch(r"[+-]?\d+", stripped):
        return text
    try:
        value = float(stripped)
    except ValueError:
        return text
    if not math.isfinite(value):
        return text
    return f"{value:.{TABLE_DIGITS}g}"


def csv_table_html(path, name: str, made: str, max_rows: int, max_columns: int) -> str:
    """Heading, size and provenance of one result table, and its rows when it is small."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return f"<h3>{escape(name)}</h3><p>not readable: {escape(exc)}</p>"
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    parts = [f"<h3>{escape(name)}</h3><p>{len(body)} rows, {len(header)} columns. "
             f"Made by: {made}</p>"]
    if body and len(body) <= max_rows and len(header) <= max_columns:
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        cells = "".join("<tr>" + "".join(f"<td>{escape(table_cell(v))}</td>" for v in row)
                        + "</tr>" for row in body)
        parts.append(wide(f"<table><tr>{head}</tr>{cells}</table>"))
    else:
        parts.append(f"<p>Columns: {escape(', '.join(header))}.</p>")
    return "".join(parts)


def environment_html(title: str, env: dict) -> str:
    """A two-column table of versions and machine."""
    versions = env.get("versions") or {}
    rows = [(k, v) for k, v in versions.items()]
    rows += [("python", f"{env.get('python', '?')} ({env.get('implementation', '?')})"),
             ("platform", env.get("platform", "?")), ("machine", env.get("machine", "?")),
             ("processor", env.get("processor", "?")), ("CPU count", env.get("cpu_count", "?"))]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<h3>{escape(title)}</h3>{wide(f'<table>{body}</table>')}"


def escape(text) -> str:
    return html.escape(str(text), quote=True)


def _inline_markdown(text: str) -> str:
    """Escape ``text`` and render the inline Markdown the errata use: code and bold."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{escape(part[1:-1])}</code>")
        else:
            escaped = escape(part)
            escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
            out.append(escaped)
    return "".join(out)


def markdown_to_html(text: str, heading_offset: int = 1) -> str:
    """HTML of the Markdown subset of the errata report: headings, paragraphs, nested lists.

    Every piece of text is escaped; ``heading_offset`` demotes headings (``#`` becomes ``h2``
    with the default).
    """
    out: list[str] = []
    depth = 0  # open <ul> levels

    def close_lists(to: int = 0):
        nonlocal depth
        while depth > to:
            out.append("</li></ul>")
            depth -= 1

    for line in text.splitlines():
        stripped = line.strip()
        heading = re.match(r"^(#{1,6})\s+(.*)$", stripped)
        item = re.match(r"^(\s*)- (.*)$", line)
        if not stripped:
            close_lists()
        elif heading:
            close_lists()
            level = min(len(heading.group(1)) + heading_offset, 6)
            out.append(f"<h{level}>{_inline_markdown(heading.group(2))}</h{level}>")
        elif item:
            level = len(item.group(1)) // 2 + 1
            if level > depth:
                while depth < level:
                    out.append("<ul><li>")
                    depth += 1
            else:
                close_lists(level)
                out.append("</li><li>")
            out.append(_inline_markdown(item.group(2)))
        else:
            close_lists()
            body = stripped
            if len(body) > 2 and body.startswith("_") and body.endswith("_"):
                out.append(f"<p><em>{_inline_markdown(body[1:-1])}</em></p>")
            else:
                out.append(f"<p>{_inline_markdown(body)}</p>")
    close_lists()
    return "\n".join(out)


def verdict_section(payload: dict) -> str:
    """The verdict table of a verify payload, each claim's sub-checks in a collapsible row."""
    results = payload["results"]
    summary = payload.get("summary") or {}
    counts = ", ".join(f"{escape(n)} {escape(v)}" for v, n in
                       ((k, summary.get(k)) for k in ("pass", "refuted", "differs", "fail",
                                                      "error", "skipped")) if n is not None)
    rows = []
    for r in results:
        cells = row_cells(r)
        verdict = str(r.get("verdict", ""))
        rows.append(
            f"<tr><td>{escape(r['claim_id'])}</td><td class=\"{escape(verdict)}\">{escape(verdict)}</td>"
            f"<td>{escape(cells.compared)}</td><td class=\"num\">{escape(cells.predicted)}</td>"
            f"<td class=\"num\">{escape(cells.measured)}</td><td class=\"num\">{escape(cells.interval)}"
            f"</td><td>{escape(', '.join(r.get('evidence') or []))}</td>"
            f"<td class=\"num\">{float(r.get('seconds') or 0.0):.2f}</td></tr>")
        checks = r.get("checks") or []
        if checks or r.get("error"):
            sub = "".join(
                f"<tr><td>{'ok' if c.get('passed') else 'not met'}"
                f"{' (refutes)' if c.get('refutes') else ''}"
                f"{'' if c.get('required', True) else ' (pattern)'}</td><td>{escape(c.get('name'))}"
                f"</td><td class=\"num\">{escape(format_number(c.get('predicted')))}</td>"
                f"<td class=\"num\">{escape(format_number(c.get('measured')))}</td>"
                f"<td class=\"num\">[{escape(format_number(c.get('ci_low')))}, "
                f"{escape(format_number(c.get('ci_high')))}]</td><td>{escape(c.get('evidence'))}</td>"
                f"<td>{escape(c.get('note'))}</td></tr>" for c in checks)
            error = f"<pre>{escape(r['error'])}</pre>" if r.get("error") else ""
            rows.append(
                f"<tr><td></td><td colspan=\"7\"><details><summary>{len(checks)} sub-checks of "
                f"{escape(r['claim_id'])}: {escape(r.get('statement', ''))}</summary>{error}"
                + wide("<table><tr><th>outcome</th><th>comparison</th><th>predicted</th>"
                       "<th>measured</th><th>interval</th><th>evidence</th><th>note</th></tr>"
                       f"{sub}</table>") + "</details></td></tr>")
    return (
        "<h2 id=\"verdicts\">Verdicts</h2>"
        f"<p>{len(results)} claims checked in <code>{escape(payload.get('mode', '?'))}</code> mode "
        f"with root seed <code>{escape(payload.get('seed', '?'))}</code>"
        f"{' in ' + escape(format_number(payload.get('seconds'))) + ' s' if payload.get('seconds') is not None else ''}"
        f" by ustat-rl {escape(payload.get('version', '?'))}: {counts}.</p>"
        "<p>Each row shows the comparison that decides the verdict (for a pass, the first one). "
        "A condition (an ordering, a bound, a spread that must vanish) reads <em>holds</em> or "
        "<em>fails</em>, with the value it measured in the comparison's text. Monte Carlo "
        "intervals are 4 standard errors wide on each side (two-sided false-failure rate "
        "6.3e-5 per comparison).</p>"
        + wide("<table><tr><th>claim</th><th>verdict</th><th>compared</th><th>predicted</th>"
               "<th>measured</th><th>interval</th><th>evidence</th><th>s</th></tr>"
               + "\n".join(rows) + "</table>"))
