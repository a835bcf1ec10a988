"""The code blocks of the README and the documentation pages, as examples the tests run.

Every fenced block of ``README.md`` and ``docs/*.md`` is read and sorted into one of:

* **run**: a ``bash``, ``sh``, ``console`` or ``python`` block. It runs in the fast tier, or in
  the integration tier when the line just before its opening fence says so (see below). The
  blocks of one page run in their order, in one working folder per page (a fresh copy of the
  checkout's tracked files, so there is no ``results/`` or other output yet) and, for Python,
  one interpreter per page, so a block may use what an earlier block of its page made.
* **marked**: a block of those languages that the tests do not run, with the reason given in
  its mark (a GPU, a service, the network, a fragment of the reader's own script, CI running
  it itself, ...).
* **not code**: a block whose language tag is anything else (``text``, ``bibtex``: output or
  data shown, never run) or a MyST directive (``{include}``, ``{toctree}``).

A block with no language tag is refused, and so is an indented code block (outside a list):
the reader cannot tell whether it is a command.

The mark is an HTML comment, the last non-blank line before the opening fence (Markdown
renderers and MyST show nothing of it)::

    <!-- example: integration -->                     run, in the integration tier
    <!-- example: integration quick -->               run with --quick (below), integration tier
    <!-- example: not-run reason="needs a GPU" -->    not run, counted under its reason

A run mark may add ``given="NAME ..."``: the run first puts a stand-in for each named input
of the reader's own (``pilot.npz``, a run's ``outputs``, ``mymodule.py``; made by
tests/docs/example_inputs.py at a fixed seed) into the page's working folder, so a command
that reads the reader's data runs as shown::

    <!-- example: integration given="pilot.npz" -->

``quick`` shortens a long command only by the ``--quick`` flag the page itself shows: in the
block's lines that call ``ustat-rl verify`` or ``python simulations/...``, ``--full`` becomes
``--quick`` and ``--quick`` is added where it is missing. Unmarked blocks of a run language run
in the fast tier. A ``console`` block runs its lines that start with ``$ `` (the rest is output).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

#: Languages whose blocks are commands or code the tests run.
RUN_LANGUAGES = ("bash", "sh", "console", "python")
#: The tiers a run block may be given (tests/tiers.py).
TIERS = ("fast", "integration")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARK = re.compile(r"^\s*<!--\s*example:\s*(?P<body>.*?)\s*-->\s*$")
_SETTING = re.compile(r'(?P<key>reason|given)="(?P<value>[^"]*)"')
_INDENTED = re.compile(r"^ {4,}\S")
_LIST_OR_INDENTED = re.compile(r"^(\s+|[-*+] |\d+[.)] |\|)")
_QUICK_LINE = re.compile(r"^\s*(ustat-rl\s+verify\b|python3?\s+simulations/\S+\.py\b)")


class ExampleError(ValueError):
    """A page whose blocks the harness cannot classify (no language tag, a bad mark)."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page.

    Attributes
    ----------
    page : str
        The page's path relative to the checkout (``README.md``, ``docs/guide.md``).
    line : int
        The line of its opening fence, counted from 1.
    language : str
        The first word of the fence's info string (``bash``, ``text``, ``{include}``).
    code : str
        The block's text, its fence's indentation removed.
    kind : str
        ``"run"``, ``"marked"`` or ``"not code"``.
    tier : str or None
        ``"fast"`` or ``"integration"`` for a run block.
    quick : bool
        Whether the run shortens the block's long commands by their ``--quick`` flag.
    reason : str
        Why a block is marked, or what a not-code block is.
    given : tuple of str
        Stand-ins for the reader's own files that the run puts in the working folder first
        (tests/docs/example_inputs.py).
    """

    page: str
    line: int
    language: str
    code: str
    kind: str
    tier: str | None = None
    quick: bool = False
    reason: str = ""
    given: tuple = ()

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def runnable_code(self) -> str:
        """The code as the run executes it (``$`` lines of a console block, ``--quick``)."""
        code = self.code
        if self.language == "console":
            code = "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ "))
        if self.quick:
            code = "\n".join(_quick(line) for line in code.splitlines())
        return code + "\n"


def _quick(line: str) -> str:
    """``line`` with ``--full`` made ``--quick``, or ``--quick`` added, when it runs a long job."""
    if not _QUICK_LINE.match(line):
        return line
    command, hash_, comment = line.partition(" #")
    if "--full" in command.split():
        command = re.sub(r"(?<!\S)--full(?!\S)", "--quick", command)
    elif "--quick" not in command.split():
        command = command.rstrip() + " --quick"
    return command + hash_ + comment


def _mark(body: str, where: str) -> dict:
    """The settings a mark's text gives: tier, quick, given inputs, not-run and its reason."""
    settings = {m["key"]: m["value"].strip() for m in _SETTING.finditer(body)}
    words = _SETTING.sub("", body).split()
    unknown = [w for w in words if w not in ("integration", "fast", "quick", "not-run")]
    if unknown or not words:
        raise ExampleError(f"{where}: the mark '<!-- example: {body} -->' is not one of "
                           "'integration', 'integration quick', 'fast', "
                           "'not-run reason=\"...\"' (a run mark may add given=\"NAMES\")")
    if "not-run" in words:
        if not settings.get("reason"):
            raise ExampleError(f"{where}: a not-run mark needs its reason: "
                               "<!-- example: not-run reason=\"...\" -->")
        if len(words) > 1 or "given" in settings:
            raise ExampleError(f"{where}: a not-run mark takes only its reason, got '{body}'")
        return {"kind": "marked", "reason": settings["reason"]}
    if "reason" in settings:
        raise ExampleError(f"{where}: only a not-run mark takes a reason, got '{body}'")
    given = tuple(settings.get("given", "").split())
    if "given" in settings:
        from example_inputs import MAKERS

        if not given or any(name not in MAKERS for name in given):
            raise ExampleError(f"{where}: given=\"{settings['given']}\" must name stand-in "
                               f"inputs of tests/docs/example_inputs.py: {', '.join(MAKERS)}")
    tier = "integration" if "integration" in words else "fast"
    return {"kind": "run", "tier": tier, "quick": "quick" in words, "given": given}


def page_blocks(path: Path, page: str) -> list[Block]:
    """Every fenced block of the Markdown file ``path``, shown as ``page``, in order.

    Raises
    ------
    ExampleError
        For a block without a language tag, a fence left open, or a mark that is malformed,
        stands before a block the tests never run, or stands before no block.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    previous = ""  # the last non-blank line outside blocks
    previous_line = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            if (_INDENTED.match(lines[i]) and i > 0 and not lines[i - 1].strip()
                    and previous and not _LIST_OR_INDENTED.match(previous)):
                raise ExampleError(f"{page}:{i + 1}: an indented code block; fence it with a "
                                   "language tag so it is run, marked or shown as text")
            if _MARK.match(previous) and lines[i].strip() and not _MARK.match(lines[i]):
                raise ExampleError(f"{page}:{previous_line}: a mark must stand on the line "
                                   "just before a block's opening fence (blank lines allowed)")
            if lines[i].strip():
                previous, previous_line = lines[i], i + 1
            i += 1
            continue
        indent, fence, info = opened["indent"], opened["fence"], opened["info"].strip()
        start = i + 1
        body: list[str] = []
        i += 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while i < len(lines) and not closing.match(lines[i]):
            text = lines[i]
            body.append(text[len(indent):] if text.startswith(indent) else text.lstrip())
            i += 1
        if i == len(lines):
            raise ExampleError(f"{page}:{start}: a fenced block is never closed")
        i += 1
        where = f"{page}:{start}"
        language = info.split()[0] if info else ""
        mark = _MARK.match(previous)
        settings = _mark(mark["body"], where) if mark else None
        previous, previous_line = lines[i - 1], i
        if not language:
            raise ExampleError(f"{where}: a fenced block without a language tag; tag it "
                               f"({', '.join(RUN_LANGUAGES)} to run it, text for output)")
        if language not in RUN_LANGUAGES:
            if settings is not None:
                raise ExampleError(f"{where}: a mark before a {language} block, which is "
                                   "never run")
            what = ("a MyST directive, not code" if language.startswith("{")
                    else f"{language}: output or data shown, never run")
            blocks.append(Block(page, start, language, "\n".join(body), "not code",
                                reason=what))
            continue
        settings = settings or {"kind": "run", "tier": "fast", "quick": False}
        blocks.append(Block(page, start, language, "\n".join(body), **settings))
    return blocks


def documented_pages(root: Path) -> list[str]:
    """The pages whose examples the tests run: the README and every ``docs/*.md``."""
    pages = ["README.md"] + sorted(f"docs/{p.name}" for p in (root / "docs").glob("*.md"))
    return [p for p in pages if (root / p).is_file()]


def all_blocks(root: Path) -> list[Block]:
    """The blocks of every documented page of the checkout at ``root``."""
    return [b for page in documented_pages(root) for b in page_blocks(root / page, page)]


@dataclass(frozen=True)
class Census:
    """How many blocks the pages hold, run in each tier, marked (by reason) and not code."""

    found: int
    run: dict
    marked: dict
    not_code: dict

    def lines(self) -> list[str]:
        out = [f"{self.found} blocks: run {sum(self.run.values())} "
               f"({', '.join(f'{t} {n}' for t, n in self.run.items())}), "
               f"marked {sum(self.marked.values())}, not code {sum(self.not_code.values())}"]
        out += [f"  marked {n}: {reason}" for reason, n in sorted(self.marked.items())]
        out += [f"  not code {n}: {what}" for what, n in sorted(self.not_code.items())]
        return out


def census(blocks: list[Block]) -> Census:
    run = Counter(b.tier for b in blocks if b.kind == "run")
    return Census(found=len(blocks),
                  run={tier: run.get(tier, 0) for tier in TIERS},
                  marked=dict(Counter(b.reason for b in blocks if b.kind == "marked")),
                  not_code=dict(Counter(b.reason for b in blocks if b.kind == "not code")))


def tracked_files(root: Path) -> list[str]:
    """The checkout's files under version control (what a fresh clone holds)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                            check=True).stdout.decode().split("\0")
    return [name for name in listed if name and (root / name).is_file()]


def fresh_copy(root: Path, into: Path) -> Path:
    """Copy the tracked files of ``root`` into ``into``: a clean clone's working tree."""
    for name in tracked_files(root):
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return into


@dataclass(frozen=True)
class PageRun:
    """What running a page's blocks gave: the exit code, its output and each block's time."""

    returncode: int
    output: str
    seconds: dict


def run_blocks(pages: list[tuple[list[Block], Path]], timeout: float) -> PageRun:
    """Run each page's blocks in order in its folder, all in one Python process, and report.

    ``pages`` pairs each page's blocks with its working folder; a page's Python blocks share
    one namespace. The commands find this interpreter's ``python``, ``ustat-rl`` and
    ``torchrun`` first on ``PATH`` and import the package from the folder (``PYTHONPATH``).
    """
    first = pages[0][1]
    spec = first.parent / f"{first.name}.blocks.json"
    spec.write_text(json.dumps([{"where": b.where, "language": b.language,
                                 "code": b.runnable_code(), "workdir": str(workdir)}
                                for blocks, workdir in pages for b in blocks]))
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(first)  # the copies are alike: the first one's package serves all
    env.setdefault("OMP_NUM_THREADS", "1")
    env["MPLBACKEND"] = "Agg"
    runner = Path(__file__).with_name("run_blocks.py")
    try:
        done = subprocess.run([sys.executable, str(runner), str(spec)], cwd=first, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as stopped:
        out = (stopped.stdout or b"")
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        return PageRun(124, out + f"\n(stopped after {timeout:.0f} s)", {})
    seconds = {}
    for line in done.stdout.splitlines():
        if line.startswith("@@block "):
            where, _, took = line[len("@@block "):].rpartition(" ")
            seconds[where] = float(took)
    return PageRun(done.returncode, done.stdout + done.stderr, seconds)


def _provide(blocks: list[Block], folder: Path) -> None:
    """Put the stand-in inputs the blocks are given into their page's folder, once each."""
    from example_inputs import make

    for name in dict.fromkeys(name for b in blocks for name in b.given):
        make(name, folder)


def run_pages(root: Path, pages: list[str], tiers: tuple[str, ...], timeout: float) -> PageRun:
    """Run the blocks of the given tiers of each page, each page on its own fresh copy of
    ``root``; pages without such blocks are left out (an empty run when none has any)."""
    chosen = [(page, [b for b in page_blocks(root / page, page)
                      if b.kind == "run" and b.tier in tiers]) for page in pages]
    chosen = [(page, blocks) for page, blocks in chosen if blocks]
    if not chosen:
        return PageRun(0, "", {})
    with tempfile.TemporaryDirectory(prefix="doc-examples-") as tmp:
        work = [(blocks, fresh_copy(root, Path(tmp) / f"page{i}"))
                for i, (_, blocks) in enumerate(chosen)]
        for blocks, folder in work:
            _provide(blocks, folder)
        return run_blocks(work, timeout)


__all__ = ["Block", "Census", "ExampleError", "PageRun", "RUN_LANGUAGES", "TIERS",
           "all_blocks", "census", "documented_pages", "fresh_copy", "page_blocks",
           "run_blocks", "run_pages", "tracked_files"]
