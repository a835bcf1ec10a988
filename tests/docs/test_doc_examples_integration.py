"""Every page's run blocks of both tiers, in order, on a fresh copy of the checkout.

Each page's blocks run in one working folder (the tracked files, no ``results/``) and one
Python interpreter, fast blocks included, so a page's sequence (the quickstart's report) runs
as a reader on a fresh clone runs it. The slow blocks run ``ustat-rl verify``, the simulation
scripts' ``--quick`` runs, ``torchrun`` and a benchmark: six ``verify --quick`` runs among
them, longer than the whole suite's budget. So the suite skips them unless
``USTAT_RL_DOCS_EXAMPLES=1`` is set, and CI runs them in a step of their own (``.ci/run``), as
it runs the advice study under Ray: every block of every page still runs on every CI run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from doc_examples import documented_pages, page_blocks, run_pages

pytestmark = pytest.mark.integration  # runs verify, simulations and torchrun: minutes

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: Seconds one page may take before its run is stopped: a guard against a hang, not a time
#: limit (the README's page took 35 minutes on 2 cores at a load of about 12).
PAGE_TIMEOUT = 3600


def _pages_with_slow_blocks() -> list[str]:
    return [page for page in documented_pages(ROOT)
            if any(b.kind == "run" and b.tier == "integration"
                   for b in page_blocks(ROOT / page, page))]


@pytest.mark.skipif(not os.environ.get("USTAT_RL_DOCS_EXAMPLES"),
                    reason="the pages' slow blocks (six verify runs, simulations, torchrun) take "
                           "longer than the suite's budget: CI runs them in its own step; set "
                           "USTAT_RL_DOCS_EXAMPLES=1 to run them here")
@pytest.mark.parametrize("page", _pages_with_slow_blocks())
def test_every_run_block_of_a_page_runs_in_order_on_a_fresh_copy(page):
    done = run_pages(ROOT, [page], ("fast", "integration"), timeout=PAGE_TIMEOUT)
    assert done.returncode == 0, f"{page}: a block failed\n{done.output[-6000:]}"
    expected = [b.where for b in page_blocks(ROOT / page, page) if b.kind == "run"]
    assert list(done.seconds) == expected
    print(f"{page}: " + ", ".join(f"{where} {s:.0f} s" for where, s in done.seconds.items()))
