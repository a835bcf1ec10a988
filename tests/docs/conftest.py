"""The census of the documented examples, printed at the end of a run that collected them."""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print how many blocks the pages hold, how many run in each tier and why the rest do not."""
    from doc_examples import ExampleError, all_blocks, census

    try:
        lines = census(all_blocks(_ROOT)).lines()
    except ExampleError as error:
        lines = [f"the pages cannot be read: {error}"]
    terminalreporter.section("documented examples")
    for line in lines:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def checkout() -> Path:
    """The checkout whose pages are run."""
    return _ROOT
