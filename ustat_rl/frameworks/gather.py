"""Rows gathered across data-parallel processes, in process order (``torch.distributed``).

Under data parallelism each process generates and scores its own slice of a generation batch;
TRL gathers the rewards of all processes in process order (``accelerate``'s ``gather``), so the
group of a gathered row is its position divided by ``G``. The monitor gathers its per-row
quantities (prompt keys, sketched scores) the same way before estimating, so every process
holds the whole batch and computes the same record. The slices may differ in length (the last
one of a dataset, say): lengths are exchanged first and the padding is dropped.

Without an initialised process group, or with one process, the rows are returned as they are.

Under FSDP2 (``fully_shard``) each process still sketches its own rows, but every chunk's
forward pass all-gathers the parameters, a collective every process of the shard group must
join: processes that would sketch different numbers of chunks would wait on each other for
ever, so such a window is skipped instead (:func:`unequal_passes`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..scores.coverage import fully_sharded

__all__ = ["gather_rows", "unequal_passes", "world"]


def world(group=None) -> tuple[int, int]:
    """``(rank, world_size)`` in ``group`` (default: the default process group), ``(0, 1)``
    without an initialised one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


def _device(group=None):
    import torch.distributed as dist

    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather_rows(rows, group=None) -> np.ndarray:
    """Concatenate every process's ``rows`` (``(n_p, ...)`` arrays) in rank order.

    Parameters
    ----------
    rows : array-like (n_p, ...)
        This process's rows; every process must call with the same trailing shape and dtype.
    group : torch.distributed.ProcessGroup, optional
        The processes whose rows are gathered (default: the default process group).

    Returns
    -------
    ndarray (sum_p n_p, ...)
        The same on every process.
    """
    import torch.distributed as dist

    if np.ndim(rows) == 0:
        raise ValueError("`rows` must have a leading row dimension")
    local = np.ascontiguousarray(rows)
    _, size = world(group)
    if size == 1:
        return local
    device = _device(group)
    tensor = torch.from_numpy(local).to(device)
    count = torch.tensor([local.shape[0]], dtype=torch.int64, device=device)
    counts = [torch.zeros_like(count) for _ in range(size)]
    dist.all_gather(counts, count, group=group)
    counts = [int(c.item()) for c in counts]
    longest = max(counts)
    padded = torch.zeros((longest, *local.shape[1:]), dtype=tensor.dtype, device=device)
    padded[:local.shape[0]] = tensor
    parts = [torch.zeros_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded, group=group)
    return np.concatenate([p[:c].cpu().numpy() for p, c in zip(parts, counts)])


def unequal_passes(model, rows: int, chunk_size: int, group=None) -> str | None:
    """Why a window of a model sharded by ``fully_shard`` or DeepSpeed ZeRO-3 cannot be sketched:
    its processes would run different numbers of chunks of ``chunk_size`` rows (each pass
    all-gathers the parameters, a collective all of them must join); ``None`` when they run the
    same number, or the model is not sharded (then nothing is exchanged).

    >>> from torch import nn
    >>> unequal_passes(nn.Linear(2, 2), rows=5, chunk_size=2) is None
    True
    """
    if not fully_sharded(model) or world(group)[1] == 1:
        return None
    passes = gather_rows(np.array([-(-int(rows) // int(chunk_size))]), group)
    if len(set(passes.tolist())) == 1:
        return None
    return (f"under fully_shard or ZeRO-3 every process must sketch as many chunks of "
            f"chunk_size = {chunk_size} rows as the others (each pass all-gathers the parameters); the "
            f"processes hold {passes.tolist()} chunks: give each the same number of rows")
