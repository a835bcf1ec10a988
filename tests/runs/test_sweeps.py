"""The sweep executor: every cell once, whatever the executor, the failures or the interruptions.

Structural checks of :func:`ustat_rl.runs.sweeps.run_cells` on trivial cells, then the property that
matters for the simulation scripts: a local-pool run killed with SIGKILL mid-sweep and rerun
writes exactly the CSV of an uninterrupted run (no cell lost, none duplicated, same bytes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from script_loader import ROOT, load_script

from ustat_rl.runs.sweeps import (
    CellFailedError,
    LocalExecutor,
    RayExecutor,
    default_output,
    order_rows,
    run_cells,
)
from ustat_rl.seeding import child_rng

pytestmark = pytest.mark.integration  # scripts: sweeps in subprocesses, killed and resumed


def draw(seed: int, index: int) -> float:
    """A cell: one number from its own stream."""
    return float(child_rng(seed, index).random())


def fail_always(index: int) -> float:
    raise RuntimeError(f"cell {index} is broken")


def kill_once(marker: str, index: int) -> int:
    """Kill the worker process running the first call; later calls return ``index``."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return index
    os.kill(os.getpid(), signal.SIGKILL)
    return -1  # not reached


def collect(cells, fn, executor, **kwargs) -> dict:
    out = {}

    def on_result(key, value):
        assert key not in out, f"cell {key} delivered twice"
        out[key] = value

    run_cells(cells, fn, on_result, executor, progress=False, **kwargs)
    return out


def test_in_process_and_pool_give_the_same_results_once_each():
    cells = {i: (7, i) for i in range(8)}
    serial = collect(cells, draw, LocalExecutor(1))
    pooled = collect(cells, draw, LocalExecutor(2))
    assert serial == pooled and sorted(serial) == list(range(8))
    assert serial == {i: draw(7, i) for i in range(8)}
    # negative control: another root seed gives other numbers
    assert collect(cells, draw, None) != collect({i: (8, i) for i in range(8)}, draw, None)


def test_a_failing_cell_is_retried_then_reported_and_others_finish():
    cells = {"good": (1, 0), "bad": (1,)}

    def fn(*args):
        return fail_always(*args) if len(args) == 1 else draw(*args)

    seen = {}
    with pytest.raises(CellFailedError, match="'bad'.*cell 1 is broken") as info:
        run_cells(cells, fn, seen.__setitem__, retries=2, progress=False)
    assert seen == {"good": draw(1, 0)} and list(info.value.failures) == ["bad"]


def test_a_killed_pool_worker_is_replaced_and_its_cell_rerun(tmp_path):
    marker = str(tmp_path / "killed")
    cells = {i: (marker, i) for i in range(6)}
    out = collect(cells, kill_once, LocalExecutor(2))
    assert out == {i: i for i in range(6)} and Path(marker).exists()


def test_arguments_are_checked_before_any_cell_runs():
    with pytest.raises(ValueError, match="`workers`"):
        LocalExecutor(0)
    with pytest.raises(ValueError, match="`address`"):
        RayExecutor("nowhere")
    with pytest.raises(ValueError, match="`retries`"):
        run_cells({0: (1, 0)}, draw, print, retries=-1)
    with pytest.raises(TypeError, match="`cells`"):
        run_cells([(1, 0)], draw, print)


def test_missing_ray_is_an_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install ustat-rl\[ray\]"):
        RayExecutor("local")._run({0: (1, 0)}, draw, None)


def test_order_rows_is_stable_and_puts_unknown_keys_last():
    table = pd.DataFrame({"a": ["y", "x", "z", "x", "y"], "v": [1, 2, 3, 4, 5]})
    ordered = order_rows(table, ["a"], [("x",), ("y",)])
    assert ordered["v"].tolist() == [2, 4, 1, 5, 3]


def test_quick_runs_have_their_own_default_folder():
    assert default_output(None, True, "limit_law") == Path("results/quick/limit_law")
    assert default_output(None, False, "limit_law") == Path("results/limit_law")
    assert default_output(None, False, "t", full="results") == Path("results")
    assert default_output("elsewhere", True, "limit_law") == Path("elsewhere")


@pytest.mark.parametrize("script", ["gradient_mse", "limit_law", "optimal_group_size",
                                    "transformer_gradient_mse", "transformer_group_size"])
def test_every_script_takes_the_executor_flags_and_a_quick_folder(script, capsys):
    module = load_script(f"simulations/{script}.py", f"{script}_flags")
    args = module.parse_args(["--quick", "--workers", "2"])
    assert args.out == Path("results/quick", script)
    assert args.executor == LocalExecutor(2)
    with pytest.raises(SystemExit) as info:
        module.parse_args(["--workers", "0"])
    assert info.value.code == 2 and "--workers" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        module.parse_args(["--help"])
    assert "results/quick/" in capsys.readouterr().out.replace("\n", "")


def test_budget_without_an_admissible_group_size_is_a_usage_error(capsys):
    script = load_script("simulations/optimal_group_size.py", "group_size_budgets")
    with pytest.raises(SystemExit) as info:
        script.parse_args(["--budgets", "7"])
    assert info.value.code == 2
    assert "--budgets" in capsys.readouterr().err
    assert script.parse_args(["--budgets", "8"]).budgets == (8,)  # 8 has G = 2, 4, 8


# ------------------------------------------------------------------------------ kill the driver
SWEEP = ["simulations/optimal_group_size.py", "--quick", "--runs", "1500", "--no-figure",
         "--no-progress"]
N_CELLS = 6  # 2 variants x G in {4, 16, 64} at N = 64
# 1500 runs make a cell take a few tenths of a second, far longer than the 20 ms between polls,
# so the kill lands after the first cell and before the last (with 150 runs an idle machine
# finished all six cells between two polls).
KEY = ["variant", "budget", "group_size"]
TIMEOUT_S = 240  # far above the few seconds the sweep needs; only a hung run reaches it


def sweep(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, *SWEEP, "--out", str(out), *extra], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # its own group: kill the pool with it


def cells_on_disk(path: Path) -> int:
    try:
        return len(pd.read_csv(path).groupby(KEY))
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return 0


def test_killing_the_driver_loses_only_cells_in_flight(tmp_path):
    reference = sweep(tmp_path / "ref")
    assert reference.wait(TIMEOUT_S) == 0, reference.stderr.read().decode()
    ref_csv = (tmp_path / "ref" / "group_size_runs.csv").read_bytes()

    out = tmp_path / "killed"
    victim = sweep(out, "--workers", "2")
    path = out / "group_size_runs.csv"
    deadline = time.monotonic() + TIMEOUT_S
    while cells_on_disk(path) < 1 and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(victim.pid, signal.SIGKILL)  # the driver and its pool, mid-sweep
    victim.wait()
    done = cells_on_disk(path)
    assert 1 <= done < N_CELLS, f"the kill landed after {done} of {N_CELLS} cells"
    table = pd.read_csv(path)
    assert not table.duplicated(KEY + ["n", "run"]).any()

    resumed = sweep(out, "--workers", "2")
    assert resumed.wait(TIMEOUT_S) == 0, resumed.stderr.read().decode()
    assert path.read_bytes() == ref_csv  # no cell lost or duplicated, same numbers, same order


# ------------------------------------------------------------------------------ orphaned workers
def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# The watchdog looks every 0.5 s and Linux's parent-death signal is immediate, so the workers are
# gone within a second on an idle machine; the wait is only a guard against a regression that
# leaves them for ever (at a load of 10 they took more than 10 s), not a threshold the test decides
# on: it polls until they are gone and asserts that they are.
ORPHAN_WAIT_S = TIMEOUT_S


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_killing_the_driver_leaves_no_worker_behind(tmp_path):
    """SIGKILL to the driver alone (not its group): its pool workers and the resource tracker
    exit by themselves (polled up to ORPHAN_WAIT_S, a guard against a hang, not a speed limit).
    Negative control: while the driver lives, they are there."""
    out = tmp_path / "orphans"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, *SWEEP, "--runs", "20000", "--out", str(out),
                               "--workers", "2"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        children: list[int] = []
        while time.monotonic() < deadline and driver.poll() is None:
            children = _children(driver.pid)
            if len(children) >= 3:  # two workers and the resource tracker
                break
            time.sleep(0.05)
        assert len(children) >= 3, f"the pool never started: children {children}"
        time.sleep(0.5)  # the workers are past their initializer and into a cell
        assert all(_alive(pid) for pid in children)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.1)
        left = [pid for pid in children if _alive(pid)]
        assert not left, f"workers outlived their driver (still alive after {ORPHAN_WAIT_S} s of " \
                         f"polling): {left}"
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
