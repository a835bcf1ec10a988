"""Every code block of the README and the docs pages is run or marked with its reason.

The fast tier runs every page's fast blocks (one process, a folder and namespace per page) (tests/docs/doc_examples.py says how blocks are read,
marked and run); tests/docs/test_doc_examples_integration.py runs every page's blocks of both
tiers in order. Controls: a planted page whose unmarked block fails makes the same run fail, a
block without a language tag or with a malformed mark stops the reading, and a ``text`` block
is never run.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from doc_examples import (
    ExampleError,
    all_blocks,
    census,
    documented_pages,
    page_blocks,
    run_blocks,
    run_pages,
)

pytestmark = pytest.mark.fast  # a few seconds: each page's fast blocks in one interpreter

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: Seconds a page's fast blocks may take before the run is stopped (a hang, not a slow block).
FAST_TIMEOUT = 300


def _pages_with(tier: str) -> list[str]:
    return [page for page in documented_pages(ROOT)
            if any(b.kind == "run" and b.tier == tier for b in page_blocks(ROOT / page, page))]


def test_every_block_is_run_or_marked_with_a_reason():
    blocks = all_blocks(ROOT)  # raises on an untagged block or a malformed mark
    counted = census(blocks)
    print("\n".join(counted.lines()))
    assert counted.found == len(blocks) == (sum(counted.run.values())
                                            + sum(counted.marked.values())
                                            + sum(counted.not_code.values()))
    assert all(b.reason for b in blocks if b.kind != "run")
    assert sum(counted.run.values()) > 0
    # the pages this harness must cover are among those read
    pages = set(documented_pages(ROOT))
    assert {"README.md", "docs/quickstart.md", "docs/guide.md", "docs/at_scale.md",
            "docs/installation.md"} <= pages


def _ci_readme_commands() -> list[str]:
    """The README's two set-up commands as .ci/run extracts them (its own awk program)."""
    script = (ROOT / ".ci" / "run").read_text()
    program = re.search(r"awk -v want=\"\$1\" '(.*?)' README.md", script, re.S).group(1)
    return [subprocess.run(["awk", "-v", f"want={n}", program, str(ROOT / "README.md")],
                           capture_output=True, text=True, check=True).stdout.strip()
            for n in (1, 2)]


def test_the_readme_set_up_commands_are_the_blocks_marked_as_run_by_ci():
    ci_reason = "CI runs it itself, exactly as written (.ci/run)"
    marked = [b.code.strip() for b in page_blocks(ROOT / "README.md", "README.md")
              if b.kind == "marked" and b.reason == ci_reason]
    assert marked == _ci_readme_commands()


def test_the_fast_blocks_of_every_page_run():
    pages = _pages_with("fast")
    assert pages
    done = run_pages(ROOT, pages, ("fast",), timeout=FAST_TIMEOUT)
    assert done.returncode == 0, f"a block failed\n{done.output[-4000:]}"
    expected = [b.where for page in pages for b in page_blocks(ROOT / page, page)
                if b.kind == "run" and b.tier == "fast"]
    assert list(done.seconds) == expected
    print(", ".join(f"{where} {s:.1f} s" for where, s in done.seconds.items()))


# --- controls: the same reading and running reject what they must ----------------------------

def _plant(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "planted.md"
    page.write_text(text)
    return page


def _run(tmp_path: Path, text: str, tiers=("fast",)):
    blocks = [b for b in page_blocks(_plant(tmp_path, text), "planted.md")
              if b.kind == "run" and b.tier in tiers]
    work = tmp_path / "work"
    work.mkdir()
    return blocks, run_blocks([(blocks, work)], timeout=FAST_TIMEOUT)


def test_control_an_unmarked_failing_shell_block_fails_the_run(tmp_path):
    blocks, done = _run(tmp_path, "# P\n\n```bash\ntrue\n```\n\n```bash\nfalse\necho after\n```\n")
    assert [b.tier for b in blocks] == ["fast", "fast"]
    assert done.returncode != 0
    assert "@@failed planted.md:7" in done.output and "after" not in done.output


def test_control_a_failing_command_inside_a_pipe_fails_the_block(tmp_path):
    _, done = _run(tmp_path, "```sh\nfalse | cat\n```\n")
    assert done.returncode != 0


def test_control_an_unmarked_failing_python_block_fails_the_run(tmp_path):
    _, done = _run(tmp_path, "```python\nx = 1\n```\n\n```python\nassert x == 2, 'planted'\n```\n")
    assert done.returncode != 0
    assert "AssertionError: planted" in done.output and "@@failed planted.md:5" in done.output


def test_control_a_failing_integration_block_fails_the_integration_run(tmp_path):
    text = "<!-- example: integration -->\n```bash\nexit 3\n```\n"
    blocks, done = _run(tmp_path, text, tiers=("fast", "integration"))
    assert [b.tier for b in blocks] == ["integration"] and done.returncode != 0


def test_blocks_of_a_page_share_their_folder_and_interpreter(tmp_path):
    text = ("```bash\nmkdir -p results && echo 7 > results/n\n```\n\n"
            "```python\nn = int(open('results/n').read())\n```\n\n"
            "```console\n$ test -f results/n\nsome output line\n```\n\n"
            "```python\nassert n == 7\n```\n")
    blocks, done = _run(tmp_path, text)
    assert done.returncode == 0, done.output
    assert len(done.seconds) == len(blocks) == 4


def test_each_page_gets_its_own_folder_and_namespace(tmp_path):
    pages = []
    for i, text in enumerate(["```python\nx = 1\nopen('mine', 'w').close()\n```\n",
                              "```python\nassert 'x' not in globals()\n```\n\n"
                              "```bash\ntest ! -e mine\n```\n"]):
        page = tmp_path / f"p{i}.md"
        page.write_text(text)
        work = tmp_path / f"w{i}"
        work.mkdir()
        pages.append((page_blocks(page, page.name), work))
    done = run_blocks(pages, timeout=FAST_TIMEOUT)
    assert done.returncode == 0, done.output
    assert list(done.seconds) == ["p0.md:1", "p1.md:1", "p1.md:5"]


def test_control_a_name_from_another_page_is_not_found(tmp_path):
    pages = []
    for i, text in enumerate(["```python\nx = 1\n```\n", "```python\nprint(x)\n```\n"]):
        page = tmp_path / f"p{i}.md"
        page.write_text(text)
        work = tmp_path / f"w{i}"
        work.mkdir()
        pages.append((page_blocks(page, page.name), work))
    done = run_blocks(pages, timeout=FAST_TIMEOUT)
    assert done.returncode != 0 and "NameError" in done.output


def test_a_text_block_is_output_and_never_run(tmp_path):
    blocks, done = _run(tmp_path, "```text\n$ false\nexit 1\n```\n")
    assert blocks == [] and done.returncode == 0
    (text,) = page_blocks(tmp_path / "planted.md", "planted.md")
    assert text.kind == "not code" and "never run" in text.reason


def test_an_indented_list_continuation_is_not_a_code_block(tmp_path):
    text = "- an item\n\n    its second paragraph\n"
    assert page_blocks(_plant(tmp_path, text), "planted.md") == []


def test_a_marked_block_is_not_run_and_keeps_its_reason(tmp_path):
    text = '<!-- example: not-run reason="needs a GPU" -->\n\n```bash\nexit 1\n```\n'
    (block,) = page_blocks(_plant(tmp_path, text), "planted.md")
    assert (block.kind, block.reason) == ("marked", "needs a GPU")


@pytest.mark.parametrize("text, words", [
    ("```\nls\n```\n", "without a language tag"),
    ('<!-- example: not-run -->\n```bash\nls\n```\n', "needs its reason"),
    ('<!-- example: slow -->\n```bash\nls\n```\n', "is not one of"),
    ('<!-- example: integration reason="x" -->\n```bash\nls\n```\n', "only a not-run mark"),
    ('<!-- example: integration -->\n```text\nls\n```\n', "never run"),
    ('<!-- example: integration -->\nA sentence.\n```bash\nls\n```\n', "just before"),
    ("```bash\nls\n", "never closed"),
    ("Run it:\n\n    pytest tests\n", "indented code block"),
])
def test_control_a_block_the_harness_cannot_classify_is_refused(tmp_path, text, words):
    with pytest.raises(ExampleError, match=words):
        page_blocks(_plant(tmp_path, text), "planted.md")


def test_quick_shortens_only_by_the_quick_flag(tmp_path):
    text = ("<!-- example: integration quick -->\n```bash\n"
            "ustat-rl verify --full --json r.json   # large sizes\n"
            "python simulations/limit_law.py --out x\n"
            "python simulations/limit_law.py --quick\n"
            "ustat-rl list\n```\n")
    (block,) = page_blocks(_plant(tmp_path, text), "planted.md")
    assert block.runnable_code().splitlines() == [
        "ustat-rl verify --quick --json r.json   # large sizes",
        "python simulations/limit_law.py --out x --quick",
        "python simulations/limit_law.py --quick",
        "ustat-rl list"]


# --- the stand-ins for the reader's own files -----------------------------------------------

def test_a_given_stand_in_is_in_the_folder_before_the_blocks_run(tmp_path):
    text = ('<!-- example: fast given="mymodule.py outputs" -->\n```bash\n'
            "test -f mymodule.py && test -f outputs/checkpoint-60/trainer_state.json\n```\n")
    (block,) = page_blocks(_plant(tmp_path, text), "planted.md")
    assert block.given == ("mymodule.py", "outputs")
    work = tmp_path / "work"
    work.mkdir()
    from doc_examples import _provide

    _provide([block], work)
    done = run_blocks([([block], work)], timeout=FAST_TIMEOUT)
    assert done.returncode == 0, done.output


def test_control_an_unknown_stand_in_is_refused(tmp_path):
    text = '<!-- example: integration given="my_data.csv" -->\n```bash\nls\n```\n'
    with pytest.raises(ExampleError, match="stand-in inputs"):
        page_blocks(_plant(tmp_path, text), "planted.md")


def test_the_logs_stand_in_is_a_run_at_the_group_size_the_pages_pass(tmp_path):
    from example_inputs import GROUP_SIZE, make

    from ustat_rl.frameworks.logs import check_group_size, read_trainer_state

    folder = make("outputs", tmp_path)
    history = read_trainer_state(folder / "checkpoint-60" / "trainer_state.json")
    assert GROUP_SIZE == 8 and check_group_size(history, GROUP_SIZE) == 60
    # control: the same logs contradict another group size
    with pytest.raises(ValueError, match="contradicts the logs"):
        check_group_size(history, 3)


def test_the_advantage_stand_in_is_trl_group_scaled_rule(tmp_path):
    import importlib.util

    import numpy as np
    from example_inputs import make

    from ustat_rl.advantages.conventions import advantages

    path = make("mymodule.py", tmp_path)
    spec = importlib.util.spec_from_file_location("stand_in_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rewards = np.array([1.0, 0.0, 0.0, 0.5, 0.5, 0.5, 2.0, 0.0, 1.0])
    ids = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_allclose(module.my_advantages(rewards, ids),
                               advantages("trl_group", rewards, ids), rtol=1e-12, atol=1e-12)
    # control: the rule without TRL's scale is told apart at the same tolerance
    assert not np.allclose(advantages("trl_none", rewards, ids),
                           advantages("trl_group", rewards, ids), rtol=1e-12, atol=1e-12)
