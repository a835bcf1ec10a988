"""Sphinx extension writing the pages of the ustat-rl docs that are computed from the code.

When a build starts (``builder-inited``) it writes, under ``docs/_generated/``:

- ``claim_checks.md``: every registered claim with its statement, source, method, the evidence
  kinds its check declares, a link to its entry in the theory notes and an autodoc entry of the
  function that checks it (so ``{py:func}`` links to each check resolve);
- ``errata.md``: the errata report of :func:`proofs_check.errata_report`, with its evidence
  computed during this build;
- ``api/*.rst``: one autodoc page per public module;
- ``notebooks/*.ipynb``: copies of ``notebooks/0*_*.ipynb``, rendered with their stored outputs.

A file is rewritten only when its text changes, so incremental builds stay incremental.
"""

from __future__ import annotations

import ast
import inspect
import os
import textwrap
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
OUT = DOCS / "_generated"

#: Public modules with an API page, in reading order: (module, one-line description).
API_MODULES = (
    ("ustat_rl.theory", "finite-G theory of the paper as functions of per-prompt moments"),
    ("ustat_rl.policies", "policies that supply exact moments and samplers"),
    ("ustat_rl.montecarlo", "the reproducible Monte Carlo engine and bandit statistics"),
    ("ustat_rl.montecarlo.batch_rules", "batch rules at a finite batch on both backends"),
    ("ustat_rl.advantages", "advantage rules: one type, one registry, the gradient estimators"),
    ("ustat_rl.theory.group_size", "the group size's one owner: G*, the grid, every fixed-budget "
                                   "curve and the best G"),
    ("ustat_rl.theory.affine", "exact moments of an affine advantage rule for any rewards"),
    ("ustat_rl.stats.ustatistics", "U-statistics and Hoeffding decompositions"),
    ("ustat_rl.weighted_chi2", "the weighted chi-square distribution"),
    ("ustat_rl.stats.rates", "log-log slopes and rate estimates"),
    ("ustat_rl.advantages.conventions", "advantage conventions of TRL, verl and OpenRLHF"),
    ("ustat_rl.conformance.kit", "property tests of an advantage function against a convention"),
    ("ustat_rl.conformance.report", "what the conformance kit reports: the smallest failing batch"),
    ("ustat_rl.training", "policy-gradient training loops (Algorithm 1)"),
    ("ustat_rl.training.group_size", "group-size sweeps at a fixed budget"),
    ("ustat_rl.policies.examples", "the example bandits"),
    ("ustat_rl.seeding", "seed derivation"),
    ("ustat_rl.tolerances", "named tolerances of the checks"),
    ("ustat_rl.runs.sweeps", "saving sweep results"),
    ("ustat_rl.interface.report", "the self-contained HTML report"),
    ("ustat_rl.claims", "the claims registry behind ustat-rl verify"),
    ("ustat_rl.scores", "a model to per-sample scores and their sketches (torch): SketchSpec"),
    ("ustat_rl.scores.coverage", "how each parameter enters the forward pass, for the factored sketch"),
    ("ustat_rl.scores.projectors", "each projector's test and formula, side by side"),
    ("ustat_rl.scores.families", "the decoder families people train, built from configs"),
    ("ustat_rl.frameworks.entry", "WindowMonitor: the window record from any training loop"),
    ("ustat_rl.frameworks.config", "MonitorConfig: the monitor's settings, one frozen object"),
    ("ustat_rl.frameworks.trl_monitor", "G* and the noise budget inside a live TRL GRPO run"),
    ("ustat_rl.frameworks.trl_support", "the TRL releases and loss settings the monitor supports"),
    ("ustat_rl.frameworks.verl_monitor", "G* and the noise budget from verl's DataProto batches"),
    ("ustat_rl.frameworks.verl_worker", "the verl adapter inside verl's actor worker (update_actor)"),
    ("ustat_rl.frameworks.window", "one monitored window: grouped rewards and scores to a record"),
    ("ustat_rl.frameworks.logs", "a trainer's per-step logs read for what they determine"),
    ("ustat_rl.frameworks.aggregation", "loss aggregations over tokens (verl, TRL, SkyRL's "
     "prompt_mean) and the clamped K3 penalty"),
    ("ustat_rl.theory.group_filters", "the frameworks' dynamic-sampling group filters, exactly"),
    ("ustat_rl.theory.replace_sampling", "POLARIS's replace: copies of informative groups"),
    ("ustat_rl.theory.shrinkage", "shrinkage and score-weighted baselines at finite G and B"),
    ("ustat_rl.theory.greedy_baseline", "ReMax's greedy-rollout baseline"),
    ("ustat_rl.theory.ebpo", "EBPO's empirical-Bayes baseline with its running prior"),
    ("ustat_rl.theory.running_norm", "ROLL's running reward normalisation and its long-run form"),
    ("ustat_rl.montecarlo.opo_lengths", "verl's opo with response lengths, under a length model"),
    ("ustat_rl.frameworks.trajectory", "the trajectory file of a monitored run"),
    ("ustat_rl.frameworks.universality", "whether one G fits every window of a run"),
    ("proofs_check", "symbolic derivations (sympy)"),
)

EVIDENCE_KINDS = ("symbolic", "exact-numeric", "monte-carlo")

# Default evidence kind of each comparator of ustat_rl.claims.registry (its ``evidence`` default).
_COMPARATOR_DEFAULTS = {
    "check_close": "monte-carlo",
    "check_interval": "monte-carlo",
    "check_exact": "exact-numeric",
    "check_true": "exact-numeric",
}


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it is already there; atomically, as two builds (a test
    and a developer's) may run at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def _cell(text: str) -> str:
    """Text safe inside one MyST table cell: one line, Markdown punctuation escaped."""
    text = " ".join(str(text).split())
    for char in "\\|*_~<>[]`$":
        text = text.replace(char, "\\" + char)
    return text


def declared_evidence(func, _depth: int = 0, _seen: set | None = None) -> tuple[str, ...]:
    """Evidence kinds a check function declares in its source, in registry order.

    Reads the source of ``func`` and of the ``ustat_rl``/``proofs_check`` functions it calls
    (three levels deep): a comparator such as ``check_close`` contributes its default kind, an
    ``evidence=`` argument or a string literal naming a kind contributes that kind. This is what
    the code can produce; ``ustat-rl verify`` reports the kinds a run actually used.
    """
    seen = set() if _seen is None else _seen
    if func in seen or _depth > 3:
        return ()
    seen.add(func)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return ()
    found: set[str] = set()
    namespace = getattr(func, "__globals__", {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in EVIDENCE_KINDS:
            found.add(node.value)
        if not isinstance(node, ast.Call):
            continue
        name = (node.func.id if isinstance(node.func, ast.Name)
                else node.func.attr if isinstance(node.func, ast.Attribute) else None)
        if name is None:
            continue
        has_kind = any(k.arg == "evidence" for k in node.keywords)
        if name in _COMPARATOR_DEFAULTS and not has_kind:
            found.add(_COMPARATOR_DEFAULTS[name])
        callee = namespace.get(name)
        module = getattr(callee, "__module__", "") or ""
        if (inspect.isfunction(callee) and name not in _COMPARATOR_DEFAULTS
                and module.startswith(("ustat_rl", "proofs_check"))):
            found.update(declared_evidence(callee, _depth + 1, seen))
    return tuple(k for k in EVIDENCE_KINDS if k in found)


def claim_checks_page() -> str:
    """MyST page: the claims table with links to the check functions, then one entry per claim."""
    from ustat_rl.claims import registry
    from ustat_rl.interface.claims_markdown import THEORY_NOTES, claim_anchors

    claims = registry()
    anchors = claim_anchors(THEORY_NOTES.read_text(encoding="utf-8"))
    lines = [
        "# Claims and the functions that check them", "",
        "Generated from the claims registry when these pages were built. Each row gives the "
        "claim's source in the paper, how it is checked, the evidence kinds its check function "
        "can produce (read from the function's source: `symbolic` for sympy derivations, "
        "`exact-numeric` for enumeration or closed forms, `monte-carlo` for sampled "
        "estimates with intervals) and a link to that function. `ustat-rl verify --only ID` "
        "runs one check and reports the kinds that run used. Check functions live in the "
        "modules `ustat_rl.claims.paper_*` and `ustat_rl.claims.beyond_*`, one per group of "
        "results, each claim's further checks beside it.", "",
        "| claim | source | how it is checked | evidence | check function |",
        "|---|---|---|---|---|",
    ]
    documented: dict[str, str] = {}
    entries = []
    for claim_id, claim in claims.items():
        target = f"{claim.check.__module__}.{claim.check.__qualname__}"
        theory = f"../theory.md#{anchors[claim_id.split('.')[0]]}"
        evidence = ", ".join(declared_evidence(claim.check)) or "not declared"
        short = target.removeprefix("ustat_rl.claims.")
        lines.append(f"| [{claim_id}]({theory}) | {_cell(claim.source)} | "
                     f"{_cell(claim.method)} | {evidence} | {{py:func}}`{short} <{target}>` |")
        entries += [f"## {claim_id}", "", _cell(claim.statement), "",
                    f"- source: {_cell(claim.source)}",
                    f"- how it is checked: {_cell(claim.method)}",
                    f"- evidence kinds declared: {evidence}",
                    f"- theory notes: [{claim_id.split('.')[0]}]({theory})", ""]
        if target in documented:
            entries += [f"Checked by {{py:func}}`{target}`, documented under "
                        f"{documented[target]}.", ""]
            continue
        documented[target] = claim_id
        entries += ["```{eval-rst}", f".. autofunction:: {target}", "```", ""]
    return "\n".join(lines + [""] + entries)


def errata_page() -> str:
    """MyST page: the errata report with its evidence computed now."""
    from proofs_check import errata_report

    report = errata_report().splitlines()
    title, rest = report[0], report[1:]
    return "\n".join([title, "",
                      "This page was generated when the documentation was built: every status, "
                      "counterexample and expression below was computed by `proofs_check` during "
                      "that build (the same report as `ustat-rl verify --errata`).", ""] + rest
                     ) + "\n"


def api_pages() -> dict[str, str]:
    """reStructuredText autodoc pages, one per module of :data:`API_MODULES`, and their index."""
    pages = {}
    toc = []
    for module, summary in API_MODULES:
        title = f"``{module}``"
        pages[f"{module}.rst"] = "\n".join([
            title, "=" * len(title), "", f"{summary[0].upper()}{summary[1:]}.", "",
            f".. automodule:: {module}", "   :members:", ""])
        toc.append(f"   {module}")
    pages["index.rst"] = "\n".join([
        "API reference", "=============", "",
        "Public functions and classes, documented from their docstrings (numpydoc). The claim "
        "check functions are documented with their claims on :doc:`../claim_checks`.", "",
        ".. toctree::", "   :maxdepth: 1", ""] + toc) + "\n"
    return pages


def write_generated(app) -> None:
    """``builder-inited`` handler: write every generated page under ``docs/_generated``."""
    _write_if_changed(OUT / "claim_checks.md", claim_checks_page())
    _write_if_changed(OUT / "errata.md", errata_page())
    pages = api_pages()
    for stale in (OUT / "api").glob("*.rst"):  # a module that moved leaves its old page behind
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        _write_if_changed(OUT / "api" / name, text)
    wanted = sorted((ROOT / "notebooks").glob("0*_*.ipynb"))
    for old in (OUT / "notebooks").glob("*.ipynb"):
        if old.name not in {p.name for p in wanted}:
            old.unlink()
    for notebook in wanted:
        _write_if_changed(OUT / "notebooks" / notebook.name,
                          notebook.read_text(encoding="utf-8"))


def setup(app):
    app.connect("builder-inited", write_generated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
