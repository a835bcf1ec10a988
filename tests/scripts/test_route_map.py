"""The committed route map of verify (docs/generated/route_map.json, benchmarks/route_map.py).

Two checks read the committed map; neither reruns coverage (the measurement takes minutes):

- every public route that computes an answer a user can get is executed by at least one claim,
  or is on ``benchmarks/route_allowlist.py`` with a reason of a listed kind (printing, I/O,
  plotting, argument parsing, a declaration, or the to-do reason ``no claim yet``), and no exact
  allow-list entry names a route a claim now executes;
- the map is not stale: every public function and method of the package is in it, and every
  route in it still exists.

Each has a planted control the same check rejects: a map entry executed by no claim and on no
list, an exact entry for a claimed route, and a new public function written into a copy of a
module.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from script_loader import ROOT, load_script

pytestmark = pytest.mark.fast

route_map = load_script("benchmarks/route_map.py", "route_map_script")
ALLOWLIST = route_map.allowlist()
MAP = json.loads(route_map.MAP_JSON.read_text(encoding="utf-8"))
REMEASURE = "python benchmarks/route_map.py"


def unexplained(entries: dict, allow: dict) -> list[str]:
    """Routes executed by no claim with no allow-list reason, or with one of no listed kind."""
    bad = []
    for name, entry in entries.items():
        if entry["claims"]:
            continue
        reason = route_map.allow_reason(name, allow)
        if reason is None or ALLOWLIST.reason_kind(reason) not in ALLOWLIST.KINDS:
            bad.append(name)
    return sorted(bad)


def stale_entries(entries: dict, allow: dict) -> list[str]:
    """Exact allow-list entries that name a route a claim executes, or no route at all."""
    prefixes = {n.rsplit(".", k)[0] for n in entries for k in range(1, n.count(".") + 1)}
    return sorted(key for key in allow
                  if (key in entries and entries[key]["claims"])
                  or (key not in entries and key not in prefixes))


def missing_routes(entries: dict, root) -> tuple[list[str], list[str]]:
    """(public routes of the package under ``root`` not in the map, map routes not there)."""
    routes, _, _ = route_map.scan(root)
    return sorted(set(routes) - set(entries)), sorted(set(entries) - set(routes))


def test_every_answering_route_is_executed_by_a_claim_or_allowed():
    bad = unexplained(MAP["routes"], ALLOWLIST.ALLOW)
    assert not bad, (f"{len(bad)} public routes are executed by no claim of verify --quick and are "
                     f"not on benchmarks/route_allowlist.py with a reason of a listed kind: "
                     f"{bad[:20]}; add a claim that runs them (and rerun `{REMEASURE}`) or a "
                     f"one-line reason")


def test_no_allowlist_entry_outlives_its_reason():
    stale = stale_entries(MAP["routes"], ALLOWLIST.ALLOW)
    assert not stale, (f"allow-list entries for routes a claim now executes, or for no route: "
                       f"{stale}; drop them from benchmarks/route_allowlist.py")


def test_every_reason_has_a_listed_kind():
    kinds = {ALLOWLIST.reason_kind(r) for r in ALLOWLIST.ALLOW.values()}
    assert kinds <= set(ALLOWLIST.KINDS), kinds - set(ALLOWLIST.KINDS)


def test_planted_unexplained_route_and_stale_entry_are_rejected():
    entries = dict(MAP["routes"])
    entries["ustat_rl.theory.mse.planted_answer"] = {"claims": [], "status": "unlisted"}
    assert unexplained(entries, ALLOWLIST.ALLOW) == ["ustat_rl.theory.mse.planted_answer"]
    claimed = next(n for n, e in entries.items() if e["claims"])
    allow = dict(ALLOWLIST.ALLOW, **{claimed: "printing: planted"})
    assert stale_entries(entries, allow) == [claimed]
    weak = dict(ALLOWLIST.ALLOW, **{"ustat_rl.theory.mse.planted_answer": "looks harmless"})
    assert unexplained(entries, weak) == ["ustat_rl.theory.mse.planted_answer"]


def test_the_map_lists_every_public_route_of_the_package():
    new, gone = missing_routes(MAP["routes"], ROOT)
    assert not new and not gone, (f"the committed route map is stale: new public routes {new}, "
                                  f"routes that no longer exist {gone}; rerun `{REMEASURE}`")


def test_planted_public_function_makes_the_map_stale(tmp_path):
    module = ROOT / "ustat_rl" / "theory" / "mse.py"
    copy = tmp_path / "ustat_rl" / "theory" / "mse.py"
    copy.parent.mkdir(parents=True)
    shutil.copy(module, copy)
    with copy.open("a", encoding="utf-8") as f:
        f.write("\n\ndef planted_answer(x):\n    return 2 * x\n")
    entries = {n: e for n, e in MAP["routes"].items() if n.startswith("ustat_rl.theory.mse.")}
    new, gone = missing_routes(entries, tmp_path)
    assert new == ["ustat_rl.theory.mse.planted_answer"] and gone == []


def test_statuses_follow_the_allowlist_as_it_is():
    routes, _, _ = route_map.scan(ROOT)
    claims_of = {n: e["claims"] for n, e in MAP["routes"].items() if n in routes}
    fresh = route_map.statuses(claims_of, ALLOWLIST.ALLOW, route_map.declarations(routes))
    moved = sorted(n for n in fresh if fresh[n] != MAP["routes"][n])
    assert not moved, (f"the allow-list changed since the map was written ({moved[:10]}); "
                       f"rerun `{REMEASURE} --restatus` (no measuring)")


CHILD_CHECK = """
import json, multiprocessing, os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from script_loader import load_script
import coverage
from ustat_rl import seeding

route_map = load_script("benchmarks/route_map.py", "route_map_script")
if __name__ == "__main__":
    folder = Path({folder!r})
    rc = route_map._rcfile(folder)
    cov = coverage.Coverage(config_file=str(rc))
    cov.start()
    os.environ[route_map.ENV_CLAIM] = "CX"
    cov.switch_context("CX")
    child = multiprocessing.get_context("spawn").Process(target=seeding.child_int, args=(1, 2))
    child.start()
    child.join(timeout=120)
    cov.switch_context("")
    cov.stop()
    cov.save()
    combined = coverage.Coverage(config_file=str(rc))
    combined.combine([str(folder)])
    by_line = combined.get_data().contexts_by_lineno(seeding.__file__)
    print(json.dumps({{"exitcode": child.exitcode, "by_line": by_line}}))
"""


def test_a_child_process_is_attributed_to_the_claim_that_started_it(tmp_path):
    """A claim that starts a process (``spawn``) gets the child's lines: the written
    ``.coveragerc`` gives the child the claim from the environment as its static context, and
    the parallel data files are combined. Negative control: a line the child does not run.
    In an interpreter of its own, as coverage patches ``multiprocessing`` for good."""
    pytest.importorskip("coverage")
    script = tmp_path / "child_check.py"
    data = tmp_path / "data"
    data.mkdir()
    script.write_text(CHILD_CHECK.format(tests=str(ROOT / "tests"), folder=str(data)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["exitcode"] == 0
    by_line = {int(k): v for k, v in out["by_line"].items()}
    routes, _, _ = route_map.scan(ROOT)
    first, last = routes["ustat_rl.seeding.child_int"].body
    assert any("CX" in by_line.get(n, []) for n in range(first, last + 1))
    first, last = routes["ustat_rl.seeding.child_rng"].body
    assert not any(by_line.get(n) for n in range(first, last + 1))


def test_figures_add_up():
    figures = MAP["figures"]
    allowed = sum(v for k, v in figures.items() if k.startswith("allowed: "))
    assert figures["public routes"] == len(MAP["routes"])
    assert (figures["executed by >= 1 claim"] + allowed + figures["unclaimed answering routes"]
            + figures["unlisted"]) == figures["public routes"]
    assert figures == route_map.figures(MAP["routes"])
