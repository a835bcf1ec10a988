"""The factored sketch of a model sharded by FSDP2 over two processes is the unsharded one (C62).

Under data parallelism with FSDP2 (``fully_shard``) each process holds a shard of every
parameter and sketches its own rows; the monitor then gathers the rows in rank order. verify
runs in one process, so here two processes are started
(:func:`ustat_rl.claims.beyond_reach.sharded_worker.run_rank`, gloo on the CPU, meeting through
a file store), each sketching its 3 rows of
:func:`~ustat_rl.claims.beyond_reach.sharded_worker.sharded_model` with its embedding, layer
norm and linear layer sharded as units of their own (resharded after their forward, so the
sketch's hooks meet sharded parameters) and its root, and gathering both processes' sketches.
In this process the same model, unsharded, sketches all 6 rows under the same seed: each
process's rows and the gathered rows must equal them (rel 1e-10, float64). Where
``torch.distributed`` cannot start two gloo processes the claim's verdict is ``skipped``, with
the reason, never ``pass``.

Negative controls: the unsharded sketch under another seed, and with the rows of the two
processes swapped (a gather out of rank order), are rejected by the same comparison.
Deterministic: no false-failure rate.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..registry import MissingExtra, check_exact, check_true, register
from .sharded_worker import (
    SHARDED_CHUNK,
    SHARDED_ROWS,
    SHARDED_SKETCH,
    sharded_model,
    sharded_spec,
)

__all__ = ["SHARDED_ROWS", "SHARDED_CHUNK", "SHARDED_TIMEOUT", "sharded_model", "sharded_spec",
           "run_two_processes"]

#: How the two processes start: spawned, not forked. A fork copies whatever lock another thread
#: of this process holds (a Monte Carlo pool, a progress bar, a tracer), and a child can then
#: wait on it for ever, as seen under ``benchmarks/calibration.py`` and
#: ``benchmarks/route_map.py``; spawning costs each child an import of torch, about 3 s. (The
#: tests fork, single-threaded, so that a bug they plant in this process reaches the children.)
START_METHOD = "spawn"

#: The seconds two processes may take, and the comparison's relative tolerance (float64).
SHARDED_TIMEOUT, SHARDED_RTOL = 120, 1e-10


def run_two_processes(out: Path) -> list:
    """Start the two worker processes (spawned: each imports what it needs), wait for both, and return their
    ``npz`` contents in rank order. Raises :class:`MissingExtra` (verdict ``skipped``) when
    ``torch.distributed`` cannot start, ``RuntimeError`` (verdict ``error``) when a process fails
    or does not finish in :data:`SHARDED_TIMEOUT` seconds."""
    import multiprocessing

    from .sharded_worker import CANNOT_START, run_rank

    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"skipped: this torch has no FSDP2 (fully_shard): {exc}") from None
    context = multiprocessing.get_context(START_METHOD)
    procs = [context.Process(target=run_rank, args=(str(out), rank), daemon=True)
             for rank in (0, 1)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(SHARDED_TIMEOUT)
    late = [rank for rank, proc in enumerate(procs) if proc.is_alive()]
    for rank in late:
        procs[rank].kill()
        procs[rank].join()
    reasons = sorted(out.glob("cannot_start.*.txt"))
    if reasons and any(p.exitcode == CANNOT_START for p in procs):
        raise MissingExtra("skipped: torch.distributed cannot start two gloo processes here: "
                           + reasons[0].read_text())
    if late:
        raise RuntimeError(f"processes {late} of the sharded sketch did not finish in "
                           f"{SHARDED_TIMEOUT} s")
    for rank, proc in enumerate(procs):
        if proc.exitcode != 0:
            log = out / f"error.{rank}.txt"
            raise RuntimeError(f"process {rank} of the sharded sketch exited with "
                               f"{proc.exitcode}: {log.read_text() if log.is_file() else ''}")
    return [dict(np.load(out / f"rank{rank}.npz")) for rank in (0, 1)]


@register("C62", "Beyond the paper: the factored sketch of a model sharded by FSDP2 over two "
          "processes, each sketching its own rows and gathering all of them in rank order, "
          "equals the unsharded model's sketch of the same rows",
          "derived (docs/theory.md C62; the sketch of C44 under data parallelism)",
          "two processes on gloo (spawned, a file store), tiny_causal_lm in float64 with its embedding, "
          "norm, linear layer and root each under fully_shard, sketch_rows and gather_rows against sketch_rows of "
          "the unsharded model in this process; rel 1e-10. Skipped, with the reason, where "
          "torch.distributed cannot start")
def check_c62(ctx) -> list:
    from ...scores.chunks import sketch_rows

    with tempfile.TemporaryDirectory(prefix="ustat_c62_") as folder:
        ranks = run_two_processes(Path(folder))
    model, tokens, target = sharded_model()
    want = sketch_rows(model, tokens, target, sharded_spec(), SHARDED_CHUNK)  # (6, k)
    scale = float(np.max(np.abs(want)))
    checks = [check_true("the linear layer's weight is sharded: each process holds "
                         f"{int(ranks[0]['local_rows'])} of its {int(ranks[0]['global_rows'])} "
                         "rows", all(int(r["local_rows"]) < int(r["global_rows"]) for r in ranks),
                         float(ranks[0]["local_rows"]))]
    for rank, part in enumerate(ranks):
        rows = slice(rank * SHARDED_ROWS, (rank + 1) * SHARDED_ROWS)
        checks.append(check_exact(f"process {rank}: its {SHARDED_ROWS} sharded rows == the "
                                  f"unsharded sketch", want[rows], part["scores"],
                                  rtol=SHARDED_RTOL, atol=SHARDED_RTOL * scale,
                                  note="float64"))
        checks.append(check_exact(f"process {rank}: every row gathered in rank order == the "
                                  f"unsharded sketch", want, part["gathered"],
                                  rtol=SHARDED_RTOL, atol=SHARDED_RTOL * scale))
    other = sketch_rows(model, tokens, target, sharded_spec(SHARDED_SKETCH[2] + 1), SHARDED_CHUNK)
    swapped = np.concatenate([want[SHARDED_ROWS:], want[:SHARDED_ROWS]])
    rejected = [not check_exact("", wrong, ranks[0]["gathered"], rtol=SHARDED_RTOL,
                                atol=SHARDED_RTOL * scale).passed for wrong in (other, swapped)]
    checks.append(check_true("negative controls: the unsharded sketch under another seed, and "
                             "the processes' rows swapped, are rejected", all(rejected),
                             float(sum(rejected))))
    return checks
