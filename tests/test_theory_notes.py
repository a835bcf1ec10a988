"""The theory notes docs/theory.md resolve every reference the repository makes to them.

References look like ``docs/theory.md C5``, ``docs/theory.md C3-C10, C17`` or
``docs/theory.md section 7``; each named claim needs a heading starting with its ID, each named
section a heading ``## k. ...``. The notes replaced a file kept outside the repository, so no
file may point there any more.
"""

import importlib
import re
import subprocess
from pathlib import Path

import pytest

from ustat_rl.claims import registry
from ustat_rl.interface.claims_markdown import THEORY_NOTES, claim_anchors

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
NOTES = ROOT / "docs" / "theory.md"

#: Where references are searched: the package, derivations, scripts, notebooks, benchmarks,
#: tests, the README and the docs themselves.
SEARCHED = ("ustat_rl", "proofs_check", "simulations", "notebooks", "benchmarks", "tests", "docs",
            "README.md")

#: Strings no file may contain: the old out-of-tree notes and the folder they lived in. Built by
#: concatenation so that this file does not match itself.
FORBIDDEN = ("THEORY" + ".md", ".." + "/shared")

#: A reference: the notes' path, then either "section k" or a list of claim IDs and ranges.
REFERENCE = re.compile(r"docs/theory\.md(?:'s)?\s+(?:section\s+(\d+)|(C\d+(?:\s*[-–,]\s*C\d+)*))")

_SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
                 "build", "dist", "results", ".ipynb_checkpoints"}


def repository_files() -> list[Path]:
    """Tracked files (``git ls-files``), or every file outside build folders without git."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                             timeout=60).stdout.decode()
        files = [ROOT / name for name in out.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = [p for p in ROOT.rglob("*")
                 if not _SKIPPED_DIRS.intersection(p.relative_to(ROOT).parts)
                 and not any(part.endswith(".egg-info") for part in p.parts)]
    return sorted(p for p in files if p.is_file())


def searched_files() -> list[Path]:
    return [p for p in repository_files() if p.relative_to(ROOT).parts[0] in SEARCHED]


def references(text: str) -> list[tuple[str, str]]:
    """Targets named in ``text``: ``("section", "7")`` or ``("claim", "C5")``; ranges expanded."""
    targets = []
    for match in REFERENCE.finditer(text):
        section, claims = match.groups()
        if section is not None:
            targets.append(("section", section))
            continue
        for part in re.split(r"\s*,\s*", claims):
            ends = [int(c) for c in re.findall(r"C(\d+)", part)]
            low, high = ends[0], ends[-1]
            if high < low:
                raise ValueError(f"backwards claim range {part!r}")
            targets += [("claim", f"C{k}") for k in range(low, high + 1)]
    return targets


def section_numbers(notes: str) -> set[str]:
    return set(re.findall(r"^## (\d+)\. ", notes, flags=re.MULTILINE))


def unresolved(text: str, notes: str) -> list[tuple[str, str]]:
    """The references of ``text`` that have no heading in ``notes``."""
    claims, sections = set(claim_anchors(notes)), section_numbers(notes)
    return [(kind, key) for kind, key in references(text)
            if key not in (sections if kind == "section" else claims)]


@pytest.fixture(scope="module")
def notes() -> str:
    return NOTES.read_text(encoding="utf-8")


def test_package_finds_the_notes():
    assert THEORY_NOTES == NOTES and NOTES.is_file()


def test_every_claim_and_section_has_exactly_one_heading(notes):
    anchors = claim_anchors(notes)  # raises on a repeated claim heading
    assert set(anchors) == ({f"C{k}" for k in range(1, 33)} | {f"C{k}" for k in range(40, 59)}
                            | {f"C{k}" for k in range(60, 85)})
    assert section_numbers(notes) == {str(k) for k in range(1, 9)}


def test_every_reference_in_the_repository_resolves(notes):
    found, broken = 0, []
    for path in searched_files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += len(references(text))
        broken += [(str(path.relative_to(ROOT)), kind, key) for kind, key in unresolved(text, notes)]
    assert found > 50, f"only {found} references found: is the search pattern still right?"
    assert not broken, f"references without a heading in docs/theory.md: {broken}"


def forbidden_in(data: bytes) -> list[str]:
    """The forbidden strings that ``data`` contains."""
    return [s for s in FORBIDDEN if s.encode() in data]


def test_no_file_points_outside_the_repository():
    hits = [(str(p.relative_to(ROOT)), forbidden_in(p.read_bytes())) for p in repository_files()]
    hits = [hit for hit in hits if hit[1]]
    assert not hits, f"replace these references by docs/theory.md: {hits}"


def test_every_registered_claim_has_a_heading(notes):
    bases = {claim_id.split(".")[0] for claim_id in registry()}
    missing = sorted(bases - set(claim_anchors(notes)))
    assert not missing, f"registered claims without a heading in docs/theory.md: {missing}"


def missing_code(notes: str) -> list[str]:
    """Backticked paths, tests, check functions and dotted names of ``notes`` that do not exist."""
    checks = {claim.check.__name__ for claim in registry().values()}
    missing = []
    for token in re.findall(r"`([^`\s]+)`", notes):
        if re.fullmatch(r"C\d+(\.\w+)?", token):
            continue
        if "::" in token:
            path, test = token.split("::")
            ok = (ROOT / path).is_file() and f"def {test}(" in (ROOT / path).read_text()
        elif "/" in token:  # from the root, or a check module of a claims subpackage
            ok = (ROOT / token).exists() or (ROOT / "ustat_rl" / "claims" / token).is_file()
        elif token.endswith(".py"):  # a check module (or a pattern), named without its folder
            ok = any((ROOT / "ustat_rl" / "claims").glob(token))
        elif token.startswith("check_"):
            ok = token in checks
        elif "." in token:
            ok = _resolves(token)
        else:
            continue
        if not ok and token not in missing:
            missing.append(token)
    return missing


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] not in ("ustat_rl", "proofs_check"):
        parts = ["ustat_rl"] + parts  # a public name such as SoftmaxBandit.exact_mse
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_code_named_in_the_notes_exists(notes):
    missing = missing_code(notes)
    assert not missing, f"docs/theory.md names code that does not exist (renamed?): {missing}"


# ----------------------------------------------------------------------------- negative controls


def test_missing_code_is_reported():
    text = ("`ustat_rl/nowhere.py`, `tests/advantages/test_estimators.py::test_nothing`, `check_c99`, "
            "`proofs_check.hoeffding.no_such_derivation`, `SoftmaxBandit.no_method`, "
            "`checks_nowhere.py`, `ustat_rl/policies/softmax.py`, `SoftmaxBandit.exact_mse`, `C5.tf`, `gap`, "
            "`paper_convergence.py`, `paper_ustatistic/lemma1.py`, `paper_ustatistic/nowhere.py`")
    assert missing_code(text) == ["ustat_rl/nowhere.py", "tests/advantages/test_estimators.py::test_nothing",
                                  "check_c99", "proofs_check.hoeffding.no_such_derivation",
                                  "SoftmaxBandit.no_method", "checks_nowhere.py",
                                  "paper_ustatistic/nowhere.py"]


def test_resolver_reports_missing_headings(notes):
    path = "docs/theory.md"
    assert unresolved(f"see {path} C99.", notes) == [("claim", "C99")]
    assert unresolved(f"({path} section 9)", notes) == [("section", "9")]
    assert unresolved(f"({path} C90-C91, C5)", notes) == [("claim", "C90"), ("claim", "C91")]
    assert unresolved(f"({path} C3-C10, C17; {path} section 7; {path} C20's law)", notes) == []


def test_reference_parser_expands_lists_and_ranges():
    path = "docs/theory.md"
    assert references(f"({path} C3-C5, C7)") == [("claim", "C3"), ("claim", "C4"),
                                                  ("claim", "C5"), ("claim", "C7")]
    assert references(f"claims refer to `{path}`") == []


def test_forbidden_strings_are_detected():
    assert forbidden_in(("see " + FORBIDDEN[0] + " C5").encode()) == [FORBIDDEN[0]]
    assert forbidden_in(("cat " + FORBIDDEN[1] + "/notes").encode()) == [FORBIDDEN[1]]
    assert forbidden_in(b"see docs/theory.md C5") == []
