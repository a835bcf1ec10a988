"""A sweep on a real (local, 2-CPU) Ray cluster: same CSV as the local pool, and a killed worker
costs nothing but a retry (one sweep shows both).

The script's module is loaded under its own name with ``simulations/`` on the path of this
process and of the Ray workers, so a test cell function in this module can call the script's
real cell function inside a worker.
"""

from __future__ import annotations

import functools
import importlib
import os
import signal

import pandas as pd
import pytest
from script_loader import ROOT, load_script

pytestmark = pytest.mark.integration  # scripts: a simulation on a local Ray cluster

ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e \".[ray]\")")

SCRIPT = "optimal_group_size"
ARGS = ["--quick", "--no-figure", "--no-progress"]
CSV = "group_size_runs.csv"
KEY = ["variant", "budget", "group_size", "n", "run"]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance bound to 127.0.0.1 whose workers can import the script and tests."""
    paths = [str(ROOT), str(ROOT / "simulations"), str(ROOT / "tests"),
             str(ROOT / "tests" / "runs")]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    try:
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def script(monkeypatch_module):
    monkeypatch_module.syspath_prepend(str(ROOT / "simulations"))
    return load_script(f"simulations/{SCRIPT}.py", SCRIPT)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def pool_csv(script, tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("pool")
    script.main(ARGS + ["--workers", "2", "--out", str(out)])
    return (out / CSV).read_bytes()


def kill_worker_once(marker: str, name: str, *args):
    """The script's cell function, except that the first call kills its own worker process."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return importlib.import_module(name).simulate_cell(*args)
    os.kill(os.getpid(), signal.SIGKILL)
    return None  # not reached


def test_a_ray_sweep_with_a_killed_worker_writes_the_local_pool_csv(cluster, script, pool_csv,
                                                                    tmp_path, monkeypatch,
                                                                    capsys):
    """One sweep on Ray shows both: the cells Ray runs give the local pool's CSV byte for byte,
    and the cell whose worker was killed is tried again, its row neither lost nor duplicated.
    (A second, undisturbed Ray sweep showed only the first and cost as much again.)"""
    marker = tmp_path / "killed"
    monkeypatch.setattr(script, "simulate_cell",
                        functools.partial(kill_worker_once, str(marker), SCRIPT))
    script.main(ARGS + ["--ray-address", "auto", "--out", str(tmp_path)])
    assert marker.exists()  # a worker did die mid-sweep, and its cell was tried again:
    assert "failed (try 1)" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / CSV)
    assert not table.duplicated(KEY).any()
    assert (tmp_path / CSV).read_bytes() == pool_csv

