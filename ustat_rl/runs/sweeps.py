"""Running the cells of a sweep, on one core, a local process pool or a Ray cluster.

A sweep is a set of independent *cells*, each seeded from its own key
(:func:`ustat_rl.seeding.child_seed`), so a cell gives the same numbers wherever and whenever it
runs. :func:`run_cells` hands the cells to an executor and calls ``on_result`` in the driver
process as each one finishes; the simulation scripts use it to rewrite their tidy CSV at once
(:func:`write_csv_atomic`: temporary file and rename, so an interruption leaves the old table or
the new one, never a half-written file). Killing the driver, a worker or the whole cluster loses
at most the cells in flight, and a rerun skips the cells already in the CSV.

Executors: :class:`LocalExecutor` (``workers=1`` runs in the driver process, more starts a
``spawn`` process pool; no dependency beyond the standard library) and :class:`RayExecutor`
(``ray`` is imported only when it is used; install it with ``pip install ustat-rl[ray]``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ._cell_tasks import make_task, run_task, watch_parent
from .records import write_run_record

__all__ = ["CellFailedError", "LocalExecutor", "RayExecutor", "add_executor_arguments",
           "default_output", "executor_from_args", "order_rows", "run_cells", "write_csv_atomic",
           "write_run_record"]

DEFAULT_RETRIES = 2  # a cell is tried at most 1 + DEFAULT_RETRIES times before the sweep gives up


def write_csv_atomic(table: pd.DataFrame, path, index: bool = False) -> None:
    """Write ``table`` to ``path`` as CSV through a temporary file and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    table.to_csv(tmp, index=index)
    os.replace(tmp, path)


def order_rows(table: pd.DataFrame, columns, order) -> pd.DataFrame:
    """Rows of ``table`` stably sorted by the position of their cell key in ``order``.

    ``columns`` name the key columns; ``order`` lists keys (tuples of those columns' values) in
    run order. Rows of keys not in ``order`` go last, in their current order. Writing a sweep's
    CSV in this order makes its bytes independent of the order in which cells finished.
    """
    columns = list(columns)
    rank = {tuple(key): i for i, key in enumerate(order)}
    keys = table[columns].itertuples(index=False, name=None)
    position = pd.Series([rank.get(tuple(k), len(rank)) for k in keys], index=table.index)
    return table.loc[position.sort_values(kind="stable").index].reset_index(drop=True)


class CellFailedError(RuntimeError):
    """Cells that failed on every try; ``failures`` maps each cell key to its last error."""

    def __init__(self, failures: dict):
        self.failures = dict(failures)
        lines = [f"  cell {key!r}: {err}" for key, err in self.failures.items()]
        super().__init__(f"{len(lines)} cell(s) failed after every retry (finished cells are "
                         "saved; rerun to retry the rest):\n" + "\n".join(lines))


@dataclass(frozen=True)
class LocalExecutor:
    """Cells on this machine: in the driver process (``workers=1``) or a pool of processes.

    The pool uses the ``spawn`` start method (no state inherited from a driver that has already
    started torch or numba threads). A worker that dies breaks the whole pool: every cell in
    flight then counts one failed try and the pool is restarted. A driver that dies (even by
    SIGKILL) takes its workers with it (:func:`ustat_rl._cell_tasks.watch_parent`).
    """

    workers: int = 1

    def __post_init__(self):
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"`workers` must be an integer >= 1, got {self.workers!r}")

    @property
    def in_process(self) -> bool:
        """Whether cells run in the driver process (so they may show their own progress)."""
        return self.workers == 1

    def _run(self, cells: dict, fn, record) -> None:
        if self.workers == 1:
            for key, args in cells.items():
                while True:
                    try:
                        result = fn(*args)
                    except Exception as err:  # noqa: BLE001 - reported with the cell key
                        if record(key, None, err):
                            continue
                    else:
                        record(key, result, None)
                    break
            return
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        pending = list(cells)
        while pending:
            with ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"),
                                     initializer=watch_parent, initargs=(os.getpid(),)) as pool:
                flight = {}
                broken = False
                while (pending or flight) and not broken:
                    try:
                        while pending and len(flight) < 2 * self.workers:
                            future = pool.submit(run_task, make_task(fn, cells[pending[0]]))
                            flight[future] = pending.pop(0)
                    except BrokenProcessPool:
                        broken = True  # died between two submissions; handled below
                    done, _ = wait(flight, return_when=FIRST_COMPLETED)
                    for future in done:
                        key = flight.pop(future)
                        try:
                            result = future.result()
                        except BrokenProcessPool as err:
                            broken = True
                            if record(key, None, f"worker process died ({err})"):
                                pending.append(key)
                        except Exception as err:  # noqa: BLE001
                            if record(key, None, err):
                                pending.append(key)
                        else:
                            record(key, result, None)
                if broken:
                    for key in flight.values():  # a broken pool fails every cell in it
                        if record(key, None, "worker pool broke while it ran"):
                            pending.append(key)


@dataclass(frozen=True)
class RayExecutor:
    """Cells as Ray tasks (one CPU each) on the cluster at ``address``.

    ``address`` is ``"auto"`` (a cluster started with ``ray start`` on this machine),
    ``"ray://host:port"`` (Ray Client) or ``"local"`` (start a private instance for this sweep).
    When Ray is already initialised in this process, that session is used and left running.
    Each node needs ``ustat-rl`` installed; a script's own functions travel as source text.
    ``max_in_flight`` bounds the cells submitted at once (default: twice the cluster's CPUs).
    """

    address: str = "auto"
    max_in_flight: int | None = None

    def __post_init__(self):
        if not isinstance(self.address, str) or not (
                self.address in ("auto", "local") or self.address.startswith("ray://")
                or ":" in self.address):
            raise ValueError("`address` must be 'auto', 'local', 'ray://host:port' or "
                             f"'host:port', got {self.address!r}")

    in_process = False

    def connection_problem(self) -> str | None:
        """Why no cluster can be reached at ``address`` (``None`` if it can), found by connecting
        once and disconnecting; ``"local"`` and a session already open are not probed."""
        if self.address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
            return ("Ray Client (a ray:// address) needs Ray's client extra, which this "
                    "installation lacks: pip install -c constraints.txt 'ray[client]'")
        ray = import_ray()
        if self.address == "local" or ray.is_initialized():
            return None
        try:
            ray.init(address=self.address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0].split(". ")[0]
            return (f"no Ray cluster reachable ({reason}); start one with `ray start --head`, "
                    "or use 'local'")
        ray.shutdown()
        return None

    def _run(self, cells: dict, fn, record) -> None:
        ray = import_ray()
        started = not ray.is_initialized()
        if started:
            try:
                if self.address == "local":
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(address=self.address, log_to_driver=False)
            except (ConnectionError, RuntimeError) as err:
                raise ConnectionError(f"no Ray cluster at address {self.address!r} (start one "
                                      f"with `ray start --head`, or use 'local'): {err}") from err
        try:
            remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
            limit = self.max_in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
            pending, flight = list(cells), {}
            while pending or flight:
                while pending and len(flight) < limit:
                    key = pending.pop(0)
                    flight[remote.remote(make_task(fn, cells[key]))] = key
                ready, _ = ray.wait(list(flight), num_returns=1)
                key = flight.pop(ready[0])
                try:
                    result = ray.get(ready[0])
                except ray.exceptions.RayError as err:
                    if record(key, None, f"{type(err).__name__}: {str(err)[:500]}"):
                        pending.append(key)
                else:
                    record(key, result, None)
        finally:
            if started:
                ray.shutdown()


def import_ray():
    """``import ray``, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as err:
        raise ImportError("running cells on Ray needs the optional dependency `ray`: "
                          "pip install ustat-rl[ray]  (or pip install -c constraints.txt "
                          "-e \".[ray]\" in a checkout)") from err
    return ray


def run_cells(cells: dict, fn, on_result, executor=None, *, retries: int = DEFAULT_RETRIES,
              progress: bool = True, n_skipped: int = 0, desc: str = "cells") -> int:
    """Run ``fn(*cells[key])`` for every key and call ``on_result(key, result)`` as each ends.

    Parameters
    ----------
    cells : dict
        Hashable cell key -> tuple of arguments of ``fn``. Each cell must be independently seeded
        so the order and place it runs in do not change its result.
    fn : callable
        A module-level function (or a picklable callable) returning plain data (numbers, arrays,
        DataFrames, dicts of them).
    on_result : callable
        ``on_result(key, result)``, called in this process in completion order; write the
        result to disk here so finished cells survive any later failure.
    executor : LocalExecutor or RayExecutor, optional
        Where cells run; default ``LocalExecutor(1)`` (in this process).
    retries : int
        Failed tries allowed per cell before it is reported (``>= 0``).
    progress : bool
        Show a tqdm bar: cells done / total, rate and ETA.
    n_skipped : int
        Cells already finished before this call, counted as done in the bar.
    desc : str
        Label of the bar.

    Returns
    -------
    int
        The number of cells run.

    Raises
    ------
    CellFailedError
        After every other cell has finished, naming the cells that failed ``1 + retries``
        times and their last errors.
    """
    if not isinstance(cells, dict):
        raise TypeError(f"`cells` must be a dict of key -> argument tuple, got {type(cells).__name__}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"`retries` must be an integer >= 0, got {retries!r}")
    executor = LocalExecutor(1) if executor is None else executor
    if not isinstance(executor, (LocalExecutor, RayExecutor)):
        raise TypeError(f"`executor` must be a LocalExecutor or RayExecutor, got {executor!r}")
    cells = {key: tuple(args) for key, args in cells.items()}
    tries, failures = {}, {}
    with tqdm(total=len(cells) + n_skipped, initial=n_skipped, desc=desc, unit="cell",
              disable=not progress or not cells) as bar:

        def record(key, result, error) -> bool:
            """Store a finished cell, or count a failed try; True when the cell is to rerun."""
            if error is None:
                on_result(key, result)
                bar.update(1)
                return False
            tries[key] = tries.get(key, 0) + 1
            if tries[key] <= retries:
                bar.write(f"cell {key!r} failed (try {tries[key]}): {error}; retrying")
                return True
            failures[key] = error
            return False

        executor._run(cells, fn, record)
    if failures:
        raise CellFailedError(failures)
    return len(cells)


# ------------------------------------------------------------------------------ command line
def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers`` and ``--ray-address`` to a simulation script's parser."""
    parser.add_argument("--workers", type=int, default=1,
                        help="cells run at once in a local process pool (1: in this process); "
                             "with --ray-address, the most cells in flight")
    parser.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="run cells on Ray: 'auto' (a cluster started with `ray start`), "
                             "'ray://host:port' (Ray Client: needs pip install 'ray[client]') "
                             "or 'local' (a private instance); needs pip install "
                             "'ustat-rl[ray]'")


def executor_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The executor named by ``--workers`` / ``--ray-address``; usage errors name the flag."""
    if args.workers < 1:
        parser.error(f"--workers must be an integer >= 1, got {args.workers}")
    if args.ray_address is None:
        return LocalExecutor(args.workers)
    try:
        import_ray()
        executor = RayExecutor(args.ray_address, max_in_flight=None if args.workers == 1
                               else args.workers)
    except (ImportError, ValueError) as err:
        parser.error(f"--ray-address: {err}")
    problem = executor.connection_problem()
    if problem is not None:
        parser.error(f"--ray-address {args.ray_address!r}: {problem}")
    return executor


def default_output(out, quick: bool, name: str, full: str | None = None) -> Path:
    """``out`` if given, else ``results/quick/<name>`` for quick runs and ``full`` (default
    ``results/<name>``) otherwise, so a quick run never leaves files a full run refuses."""
    if out is not None:
        return Path(out)
    return Path("results", "quick", name) if quick else Path(full or Path("results", name))
