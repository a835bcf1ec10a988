"""HTML pieces of ``ustat-rl report``: escaping, the errata's Markdown subset, PNG text chunks.

Private to :mod:`ustat_rl.interface.report`, which re-exports :func:`markdown_to_html` and
:func:`png_text_chunks`.
"""

from __future__ import annotations

import html
import re
import struct
import zlib

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
"""


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
