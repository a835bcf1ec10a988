"""One home for "which group size?" (issue 45, item 1): a scan of the package's code.

``G* = 1 + sqrt(c3'/c1)``, the divisor grid and the argmin over group sizes each have one home,
:mod:`ustat_rl.theory.group_size`; everything else calls it. The scanner reads code only
(strings and comments are dropped with :mod:`tokenize`, so docstrings that state the formula do
not count) and each check has a planted second copy, written to a temporary file the scanner is
also pointed at, that it must find.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

import ustat_rl

pytestmark = pytest.mark.fast

PACKAGE = Path(ustat_rl.__file__).resolve().parent
OWNER = "theory/group_size.py"

#: The formula's code spellings: ``1 + sqrt(..)``, ``1 + 1/sqrt(rho)``, ``1 + rho ** -0.5``, and
#: the ratio itself, ``sqrt(c3)/sqrt(c1)`` or ``sqrt(c3/c1)`` (``self.c3``, ``c.c3`` ...).
FORMULA = re.compile(r"""
      \b1(?:\.0*)?\s*\+\s*(?:1(?:\.0*)?\s*/\s*)?(?:math|np|numpy)\.sqrt\s*\(
    | \b1(?:\.0*)?\s*\+\s*[\w.]+\s*\*\*\s*\(?\s*-\s*(?:0?\.5|1\s*/\s*2)
    | \bsqrt\s*\(\s*[\w.]*\bc3\w*\s*\)\s*/\s*(?:math\.|np\.|numpy\.)?sqrt\s*\(\s*[\w.]*\bc1
    | \bsqrt\s*\(\s*[\w.]*\bc3\w*\s*/\s*[\w.]*\bc1
""", re.VERBOSE)

#: An argmin (``np.argmin(..)``, ``x.argmin(..)``): the choice of a best group size from a curve.
ARGMIN = re.compile(r"(?:\bnp\.|\bnumpy\.|\.)argmin\s*\(")

#: A grid of divisors built by filtering: ``sizes[N % sizes == 0]``, ``[g for g .. if N % g == 0]``.
DIVISORS = re.compile(r"%\s*[\w.]+\s*==\s*0\s*\]")

#: Argmins that choose something other than a batch's group size, each with the reason.
NOT_A_GROUP_SIZE = {
    "claims/paper_ustatistic/baselines.py": "the best constant baseline b over a grid of b",
    "theory/allocation.py": "the per-prompt allocation's dynamic programme, which chooses each "
                            "prompt's size given the budget left (its own problem, checked "
                            "against a brute force over compositions); no argmin over one "
                            "batch's G reduces to it",
}


@functools.lru_cache(maxsize=None)  # each file is read once per session, not once per pattern
def code_lines(path: Path) -> dict[int, str]:
    """The file's code by line number, with strings and comments dropped."""
    out: dict[int, list[str]] = {}
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    text_parts = {tokenize.STRING, tokenize.COMMENT} | {
        getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
        if hasattr(tokenize, name)}  # an f-string's {expressions} stay: they are code
    for tok in tokens:
        if tok.type in text_parts:
            continue
        out.setdefault(tok.start[0], []).append(tok.string)
    return {line: " ".join(parts) for line, parts in out.items()}


def homes(roots, pattern: re.Pattern, skip=()) -> dict[str, list[int]]:
    """``{file: [lines]}`` where ``pattern`` occurs in code, over every ``.py`` under ``roots``."""
    found: dict[str, list[int]] = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name in skip:
                continue
            # tokens are joined by blanks, so match with blanks squeezed out of the pattern's way
            hits = [line for line, text in code_lines(path).items()
                    if pattern.search(_squeeze(text))]
            if hits:
                found[name] = hits
    return found


def _squeeze(text: str) -> str:
    """Undo the blanks :func:`code_lines` puts between tokens (``np . sqrt (`` -> ``np.sqrt(``)."""
    return re.sub(r"\s*([.()\[\]])\s*", r"\1", text)


#: Claims whose independent side writes the choice out on purpose (a claim's two sides share no
#: code on the path under test: benchmarks/claim_sides.py), each with the route it checks.
INDEPENDENT_SIDES = {
    "claims/beyond_answers/small_answers.py": "C70: best_group_size against the law minimised "
                                              "by brute force over the divisors and over 2..N",
    "claims/beyond_answers/variance_filter_kit.py": "C68: the filter report's grid against the "
                                                    "divisors of N listed by brute force",
}


@pytest.mark.parametrize("pattern, skip", [
    (FORMULA, ()), (ARGMIN, tuple(NOT_A_GROUP_SIZE) + tuple(INDEPENDENT_SIDES)),
    (DIVISORS, tuple(INDEPENDENT_SIDES))],
                         ids=["gstar formula", "argmin over group sizes", "divisor grid"])
def test_one_home_in_the_package(pattern, skip):
    assert set(homes([PACKAGE], pattern, skip)) == {OWNER}


PLANTED = {
    "gstar formula": "def gstar(c1, c3):\n    return 1.0 + math.sqrt(c3) / math.sqrt(c1)\n",
    "gstar of a ratio": "def gstar(rho):\n    return 1.0 + 1.0 / math.sqrt(rho)\n",
    "gstar as a power": "def gstar(rho):\n    return 1 + rho ** -0.5\n",
    "ratio inside one sqrt": "root = np.sqrt(c.c3 / c.c1)\n",
    "argmin over divisors": "best = int(sizes[np.argmin(curve)])\n",
    "method argmin": "i = values.argmin()\n",
    "divisor grid": "sizes = [g for g in range(2, n + 1) if n % g == 0]\n",
}
PATTERN_OF = {"gstar formula": FORMULA, "gstar of a ratio": FORMULA, "gstar as a power": FORMULA,
              "ratio inside one sqrt": FORMULA, "argmin over divisors": ARGMIN,
              "method argmin": ARGMIN, "divisor grid": DIVISORS}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_second_copy_is_found(tmp_path, name):
    """The negative control: a second home, planted outside the package, fails the check."""
    (tmp_path / "planted.py").write_text("import math\nimport numpy as np\n\n" + PLANTED[name])
    found = homes([PACKAGE, tmp_path], PATTERN_OF[name], tuple(NOT_A_GROUP_SIZE))
    assert "planted.py" in found and OWNER in found
    assert set(found) != {OWNER}


def test_strings_and_comments_do_not_count(tmp_path):
    """A docstring or comment that states the formula is documentation, not a second home."""
    (tmp_path / "doc.py").write_text(
        '"""G* = 1 + math.sqrt(c3 / c1) and sizes[np.argmin(curve)]."""\n'
        "# 1.0 + np.sqrt(c3) / np.sqrt(c1); [g for g in r if n % g == 0]\nx = 1\n")
    for pattern in (FORMULA, ARGMIN, DIVISORS):
        assert "doc.py" not in homes([tmp_path], pattern)


def test_the_allowlist_names_files_that_exist_and_argmin():
    """An entry for a file that no longer argmins would hide a future second home there."""
    for name in NOT_A_GROUP_SIZE:
        assert name in homes([PACKAGE], ARGMIN), name
