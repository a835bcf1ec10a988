"""Sphinx configuration of the ustat-rl documentation.

Build (strict, as CI does)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages that depend on the code (the claims and their check functions, the errata with evidence
computed at build time, the API reference and the notebooks) are written under
``docs/_generated/`` by the local extension ``docs/_ext/ustat_docs.py`` when the build starts.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

from ustat_rl import __version__  # noqa: E402

project = "ustat-rl"
author = "ustat-rl contributors"
copyright = "2026, ustat-rl contributors"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
    "ustat_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints",
                    "advice_wins_data", "measured"]

# The theory notes and the generated claims table link to headings by the slug GitHub gives them
# ("theory.md#c5-exact-finite-g-mse-theorem-2"); MyST derives the same slugs for these levels.
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath", "colon_fence"]

# Notebooks are rendered with the outputs stored in them and never executed during a build
# (the test suite executes them). USTAT_RL_DOCS_EXECUTE=1 runs them once, cached, instead.
nb_execution_mode = "cache" if os.environ.get("USTAT_RL_DOCS_EXECUTE") == "1" else "off"
nb_execution_raise_on_error = True
nb_execution_timeout = 600

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": False}
# the trl extra's packages are not in the docs extra: the TRL monitor's page is built without them
autodoc_mock_imports = ["trl", "transformers"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"ustat-rl {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# MathJax is served from the built site, not a CDN, so formulas render offline. The file comes
# from the sphinx-mathjax-offline package (MathJax 3.2.2, in the docs extra); its SVG "full"
# build carries its fonts and every TeX extension in one file, so nothing else is fetched.
_MATHJAX = "tex-svg-full.js"
try:
    _MATHJAX_SOURCE = Path(metadata.distribution("sphinx-mathjax-offline").locate_file(
        f"sphinx-mathjax-offline/static/mathjax/{_MATHJAX}"))
except metadata.PackageNotFoundError:
    _MATHJAX_SOURCE = None
if _MATHJAX_SOURCE is None or not _MATHJAX_SOURCE.is_file():
    raise RuntimeError("the docs serve MathJax locally and need the package sphinx-mathjax-offline: "
                       "pip install -c constraints.txt -e '.[docs]'")
mathjax_path = f"mathjax/{_MATHJAX}"


def _copy_mathjax(app, exc) -> None:
    if exc is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_MATHJAX_SOURCE, target / _MATHJAX)


def setup(app):
    """Copy the local MathJax into the built site once the pages are written."""
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True}
