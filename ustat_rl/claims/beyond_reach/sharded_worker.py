"""One process of C62's sharded sketch (:func:`run_rank`; importing this module does nothing).

The two processes meet through the file store ``OUT/store`` on the gloo backend; each builds
C62's model (:func:`sharded_model`), shards its embedding,
its layer norm, its linear layer and its root with FSDP2's ``fully_shard``, sketches its own rows
(:func:`ustat_rl.scores.chunks.sketch_rows`) and gathers every process's sketch in rank order
(:func:`ustat_rl.frameworks.gather.gather_rows`, the monitor's gather). It writes
``OUT/rank<RANK>.npz``: ``scores`` (its rows), ``gathered`` (all rows), ``local_rows`` and
``global_rows`` of the sharded weight (a real shard has fewer local rows). When
``torch.distributed`` cannot start it writes ``OUT/cannot_start.<RANK>.txt`` with the reason and
exits with :data:`CANNOT_START`; any other failure writes ``OUT/error.<RANK>.txt`` (the
traceback) and exits with 1.
"""

from __future__ import annotations

import datetime
import sys
import traceback
from pathlib import Path

#: Rows each process sketches, and rows per sketched pass.
SHARDED_ROWS, SHARDED_CHUNK = 3, 2
#: The sketch's dimension, blocks and seed.
SHARDED_SKETCH = (12, 3, 62)


def sharded_model():
    """:func:`~ustat_rl.scores.families.tiny_causal_lm` in float64, parameters drawn from a fixed
    ``torch.Generator`` (the same in every process), and ``2 * SHARDED_ROWS`` padded rows:
    ``(model, tokens (6, 7), target (6, 7))``."""
    import torch

    from ...scores.families import tiny_causal_lm

    gen = torch.Generator().manual_seed(6201)
    with torch.random.fork_rng(devices=[]):
        model = tiny_causal_lm().double()
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(0.7 * torch.randn(param.shape, generator=gen, dtype=torch.float64))
    tokens = torch.randint(0, 9, (2 * SHARDED_ROWS, 7), generator=gen)
    target = torch.zeros(2 * SHARDED_ROWS, 7, dtype=torch.float64)
    target[:, 2:] = 1.0
    target[1, 5:] = 0.0  # padding after an end token
    target[4, 4:] = 0.0
    return model, tokens, target


def sharded_spec(seed: int | None = None):
    from ...scores.spec import SketchSpec

    k, blocks, default = SHARDED_SKETCH
    return SketchSpec(k, seed=default if seed is None else seed, blocks=blocks)


#: The exit status of a process whose process group could not start.
CANNOT_START = 3
#: Seconds a process waits for the other at the store before it gives up (cannot start).
MEET_TIMEOUT = 60


def run_rank(out, rank: int) -> None:
    """Run process ``rank`` (0 or 1) of the pair, writing into the folder ``out``."""
    out = Path(out)
    try:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("torch.distributed or its gloo backend is not available")
        dist.init_process_group("gloo", init_method=f"file://{out / 'store'}", rank=rank,
                                world_size=2, timeout=datetime.timedelta(seconds=MEET_TIMEOUT))
    except Exception as exc:  # the route cannot run here: say why, in one line
        text = str(exc).splitlines()[0] if str(exc) else ""
        (out / f"cannot_start.{rank}.txt").write_text(f"{type(exc).__name__}: {text}")
        sys.exit(CANNOT_START)
    try:
        _sketch(out, rank, fully_shard)
    except BaseException:
        (out / f"error.{rank}.txt").write_text(traceback.format_exc(limit=6))
        sys.exit(1)
    finally:
        dist.destroy_process_group()


def _sketch(out: Path, rank: int, fully_shard) -> None:
    import warnings

    import numpy as np

    from ...frameworks.gather import gather_rows
    from ...scores.chunks import sketch_rows

    # FSDP2 warns that the tiny model returns views; nothing here writes into them in place
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module", category=UserWarning)
    model, tokens, target = sharded_model()
    for unit in (model.embed, model.norm, model.mix):  # units of their own: resharded after
        fully_shard(unit)  # their forward, so the sketch's hooks read sharded parameters
    fully_shard(model)
    weight = model.mix.weight
    rows = slice(rank * SHARDED_ROWS, (rank + 1) * SHARDED_ROWS)
    scores = sketch_rows(model, tokens[rows], target[rows], sharded_spec(), SHARDED_CHUNK)
    gathered = gather_rows(scores)
    local = weight.to_local() if hasattr(weight, "to_local") else weight
    np.savez(out / f"rank{rank}.npz", scores=scores, gathered=gathered,
             local_rows=int(local.shape[0]), global_rows=int(weight.shape[0]))
