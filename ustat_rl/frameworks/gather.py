"""Rows gathered across data-parallel processes, in process order (``torch.distributed``).

Under data parallelism each process generates and scores its own slice of a generation batch;
TRL gathers the rewards of all processes in process order (``accelerate``'s ``gather``), so the
group of a gathered row is its position divided by ``G``. The monitor gathers its per-row
quantities (prompt keys, sketched scores) the same way before estimating, so every process
holds the whole batch and computes the same record. The slices may differ in length (the last
one of a dataset, say): lengths are exchanged first and the padding is dropped.

Without an initialised process group, or with one process, the rows are returned as they are.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["gather_rows", "world"]


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
