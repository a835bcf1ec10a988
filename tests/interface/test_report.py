"""``ustat-rl report``: one self-contained HTML file that opens offline.

Every report is checked as HTML (html.parser: tags balanced, no script, no external resource,
every <img> a data: URI whose base64 decodes to a PNG). Where headless Chromium is installed
it also renders the report, and a copy instrumented with a collector script checks that every
image decodes (``naturalWidth > 0``) and that no script error occurred.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread
from script_loader import ROOT

from ustat_rl.claims import VerifyContext, run_claim
from ustat_rl.claims.registry import Claim, check_close, check_true
from ustat_rl.interface.cli import main
from ustat_rl.interface.plotting import save_figure
from ustat_rl.interface.report import (
    MAX_REPORT_BYTES,
    PNG_SIGNATURE,
    load_verify_json,
    markdown_to_html,
    png_text_chunks,
    write_report,
)
from ustat_rl.runs.sweeps import write_run_record

pytestmark = pytest.mark.fast

ERRATA = """# Errata (test)

## 1. Eq. (4)

- printed: `a < b`
- evidence:
  - `check`: **disproved**, 0.1 s
"""
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


class _Checker(HTMLParser):
    """Balanced tags, images, scripts and external references of a document."""

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.images: list[str] = []
        self.external: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "img":
            self.images.append(attrs.get("src") or "")
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            if key in attrs and not value.startswith(("data:", "#")):
                self.external.append(value)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()


def _check_html(path: Path) -> _Checker:
    checker = _Checker()
    checker.feed(path.read_text(encoding="utf-8"))
    checker.close()
    assert not checker.errors and not checker.stack, (checker.errors, checker.stack)
    assert checker.scripts == 0 and not checker.external, checker.external
    for src in checker.images:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    return checker


def _results(tmp_path: Path) -> tuple[Path, Path]:
    """A verify file with a pass, a condition and a failure, and a results folder."""
    claims = [Claim("C1", "identity", "Lemma 1", "exact",
                    lambda ctx: [check_close("mean <estimate> & more", 1.0, 1.01, 0.01)]),
              Claim("C18", "argmins stable", "Fig. 5", "sweep",
                    lambda ctx: [check_true("argmin stable across N and n: [16, 16]", True, 0.0,
                                            note="measured: spread of log2 argmin")]),
              Claim("C2", "broken", "test", "test",
                    lambda ctx: [check_true("ordering <b>holds</b>", False)])]
    results = [run_claim(c, VerifyContext()).to_dict() for c in claims]
    verify = tmp_path / "verify.json"
    verify.write_text(json.dumps({"mode": "quick", "seed": 5, "n_jobs": 1, "version": "0.1.0",
                                  "summary": {"pass": 2, "fail": 1}, "results": results}))
    out = tmp_path / "results" / "sim"
    out.mkdir(parents=True)
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot([1, 2, 3], [3, 1, 2])
    fig.suptitle("MSE vs G <test & caption>")
    figures = save_figure(fig, out / "curve", formats=("png",))
    (out / "table.csv").write_text("G,mse\n2,0.5\n4,0.25\n")
    write_run_record(out, "sim", "simulations/sim.py", ["--quick", "--out", str(out)], seed=7,
                     seconds=1.5, files=[out / "table.csv", *figures])
    orphan = Figure(figsize=(2, 2))
    orphan.add_subplot().plot([0, 1])
    save_figure(orphan, tmp_path / "results" / "other" / "orphan", formats=("png",))
    return verify, tmp_path / "results"


def test_report_is_self_contained_and_complete(tmp_path):
    verify, results = _results(tmp_path)
    summary = write_report(tmp_path / "report.html", verify, results, errata=ERRATA)
    assert summary.n_figures == 2 and summary.n_skipped == 0
    assert summary.n_bytes == summary.path.stat().st_size < MAX_REPORT_BYTES
    checker = _check_html(summary.path)
    assert len(checker.images) == 2
    text = summary.path.read_text(encoding="utf-8")
    for needle in ("C18", "argmin stable across N and n: [16, 16] (value 0: spread of log2 "
                   "argmin)", "MSE vs G &lt;test &amp; caption&gt;",
                   "python simulations/sim.py --quick --out", "command not recorded",
                   "<strong>disproved</strong>", "<code>a &lt; b</code>", "ordering &lt;b&gt;",
                   "numpy", "scipy", "torch", "numba", "CPU count", "seed 7", "table.csv"):
        assert needle in text, needle


def test_figures_beyond_the_size_limit_are_listed_not_embedded(tmp_path):
    from ustat_rl.interface.report import render_report

    verify, results = _results(tmp_path)
    payload = load_verify_json(verify)
    full, n_figures, _ = render_report(payload, results, errata=ERRATA)
    assert n_figures == 2
    limit = len(full.encode("utf-8")) - 1000  # too small for both figures
    document, n_figures, n_skipped = render_report(payload, results, errata=ERRATA,
                                                   max_bytes=limit)
    assert n_skipped >= 1 and n_figures + n_skipped == 2
    assert len(document.encode("utf-8")) <= limit and "Not embedded" in document


def test_png_caption_chunk_and_markdown_escaping(tmp_path):
    fig = Figure(figsize=(2, 2))
    ax = fig.add_subplot()
    ax.set_title("only an axes title")
    (path,) = save_figure(fig, tmp_path / "f", formats=("png",))
    assert png_text_chunks(path.read_bytes())["Title"] == "only an axes title"
    with pytest.raises(ValueError, match="not a PNG"):
        png_text_chunks(b"GIF89a")
    rendered = markdown_to_html("# T <x>\n\n- a `<b>`\n  - **c**\n- d\n\n_done_")
    assert "<script" not in rendered and "&lt;x&gt;" in rendered
    assert rendered.count("<ul>") == rendered.count("</ul>") == 2


def test_cli_validates_inputs_before_any_work(tmp_path, capsys, monkeypatch):
    import ustat_rl.interface.report as report

    def no_work(*args, **kwargs):
        raise AssertionError("the report was rendered although the arguments were invalid")

    verify, results = _results(tmp_path)
    monkeypatch.setattr(report, "render_report", no_work)
    assert main(["report", str(verify), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.json"), "--out",
                 str(tmp_path / "r.html")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"results": [{"claim": 1}]}))
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "results[0] is not a claim result" in capsys.readouterr().err
    assert main(["report", str(verify), "--results", str(tmp_path / "nowhere"), "--out",
                 str(tmp_path / "r.html")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_cli_report_with_errata_computed_now(tmp_path, capsys):
    """The real errata (about 20 s of sympy on 2 cores) and the command line end to end."""
    verify, results = _results(tmp_path)
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(verify), "--results", str(results), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    _check_html(out)
    text = out.read_text(encoding="utf-8")
    assert "Eq. (4)" in text and "disproved" in text and "proved" in text


#: Where the browser test leaves its screenshot of the rendered report, for a person to look at.
SCREENSHOT = ROOT / "tests" / "artifacts" / "report.png"


def test_report_renders_in_headless_chromium(tmp_path):
    """The report rendered by headless Chromium: its title, the verdict table with one row per
    claim, every image decoded, no script error; and a screenshot at ``SCREENSHOT``.

    Skipped without Chromium, unless ``USTAT_RL_REQUIRE_CHROMIUM=1`` (CI sets it), where a
    missing browser fails the test.
    """
    if CHROMIUM is None:
        if os.environ.get("USTAT_RL_REQUIRE_CHROMIUM") == "1":
            pytest.fail("USTAT_RL_REQUIRE_CHROMIUM=1 but no chromium on PATH (Debian: apt-get "
                        "install chromium)")
        pytest.skip("no headless Chromium installed; the HTML checks of the other tests still run")
    verify, results = _results(tmp_path)
    summary = write_report(tmp_path / "report.html", verify, results, errata=ERRATA)
    text = summary.path.read_text(encoding="utf-8")
    # A test-only copy with a collector: script errors, each image's decoded width, the title and
    # the rows of the verdict table (the table whose first header cell is "claim"; a claim's
    # sub-checks sit in a one-cell row below it).
    collector = (
        "<script>window.__errors = [];"
        "window.addEventListener('error', e => window.__errors.push(String(e.message)));"
        "window.addEventListener('load', () => {"
        "const imgs = Array.from(document.images);"
        "const bad = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length;"
        "const table = Array.from(document.querySelectorAll('table')).find("
        "t => (t.querySelector('th') || {}).textContent === 'claim');"
        "const rows = table ? Array.from(table.rows).slice(1).filter(r => r.cells.length > 2).map("
        "r => r.cells[0].textContent.trim() + ':' + r.cells[1].textContent.trim()) : [];"
        "const div = document.createElement('div'); div.id = 'collector';"
        "div.textContent = 'images=' + imgs.length + ' broken=' + bad + "
        "' errors=' + window.__errors.length + ' title=' + document.title + "
        "' verdicts=' + rows.join(','); document.body.appendChild(div);});</script>")
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("<head>", "<head>" + collector, 1), encoding="utf-8")
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions",
         "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<div id="collector">([^<]*)</div>', proc.stdout)
    assert found, proc.stdout[-500:]
    collected = found.group(1)
    assert "images=2 broken=0 errors=0 " in collected, collected
    assert " title=ustat-rl report: quick run, seed 5" in collected, collected
    verdicts = collected.split(" verdicts=", 1)[1].split(",")
    assert [v.split(":")[0] for v in verdicts] == ["C1", "C18", "C2"], collected
    assert dict(v.split(":") for v in verdicts)["C2"].startswith("fail"), collected
    SCREENSHOT.parent.mkdir(exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={SCREENSHOT}", "--window-size=1000,1400",
                    summary.path.as_uri()], capture_output=True, timeout=120, check=True)
    assert SCREENSHOT.read_bytes().startswith(PNG_SIGNATURE)
    pixels = imread(SCREENSHOT)  # (1400, 1000, channels): a page, not a blank
    assert pixels.shape[:2] == (1400, 1000)
    assert pixels[..., :3].std() > 0.05, "the screenshot is blank"
