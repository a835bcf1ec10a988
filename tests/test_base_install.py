"""Every user command on the base install (``pip install -c constraints.txt -e .``, no extras).

A fresh virtual environment with the base install would take minutes to build (torch alone is
about 200 MB of wheels) and needs the network, so the boundary is marked another way that CI
exercises on every run: each command runs in a subprocess whose imports of every module outside
the core dependencies (``[project].dependencies`` of pyproject.toml, read now, and what they
require) fail as if the package were absent (tests/_base_install.py). In a dev environment that
blocks hypothesis, ray, pyarrow, transformers, sphinx and the rest. A command must then work, or
exit 2 with one line naming the extra that it needs; none may print a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

from _base_install import RUNNER, blocked_modules, core_closure  # noqa: E402

pytestmark = pytest.mark.integration  # install: a fresh virtual environment with the base install

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600  # far above the ~1-2 min the slowest (report: the errata's evidence) needs


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(runner path, blocked modules, work folder with a pilot and a reference function)."""
    work = tmp_path_factory.mktemp("base_install")
    runner = work / "runner.py"
    runner.write_text(RUNNER)
    from ustat_rl.policies.examples import interior_optimum_bandit
    from ustat_rl.scores.bandit import bandit_pilot
    from ustat_rl.seeding import child_rng

    bandit_pilot(interior_optimum_bandit(), 16, 8, child_rng(7, 1)).save(work / "pilot.npz")
    (work / "pilot.parquet").write_bytes(b"PAR1")  # never read: pyarrow is missing first
    (work / "refadv.py").write_text(
        "from ustat_rl.advantages.conventions import advantages\n\n\n"
        "def adv(rewards, group_ids):\n"
        "    return advantages('trl_group', rewards, group_ids)\n")
    return runner, blocked_modules(), work


def run(base, *argv, module=True):
    runner, blocked, work = base
    env_path = str(ROOT)
    command = [sys.executable, str(runner), ",".join(blocked)]
    command += ["-m", "ustat_rl.interface.cli", *argv] if module else list(argv)
    return subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**__import__("os").environ, "PYTHONPATH": env_path,
                               "OMP_NUM_THREADS": "1"})


def assert_clean(result, code=0):
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text[-3000:]
    assert result.returncode == code, text[-3000:]


def assert_names_extra(result, extra: str):
    assert_clean(result, 2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"ustat-rl[{extra}]" in lines[0], result.stderr


def test_the_boundary_blocks_the_extras_and_keeps_the_core():
    blocked = set(blocked_modules())
    assert {"pytest", "ray", "pyarrow"} <= blocked  # negative control: the dev tools are out
    assert not blocked & {"numpy", "scipy", "torch", "numba", "pandas", "matplotlib", "sympy"}
    assert {"numpy", "torch"} <= core_closure()


def test_the_runner_really_hides_a_blocked_module(base):
    """Negative control of the mechanism: an extra imported directly fails in the runner."""
    probe = base[2] / "probe.py"
    probe.write_text("import pytest\n")
    result = run(base, str(probe), module=False)
    assert result.returncode != 0 and "not a core dependency" in result.stderr


def test_version_help_and_list(base):
    for argv in (["--version"], ["--help"], ["list"], ["verify", "--help"]):
        result = run(base, *argv)
        assert_clean(result)
    assert "C17" in run(base, "list").stdout


def test_verify_compare_and_report(base):
    work = base[2]
    assert_clean(run(base, "verify", "--only", "C1", "--json", "v.json"))
    assert json.loads((work / "v.json").read_text())["results"][0]["claim_id"] == "C1"
    assert_clean(run(base, "compare", "v.json", "v.json"))
    assert_clean(run(base, "report", "v.json", "--out", "r.html"))
    assert (work / "r.html").stat().st_size > 0


def test_a_claim_that_needs_an_extra_is_skipped_not_an_error(base):
    """The README's first command runs every claim on the base install: a claim whose route
    needs an extra (C45.trl reads TRL's Parquet log) is ``skipped`` with the extra named, the
    others run, and verify exits 0."""
    work = base[2]
    result = run(base, "verify", "--quick", "--only", "C45,C45.trl", "--json", "skip.json")
    assert_clean(result)
    verdicts = {r["claim_id"]: r for r in json.loads((work / "skip.json").read_text())["results"]}
    assert verdicts["C45"]["verdict"] == "pass"
    assert verdicts["C45.trl"]["verdict"] == "skipped"
    assert "needs extra parquet" in verdicts["C45.trl"]["error"]
    assert "0 fail, 0 error, 1 skipped" in result.stdout


def test_gstar_on_npz_and_parquet_names_its_extra(base):
    work = base[2]
    assert_clean(run(base, "gstar", "pilot.npz", "--budget", "64", "--json", "g.json",
                     "--plot", "g.png"))
    assert (work / "g.png").stat().st_size > 0
    assert_names_extra(run(base, "gstar", "pilot.parquet", "--budget", "64"), "parquet")


def test_conformance_runs_or_names_its_extra(base):
    result = run(base, "conformance", "refadv.py:adv", "--estimator", "trl_group",
                 "--max-examples", "20")
    if "hypothesis" in core_closure():
        assert_clean(result)
    else:
        assert_clean(result, 2)
        assert len(result.stderr.strip().splitlines()) == 1 and "pip install" in result.stderr


def test_simulations_run_and_ray_names_its_extra(base):
    script = str(ROOT / "simulations" / "optimal_group_size.py")
    out = base[2] / "sim"
    result = run(base, script, "--quick", "--runs", "4", "--no-figure", "--no-progress",
                 "--out", str(out), module=False)
    assert_clean(result)
    assert (out / "group_size_runs.csv").is_file()
    result = run(base, script, "--quick", "--ray-address", "local", "--out", str(out),
                 module=False)
    assert_clean(result, 2)
    assert "ustat-rl[ray]" in result.stderr
    # every other script's --help, in one interpreter of the base install (one start-up, not
    # six): each must exit 0, and the driver says which did not
    names = ("gradient_mse", "limit_law", "transformer_gradient_mse", "transformer_group_size",
             "transformer_aggregation_bias", "make_transformer_policies")
    driver = base[2] / "help_driver.py"
    driver.write_text(
        "import runpy, sys\n"
        "for path in sys.argv[1:]:\n"
        "    sys.argv = [path, '--help']\n"
        "    try:\n"
        "        runpy.run_path(path, run_name='__main__')\n"
        "    except SystemExit as exc:\n"
        "        if exc.code not in (0, None):\n"
        "            raise SystemExit(f'{path} --help exited {exc.code}')\n"
        "    else:\n"
        "        raise SystemExit(f'{path} --help did not exit')\n"
        "    print('help ok', path)\n")
    result = run(base, str(driver), *(str(ROOT / "simulations" / f"{n}.py") for n in names),
                 module=False)
    assert_clean(result)
    assert result.stdout.count("help ok") == len(names), result.stdout[-2000:]
