"""Sphinx configuration of the ustat-rl documentation.

Build (strict, as CI does)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages that depend on the code (the claims and their check functions, the errata with evidence
computed at build time, the API reference and the notebooks) are written under
``docs/_generated/`` by the local extension ``docs/_ext/ustat_docs.py`` when the build starts.
"""

from __future__ import annotations

import os
import sys
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
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

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
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"ustat-rl {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
