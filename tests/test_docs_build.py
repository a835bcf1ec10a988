"""The documentation builds with warnings as errors and links every claim to its check function.

One strict Sphinx build (``-W --keep-going``, one process, notebooks not executed) into a
temporary folder, then the generated HTML is parsed: every registered claim ID must appear in
the claims table with a link that resolves to the autodoc entry of the function that checks it.
About 40-60 s on two shared cores, most of it the errata's evidence and the autodoc imports.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag

import pytest
from script_loader import ROOT, load_script

DOC_TOOLS = ("sphinx", "numpydoc", "myst_nb", "furo")
MISSING = [name for name in DOC_TOOLS if importlib.util.find_spec(name) is None]

pytestmark = [
    pytest.mark.integration,  # docs build: the strict Sphinx build of the whole site
    pytest.mark.skipif(bool(MISSING), reason=f"documentation tools not installed "
                       f"({', '.join(MISSING)}); install the docs extra: "
                       "pip install -c constraints.txt -e '.[docs]'"),
]


class _Rows(HTMLParser):
    """Table rows of a page (cell texts and link targets) and every element id."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[list[str], list[str]]] = []
        self.ids: set[str] = set()
        self._cells: list[str] | None = None
        self._links: list[str] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "tr":
            self._cells, self._links = [], []
        elif tag in ("td", "th") and self._cells is not None:
            self._text = []
        elif tag == "a" and self._cells is not None and attrs.get("href"):
            self._links.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._text is not None:
            self._cells.append("".join(self._text).strip())
            self._text = None
        elif tag == "tr" and self._cells is not None:
            self.rows.append((self._cells, self._links))
            self._cells = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def _parse(path: Path) -> _Rows:
    parser = _Rows()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("USTAT_RL_DOCS_EXECUTE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-j", "1", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"strict docs build failed:\n{proc.stdout}\n{proc.stderr}"
    return out / "html"


def test_every_claim_links_to_its_check_function(built):
    from ustat_rl.claims import registry

    page = built / "_generated" / "claim_checks.html"
    rows = {cells[0]: links for cells, links in _parse(page).rows if cells}
    for claim_id, claim in registry().items():
        target = f"{claim.check.__module__}.{claim.check.__qualname__}"
        assert claim_id in rows, f"{claim_id} has no row in the claims table"
        hrefs = [h for h in rows[claim_id] if urldefrag(h).fragment == target]
        assert hrefs, f"{claim_id}: no link to {target} in {rows[claim_id]}"
        url, fragment = urldefrag(hrefs[0])
        resolved = (page.parent / url).resolve() if url else page
        assert resolved.is_file(), f"{claim_id}: link {hrefs[0]} points at a missing page"
        assert fragment in _parse(resolved).ids, f"{claim_id}: {target} is not documented"


def test_pages_of_the_site_exist(built):
    ext = load_script("docs/_ext/ustat_docs.py", "ustat_docs")
    for page in ("index", "installation", "quickstart", "theory", "claims", "conventions",
                 "benchmarks", "citing", "notebooks", "_generated/errata"):
        assert (built / f"{page}.html").is_file(), page
    errata = (built / "_generated" / "errata.html").read_text(encoding="utf-8")
    assert "computed" in errata and "Eq. (4)" in errata
    for module, _ in ext.API_MODULES:
        assert (built / "_generated" / "api" / f"{module}.html").is_file(), module
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("0*_*.ipynb"))
    rendered = sorted(p.stem for p in (built / "_generated" / "notebooks").glob("*.html"))
    assert rendered == notebooks


_REMOTE = re.compile(r'<(?:script|link)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.IGNORECASE)


def test_formulas_render_offline_from_a_local_mathjax(built):
    """Every page that typesets maths loads MathJax from the built site, the file is there, and
    no page loads a script or style sheet from the network. Negative control: the check flags
    the CDN tag that sphinx.ext.mathjax writes by default."""
    assert _REMOTE.search('<script defer="defer" '
                          'src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js">')
    pages = {p: p.read_text(encoding="utf-8") for p in built.rglob("*.html")}
    assert not [p for p, text in pages.items() if _REMOTE.search(text)]
    assert (built / "_static" / "mathjax" / "tex-svg-full.js").stat().st_size > 1_000_000
    maths = [p for p, text in pages.items() if 'class="math' in text]
    assert maths and all("_static/mathjax/tex-svg-full.js" in pages[p] for p in maths)
